"""Rooms that recover: a room wedged by its own processes comes back
without losing its files, through nginx and lighttpd alike.

Small pids_limit, so that a fork bomb fills its room at once.  The bombs
run with a long exec timeout (120 s): the keeper's own clean-up at that
deadline must not be what ends them within the test."""

import os
import threading
import time

from conftest import pid_alive, proc_status, procs_with_uid, unique_room, wait_until
from security_helpers import (FORK_LOOP, Background, assert_room_holds_only_keeper_and_this_exec, pids_refused,
                              room_ps, wait_for_pids_limit_hit)

PIDS_LIMIT = 64
ROOMBOX_CONFIG = {"pids_limit": str(PIDS_LIMIT)}
# in the background: the exec answers at once, the bomb stays
BOMB = FORK_LOOP + " >/dev/null 2>&1 &"
RECOVERY_S = 15


def is_room_init(pid):
    """The keeper: PID 1 of its room's pid namespace (NSpid ends in 1).  It
    runs as the room's root, so as the room's first host id."""
    st = proc_status(pid) or {}
    return st.get("NSpid", "").split()[-1:] == ["1"]


def live_count(uid):
    """The room's processes but its keeper."""
    return len([pid for pid, _ in procs_with_uid(uid) if not is_room_init(pid)])


class Hammer:
    """Execs in room B, one after the other, until stopped; every answer
    that is not a 200 with `echo b`'s exact result is kept."""

    def __init__(self, client, room):
        self.done = 0
        self.failures = []
        self.stop_flag = threading.Event()

        def run():
            while not self.stop_flag.is_set():
                try:
                    r = client.exec_raw(room, {"cmd": "echo b; cat /dev/null", "timeout": 10000},
                                        timeout=30)
                    res = r.json.get("result") or {}
                    if r.status != 200 or res.get("exitCode") != 0 or res.get("stdout") != "b\n" \
                            or res.get("stderr") != "":
                        self.failures.append(f"{r.status} {r.json}")
                except Exception as e:        # noqa: BLE001 -- every failure counts
                    self.failures.append(repr(e))
                self.done += 1
        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def stop(self):
        self.stop_flag.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), "room B's exec did not answer within 60 s"


def service_log(stack):
    text = []
    for log in stack.logs:
        try:
            text.append(log.read_text(errors="replace"))
        except OSError:
            pass
    return "\n".join(text)


def recovery_logged(stack, room):
    """The service log's lines about the room's recovery."""
    return [ln for ln in service_log(stack).splitlines()
            if f"room {room}: at its process limit" in ln]


# Probes in a bombed room run with a long timeout: at an exec's deadline the
# keeper looks for a fork bomb itself (keeper.c, linger), and that must not
# be what ends the bomb here.
PROBE_TIMEOUT = 60000


def start_bomb(client, a):
    """A background fork bomb in room A, pressing on its pids_limit: the
    kernel refuses its forks (pids.events), again after the first time.
    That is the kernel's own record, as the service reads it, rather than
    a count of the room's processes in /proc, which a bomb keeps moving and
    a scan may catch low."""
    before = pids_refused(a)
    assert before is not None, f"room {a} has no pids.events: no pids controller?"
    res = client.exec(a, BOMB, timeout=120000)
    assert res["exitCode"] == 0, res
    first = wait_for_pids_limit_hit(a, before, 20, "the fork bomb to reach room A's pids_limit")
    wait_for_pids_limit_hit(a, first, 20, "the fork bomb to stay at room A's pids_limit")


def test_fork_bomb_room_answers_again_with_its_files_and_other_rooms_never_notice(client, stack):
    """The issue's case: a background fork bomb, then within 15 s room A
    answers `echo ok` and reads its file (a fork), without a DELETE; room B
    answers every exec throughout."""
    a, b = unique_room("a"), unique_room("b")
    client.sh(b, "true")                     # B exists before the bomb
    uid = client.room_uid(a)
    client.sh(a, "echo kept > /workspace/keep.txt")
    hammer = Hammer(client, b)
    try:
        start_bomb(client, a)
        t0 = time.monotonic()
        seen = []

        def answers(cmd, want):
            r = client.exec_raw(a, {"cmd": cmd, "timeout": PROBE_TIMEOUT}, timeout=90)
            res = r.json.get("result") or {}
            seen.append((round(time.monotonic() - t0, 2), cmd, r.status, r.json))
            return r.status == 200 and res.get("exitCode") == 0 and res.get("stdout") == want

        try:
            wait_until(lambda: answers("echo ok", "ok\n"), RECOVERY_S, "room A to answer echo ok",
                       interval=0.2)
            wait_until(lambda: answers("cat /workspace/keep.txt", "kept\n"),
                       RECOVERY_S - (time.monotonic() - t0), "room A to read its file", interval=0.2)
        except AssertionError as e:
            raise AssertionError(f"{e}; {live_count(uid)} processes of room A alive; "
                                 f"its last answers: {seen[-4:]}\n{stack.log_tail()}")
        assert time.monotonic() - t0 < RECOVERY_S
    finally:
        hammer.stop()
        if live_count(uid):
            client.destroy(a)
    assert hammer.done >= 3, f"room B answered only {hammer.done} execs during the test"
    assert not hammer.failures, f"room B failed {len(hammer.failures)} of {hammer.done} execs: " \
        f"{hammer.failures[:3]}"


# Holds its room at pids_limit (free=0) or one below it (free=1), steadily,
# unlike a bomb: once the exec that started it has ended (it is then the
# keeper's child), it starts sleeps until the kernel refuses one, gives
# `free` slots back, says so in /tmp/holder.ready and waits.
HOLDER = r"""
import os, subprocess, sys, time
free = int(sys.argv[1])
deadline = time.monotonic() + 20
while os.getppid() != 1 and time.monotonic() < deadline:
    time.sleep(0.01)
kids = []
while True:
    try:
        kids.append(subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    except OSError:
        break
for p in kids[:free]:
    p.kill()
    p.wait()
open("/tmp/holder.ready", "w").close()
time.sleep(3600)
"""


def fill_room(client, stack, a, uid, free):
    client.sh(a, "cat > /tmp/holder.py", stdin=HOLDER)
    client.sh(a, f"python3 /tmp/holder.py {free} >/dev/null 2>&1 &")
    # seen from the host, through the keeper's root: no exec can ask
    ready = f"/proc/{stack.keeper_pid(a)}/root/tmp/holder.ready"
    wait_until(lambda: os.path.exists(ready), 20, "the holder to fill room A")
    # the keeper + the room's other processes fill the pids cgroup
    assert live_count(uid) == PIDS_LIMIT - 1 - free


def test_exec_in_a_full_room_frees_it_and_runs(client, stack):
    """The keeper cannot fork the shell (EAGAIN): the room's processes are
    killed, the log says so, and the exec runs."""
    a = unique_room("a")
    uid = client.room_uid(a)
    client.sh(a, "cd /tmp && echo kept > /workspace/keep.txt")
    keeper = stack.keeper_pid(a)
    fill_room(client, stack, a, uid, 0)
    res = client.exec(a, "echo ok; pwd; cat /workspace/keep.txt")
    assert (res["exitCode"], res["stdout"], res["stderr"]) == (0, "ok\n/tmp\nkept\n", ""), res
    lines = recovery_logged(stack, a)
    assert len(lines) == 1 and "the shell could not start" in lines[0], lines
    assert f"killed {PIDS_LIMIT - 1} processes" in lines[0], lines
    assert stack.keeper_pid(a) == keeper
    assert_room_holds_only_keeper_and_this_exec(client, a)


def test_recovery_kills_a_managed_process_and_it_reads_killed(client, stack):
    """The recovery kills the room's managed processes with the rest while
    the room runs on: they read `killed` by SIGKILL, not `lost`
    (the room did not stop under them)."""
    a = unique_room("a")
    uid = client.room_uid(a)
    procs = f"/api/rooms/{a}/sandbox/processes"
    r = client.post(procs, {"cmd": "sleep 1012", "name": "held"})
    assert r.status == 201 and r.json["process"]["status"] == "running", r
    keeper = stack.keeper_pid(a)
    fill_room(client, stack, a, uid, 0)
    res = client.exec(a, "echo ok")
    assert (res["exitCode"], res["stdout"]) == (0, "ok\n"), res
    assert len(recovery_logged(stack, a)) == 1
    assert stack.keeper_pid(a) == keeper
    end = wait_until(lambda: (lambda p: p if p["status"] != "running" else None)(
        client.get(f"{procs}/held").json["process"]), 10, "the managed process's end")
    assert (end["status"], end["signal"], end["exitCode"]) == ("killed", "SIGKILL", 137), end


def test_shell_that_cannot_fork_under_2_to_1_answers_without_the_error(client, stack):
    """One slot left: the shell starts, its `cat` cannot fork.  dash makes
    a command's redirections before it forks, so its "Cannot fork" went
    where `2>&1` sent fd 2: the client's stdout.  Now the room is freed and
    the command runs again: stdout holds the file alone."""
    a = unique_room("a")
    uid = client.room_uid(a)
    client.sh(a, "echo kept > /workspace/keep.txt")
    fill_room(client, stack, a, uid, 1)
    res = client.exec(a, "cat /workspace/keep.txt 2>&1")
    assert (res["exitCode"], res["stdout"], res["stderr"]) == (0, "kept\n", ""), res
    lines = recovery_logged(stack, a)
    assert len(lines) == 1 and "the shell could not fork" in lines[0], lines
    assert f"killed {PIDS_LIMIT - 2} processes" in lines[0], lines
    assert_room_holds_only_keeper_and_this_exec(client, a)


def test_the_second_run_keeps_within_the_rooms_own_exec_timeout_max(client, stack):
    """A room whose execTimeoutMax is below the configuration's exec_timeout,
    asked for a command without a timeout: the default is cut to the room's
    maximum, and so is what the second run (after the room is freed) gets."""
    a = unique_room("a")
    uid = client.room_uid(a)
    client.sh(a, "echo kept > /workspace/keep.txt")
    r = client.request("PATCH", f"/api/rooms/{a}", {"limits": {"execTimeoutMax": 10000}})
    assert r.status == 200, r.json
    fill_room(client, stack, a, uid, 1)
    res = client.exec(a, "cat /workspace/keep.txt 2>&1")
    assert (res["exitCode"], res["stdout"]) == (0, "kept\n"), res
    lines = recovery_logged(stack, a)
    assert len(lines) == 1 and "the shell could not fork" in lines[0], lines


def test_a_command_that_only_says_cannot_fork_kills_nothing_and_runs_once(client, stack):
    """The words "Cannot fork" and exit status 2 are the room's own output:
    a command can print them with the room far from its limit.  Its
    background processes live on, it runs once, and its answer is its own."""
    a = unique_room("a")
    client.sh(a, "sleep 3600 >/dev/null 2>&1 &")
    res = client.exec(a, "echo run >> /workspace/runs; echo 'sh: 1: Cannot fork' >&2; exit 2")
    assert (res["exitCode"], res["stderr"]) == (2, "sh: 1: Cannot fork\n"), res
    assert client.sh(a, "cat /workspace/runs") == "run\n", "the command ran again"
    comms = [row[3] for row in room_ps(client, a)]
    assert comms.count("sleep") == 1, f"the room's processes were killed: {comms}"
    assert recovery_logged(stack, a) == []


def test_delete_processes_kills_all_but_the_keeper_and_keeps_files(client, stack):
    a = unique_room("a")
    client.sh(a, "cd /tmp && echo kept > /workspace/f && "
                 "{ sleep 3600 >/dev/null 2>&1 & sleep 3601 >/dev/null 2>&1 & }")
    keeper = stack.keeper_pid(a)
    comms = [row[3] for row in room_ps(client, a)]
    assert comms.count("sleep") == 2, comms

    r = client.delete(f"/api/rooms/{a}/sandbox/processes")
    assert r.status == 200, r.json
    assert r.json == {"killed": 2}
    assert stack.keeper_pid(a) == keeper, "the keeper (PID 1) must survive"
    assert_room_holds_only_keeper_and_this_exec(client, a)
    # files and session kept
    assert client.sh(a, "pwd; cat /workspace/f") == "/tmp\nkept\n"
    # nothing left to kill
    r = client.delete(f"/api/rooms/{a}/sandbox/processes")
    assert (r.status, r.json) == (200, {"killed": 0})


def test_delete_processes_ends_a_running_exec(client, stack):
    a = unique_room("a")
    client.sh(a, "true")
    uid = client.room_uid(a)
    slow = Background(client, a, {"cmd": "sleep 60", "timeout": 90000})
    wait_until(lambda: any(c == "sleep" for *_, c in room_ps(client, a)), 10, "the sleep to run")
    r = client.delete(f"/api/rooms/{a}/sandbox/processes")
    assert r.status == 200 and r.json["killed"] >= 1, r.json
    res = slow.join(30)
    assert res.status == 200, res.json
    assert res.json["result"]["exitCode"] == 137 and res.json["result"]["signal"] == "SIGKILL", res.json
    wait_until(lambda: live_count(uid) == 0, 5, "the exec's processes to end")
    assert client.sh(a, "echo again") == "again\n"


def test_restart_keeps_files_and_session_with_a_new_keeper(client, stack):
    a = unique_room("a")
    client.sh(a, "cd /tmp && export RB_KEPT=yes && echo data > /workspace/f && "
                 "{ sleep 3600 >/dev/null 2>&1 & }")
    old = stack.keeper_pid(a)
    assert old
    r = client.post(f"/api/rooms/{a}/sandbox/restart")
    assert r.status == 200, r.json
    assert r.json == {"restarted": True, "roomId": a}
    wait_until(lambda: not pid_alive(old), 5, f"the old keeper {old} to end")
    new = stack.keeper_pid(a)
    assert new and new != old, (old, new)
    assert client.sh(a, 'pwd; echo "$RB_KEPT"; cat /workspace/f') == "/tmp\nyes\ndata\n"
    assert_room_holds_only_keeper_and_this_exec(client, a)
    assert stack.keeper_pid(a) == new


def test_recovery_routes_follow_the_api_rules(client):
    missing = unique_room("never")
    # (GET and POST of sandbox/processes are the managed processes' list and
    # start: PUT is the method no route of that path serves)
    for method, path, wrong, allow in (("DELETE", "sandbox/processes", "PUT", "GET, POST, DELETE"),
                                       ("POST", "sandbox/restart", "GET", "POST")):
        r = client.request(method, f"/api/rooms/{missing}/{path}")
        assert (r.status, r.json) == (404, {"error": "room not found"}), (method, path)
        r = client.request(method, f"/api/rooms/bad.id/{path}")
        assert (r.status, r.json) == (400, {"error": "invalid room id"}), (method, path)
        r = client.request(method, f"/api/rooms/{missing}/{path}", auth=False)
        assert r.status == 401, (method, path)
        r = client.request(wrong, f"/api/rooms/{missing}/{path}")
        assert r.status == 405 and r.headers.get("allow") == allow, (method, path, r.headers)
    # the 404s created nothing
    assert client.get(f"/api/rooms/{missing}").status == 404
