"""Warm execs go over the room's exec channel, not through the setuid
helper: once a room runs, roombox-fcgi runs its plain commands straight
with the room's keeper, and every exec behaves as before -- session,
limits, a keeper gone under it.  (The channel's own protocol and its
refusals: tests/security/test_exec_channel.py.)"""

import os
import signal
import threading

from conftest import HELPER, proc_cmdline, proc_pids, proc_status, wait_until

SERVERS = ("nginx",)


def helpers_running(stack):
    """This stack's roombox-helper processes now: children of its
    roombox-fcgi (other stacks, on other test workers, run helpers of the
    same build at the same time)."""
    parents = {str(p) for p in stack.fcgi_pids()}
    found = []
    for pid in proc_pids():
        try:
            if os.readlink(f"/proc/{pid}/exe") == str(HELPER) and \
                    (proc_status(pid) or {}).get("PPid") in parents:
                found.append(pid)
        except OSError:
            pass
    return found


def test_a_warm_exec_runs_without_the_helper(client, room):
    client.sh(room, "true")     # the helper starts the room
    client.sh(room, "true")     # the room's channel is asked for
    done, seen = {}, []
    t = threading.Thread(target=lambda: done.setdefault("out", client.sh(room, "sleep 1.517; echo slept")))
    t.start()
    try:
        wait_until(lambda: any(proc_cmdline(p) == "sleep 1.517" for p in proc_pids()), 10,
                   "the command to run")
        while t.is_alive() and len(seen) < 200:
            seen.append(helpers_running(client.stack))
    finally:
        t.join(30)
    assert done.get("out") == "slept\n"
    assert not any(seen), f"a helper ran during a warm exec: {seen}"


def test_session_limits_and_a_lost_keeper(client, room):
    stack = client.stack
    client.sh(room, "true")
    client.sh(room, "export A=1; cd /tmp")
    assert client.sh(room, "echo $A $PWD") == "1 /tmp\n"
    assert client.sh(room, "echo $A", user="user") == "\n"
    assert client.exec(room, "pwd", cwd="/etc")["stdout"] == "/etc\n"
    assert client.sh(room, "echo $B", env={"B": "2"}) == "2\n"
    assert client.sh(room, "echo ${B:-none} $PWD") == "none /tmp\n"     # a one-off scope is not saved
    r = client.exec(room, "sleep 5", timeout=500)
    assert r["timedOut"] is True, r
    # the keeper goes (as if the room stopped by itself): the next exec
    # is the helper's, which starts the room again
    keeper = stack.keeper_pid(room)
    os.kill(keeper, signal.SIGTERM)
    wait_until(lambda: stack.keeper_pid(room) is None, 20, "the keeper to end")
    assert client.sh(room, "echo $A $PWD") == "1 /tmp\n"
    assert client.sh(room, "echo again") == "again\n"


def test_a_warm_exec_without_input_reads_its_end_at_once(client, room):
    """A command given no stdin reads end of file at once, over the channel
    as through the helper (there it is /dev/null, one descriptor for every
    such exec), and what it writes there reaches no other exec."""
    client.sh(room, "true")
    client.sh(room, "true")     # warm: the channel runs the rest
    r = client.exec(room, "cat; read x; echo \"read=$?\"; echo gone > /proc/self/fd/0; echo ok",
                    timeout=5000)
    assert r["timedOut"] is False, r
    assert r["stdout"] == "read=1\nok\n", r
    assert client.exec(room, "cat", timeout=5000)["stdout"] == ""
    # with input, a pipe as before
    assert client.exec(room, "cat", stdin="in\n")["stdout"] == "in\n"


def keeper_pipes(keeper):
    """The pipes the keeper holds (roombox-fcgi's pipes come as its execs'
    stdout and stderr; its own are the start pipes of shells not yet
    started)."""
    found = 0
    for fd in os.listdir(f"/proc/{keeper}/fd"):
        try:
            found += os.readlink(f"/proc/{keeper}/fd/{fd}").startswith("pipe:")
        except OSError:
            pass
    return found


def test_the_keeper_lets_each_execs_output_go_with_its_answer(client, room):
    """The keeper holds a copy of each exec's stdout and stderr until it
    answers, then closes it: after execs that ended every way (over the
    channel, through the helper as a tool, one that failed, one that timed
    out, one whose output a background process still holds) it holds no
    more pipes than before, and every answer came whole."""
    client.sh(room, "true")
    keeper = client.stack.keeper_pid(room)
    base = keeper_pipes(keeper)
    for i in range(20):
        assert client.sh(room, f"echo {i}; echo e{i} >&2") == f"{i}\n"
    # a channel exec's copies are closed before its answer: none held now
    assert keeper_pipes(keeper) == base
    r = client.exec(room, "exit 3")
    assert r["exitCode"] == 3, r
    r = client.exec(room, "sleep 30", timeout=300)
    assert r["timedOut"], r
    r = client.exec(room, "(sleep 2; echo late) & echo now")
    assert r["stdout"] == "now\n", r
    r = client.request("PUT", f"/api/rooms/{room}/sandbox/files/held.txt", data=b"x" * 100)
    assert r.status in (200, 201), r
    r = client.request("GET", f"/api/rooms/{room}/sandbox/files/held.txt", check_json=False)
    assert r.body == b"x" * 100, r.status
    # a download's answer is whole once the tool has written the file,
    # which can be before the keeper has reaped the tool and let go
    wait_until(lambda: keeper_pipes(keeper) == base, 10,
               f"the keeper to hold {base} pipes again, as before (holds {keeper_pipes(keeper)})")
