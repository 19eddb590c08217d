"""A slow exec never delays other requests.  These are
ordering assertions: the quick request must finish while the slow one is
still running, whatever the machine's speed."""

import threading
import time

from conftest import procs_with_uid, unique_room, wait_until


def start_slow_exec(client, room, seconds):
    """Run `sleep <seconds>` in room on a thread; return once the sleep is
    running on the host.  The thread records when the answer arrived."""
    uid = client.room_uid(room)
    box = {}

    def run():
        box["response"] = client.exec_raw(room, {"cmd": f"sleep {seconds}"})
        box["done"] = time.monotonic()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    wait_until(lambda: [p for p in procs_with_uid(uid) if p[1] == f"sleep {seconds}"]
               or not t.is_alive(), 20, f"sleep {seconds} to start in {room}")
    assert t.is_alive(), f"the slow exec ended early: {box.get('response')}"
    return t, box


def finish(t, box, seconds):
    t.join(seconds + 30)
    assert not t.is_alive(), "the slow exec never answered"
    r = box["response"]
    assert r.status == 200, r.json
    assert r.json["result"]["exitCode"] == 0
    assert r.json["result"]["duration"] >= seconds * 1000 * 0.9


def test_slow_exec_in_one_room_does_not_delay_another_room(client):
    a, b = unique_room("a"), unique_room("b")
    client.sh(b, "true")        # room B exists and is warm
    t, box = start_slow_exec(client, a, 5)
    res = client.exec(b, "true")
    b_done = time.monotonic()
    assert res["exitCode"] == 0
    # nor other kinds of request
    assert client.get("/api/health", auth=False).status == 200
    assert client.get("/api/rooms").status == 200
    assert client.get(f"/api/rooms/{b}").status == 200
    others_done = time.monotonic()
    a_running = t.is_alive()
    finish(t, box, 5)
    assert a_running, "room A's sleep 5 answered before the other requests did"
    assert b_done < box["done"], "room B waited for room A's sleep 5"
    assert others_done < box["done"], "health/list/status waited for room A's sleep 5"


def test_execs_in_one_room_run_concurrently(client, room):
    t, box = start_slow_exec(client, room, 5)
    assert client.sh(room, "echo quick") == "quick\n"
    done = time.monotonic()
    a_running = t.is_alive()
    finish(t, box, 5)
    assert a_running and done < box["done"], "the second exec waited for the first"


def test_many_rooms_at_once(client):
    rooms = [unique_room(f"m{i}") for i in range(8)]
    out = {}

    def run(i, r):
        # the host id of the room's root: each room's own
        out[r] = client.exec_raw(r, {"cmd": f"echo {i}; read a b c < /proc/self/uid_map; echo $b"})

    threads = [threading.Thread(target=run, args=(i, r)) for i, r in enumerate(rooms)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    uids = set()
    for i, r in enumerate(rooms):
        resp = out[r]
        assert resp.status == 200, (r, resp.json)
        lines = resp.json["result"]["stdout"].splitlines()
        assert lines[0] == str(i)
        uids.add(lines[1])
    assert len(uids) == len(rooms), "two rooms share a uid"
    assert "0" not in uids
