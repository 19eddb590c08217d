"""Abuse of a room's resources stays in that room: fork
bombs, memory, process count, disk, kill -9 -1.  Through nginx, with small
limits so that each is crossed quickly."""

import os

import pytest

from conftest import (GONE_TIMEOUT, ROOM_IDS, procs_of_room, procs_with_uid, procs_with_uid_in,
                      unique_room, wait_until)
from security_helpers import (FORK_LOOP, Background, assert_room_holds_only_keeper_and_this_exec,
                              pids_refused, room_python_json, wait_for_pids_limit_hit)

SERVERS = ("nginx",)
MEMORY_LIMIT = 64 << 20
PIDS_LIMIT = 64
DISK_LIMIT = 64 << 20
ROOMBOX_CONFIG = {"memory_limit": "64M", "pids_limit": str(PIDS_LIMIT), "disk_limit": "64M"}


def live_count(uid):
    """Live processes under the room's host ids (`uid`: its root's), the
    keeper (the room's root too) left out."""
    return len([p for p in procs_with_uid_in(uid, uid + ROOM_IDS) if p[2] != "roombox-keeper"])


def check_other_room_answers_while(client, b, busy):
    """Room B (already made) answers an echo while the bomb in room `busy`
    presses on its pids_limit: the kernel refused the bomb's forks before
    B's exec (pids.events), and again after B answered (ordering, not time;
    not a count of the busy room's processes, which a bomb keeps moving and
    a scan of /proc may catch low)."""
    assert pids_refused(busy), f"the bomb in {busy} has not reached its limit"
    out = client.sh(b, "echo B answers")
    after = pids_refused(busy)
    assert out == "B answers\n"
    wait_for_pids_limit_hit(busy, after, 10, f"the bomb in {busy} to press on its limit "
                            "after B answered")


FOREGROUND_BOMB = "exec " + FORK_LOOP


def test_fork_bomb_is_killed_at_its_timeout_and_other_rooms_answer(client):
    a, b = unique_room("a"), unique_room("b")
    uid = client.room_uid(a)
    client.sh(b, "true")
    bomb = Background(client, a, {"cmd": FOREGROUND_BOMB, "timeout": 6000})
    wait_until(lambda: pids_refused(a) or not bomb.running(), 20,
               "the fork bomb to reach the room's pids_limit")
    assert bomb.running(), f"the bomb ended early: {bomb.response}"
    check_other_room_answers_while(client, b, a)
    assert bomb.running(), "room A's exec answered while B ran: the ordering check proves nothing"
    # the limit held: never more processes than pids_limit
    assert live_count(uid) <= PIDS_LIMIT
    r = bomb.join(30)
    assert r.status == 200, r.json
    res = r.json["result"]
    assert res["timedOut"] is True and res["exitCode"] == 124, res
    wait_until(lambda: live_count(uid) == 0, GONE_TIMEOUT,
               f"the bomb's processes to end: {live_count(uid)} left")
    assert_room_holds_only_keeper_and_this_exec(client, a)


def test_fork_bomb_in_the_background_is_contained_and_ends(client):
    """The classic bomb: bash returns at once and the bomb lives on in the
    background.  It must stay within pids_limit, other rooms must answer,
    and the exec's timeout (3 s) must be the end of it: within 15 s of the
    exec the room answers again and holds nothing of the bomb."""
    a, b = unique_room("a"), unique_room("b")
    uid = client.room_uid(a)
    client.sh(b, "true")
    bomb = Background(client, a, {"cmd": "bash -c ':(){ :|:& };:'", "timeout": 3000})
    try:
        wait_for_pids_limit_hit(a, 0, 20, "the fork bomb to reach the room's pids_limit")
        check_other_room_answers_while(client, b, a)
        assert live_count(uid) <= PIDS_LIMIT
        r = bomb.join(30)
        assert r.status == 200, r.json

        last = {}

        def room_a_clean():
            resp = client.exec_raw(a, {"cmd": "ps -e -o pid=", "timeout": 5000})
            if resp.status != 200:
                last["answer"] = f"{resp.status} {resp.json}"
                return False
            n = len(resp.json["result"]["stdout"].split())
            last["answer"] = f"200, with {n} processes in the room's ps"
            # the keeper, this exec's shell and ps
            return n == 3
        try:
            wait_until(room_a_clean, 15, "room A to be usable and empty again", interval=0.5)
        except AssertionError as e:
            raise AssertionError(f"{e}: 15 s after a fork bomb run with timeout 3000 ms, "
                                 f"{live_count(uid)} processes of the room are still alive "
                                 f"and an exec in it answers {last.get('answer')}")
        assert_room_holds_only_keeper_and_this_exec(client, a)
    finally:
        if live_count(uid):
            client.destroy(a)        # leave no bomb running for the next test


def test_memory_hog_is_killed_alone(client, stack):
    a, b = unique_room("a"), unique_room("b")
    client.sh(b, "sleep 3602 >/dev/null 2>&1 &")
    client.sh(a, "sleep 3601 >/dev/null 2>&1 &")
    keeper_a = stack.keeper_pid(a)
    hog = f"python3 -c 'a = b\"x\" * {3 * MEMORY_LIMIT}; print(\"allocated\", len(a))'"
    # the shell goes on: only the command was killed
    res = client.exec(a, f"{hog}; echo \"status=$?\"")
    assert res["stdout"] == "status=137\n", res
    assert res["exitCode"] == 0
    # and as the exec's own process: 137 / SIGKILL
    res = client.exec(a, "exec " + hog)
    assert res["exitCode"] == 137 and res["signal"] == "SIGKILL", res
    assert res["timedOut"] is False and "allocated" not in res["stdout"]
    # the room works, its other process and its keeper are untouched
    assert "sleep 3601" in client.sh(a, "ps -e -o args=").splitlines()
    assert stack.keeper_pid(a) == keeper_a
    assert "sleep 3602" in client.sh(b, "ps -e -o args=").splitlines()
    # a smaller allocation still works
    assert client.sh(a, "python3 -c 'a = b\"x\" * (16 << 20); print(len(a))'") == f"{16 << 20}\n"


SPAWN_SLEEPS = r'''
import json, subprocess
procs, errors = [], []
for i in range(600):
    try:
        procs.append(subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    except OSError as e:
        errors.append((e.errno, e.strerror))
out = {"started": len(procs), "failed": len(errors), "errors": sorted(set(errors))}
for p in procs:
    p.kill()
for p in procs:
    p.wait()
print(json.dumps(out))
'''


def test_600_sleeps_stop_at_pids_limit(client, room):
    uid = client.room_uid(room)
    out = room_python_json(client, room, SPAWN_SLEEPS, timeout=60000)
    assert out["started"] + out["failed"] == 600, out
    # the keeper, the shell and python take 3 of the slots
    assert PIDS_LIMIT - 7 <= out["started"] <= PIDS_LIMIT - 3, out
    assert out["errors"] == [[11, "Resource temporarily unavailable"]], out
    wait_until(lambda: not [p for p in procs_of_room(uid) if p[1].startswith("sleep")],
               GONE_TIMEOUT, "the sleeps to end")
    assert client.sh(room, "echo still fine") == "still fine\n"


# Says when it first met the limit (a file: writing it takes no process),
# so that the test's execs come when no slot is left, not before.
FILL_ROOM = r'''
import errno, os, subprocess, time
os.setsid()
held = []
while True:
    try:
        held.append(subprocess.Popen(["sleep", "3711"], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    except OSError as e:
        if e.errno != errno.EAGAIN:
            raise
        if not os.path.exists("/tmp/rb-filled"):
            open("/tmp/rb-filled", "w").close()
        time.sleep(0.002)
'''


def room_filled(uid):
    """The filler (seen from the host, through its own root) met the limit."""
    return any(cmd.startswith("python3 -c") and os.path.exists(f"/proc/{pid}/root/tmp/rb-filled")
               for pid, cmd in procs_with_uid(uid))


def test_exec_in_a_room_at_its_process_limit_frees_it(client, room):
    """A background job that takes every free process slot of the room (and
    keeps taking them): an exec that cannot get a process does not fail nor
    wait for the job's deadline: the room's processes are killed and the
    exec runs (tests/security/test_recovery.py has the rest)."""
    uid = client.room_uid(room)
    r = client.exec_raw(room, {"cmd": 'python3 -c "$RB_FILL" >/dev/null 2>&1 &',
                               "env": {"RB_FILL": FILL_ROOM}, "timeout": 60000})
    assert r.status == 200, r.json
    wait_until(lambda: room_filled(uid), 20, "the room to fill up")
    assert len(sleeps_of(uid, 3711)) >= PIDS_LIMIT - 6
    answers = [client.exec_raw(room, {"cmd": "echo in", "timeout": 2000}) for _ in range(10)]
    for a in answers:
        assert a.status == 200 and a.json["result"]["stdout"] == "in\n", a.json
    wait_until(lambda: not sleeps_of(uid, 3711), GONE_TIMEOUT, "the filler to be killed")
    assert client.sh(room, "echo works again") == "works again\n"


def host_free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


# serial: the free space it measures is the host's /tmp, which every other
# test's stacks write to as well
@pytest.mark.serial
def test_filling_the_disk_stops_at_disk_limit(client, stack):
    a, b = unique_room("a"), unique_room("b")
    client.sh(a, "true")
    client.sh(b, "true")
    free_before = host_free_bytes(stack.state_dir)
    res = client.exec(a, "dd if=/dev/zero of=/workspace/big bs=1M count=3072; echo \"dd=$?\"; "
                         "stat -c %s /workspace/big", timeout=120000, http_timeout=180)
    free_after = host_free_bytes(stack.state_dir)
    assert "No space left on device" in res["stderr"], res
    lines = res["stdout"].splitlines()
    assert lines[0] != "dd=0", res
    assert int(lines[1]) <= DISK_LIMIT, res
    lost = free_before - free_after
    assert lost <= DISK_LIMIT + (8 << 20), f"the host lost {lost >> 20} MiB of free space"
    image = os.stat(stack.room_state_dir(a) / "disk.img")
    assert image.st_blocks * 512 <= DISK_LIMIT, f"room image uses {image.st_blocks * 512} bytes"
    # the other room can still write, and so can A once it made room
    assert client.sh(b, "dd if=/dev/zero of=/workspace/f bs=1M count=8 2>/dev/null; stat -c %s /workspace/f") \
        == f"{8 << 20}\n"
    assert client.sh(a, "rm /workspace/big; echo again > /workspace/g; cat /workspace/g") == "again\n"


def test_kill_minus_one_harms_neither_the_keeper_nor_other_rooms(client, stack):
    a, b = unique_room("a"), unique_room("b")
    client.sh(a, "sleep 3601 >/dev/null 2>&1 &")
    client.sh(b, "sleep 3602 >/dev/null 2>&1 &")
    keeper_a, keeper_b = stack.keeper_pid(a), stack.keeper_pid(b)
    uid_b = client.room_uid(b)
    b_sleeps = [p for p, args in procs_with_uid(uid_b) if args == "sleep 3602"]
    assert keeper_a and keeper_b and len(b_sleeps) == 1
    # kill(-1) spares the caller (the shell, kill is a builtin) and PID 1
    res = client.exec(a, "kill -9 -1; echo \"kill=$?\"")
    assert res["stdout"] == "kill=0\n" and res["exitCode"] == 0, res
    assert "sleep 3601" not in client.sh(a, "ps -e -o args=")   # it did kill
    assert stack.keeper_pid(a) == keeper_a
    assert stack.keeper_pid(b) == keeper_b
    assert [p for p, args in procs_with_uid(uid_b) if args == "sleep 3602"] == b_sleeps
    assert "sleep 3602" in client.sh(b, "ps -e -o args=").splitlines()
    assert client.sh(a, "echo a works") == "a works\n"
    assert stack.health()


def test_filling_dev_shm_is_bounded_by_the_room(client, stack):
    """/dev/shm is memory: what a room puts there counts against the room,
    never the host's memory at large."""
    a = unique_room("a")
    client.sh(a, "sleep 3601 >/dev/null 2>&1 &")
    keeper = stack.keeper_pid(a)
    res = client.exec(a, "dd if=/dev/zero of=/dev/shm/fill bs=1M count=3072; echo \"dd=$?\"; "
                         "stat -c %s /dev/shm/fill", timeout=60000)
    lines = res["stdout"].splitlines()
    assert lines and lines[0] != "dd=0", res
    assert int(lines[-1]) <= MEMORY_LIMIT, res
    # with its memory full of /dev/shm the room still runs commands
    assert client.sh(a, "echo still; ls /dev/shm") == "still\nfill\n"
    assert client.sh(a, "rm -f /dev/shm/fill; echo ok") == "ok\n"
    assert stack.keeper_pid(a) == keeper
    assert "sleep 3601" in client.sh(a, "ps -e -o args=").splitlines()


def sleeps_of(uid, marker):
    return [p for p in procs_with_uid(uid) if p[1] == f"sleep {marker}"]


def test_fork_bomb_check_kills_only_what_that_exec_left(client, room):
    """When an exec's deadline finds the room at its process limit, what
    *that* exec left running is killed -- not another exec's background
    service, and not a still-running exec's processes."""
    uid = client.room_uid(room)
    client.sh(room, "setsid sleep 3701 >/dev/null 2>&1 &")
    fill = fill_room_then_leave_one_behind(client, room, uid)
    assert sleeps_of(uid, 3701), "exec A's background service was killed with C's leftovers"
    assert len(sleeps_of(uid, 3702)) >= fill - 4, "running exec B lost processes"
    client.destroy(room)


def test_fork_bomb_check_finds_what_a_lone_exec_left(client, room):
    """The keeper reads an ended exec's audit session only when one of its
    own children is not an exec's shell.  With nothing else left in the
    room (only running exec B's shell beside it), what exec C left is such
    a child: found, and killed at C's deadline with the room at its limit."""
    uid = client.room_uid(room)
    fill = fill_room_then_leave_one_behind(client, room, uid)
    assert len(sleeps_of(uid, 3702)) >= fill - 4, "running exec B lost processes"
    client.destroy(room)


def fill_room_then_leave_one_behind(client, room, uid):
    """Exec B keeps the room near its process limit while it runs; exec C
    leaves one process behind (sleep 3703), which must be gone after C's
    deadline.  Returns how many processes B runs."""
    fill = PIDS_LIMIT * 9 // 10
    b = Background(client, room, {"cmd": f"i=0; while [ $i -lt {fill} ]; do sleep 3702 & "
                                         "i=$((i+1)); done; wait", "timeout": 60000})
    wait_until(lambda: len(sleeps_of(uid, 3702)) >= fill - 4 or not b.running(), 20,
               "exec B to fill the room")
    assert b.running(), b.response and b.response.json
    r = client.exec_raw(room, {"cmd": "sleep 3703 >/dev/null 2>&1 &", "timeout": 1000})
    assert r.status == 200, r.json
    wait_until(lambda: not sleeps_of(uid, 3703), GONE_TIMEOUT,
               "what exec C left to be killed at its deadline")
    assert b.running(), "exec B ended early"
    return fill


def test_room_stopping_everything_cannot_hang_the_service(client, room):
    """A room process that SIGSTOPs every process of the room in a loop
    (kill -STOP -1) catches each new shell too, even before it runs the
    command.  The exec still answers at its timeout, the keeper is never
    stopped, other rooms answer, and DELETE works."""
    other = unique_room("other")
    client.sh(other, "true")
    client.sh(room, "setsid sh -c 'while :; do kill -STOP -1; done' >/dev/null 2>&1 &")
    keeper = client.stack.keeper_pid(room)
    for _ in range(2):
        r = client.exec_raw(room, {"cmd": "echo never", "timeout": 1500}, timeout=60)
        assert r.status in (200, 500), r.json
        if r.status == 200:
            res = r.json["result"]
            # stopped by the loop and killed at its timeout -- or, when the
            # loop did not get the CPU in time, simply done: a race the room
            # may win or lose, never a hang
            assert res["timedOut"] is True or (res["exitCode"] == 0 and
                                               res["stdout"] == "never\n"), r.json
        with open(f"/proc/{keeper}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        assert state not in ("T", "t"), f"the keeper is stopped ({state})"
    assert client.sh(other, "echo other answers") == "other answers\n"
    client.destroy(room)
    client.destroy(other)
