"""roomboxctl against a test stack: every verb, and what it did as seen
through the API and on the host.

roomboxctl reads the stack's configuration (-c) and speaks FastCGI to
roombox-fcgi's socket: the configuration's `socket` behind nginx; behind
lighttpd, which spawns roombox-fcgi on a socket of its own, the socket that
lighttpd made (-s)."""

import hashlib
import re
import subprocess

from conftest import REPO, wait_until, pid_alive

CTL = REPO / "build" / "roomboxctl"


def ctl_socket(stack):
    if stack.server != "lighttpd":
        return []
    socks = sorted(stack.dir.glob("lighttpd-fcgi.sock*"))
    assert len(socks) == 1, socks
    return ["-s", str(socks[0])]


def ctl(stack, *args, timeout=120):
    argv = [str(CTL), "-c", str(stack.conf_path)] + ctl_socket(stack)
    r = subprocess.run(argv + [str(a) for a in args], capture_output=True, timeout=timeout)
    return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")


def fingerprint(token):
    return hashlib.sha256(token.encode()).hexdigest()[:12]


def test_status(client, stack, room):
    client.sh(room, "true")
    rc, out, err = ctl(stack, "status")
    assert rc == 0, err
    version = client.get("/api/health").json["version"]
    assert out.startswith(f"roombox {version}: ok ("), out
    rooms = client.get("/api/rooms").json["rooms"]
    running = sum(r["state"] == "running" for r in rooms)
    assert f"rooms: {len(rooms)} ({running} running, {len(rooms) - running} stopped)" in out


def test_rooms_lists_every_room(client, stack, room):
    client.sh(room, "true")
    rc, out, err = ctl(stack, "rooms")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["ROOM", "STATE", "PROCS"]
    mine = [l.split() for l in lines[1:] if l.split()[0] == room]
    assert len(mine) == 1 and mine[0][1] == "running", out
    assert len(lines) - 1 == len(client.get("/api/rooms").json["rooms"])


def test_exec_output_and_exit_status(client, stack, room):
    rc, out, err = ctl(stack, "exec", room, "echo out; echo err >&2; exit 7")
    assert (rc, out, err) == (7, "out\n", "err\n")
    rc, out, err = ctl(stack, "exec", room, "printf", "'%s|'", "a b", "c")
    assert (rc, out, err) == (0, "a|b|c|", "")
    # the room is the one the API sees
    assert client.sh(room, "true") == ""
    # the output's exact bytes, not UTF-8 with U+FFFD
    argv_ = ["exec", room, r"printf '\377\000x'; printf '\376' >&2"]
    r = subprocess.run([str(CTL), "-c", str(stack.conf_path)] + ctl_socket(stack) + argv_,
                       capture_output=True, timeout=60)
    assert (r.returncode, r.stdout, r.stderr) == (0, b"\xff\x00x", b"\xfe")
    rc, out, err = ctl(stack, "exec", room, "kill -9 $$")
    assert rc == 137, (rc, out, err)


def test_exec_failures_are_125(stack):
    rc, out, err = ctl(stack, "exec", "not a room", "true")
    assert rc == 125 and "invalid room id" in err
    argv = [str(CTL), "-c", str(stack.conf_path), "-s", str(stack.dir / "no-such.sock"),
            "exec", "r1", "true"]
    r = subprocess.run(argv, capture_output=True, timeout=60)
    assert r.returncode == 125 and b"no-such.sock" in r.stderr, r


def test_stop(client, stack, room):
    client.sh(room, "sleep 1000 > /dev/null 2>&1 &")
    keeper = stack.keeper_pid(room)
    assert keeper
    rc, out, err = ctl(stack, "stop", room)
    assert (rc, out) == (0, f"room {room}: stopped\n"), err
    assert client.get(f"/api/rooms/{room}").json["state"] == "stopped"
    wait_until(lambda: not pid_alive(keeper), 5, f"keeper {keeper} of {room} to end")
    # files kept; the next exec starts it again
    assert client.sh(room, "echo back") == "back\n"
    rc, out, err = ctl(stack, "stop", "never-made-" + room[:20])
    assert rc == 1 and "404 room not found" in err


def test_restart(client, stack, room):
    """restart is POST /api/rooms/{id}/sandbox/restart.  Where
    the service has that route, the room comes back with a new keeper and
    its files; where it has not, roomboxctl says what the service answered
    and exits 1.  Either way the request is the one the spec names."""
    client.sh(room, "echo kept > /workspace/f")
    keeper = stack.keeper_pid(room)
    rc, out, err = ctl(stack, "restart", room)
    if rc == 0:
        assert out == f"room {room}: restarted\n"
        assert pid_alive(keeper) is False or stack.keeper_pid(room) != keeper
        assert client.sh(room, "cat /workspace/f") == "kept\n"
    else:
        assert rc == 1 and f"restart {room}: 404" in err, (rc, out, err)
    log = (stack.dir / ("fcgi.log" if stack.server == "nginx" else "lighttpd.out")).read_text()
    assert re.search(rf"method=POST route=\S+ room=\S+ status=\d+ .* "
                     rf"path=/api/rooms/{room}/sandbox/restart$", log, re.M), log[-2000:]


def test_destroy(client, stack, room):
    client.sh(room, "echo x > /workspace/f")
    rc, out, err = ctl(stack, "destroy", room)
    assert (rc, out) == (0, f"room {room}: destroyed\n"), err
    assert client.get(f"/api/rooms/{room}").status == 404


def test_snapshot_snapshots_restore_fork(client, stack, room):
    client.sh(room, "echo one > /workspace/f")
    rc, out, err = ctl(stack, "snapshot", room, "first")
    assert rc == 0 and re.fullmatch(rf"room {room}: snapshot [0-9a-f]{{16}} taken\n", out), (rc, out, err)
    sid = out.split()[3]
    rc, out, err = ctl(stack, "snapshots", room)
    assert rc == 0 and re.search(rf"^{sid} +first ", out, re.M), (rc, out, err)
    client.sh(room, "echo two > /workspace/f")
    rc, out, err = ctl(stack, "restore", room, "first")
    assert (rc, out) == (0, f"room {room}: restored snapshot {sid}\n"), err
    assert client.sh(room, "cat /workspace/f") == "one\n"
    to = room + "-fork"
    client.touch(to)
    rc, out, err = ctl(stack, "fork", room, to, sid)
    assert (rc, out) == (0, f"room {room}: forked to {to}\n"), err
    assert client.sh(to, "cat /workspace/f") == "one\n"
    rc, out, err = ctl(stack, "fork", room, to)
    assert rc == 1 and "409" in err, (rc, out, err)
    rc, out, err = ctl(stack, "restore", room, "nosuch")
    assert rc == 1 and "404" in err, (rc, out, err)


def test_tokens_new_list_revoke(client, stack):
    tokens_before = stack.tokens_file.read_text()
    rc, out, err = ctl(stack, "token", "list")
    assert rc == 0, err
    assert out.split() == [fingerprint(stack.token), fingerprint(stack.second_token)]
    assert stack.token not in out + err and stack.second_token not in out + err

    rc, out, err = ctl(stack, "token", "new")
    assert rc == 0, err
    new = out.strip()
    assert re.fullmatch(r"[0-9a-f]{64}", new), out
    assert fingerprint(new) in err
    # the service takes it at once
    assert client.get("/api/rooms", auth=f"Bearer {new}").status == 200
    rc, out, err = ctl(stack, "token", "list")
    assert out.split() == [fingerprint(stack.token), fingerprint(stack.second_token),
                           fingerprint(new)]
    assert new not in out + err
    assert stack.tokens_file.stat().st_mode & 0o777 == 0o600   # mode kept

    # revoked: refused on the very next request, no restart
    rc, out, err = ctl(stack, "token", "revoke", fingerprint(new)[:8])
    assert (rc, out) == (0, f"revoked {fingerprint(new)}\n"), err
    r = client.get("/api/rooms", auth=f"Bearer {new}")
    assert r.status == 401 and r.json == {"error": "unauthorized"}
    assert client.get("/api/rooms").status == 200           # the others still work
    assert stack.tokens_file.read_text() == tokens_before

    rc, out, err = ctl(stack, "token", "revoke", fingerprint(new))
    assert rc == 1 and "no token with fingerprint" in err
    rc, out, err = ctl(stack, "token", "revoke", "xyz")
    assert rc == 1 and "not a fingerprint" in err
    assert stack.tokens_file.read_text() == tokens_before


def test_usage_errors(stack):
    for args in ([], ["frobnicate"], ["exec", "r1"], ["stop"], ["token"], ["token", "revoke"]):
        rc, out, err = ctl(stack, *args)
        assert rc == 2 and "usage: roomboxctl" in err, (args, rc, err)
