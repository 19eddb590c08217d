"""A move crashed at each of its steps: the source host's roombox-fcgi, the
target's, the mover (roomboxctl, its whole process group) or etcd's leader
killed with SIGKILL, then what was killed started again and the operator's
step the documentation gives (`roomboxctl move --abort ROOM` when the
moving key is left) done.  Whatever happened, there is exactly one intact
copy of the room: one host serves it with all its data (straight and
through the router), the other answers 421 naming it and keeps nothing of
the room but its tombstone, and etcd's record agrees (no moving key left).
Before the commit a failure leaves the room where it was; after the commit
the move only goes forward.

The steps, each found by observation, the mover stopped there while the
kill happens (nothing in the product helps):
  moving         the moving key's transaction applied by etcd, its answer
                 held by a relay between the mover and etcd (etcd_gate.py):
                 the mover waits, nothing exported yet;
  export         16 MiB of the room's 128 MiB export passed on by the
                 mover's reader (its /proc/PID/io), which is then stopped (SIGSTOP):
                 the source's export and the target's import wait mid-way;
  import         16 MiB taken for the target's import by the mover's
                 writer, which is then stopped: the same, seen from the
                 target's side;
  before-commit  the target answered its import (201) and the mover's commit
                 transaction is held by the relay before it reaches etcd;
  after-commit   the commit applied by etcd, its answer held (for etcd's
                 leader: the commit sent to the leader, which is killed, and
                 the answer never comes: the mover has to find out).
A mover stopped and not killed is let go (SIGCONT, the relay's answer
released) after the kill."""

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from conftest import CTL, gone as ended, wait_until
from etcd_gate import Gate, commit, leader, moving_written
from moving import fcgi_kill, fcgi_pid, fcgi_start, no_trace, room_paths, stdout

MIB = 1 << 20
POINTS = ["moving", "export", "import", "before-commit", "after-commit"]
TARGETS = ["src", "dst", "mover", "etcd-leader"]
FILL = ("mkdir -p /srv/m && head -c 128M /dev/urandom > /srv/m/big && echo {room} > /srv/m/marker && "
        "chown 1000:1000 /srv/m/marker && sha256sum /srv/m/big /srv/m/marker")
CHECK = "sha256sum /srv/m/big /srv/m/marker"


def io(pid, field):
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            k, v = line.split(":")
            if k == field:
                return int(v)
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def children(pid):
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except FileNotFoundError:
        return []


def mover(c, gate, *args):
    return subprocess.Popen([str(CTL), "-c", str(c.run / "h1" / "roombox.conf"), "-e", gate.url,
                             "-a", str(c.admin), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def stop_mid_stream(mv, side):
    """The mover's reader of the export (side "export", its child) or its
    writer into the import (side "import", itself) stopped once 16 MiB went
    through it; the stopped pid."""
    def ready():
        if mv.poll() is not None:
            raise AssertionError(f"the mover ended first: {mv.communicate()}")
        # what crossed the pipe between them (recv and send on the sockets
        # are not counted in /proc/PID/io, the pipe's read and write are)
        if side == "import":
            return mv.pid if io(mv.pid, "rchar") >= 16 * MIB else None
        kids = children(mv.pid)
        return kids[0] if kids and io(kids[0], "wchar") >= 16 * MIB else None
    # polled every millisecond, not wait_until's 50 ms: the stream runs at
    # over 100 MB/s
    end = time.monotonic() + 120
    while not (pid := ready()):
        assert time.monotonic() < end, f"no 16 MiB of the move's stream ({side}) in 120 s"
        time.sleep(0.001)
    os.kill(pid, signal.SIGSTOP)
    return pid


def one_intact_copy(c, room, sandbox, src, dst, sums):
    """Exactly one copy: the record's host serves the room whole; the
    other answers 421 and keeps only the tombstone; no move in flight."""
    assert c.etcd_get(f"/roombox/moving/{room}") is None
    rec = c.etcd_get(f"/roombox/rooms/{room}")
    assert rec in ({"host": src, "epoch": 1}, {"host": dst, "epoch": 2}), rec
    home = rec["host"]
    gone = dst if home == src else src

    def serves(host):
        last = []
        def answer():
            a = c.request("POST", f"/api/rooms/{room}/sandbox/exec",
                          {"cmd": CHECK, "timeout": 300000}, host=host, timeout=330)
            assert a.status in (200, 503), a
            if a.status == 503:
                assert "retry-after" in a.headers, a
                last[:] = [a]
                return None
            return a
        try:
            return wait_until(answer, 60, f"room {room} to serve "
                              f"{'from ' + host if host else 'through the router'}")
        except AssertionError as e:
            raise AssertionError(f"{e}; last answer {last[0] if last else None}") from None
    for via in (home, None):
        a = serves(via)
        assert a.host == home and a.json["result"]["exitCode"] == 0 and stdout(a) == sums, a
    def misdirected():
        # 503 + Retry-After while its copy of etcd's records catches up
        # (its watch may be starting again after etcd's leader died)
        o = c.exec(room, "true", host=gone)
        assert o.status == 421 or (o.status == 503 and "retry-after" in o.headers), o
        return o if o.status == 421 else None
    o = wait_until(misdirected, 60, f"{gone} to answer 421 for {room}")
    assert f"lives on host {home}" in o.json["error"], o
    wait_until(lambda: no_trace(c, gone, room, sandbox), 60,
               f"{gone} to keep nothing of {room} but its tombstone "
               f"(has {room_paths(c, gone, room, sandbox)})")
    third = next(h for h in c.hosts if h not in (src, dst))
    assert room_paths(c, third, room, sandbox) == []
    return home


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("point", POINTS)
def test_a_move_killed_at_each_step_leaves_one_intact_copy(cluster_mode, room, point, target):
    c = cluster_mode
    a = c.request("POST", f"/api/rooms/{room}/sandbox/exec", {"cmd": FILL.format(room=room),
                                                               "timeout": 120000}, timeout=150)
    assert a.status == 200 and a.json["result"]["exitCode"] == 0, a
    sums, src = stdout(a), a.host
    dst = next(h for h in c.hosts if h != src)
    sandbox = next(r["sandboxName"] for r in c.request("GET", "/api/rooms").json["rooms"]
                   if r["roomId"] == room)
    c.ctl("route-sync")
    held = room_paths(c, src, room, sandbox)

    lead = leader(c) if target == "etcd-leader" else None
    order = list(c.endpoints)
    if lead:     # the mover's calls go to the leader first, so its death is felt
        order.sort(key=lambda u: u != f"http://10.77.0.{lead[1:]}:2379")
    gate = Gate(order)
    stopped = None
    restarted = False
    try:
        if point == "moving":
            gate.hold(moving_written(room), "after")
        elif point == "before-commit":
            gate.hold(commit(room), "before")
        elif point == "after-commit":
            gate.hold(commit(room), "after")
        mv = mover(c, gate, "move", room, dst)
        if point in ("export", "import"):
            stopped = stop_mid_stream(mv, point)
        else:
            wait_until(gate.reached.is_set, 180, f"the mover to reach its step {point}")

        # the step is what it should be
        if point == "after-commit":
            assert c.etcd_get(f"/roombox/rooms/{room}") == {"host": dst, "epoch": 2}
        else:
            assert c.etcd_get(f"/roombox/moving/{room}") is not None
            assert c.etcd_get(f"/roombox/rooms/{room}") == {"host": src, "epoch": 1}

        if target == "mover":
            os.killpg(mv.pid, signal.SIGKILL)
            mv.communicate()
        elif target in ("src", "dst"):
            fcgi_kill(c, src if target == "src" else dst)
        else:
            c.etcd_stop(lead)
        if target != "mover":
            gate.release(drop=point == "after-commit" and target == "etcd-leader")
            if stopped:
                os.kill(stopped, signal.SIGCONT)
            out, err = mv.communicate(timeout=300)
        if target in ("src", "dst"):
            fcgi_start(c, src if target == "src" else dst)
        elif target == "etcd-leader":
            c.etcd_start(lead)
            c.etcd_has_leader()
        restarted = True
    finally:
        gate.close()
        if not restarted:
            if mv.poll() is None:
                os.killpg(mv.pid, signal.SIGKILL)
            host = src if target == "src" else dst
            if target in ("src", "dst") and ended(fcgi_pid(c, host)):
                fcgi_start(c, host)
            if target == "etcd-leader" and lead:
                try:
                    c.etcd_start(lead)
                except AssertionError:
                    pass

    # the operator's step: a moving key left behind is aborted
    if c.etcd_get(f"/roombox/moving/{room}") is not None:
        ab = c.ctl("move", "--abort", room)
        assert "move aborted" in ab.stdout, ab

    home = one_intact_copy(c, room, sandbox, src, dst, sums)
    if home == src:     # and nothing left over from the export there
        wait_until(lambda: room_paths(c, src, room, sandbox) == held, 60,
                   f"{src} to hold what it held before the move: {held}, "
                   f"not {room_paths(c, src, room, sandbox)}")
    if target != "mover":
        assert (mv.returncode == 0) == (home == dst), (mv.returncode, out, err, home)
    if point == "after-commit":
        assert home == dst, "after the commit the move only goes forward"
    elif point != "before-commit" and target != "etcd-leader":
        assert home == src, "before the commit a failure leaves the room where it was"
    elif point == "before-commit" and target == "mover":
        assert home == src
    c.request("DELETE", f"/api/rooms/{room}")


def test_a_stopped_mover_whose_move_was_aborted_cannot_commit(cluster_mode, room):
    """The mover stopped mid-stream (a paused VM, say), the operator aborts
    the move, the room takes writes on its host again; when the mover wakes
    and finishes the import, its commit must fail: the target's copy is
    stale."""
    c = cluster_mode
    a = c.request("POST", f"/api/rooms/{room}/sandbox/exec", {"cmd": FILL.format(room=room),
                                                               "timeout": 120000}, timeout=150)
    assert a.status == 200, a
    src = a.host
    dst = next(h for h in c.hosts if h != src)
    sandbox = next(r["sandboxName"] for r in c.request("GET", "/api/rooms").json["rooms"]
                   if r["roomId"] == room)
    c.ctl("route-sync")
    gate = Gate(c.endpoints)
    try:
        mv = mover(c, gate, "move", room, dst)
        stopped = stop_mid_stream(mv, "export")
        ab = c.ctl("move", "--abort", room)
        assert "move aborted" in ab.stdout, ab
        w = wait_until(lambda: (lambda r: r if r.status == 200 else None)(
            c.exec(room, "echo after-the-abort >> /srv/m/marker")), 30, "the room to serve again")
        assert w.host == src, w
        os.kill(stopped, signal.SIGCONT)
        out, err = mv.communicate(timeout=300)
    finally:
        gate.close()
        if mv.poll() is None:
            os.killpg(mv.pid, signal.SIGKILL)
    assert mv.returncode != 0, (out, err)
    assert c.etcd_get(f"/roombox/rooms/{room}") == {"host": src, "epoch": 1}
    assert c.etcd_get(f"/roombox/moving/{room}") is None
    b = c.exec(room, "cat /srv/m/marker")
    assert b.status == 200 and b.host == src and stdout(b) == f"{room}\nafter-the-abort\n", b
    wait_until(lambda: no_trace(c, dst, room, sandbox), 60,
               f"{dst} to keep nothing of {room} (has {room_paths(c, dst, room, sandbox)})")
    c.request("DELETE", f"/api/rooms/{room}")
