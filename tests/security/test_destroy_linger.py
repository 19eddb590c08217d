"""A destroyed room leaves nothing running under its host ids, whatever
the room itself recorded: a keeper of a start the room never recorded, or
anything else that runs under the room's ids outside its cgroup and pid
namespace, dies with the room before the slot (and so the ids) can go to
another room; and a room whose freed ids a new room takes is the new
room's, not a leftover of the old one."""

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

from conftest import ROOM_IDS, GONE_TIMEOUT, pid_alive, procs_with_uid_in, unique_room, wait_until
from security_helpers import Background


def test_destroy_kills_what_runs_under_the_rooms_ids_outside_its_cgroup(client, stack):
    room = unique_room("linger")
    client.sh(room, "true")
    uid = client.room_uid(room)
    # as the room's root (its keeper's host id), started from the test:
    # neither the room's cgroup nor its keeper's pid namespace holds it
    stray = subprocess.Popen(["sleep", "600"], user=uid, group=uid, extra_groups=[],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        wait_until(lambda: any(p == stray.pid for p, _, _ in procs_with_uid_in(uid, uid + ROOM_IDS)),
                   GONE_TIMEOUT, f"the stray process {stray.pid} to run as uid {uid}")
        r = client.delete(f"/api/rooms/{room}")
        assert r.status == 200 and r.json == {"cleaned": True, "roomId": room}, (r.status, r.json)
        # the answer came after the kill: nothing to wait for
        assert not pid_alive(stray.pid), \
            f"DELETE {room} answered 200 while process {stray.pid} still runs under its ids ({uid})"
    finally:
        stray.kill()
        stray.wait()


def test_a_new_room_may_take_a_destroyed_rooms_ids(client, stack):
    """What the soak took for a keeper left by a DELETE: the destroyed
    room's slot goes to the next new room, whose keeper then runs under
    the same host ids."""
    old = unique_room("linger-old")
    client.sh(old, "true")
    uid = client.room_uid(old)
    client.destroy(old)
    assert not procs_with_uid_in(uid, uid + ROOM_IDS)
    new = unique_room("linger-new")
    client.sh(new, "true")
    try:
        # the lowest free slot: the one the old room gave up
        assert client.room_uid(new) == uid
        keeper = stack.keeper_pid(new)
        assert keeper in [p for p, _, _ in procs_with_uid_in(uid, uid + ROOM_IDS)]
        # what tells them apart (the soak's check): the new room's cgroup
        groups = [line.split(":", 2)[-1].split("/") for line in
                  Path(f"/proc/{keeper}/cgroup").read_text().splitlines()]
        assert any(new in g for g in groups) and not any(old in g for g in groups), groups
    finally:
        client.destroy(new)


def waiting_for_lock(inode):
    """Whether a process waits in flock for the file with this inode
    (/proc/locks lists waiters with "->")."""
    for line in Path("/proc/locks").read_text().splitlines():
        f = line.split()
        if "->" in f and f[f.index("->") + 1] == "FLOCK" and f[-3].rsplit(":", 1)[-1] == str(inode):
            return True
    return False


def test_an_exec_that_waited_behind_a_destroy_makes_the_room_anew(client, stack):
    """A destroy removes the room's run folder, its lock file with it, while
    it holds that lock.  A request that waited for the lock then holds one
    on a file nobody else opens: two requests could each think they had
    the room to themselves (two starts, one keeper the room never
    records).  It must lock the room's lock file as it is after the wait."""
    room = unique_room("linger-lock")
    run = stack.run_dir / "rooms" / room
    # the test as a destroy that holds the room's lock
    run.mkdir(mode=0o700)
    fd = os.open(run / "lock", os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    inode = os.fstat(fd).st_ino
    try:
        bg = Background(client, room, {"cmd": "echo here"})
        wait_until(lambda: waiting_for_lock(inode), 30, f"the exec in {room} to wait for its lock")
        shutil.rmtree(run)     # the destroy's last step, still locked
    finally:
        os.close(fd)
    try:
        r = bg.join(120)
        assert r.status == 200 and r.json["result"]["stdout"] == "here\n", (r.status, r.json)
    finally:
        client.destroy(room)
