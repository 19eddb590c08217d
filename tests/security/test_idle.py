"""Idle stop: an idle room releases every process,
mount and loop device it held on the host, and comes back with its files
and session on the next exec; a room whose exec is still running is not
idle.  roombox-fcgi's idle thread runs "stop-idle" every idle_timeout / 4.
Through nginx."""

import os
import signal
import subprocess

from conftest import (GONE_TIMEOUT, IDLE_STOP_WAIT, host_mountinfo_lines, loop_devices_backed_by,
                      ns_inode, pid_alive, procs_in_ns, procs_of_room, procs_with_uid, room_state,
                      unique_room, wait_idle_stopped, wait_until)
from security_helpers import Background

SERVERS = ("nginx",)
ROOMBOX_CONFIG = {"idle_timeout": "2s"}


def test_idle_room_releases_everything_and_comes_back(client, stack):
    room = unique_room("idle")
    client.sh(room, "cd /tmp; echo kept > /workspace/f; sleep 3600 >/dev/null 2>&1 &")
    uid = client.room_uid(room)
    keeper = stack.keeper_pid(room)
    state = str(stack.room_state_dir(room))
    assert keeper and pid_alive(keeper)
    pid_ns, mnt_ns = ns_inode(keeper, "pid"), ns_inode(keeper, "mnt")
    # what there is while it runs, so that the checks below can fail
    assert [p for p in procs_with_uid(uid) if p[1] == "sleep 3600"]
    assert loop_devices_backed_by(state), "a running room has its disk image attached"
    assert room_state(client, room) == "running"

    wait_idle_stopped(client, room)

    wait_until(lambda: not pid_alive(keeper), GONE_TIMEOUT, "the keeper to end")
    assert stack.keeper_pid(room) is None
    wait_until(lambda: not procs_of_room(uid), GONE_TIMEOUT,
               f"the room's processes to end: {procs_of_room(uid)}")
    assert not procs_in_ns("pid", pid_ns)
    assert not procs_in_ns("mnt", mnt_ns)
    assert not host_mountinfo_lines(state, f"/{room}/")
    wait_until(lambda: not loop_devices_backed_by(state), GONE_TIMEOUT,
               f"the room's loop device to be released: {loop_devices_backed_by(state)}")

    # the next exec brings it back, files and session intact
    assert client.sh(room, "pwd; cat /workspace/f") == "/tmp\nkept\n"
    assert room_state(client, room) == "running"
    new = stack.keeper_pid(room)
    assert new and new != keeper
    assert "sleep 3600" not in client.sh(room, "ps -e -o args=")


def test_a_room_with_a_running_exec_is_not_idle(client, stack):
    busy, idle = unique_room("busy"), unique_room("idle")
    uid = client.room_uid(busy)
    # the exec waits for a file that only a later exec creates
    waiter = Background(client, busy, {
        "cmd": "while [ ! -e /workspace/go ]; do sleep 0.05; done; echo done",
        "timeout": 120000})
    wait_until(lambda: [p for p in procs_with_uid(uid) if p[1].startswith("sleep")]
               or not waiter.running(), 10, "the busy room's exec to run")
    assert waiter.running(), waiter.join(1).json
    # a room made after the busy exec started: once the idle thread has
    # stopped it, the busy room has been idle as long and was passed over
    client.sh(idle, "true")
    wait_idle_stopped(client, idle)
    assert waiter.running(), "the busy room's exec ended before anyone let it"
    assert room_state(client, busy) == "running"
    client.sh(busy, "touch /workspace/go")
    r = waiter.join(30)
    assert r.status == 200, r.json
    res = r.json["result"]
    assert res["stdout"] == "done\n" and res["exitCode"] == 0 and res["timedOut"] is False, res


def keeper_sockets(keeper):
    """(state, Recv-Q, inode) of each of the keeper's unix sockets, as ss(8)
    sees them in the room's network namespace (where the keeper made them):
    LISTEN counts connections not yet taken, ESTAB bytes not yet read."""
    out = subprocess.run(["nsenter", f"--net=/proc/{keeper}/ns/net", "ss", "-xaH"],
                         capture_output=True, text=True, timeout=10)
    if out.returncode != 0 and (not pid_alive(keeper) or not os.path.exists(f"/proc/{keeper}/ns/net")):
        return []            # gone (or a zombie) meanwhile: no socket left
    assert out.returncode == 0, out.stderr
    rows = [line.split() for line in out.stdout.splitlines()]
    return [(row[1], int(row[2]), row[5]) for row in rows if len(row) > 5 and row[0] == "u_seq"]


def test_an_exec_sent_as_the_sweep_stops_its_room_is_run(client, stack):
    """An exec that reaches a warm room's keeper straight (its exec channel,
    no room lock) just as the idle sweep decides to stop the room: the
    sweep must neither kill it nor lose it.  The keeper is held stopped
    (SIGSTOP) with the exec queued on its channel and the sweep's request
    queued behind it; let go, the keeper takes the sweep's first (always:
    its loop's order), shuts its channels and sends the exec back, which
    roombox-fcgi gives to the helper.  The exec answers 200 with its
    output, the room was wanted so it still runs (the same keeper), and
    the channel the exec came on is gone."""
    room = unique_room("sweep")
    for _ in range(3):        # the first starts it; then roombox-fcgi holds a channel
        assert client.sh(room, "true") == ""
    keeper = stack.keeper_pid(room)
    channels = {inode for state, _, inode in keeper_sockets(keeper) if state == "ESTAB"}
    assert channels, keeper_sockets(keeper)
    os.kill(keeper, signal.SIGSTOP)
    try:
        waiter = Background(client, room, {"cmd": "echo ran"})
        wait_until(lambda: any(s == "ESTAB" and q > 0 for s, q, _ in keeper_sockets(keeper)),
                   10, "the exec to wait on the keeper's channel")
        # the sweep comes once the room has been idle 2 s: its request to
        # the keeper waits too (or, without that, it stops the room)
        wait_until(lambda: not pid_alive(keeper) or
                   any(s == "LISTEN" and q > 0 for s, q, _ in keeper_sockets(keeper)),
                   IDLE_STOP_WAIT, "the idle sweep to reach the stopped keeper", interval=0.01)
    finally:
        if pid_alive(keeper):
            os.kill(keeper, signal.SIGCONT)
    r = waiter.join(60)
    assert r.status == 200, r.json
    assert r.json["result"]["stdout"] == "ran\n" and r.json["result"]["exitCode"] == 0, r.json
    assert stack.keeper_pid(room) == keeper, "a room an exec was sent back from was stopped"
    left = {inode for state, _, inode in keeper_sockets(keeper) if state == "ESTAB"}
    assert not channels & left, f"the channels {channels & left} were not closed"
    # and the room is whole: its next exec runs, the sweep stops it in time
    assert client.sh(room, "echo again") == "again\n"
    wait_idle_stopped(client, room)
