"""Isolation between rooms and from the host, and the keeper
(identity, namespaces, file system, lifecycle).  Through nginx."""

import os
import signal
import socket
import subprocess
import threading

from conftest import (GONE_TIMEOUT, ROOM_IDS, pid_alive, procs_with_uid, procs_with_uid_in,
                      unique_room, wait_until)

SERVERS = ("nginx",)


def test_rooms_do_not_see_each_others_files(client):
    a, b = unique_room("a"), unique_room("b")
    marker = f"marker-{a}"
    client.sh(a, f"echo secret > /workspace/{marker}; echo secret > /tmp/{marker}; "
                 f"echo secret > /home/user/{marker}")
    assert client.sh(a, f"cat /workspace/{marker}") == "secret\n"
    res = client.exec(b, f"cat /workspace/{marker} /tmp/{marker} /home/user/{marker}")
    assert res["exitCode"] != 0
    assert res["stdout"] == ""
    assert res["stderr"].count("No such file") == 3, res["stderr"]
    assert client.sh(b, "ls -A /workspace") == ""
    # and nothing reached the host's own directories
    assert not os.path.exists(f"/tmp/{marker}")
    assert not os.path.exists(f"/home/user/{marker}")
    assert not os.path.exists(f"/workspace/{marker}")


def test_rooms_do_not_see_each_others_processes(client):
    a, b = unique_room("a"), unique_room("b")
    client.sh(a, "sleep 3001 >/dev/null 2>&1 &")
    client.sh(b, "sleep 3002 >/dev/null 2>&1 &")
    pa = client.sh(a, "ps -e -o args=").splitlines()
    pb = client.sh(b, "ps -e -o args=").splitlines()
    assert "sleep 3001" in pa and "sleep 3002" not in pa, pa
    assert "sleep 3002" in pb and "sleep 3001" not in pb, pb
    # the room's pid namespace: a handful of processes, its own PID 1
    assert len(pa) < 10, pa
    assert client.sh(a, "cat /proc/1/status | sed -n 's/^Pid:[[:space:]]*//p'") == "1\n"
    # a room cannot signal the other room's process: it cannot even name it
    # (the bracket keeps pkill from matching this shell's own command line)
    res = client.exec(a, "pkill -f 'sleep 300[2]'; echo $?")
    assert res["stdout"].strip() == "1"
    assert "sleep 3002" in client.sh(b, "ps -e -o args=").splitlines()


def test_id_ranges_differ_are_unprivileged_and_named(client, stack):
    a, b = unique_room("a"), unique_room("b")
    ua, ub = client.room_uid(a), client.room_uid(b)
    # each room's 65536 ids sit on host ids of its own: uid_base + slot * 65536
    assert ua != ub
    assert abs(ua - ub) >= ROOM_IDS, (ua, ub)
    for u in (ua, ub):
        assert u != 0
        assert stack.uid_base <= u < stack.uid_base + stack.max_rooms * ROOM_IDS
        assert (u - stack.uid_base) % ROOM_IDS == 0, u
    assert client.sh(a, "read a b c < /proc/self/gid_map; echo $a $b $c") == f"0 {ua} {ROOM_IDS}\n"
    # by default a command runs as the room's root; "user":"user" as its user
    assert client.sh(a, "id -un; id -u; id -g") == "root\n0\n0\n"
    assert client.sh(b, "id -un; id -u; id -g", user="user") == "user\n1000\n1000\n"
    # each room id is the host id at the same offset in the room's range
    client.sh(a, "sleep 3003 >/dev/null 2>&1 &")
    client.sh(a, "sleep 3004 >/dev/null 2>&1 &", user="user")
    assert [p for p in procs_with_uid(ua) if p[1] == "sleep 3003"]
    assert [p for p in procs_with_uid(ua + 1000) if p[1] == "sleep 3004"]
    assert not [p for p in procs_with_uid_in(ub, ub + ROOM_IDS) if p[2].startswith("sleep 300")]
    assert not [p for p in procs_with_uid(0) if p[1] in ("sleep 3003", "sleep 3004")]


def test_hostname_is_the_sandbox_name(client, room):
    assert client.sh(room, "uname -n") == f"sandbox-{room}\n"
    assert client.sh(room, "cat /proc/sys/kernel/hostname") == f"sandbox-{room}\n"


def test_hostname_of_a_64_character_room_id_is_cut_to_64_bytes(client):
    rid = ("L" + unique_room("x") * 8)[:64]
    assert len(rid) == 64
    assert client.sh(rid, "uname -n") == ("sandbox-" + rid)[:64] + "\n"


def test_network_is_loopback_only(client, room):
    dev = client.sh(room, "cat /proc/net/dev").splitlines()[2:]
    names = {line.split(":")[0].strip() for line in dev}
    assert names == {"lo"}, dev
    out = client.sh(room, "python3 -c 'import socket; print(sorted(n for _, n in socket.if_nameindex()))'")
    assert out == "['lo']\n"


def host_ipv4_addresses():
    out = subprocess.run(["ip", "-o", "-4", "addr", "show"], capture_output=True,
                         text=True, check=True).stdout
    return sorted({line.split()[3].split("/")[0] for line in out.splitlines()})


def test_nothing_on_the_host_answers(client, stack, room):
    # a TCP server of the test on every host address
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", 0))
    srv.listen(16)
    port = srv.getsockname()[1]
    accepted = []

    def accept_loop():
        while True:
            try:
                conn, peer = srv.accept()
            except OSError:
                return
            accepted.append(peer)
            conn.close()

    t = threading.Thread(target=accept_loop, daemon=True)
    t.start()
    try:
        addrs = host_ipv4_addresses()
        assert "127.0.0.1" in addrs
        # control: from the host it answers
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass
        wait_until(lambda: len(accepted) == 1, 5, "the host's own connection")

        targets = [(a, port) for a in addrs] + [("127.0.0.1", stack.port)]
        script = ("import socket\n"
                  f"for host, port in {targets!r}:\n"
                  "    s = socket.socket(); s.settimeout(2)\n"
                  "    try:\n"
                  "        s.connect((host, port)); print(host, port, 'CONNECTED')\n"
                  "    except OSError as e:\n"
                  "        print(host, port, 'refused', e.errno)\n")
        out = client.sh(room, "python3 -", stdin=script)
        assert "CONNECTED" not in out, out
        assert len(out.splitlines()) == len(targets), out
        assert len(accepted) == 1, accepted
    finally:
        srv.close()


def test_default_environment(client, room):
    for who, want_home in (("root", "/root"), ("user", "/home/user")):
        out = client.sh(room, 'pwd; echo "$HOME"; echo "$LANG"; echo "$PATH"; echo "$USER"', user=who)
        cwd, home, lang, path, user = out.splitlines()
        assert cwd == "/workspace"
        assert home == want_home
        assert user == who
        assert lang == "C.UTF-8"
        assert "/usr/bin" in path.split(":") and "/bin" in path.split(":")
    # without "user", the room's root (exec_user's default); root and user
    # each keep a session of their own
    client.sh(room, "export KEPT=1")
    assert client.sh(room, 'echo "$HOME $KEPT"') == "/root 1\n"
    assert client.sh(room, 'echo "$HOME $USER $LOGNAME [$KEPT]"', user="user") == "/home/user user user []\n"
    assert client.sh(room, 'echo "$HOME $USER $LOGNAME $KEPT"') == "/root root root 1\n"


def test_host_files_are_invisible(client, stack, room):
    markers = [f"/root/.rbx-{room}", f"/run/rbx-{room}", f"/tmp/rbx-{room}"]
    try:
        for m in markers:
            with open(m, "w") as f:
                f.write("host secret\n")
        paths = " ".join(markers + ["/etc/shadow", str(stack.state_dir), str(stack.conf_path),
                                    str(stack.tokens_file)])
        res = client.exec(room, f"for p in {paths}; do cat $p >/dev/null 2>&1 && echo $p; done; "
                                "ls -A /home")
        assert res["stdout"].split() == ["user"], res
        assert stack.token not in client.exec(room, "grep -rs . /etc /run /tmp 2>/dev/null | head -c 100000")["stdout"]
    finally:
        for m in markers:
            os.unlink(m)


def test_keeper_killed_from_the_host(client, stack, room):
    client.sh(room, "mkdir -p /workspace/d && cd /workspace/d && echo kept > f && export K=v")
    keeper = stack.keeper_pid(room)
    assert keeper, f"no live keeper recorded in {stack.run_dir}/rooms/{room}/keeper"
    assert os.readlink(f"/proc/{keeper}/ns/pid") != os.readlink("/proc/self/ns/pid")
    os.kill(keeper, signal.SIGKILL)
    wait_until(lambda: not pid_alive(keeper), GONE_TIMEOUT, f"keeper {keeper} to die")
    assert client.sh(room, 'pwd; cat f; echo "$K"') == "/workspace/d\nkept\nv\n"
    new = stack.keeper_pid(room)
    assert new and new != keeper


def test_keeper_killed_during_an_exec_is_not_run_twice(client, stack, room):
    """A keeper that dies while a command runs takes the command with it:
    the exec answers at once with an error, and the command is not tried
    again in the restarted room (it may have done part of its work).  The
    next exec gets a fresh keeper; files survive."""
    client.sh(room, "rm -f /workspace/runs")
    keeper = stack.keeper_pid(room)
    assert keeper
    answer = {}

    def run():
        answer["r"] = client.exec_raw(room, {"cmd": "echo run >> /workspace/runs; sleep 60"},
                                      timeout=120)

    t = threading.Thread(target=run)
    t.start()
    try:
        wait_until(lambda: client.sh(room, "cat /workspace/runs 2>/dev/null; true") == "run\n",
                   GONE_TIMEOUT, "the command to start")
        os.kill(keeper, signal.SIGKILL)
    finally:
        t.join(90)
    r = answer["r"]
    assert r.status == 500, (r.status, r.json)
    assert "stopped while the command ran" in r.json["error"], r.json
    assert r.elapsed < 30, f"the exec took {r.elapsed:.1f} s to notice its keeper had died"
    assert client.sh(room, "cat /workspace/runs") == "run\n"
    new = stack.keeper_pid(room)
    assert new and new != keeper


def test_keeper_alive_but_not_answering_is_replaced(client, stack, room):
    """A warm exec trusts a keeper that answers on its socket.  One that is
    alive but does not answer (here: its socket file is gone) is stopped and
    replaced by the next exec; files and session survive."""
    client.sh(room, "mkdir -p /workspace/e && cd /workspace/e && echo kept > f && export K=w")
    keeper = stack.keeper_pid(room)
    assert keeper
    os.unlink(stack.run_dir / "rooms" / room / "sock")
    assert client.sh(room, 'pwd; cat f; echo "$K"') == "/workspace/e\nkept\nw\n"
    wait_until(lambda: not pid_alive(keeper), GONE_TIMEOUT, f"old keeper {keeper} to end")
    new = stack.keeper_pid(room)
    assert new and new != keeper


def test_a_silent_connection_does_not_hold_up_the_room(client, stack, room):
    """The keeper waits for an exec's request inside its event loop: a
    connection to its socket that sends nothing (a stalled helper) neither
    delays the next exec nor is kept forever.  The exec answers while the
    silent connection is still open; the keeper then drops it."""
    client.sh(room, "true")
    keeper = stack.keeper_pid(room)
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        silent.connect(str(stack.run_dir / "rooms" / room / "sock"))
        assert client.sh(room, "echo served") == "served\n"
        silent.setblocking(False)
        try:
            data = silent.recv(256)
        except BlockingIOError:
            data = None
        assert data is None, "the keeper closed the silent connection before serving the exec"
        silent.setblocking(True)
        silent.settimeout(30)
        assert silent.recv(256) == b"", "the keeper sent something on a connection that asked nothing"
    finally:
        silent.close()
    assert stack.keeper_pid(room) == keeper
    assert client.sh(room, "echo still") == "still\n"


def test_room_processes_may_run_on_every_cpu(client):
    """roombox-fcgi starts the helper pinned to its current CPU (a latency
    choice); neither the keeper nor the commands of a new room may inherit
    that: they may run on every CPU the service may use."""
    room = unique_room("cpus")
    want = sorted(os.sched_getaffinity(0))
    out = client.sh(room, "grep Cpus_allowed_list /proc/self/status; "
                          "grep Cpus_allowed_list /proc/1/status")
    lists = [line.split(":", 1)[1].strip() for line in out.splitlines()]

    def cpus(text):
        got = set()
        for part in text.split(","):
            lo, _, hi = part.partition("-")
            got.update(range(int(lo), int(hi or lo) + 1))
        return sorted(got)
    assert [cpus(t) for t in lists] == [want, want], out
