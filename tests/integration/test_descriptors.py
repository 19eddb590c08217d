"""roombox-fcgi holds a descriptor for every exec channel, kept preview
connection and web-server connection: more than the soft limit of 1,024 a
service manager usually leaves.  It raises its soft limit to the hard one,
and hands the helper (and so the rooms) the limit it was given.

Shown with a small given limit (64 soft, 4096 hard) so that a few rooms
reach it: 12 rooms with 4 execs at once each need about 48 channels on top
of the process's own descriptors."""

import threading

import pytest

from conftest import Client, Stack, unique_room

GIVEN_SOFT, GIVEN_HARD = 64, 4096
ROOMS, AT_ONCE = 12, 4


@pytest.fixture
def low_limit_stack():
    s = Stack("nginx", {})
    s.fcgi_wrap = ["prlimit", f"--nofile={GIVEN_SOFT}:{GIVEN_HARD}", "--"]
    try:
        s.start()
    except BaseException:
        s.stop()
        raise
    yield s
    problems = s.stop()
    assert not problems, problems


def test_many_warm_rooms_at_once_past_the_given_descriptor_limit(low_limit_stack):
    c = Client(low_limit_stack)
    rooms = [unique_room("fd") for _ in range(ROOMS)]
    for r in rooms:
        c.sh(r, "true")

    start = threading.Barrier(ROOMS * AT_ONCE)
    answers = []
    lock = threading.Lock()

    def one(room, n):
        start.wait(timeout=60)
        # the exec holds its channel while it sleeps, so the 48 overlap
        a = c.exec_raw(room, {"cmd": f"sleep 0.5; echo {n}"}, timeout=120)
        with lock:
            answers.append((a.status, a.json["result"] if a.status == 200 else a.body))

    threads = [threading.Thread(target=one, args=(r, i))
               for r in rooms for i in range(AT_ONCE)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert len(answers) == ROOMS * AT_ONCE
    bad = [a for a in answers if a[0] != 200 or a[1]["exitCode"] != 0]
    assert bad == [], bad[:3]

    pid = low_limit_stack.fcgi_pids()[0]
    limits = open(f"/proc/{pid}/limits").read()
    line = next(l for l in limits.splitlines() if l.startswith("Max open files"))
    assert line.split()[3:5] == [str(GIVEN_HARD), str(GIVEN_HARD)], line

    # a room starts with the limit roombox-fcgi was given, not the raised one
    out = c.sh(rooms[0], "ulimit -n; ulimit -Hn")
    assert out.split() == [str(GIVEN_SOFT), str(GIVEN_HARD)], out
    # ... but its keeper, which holds descriptors for every exec at once
    # (the shell's output among them, until it answers), takes its hard one
    limits = open(f"/proc/{low_limit_stack.keeper_pid(rooms[0])}/limits").read()
    line = next(l for l in limits.splitlines() if l.startswith("Max open files"))
    assert line.split()[3:5] == [str(GIVEN_HARD), str(GIVEN_HARD)], line
    for r in rooms:
        c.destroy(r)
