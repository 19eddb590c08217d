"""Kept connections into the room: the relay asks the room's server to keep
its connection after a framed answer and sends a later request of the same
exposure on it, as nginx does with an upstream's keepalive.  What the room's
server and a browser observe: several requests on one connection, none of
the service's connection fields; a connection the server closes or sends
stray bytes on while it waits is never used again (the next request gets a
true answer); a POST is never lost to such a close; unexposing the port
closes the kept connections."""

import json

from conftest import wait_until
from preview_util import expose, start_in_room, target_of, wait_serving

ROOMBOX_CONFIG = {"network": "none"}
SERVERS = ("nginx",)

# Runs in the room: an HTTP/1.1 server that keeps its connections.  Each
# answer's body is JSON: the connection's number, the request's number on
# it, and the head it got.  /close-after answers, then closes the
# connection (then /tmp/pool.closed names it); /stray answers, then sends a
# fake answer on the idle connection at once (TCP_NODELAY: the bytes reach
# the relay now, not with the next request's ACK).  /tmp/pool.ended.<n> is
# written when connection n has ended, /tmp/pool.open holds the count of
# open ones.
KEEP_SERVER = r'''
import json, socket, sys, threading
lock = threading.Lock()
state = {"conns": 0, "open": 0}

def note(path, text):
    with open(path + ".tmp", "w") as f:
        f.write(text)
    import os
    os.rename(path + ".tmp", path)

def opened(d):
    with lock:
        state["open"] += d
        note("/tmp/pool.open", str(state["open"]))

def run(c, n):
    buf, k = b"", 0
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
            head, buf = buf.split(b"\r\n\r\n", 1)
            fields = dict((l.split(b":", 1)[0].strip().lower(), l.split(b":", 1)[1].strip())
                          for l in head.split(b"\r\n")[1:] if b":" in l)
            size = int(fields.get(b"content-length", b"0"))
            while len(buf) < size:
                d = c.recv(65536)
                if not d:
                    return
                buf += d
            body, buf = buf[:size], buf[size:]
            k += 1
            target = head.split(b" ")[1]
            out = json.dumps({"conn": n, "req": k, "head": head.decode("latin-1"),
                              "body": len(body)}).encode()
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % len(out) + out)
            if target == b"/close-after":
                c.close()
                note("/tmp/pool.closed", str(n))
                return
            if target == b"/stray":
                c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nPWNED!")
    except OSError:
        pass
    finally:
        c.close()
        opened(-1)
        note("/tmp/pool.ended.%d" % n, "1")

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
while True:
    c, _ = s.accept()
    with lock:
        state["conns"] += 1
        n = state["conns"]
    opened(1)
    threading.Thread(target=run, args=(c, n), daemon=True).start()
'''


def serving(client, room, port=8000):
    client.exec(room, "cat > /workspace/keep.py", stdin=KEEP_SERVER)
    start_in_room(client, room, f"python3 /workspace/keep.py {port}", "/tmp/keep.out")
    e = expose(client, room, port)
    wait_serving(client, e["url"], f"the server in {room}")
    return e


def get(client, e, path="", method="GET", data=None):
    r = client.request(method, target_of(e["url"]) + path, data=data, auth=False,
                       check_json=False, timeout=30)
    assert r.status == 200, r
    assert b"PWNED" not in r.body, r.body
    return json.loads(r.body)


def room_file(client, room, name):
    return client.sh(room, f"cat /tmp/pool.{name} 2>/dev/null || true").strip()


def test_requests_of_an_exposure_share_one_connection_into_the_room(client, room):
    e = serving(client, room)
    seen = [get(client, e, "one") for _ in range(10)]
    assert len({s["conn"] for s in seen}) == 1, seen
    assert [s["req"] for s in seen] == list(range(seen[0]["req"], seen[0]["req"] + 10)), seen
    for s in seen:   # no connection field of the relay's or the web server's
        fields = [l.split(":", 1)[0].strip().lower() for l in s["head"].split("\r\n")[1:]]
        assert "connection" not in fields and "keep-alive" not in fields, s["head"]
        assert s["head"].startswith("GET /one HTTP/1.1\r\n"), s["head"]


def test_a_connection_the_room_closes_or_soils_is_not_used_again(client, room):
    e = serving(client, room)
    first = get(client, e, "close-after")
    wait_until(lambda: room_file(client, room, "closed") == str(first["conn"]), 10,
               "the room's server to close its connection")
    after = get(client, e, "x")
    assert after["conn"] != first["conn"], (first, after)
    # a POST after such a close reaches the room whole, on a live connection
    get(client, e, "close-after")
    wait_until(lambda: room_file(client, room, "open") == "0", 10,
               "the room's server to close its connection")
    posted = get(client, e, "post", method="POST", data=b"x" * 5000)
    assert posted["body"] == 5000, posted
    # stray bytes on a waiting connection: the relay drops it
    soiled = get(client, e, "stray")
    wait_until(lambda: room_file(client, room, "ended.%d" % soiled["conn"]), 10,
               "the relay to close the connection the stray answer came on")
    for _ in range(5):
        again = get(client, e, "y")
        assert again["conn"] != soiled["conn"], (soiled, again)


def test_unexposing_closes_the_kept_connections(client, room):
    e = serving(client, room)
    for _ in range(3):
        get(client, e, "z")
    assert int(room_file(client, room, "open")) >= 1
    r = client.delete(f"/api/rooms/{room}/sandbox/ports/8000")
    assert r.status == 200, r
    wait_until(lambda: room_file(client, room, "open") == "0", 10,
               "the kept connections into the room to close")
