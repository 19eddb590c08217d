"""One room can only slow itself: requests of a room that hang (slow execs
here; a hostile room's file listings would do the same) hold at most the
room's share of roombox-fcgi's workers.  The next request for that room
waits a little (parked without a worker, until none of the room's requests
has ended for 2 s) and is refused (503 + Retry-After, JSON), while other
rooms' execs, /api/health and the room list keep answering.  And a room's log flood is
read at a bounded rate: the writer waits on its full pipe, in its own
cgroup, instead of costing roombox-fcgi a core.

workers = 8 gives a share of 2 (a quarter of the workers); every wait is a
bounded poll for an answer."""

import os
import socket
import threading
import time

from conftest import unique_room, wait_until

WORKERS = 8
ROOMBOX_CONFIG = {"workers": str(WORKERS), "max_concurrent_execs": "64"}
SLOW = {"cmd": "sleep 120", "timeout": 150000}


def hold(client, room, n):
    """n slow execs of room, each from a thread of its own; their answers
    (a status or an exception's text) go to the returned list."""
    answers = []

    def slow():
        try:
            answers.append(client.exec_raw(room, SLOW, timeout=200, check_json=False).status)
        except Exception as e:   # the stack going away at teardown
            answers.append(repr(e))
    client.touch(room)
    for _ in range(n):
        threading.Thread(target=slow, daemon=True).start()
    return answers


def refused_soon(client, room):
    """An exec of room answered 503 (its share is held); None while it is
    still admitted, or not answered within a few seconds (all workers
    held)."""
    try:
        r = client.exec_raw(room, {"cmd": "true"}, timeout=5, check_json=False)
    except (socket.timeout, TimeoutError):
        return None
    return r if r.status == 503 else None


def answers(client, method, path, body=None, timeout=20):
    try:
        if body is None:
            return client.request(method, path, timeout=timeout)
        return client.request(method, path, body, timeout=timeout)
    except (socket.timeout, TimeoutError):
        return None


def test_a_room_holding_its_share_gets_503_and_others_answer(client):
    a, b = unique_room("fsa"), unique_room("fsb")
    client.sh(a, "true")
    client.sh(b, "true")
    hold(client, a, WORKERS)   # as many as there are workers: more than its share
    r = wait_until(lambda: refused_soon(client, a), 60,
                   f"an exec of room {a} to be refused while the room holds its share")
    assert r.header("retry-after") == "1", r.headers
    body = r.check_json().json
    assert set(body) == {"error"} and a in body["error"] and "share" in body["error"], body

    # requests that name no room, and another room's exec, still answer
    lst = answers(client, "GET", "/api/rooms")
    assert lst is not None and lst.status == 200, lst
    assert_health_and_room_answer(client, b)
    # the room's own cleanup is never refused (the client's teardown
    # deletes it, which also ends the slow execs)


def test_many_busy_rooms_leave_health_and_a_new_room_answering(client):
    """Four rooms each trying to hold every worker: together they still
    leave a worker for a room that holds none, and one for /api/health."""
    busy = [unique_room(f"fsh{i}") for i in range(4)]
    for room in busy:
        client.sh(room, "true")
    fresh = unique_room("fsn")
    client.sh(fresh, "true")
    for room in busy:
        hold(client, room, WORKERS)
    for room in busy:
        wait_until(lambda: refused_soon(client, room), 60,
                   f"an exec of busy room {room} to be refused")
    assert_health_and_room_answer(client, fresh)


def assert_health_and_room_answer(client, room):
    """/api/health answers, and so does an exec of room (one not at its
    share), each within a bounded wait."""
    h = answers(client, "GET", "/api/health")
    assert h is not None and h.status == 200, h
    res = answers(client, "POST", f"/api/rooms/{room}/sandbox/exec", {"cmd": "echo answered"}, 60)
    assert res is not None and res.status == 200, res
    assert res.json["result"]["stdout"] == "answered\n", res.json


def running_on_host(text):
    """How many processes of this machine (rooms' included) have text in
    their command line."""
    n = 0
    for d in os.listdir("/proc"):
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                n += text.encode() in f.read()
        except OSError:
            pass
    return n


def hold_with_gate(client, room, n):
    """n execs of room that run until the gate opens: a managed process
    that makes the file they wait for when it is killed (DELETE of a
    process, which the room's full share never holds up).  Returns their
    answers (a list that fills) and open_gate(), which opens it and waits
    for the n to end."""
    client.sh(room, "rm -f /tmp/open")
    r = client.post(f"/api/rooms/{room}/sandbox/processes",
                    {"cmd": "trap 'touch /tmp/open; exit 0' TERM; sleep 1000 & wait", "name": "gate"})
    assert r.status == 201, r
    mark = f"gate-of-{room}"
    gate = {"cmd": f": {mark}; while [ ! -e /tmp/open ]; do sleep 0.05; done", "timeout": 150000}
    answers = []
    for _ in range(n):
        threading.Thread(target=lambda: answers.append(
            client.exec_raw(room, gate, timeout=200, check_json=False).status), daemon=True).start()
    wait_until(lambda: running_on_host(mark) >= n, 60, f"the {n} gate execs to run")

    def open_gate():
        r = client.delete(f"/api/rooms/{room}/sandbox/processes/gate")
        assert r.status == 200, r
        wait_until(lambda: len(answers) == n, 60, "the gate execs to end")
    return answers, open_gate


def test_a_waiting_request_runs_when_its_rooms_share_frees(client):
    """An exec past the room's share waits, then runs once one of the
    room's requests ends."""
    room = unique_room("fsw")
    answers, open_gate = hold_with_gate(client, room, 2)   # the room's share
    waiting = []
    threading.Thread(target=lambda: waiting.append(client.exec_raw(
        room, {"cmd": "echo waited"}, timeout=120, check_json=False)), daemon=True).start()
    open_gate()
    r = wait_until(lambda: waiting and waiting[0], 60, "the waiting exec's answer")
    assert r.status == 200, r
    assert r.check_json().json["result"]["stdout"] == "waited\n", r.json
    assert answers == [200, 200], answers


LOG_RATE = 1 << 20   # fcgi-app/processes/process_log.c LOG_ROOM_RATE: bytes a second
# Runs in the room as a managed process: writes to its stdout as fast as it
# is let, and after each write puts the bytes written so far in a file.
FLOOD = ("python3 -c 'import os\n"
         "b = b\"y\" * 65536; n = 0\n"
         "while True:\n"
         "    n += os.write(1, b)\n"
         "    open(\"/tmp/flood.n\", \"w\").write(str(n))'")


def test_a_log_flood_is_read_at_the_rooms_rate(client):
    """A managed process that writes without end gets its output read at
    most LOG_RATE a second (the rest waits in its pipe, the writer
    blocked): the bytes it managed to write stay within that rate over
    the time it ran, whatever the machine's speed (a slower machine only
    writes less)."""
    room = unique_room("fsl")
    client.sh(room, "true")
    t0 = time.monotonic()
    r = client.post(f"/api/rooms/{room}/sandbox/processes", {"cmd": FLOOD})
    assert r.status == 201, r

    def written():
        out = client.exec(room, "cat /tmp/flood.n 2>/dev/null || echo 0")["stdout"].strip()
        n = int(out or 0)
        return n if n >= 3 * LOG_RATE else None
    n = wait_until(written, 60, "the flood to have written 3 MiB", interval=0.2)
    wall = time.monotonic() - t0
    # one second's budget of slack, and the pipe's and a read's bytes
    assert n <= (wall + 1) * LOG_RATE + (1 << 20), \
        f"{n} bytes written in {wall:.1f} s: its output was read past {LOG_RATE} bytes a second"
