"""Service-wide limits: max_rooms (429) and max_concurrent_execs (503 with
Retry-After).  Through nginx, with small limits."""

import threading

from conftest import procs_with_uid, unique_room, wait_until

SERVERS = ("nginx",)
ROOMBOX_CONFIG = {"max_rooms": "2", "max_concurrent_execs": "1"}


def test_room_limit(client):
    a, b, c = unique_room("a"), unique_room("b"), unique_room("c")
    client.sh(a, "true")
    client.sh(b, "true")
    r = client.exec_raw(c, {"cmd": "true"})
    assert r.status == 429, r.json
    assert r.json == {"error": "room limit reached"}
    r = client.post("/api/rooms")
    assert r.status == 429, r.json
    assert r.json == {"error": "room limit reached"}
    # deleting a room makes room for another
    client.destroy(a)
    assert client.sh(c, "echo in") == "in\n"


def test_too_many_concurrent_execs(client):
    a, b = unique_room("a"), unique_room("b")
    client.sh(b, "true")
    uid = client.room_uid(a)
    box = {}
    t = threading.Thread(target=lambda: box.update(r=client.exec_raw(a, {"cmd": "sleep 3"})))
    t.start()
    wait_until(lambda: [p for p in procs_with_uid(uid) if p[1] == "sleep 3"] or not t.is_alive(),
               10, "sleep 3 to start")
    assert t.is_alive()
    r = client.exec_raw(b, {"cmd": "true"})
    still_running = t.is_alive()
    t.join(30)
    assert still_running
    assert r.status == 503, r.json
    assert r.json["error"]
    retry = r.header("retry-after")
    assert retry and retry.isdigit() and int(retry) >= 1, retry
    assert box["r"].status == 200
    # and once it is done, execs run again
    assert client.sh(b, "echo again") == "again\n"
