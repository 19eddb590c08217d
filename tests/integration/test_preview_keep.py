"""Kept connections on the preview socket:
nginx keeps its connections to preview.sock, so one connection carries many
requests, maybe to different rooms.  What a web server on that connection
observes: each answer whole and its own room's, never a byte a room sent past
its answer's end; Connection: close on (and the connection's end after) an
answer whose end the relay cannot find; the relay's own 502 where the room
gives no usable head.

Most tests talk to preview.sock directly, as a web server would (the relay's
behaviour is the same behind either web server); the last goes through the
real nginx, the web server that keeps these connections (lighttpd closes
after each request: test_preview.py covers it)."""

import hashlib
import json
import os
import socket
import time

from conftest import unique_room, wait_until
from preview_util import expose, start_in_room, target_of, wait_serving

ROOMBOX_CONFIG = {"network": "none"}
SERVERS = ("nginx",)

# Runs in a room: a raw-socket HTTP server (argv: port, name, log) whose
# answer depends on the request's target; some answers are deliberately
# hostile or broken.  After answering it half-closes and reads on until the
# relay closes, then logs one JSON line per connection with every byte it
# received, so a test sees exactly what the relay forwarded.
ROOM_SERVER = r'''
import hashlib, json, socket, sys, threading, time
PORT, NAME, LOG = int(sys.argv[1]), sys.argv[2].encode(), sys.argv[3]
lock = threading.Lock()
PWNED = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nPWNED!"
CHUNKED = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n"
           b"5;ext=1\r\nhello\r\n8 ; name=\"q\"\r\n, world!\r\n"
           b"0\r\nX-Sum: done\r\n\r\n")
BIG = bytes(range(256)) * 400

# answers that depend on nothing of the request
FIXED = {
    b"/hostile": b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello" + PWNED + b"\0garbage\r\n\r\n",
    b"/chunked": CHUNKED + PWNED,
    b"/badchunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX0\r\n\r\n" + PWNED,
    b"/close10": b"HTTP/1.0 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n" + BIG,
    b"/close11": b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n" + BIG,
    b"/clte": (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5\r\nhello\r\n0\r\n\r\n" + PWNED),
    b"/gzipchunked": (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
                      b"5\r\nhello\r\n0\r\n\r\n" + PWNED),
    b"/100": b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" + PWNED,
    b"/len10": b"HTTP/1.0 200 OK\r\nContent-Length: 4\r\nConnection: keep-alive\r\n\r\nten!" + PWNED,
    b"/204": b"HTTP/1.1 204 No Content\r\nConnection: keep-alive\r\n\r\n" + PWNED,
    b"/304": b"HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\nContent-Length: 9\r\n\r\n" + PWNED,
    # interim answers without end: never a final head
    b"/interims": b"HTTP/1.1 100 Continue\r\n\r\n" * 4000,
}

def answer(body, status=b"200 OK"):
    return (b"HTTP/1.1 " + status + b"\r\nContent-Length: " + str(len(body)).encode() +
            b"\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5, max=100\r\n"
            b"Proxy-Connection: keep-alive\r\nX-Room: " + NAME + b"\r\n\r\n" + body)

# /dribble's answer, sent a byte a segment
DRIBBLE = answer(b"dribbled " + NAME)

class Conn:
    def __init__(self, c):
        self.c, self.got, self.buf = c, b"", b""
    def more(self):
        d = self.c.recv(65536)
        if not d:
            raise EOFError
        self.got += d
        self.buf += d
    def head(self):
        while b"\r\n\r\n" not in self.buf:
            self.more()
        h, self.buf = self.buf.split(b"\r\n\r\n", 1)
        return h + b"\r\n\r\n"
    def exactly(self, n):
        while len(self.buf) < n:
            self.more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

def reply(k, head):
    method, target = head.split(b" ")[:2]
    fields = dict((l.split(b":", 1)[0].strip().lower(), l.split(b":", 1)[1].strip())
                  for l in head.split(b"\r\n")[1:] if b":" in l)
    if method == b"HEAD":   # the head of /name's answer, then stray bytes
        return answer(NAME)[:-len(NAME)] + PWNED
    if target == b"/name":
        return answer(NAME)
    if target == b"/echo":
        return answer(head)
    if target == b"/post":
        if fields.get(b"transfer-encoding") == b"chunked":
            while not k.buf.endswith(b"0\r\n\r\n"):
                k.more()
            return answer(b"chunked " + NAME)
        body = k.exactly(int(fields[b"content-length"]))
        return answer(b"%d %s" % (len(body), hashlib.sha256(body).hexdigest().encode()))
    if target in FIXED:
        return FIXED[target]
    if target == b"/bighead":
        pad = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"p" * 1000) for i in range(40))
        return b"HTTP/1.1 200 OK\r\n" + pad + b"Content-Length: 2\r\n\r\nok"
    if target == b"/silent":
        return b""
    if target == b"/halfhead":
        return b"HTTP/1.1 200 OK\r\nContent-Le"
    return answer(b"no such test path", b"404 Not Found")

def run(c):
    c.settimeout(20)
    k = Conn(c)
    target = ""
    try:
        head = k.head()
        target = head.split(b" ")[1].decode("latin-1")
        if target == "/dribble":   # the answer a byte a segment, paced
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for i in range(len(DRIBBLE)):
                c.sendall(DRIBBLE[i:i + 1])
                time.sleep(0.0005)
        else:
            c.sendall(reply(k, head))
        c.shutdown(socket.SHUT_WR)
        while True:
            k.more()
    except Exception:
        pass
    finally:
        c.close()
        with lock, open(LOG, "a") as f:
            # the first 16 KiB of what came, and how much came in all
            f.write(json.dumps({"target": target, "got": k.got[:16384].decode("latin-1"),
                                "total": len(k.got)}) + "\n")

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", PORT))
s.listen(64)
while True:
    c, _ = s.accept()
    threading.Thread(target=run, args=(c,), daemon=True).start()
'''

LOG = "/tmp/srv.log"
PWNED = b"PWNED"
FAKE = b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nPWNED!"   # ROOM_SERVER's PWNED
BIG = bytes(range(256)) * 400
CHUNKED_BODY = (b"5;ext=1\r\nhello\r\n8 ; name=\"q\"\r\n, world!\r\n"
                b"0\r\nX-Sum: done\r\n\r\n")


def serving_room(client, room, port=8000):
    """Start ROOM_SERVER in room (it answers /name with the room's id) and
    expose it; the preview path prefix ("/preview/<token>/")."""
    client.exec(room, "cat > /workspace/srv.py", stdin=ROOM_SERVER)
    start_in_room(client, room, f"python3 /workspace/srv.py {port} {room} {LOG}", "/tmp/srv.out")
    e = expose(client, room, port)
    r = wait_serving(client, e["url"], f"the server in {room}", path_extra="name")
    assert r.status == 200 and r.body == room.encode(), r
    return target_of(e["url"])


def room_log(client, room, target, count=1):
    """The connections the room's server logged for target, once `count`
    of them have ended: (the first 16 KiB it received, the count of all
    bytes received) for each."""
    def logged():
        out = client.sh(room, f"cat {LOG} 2>/dev/null || true")
        recs = [json.loads(l) for l in out.splitlines() if l.strip()]
        recs = [(r["got"].encode("latin-1"), r["total"]) for r in recs if r["target"] == target]
        return recs if len(recs) >= count else None
    return wait_until(logged, 10, f"{room}'s server to log {count} connection(s) for {target}",
                      interval=0.05)


def req(prefix, path, method="GET", headers=(), body=b""):
    lines = [f"{method} {prefix}{path} HTTP/1.1", "Host: 127.0.0.1"] + list(headers)
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class Relay:
    """A connection to preview.sock, as a web server keeping it."""

    def __init__(self, stack):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(10)
        self.s.connect(str(stack.dir / "preview.sock"))
        self.buf = b""

    def close(self):
        self.s.close()

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def send(self, raw):
        self.s.sendall(raw)

    def _more(self):
        d = self.s.recv(65536)
        if not d:
            raise EOFError(f"the relay closed the connection; unread: {self.buf[:300]!r}")
        self.buf += d

    def _take(self, n):
        while len(self.buf) < n:
            self._more()
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def head(self):
        """(status line, [(lower-case name, value)]) of the next answer."""
        while b"\r\n\r\n" not in self.buf:
            self._more()
        h, self.buf = self.buf.split(b"\r\n\r\n", 1)
        lines = h.decode("latin-1").split("\r\n")
        fields = [(k.strip().lower(), v.strip()) for k, v in (l.split(":", 1) for l in lines[1:])]
        return lines[0], fields

    def chunked_raw(self):
        """The bytes of a chunked body through its end, as they came."""
        out = b""
        while True:
            while b"\r\n" not in self.buf:
                self._more()
            line, self.buf = self.buf.split(b"\r\n", 1)
            out += line + b"\r\n"
            size = int(line.split(b";")[0].strip(), 16)
            if size == 0:
                break
            out += self._take(size + 2)
        while True:   # trailer fields, then the blank line
            while b"\r\n" not in self.buf:
                self._more()
            line, self.buf = self.buf.split(b"\r\n", 1)
            out += line + b"\r\n"
            if not line:
                return out

    def rest(self):
        """Everything until the relay closes the connection."""
        while True:
            try:
                self._more()
            except EOFError:
                out, self.buf = self.buf, b""
                return out

    def answer(self, method="GET"):
        """(status line, fields, body) of one whole answer, framed as a web
        server would frame it (a chunked body is returned raw)."""
        status, fields = self.head()
        f = dict(fields)
        code = int(status.split(" ")[1])
        if method == "HEAD" or code in (204, 304):
            return status, fields, b""
        if "transfer-encoding" in f:
            assert f["transfer-encoding"] == "chunked", fields
            return status, fields, self.chunked_raw()
        if "content-length" in f:
            return status, fields, self._take(int(f["content-length"]))
        return status, fields, self.rest()

    def ended(self):
        """True once the relay has closed the connection (waits for it,
        bounded); False if bytes come instead."""
        if self.buf:
            return False
        try:
            return self.s.recv(65536) == b""
        except ConnectionResetError:
            return True

    def open_and_quiet(self):
        """Nothing waits on the connection and it is not at its end."""
        if self.buf:
            return False
        self.s.setblocking(False)
        try:
            self.s.recv(1)
            return False   # bytes, or the end
        except BlockingIOError:
            return True
        finally:
            self.s.settimeout(10)


def names(fields):
    return [k for k, _ in fields]


def value(fields, name):
    vals = [v for k, v in fields if k == name]
    assert len(vals) <= 1, (name, fields)
    return vals[0] if vals else None


def assert_kept(fields):
    """An answer after which the web server may send its next request."""
    assert "connection" not in names(fields), fields
    assert "keep-alive" not in names(fields), fields
    assert "proxy-connection" not in names(fields), fields


def assert_closing(fields):
    assert value(fields, "connection") == "close", fields


def two_rooms(client, room):
    other = unique_room()
    return serving_room(client, room, 8000), serving_room(client, other, 8001), other


def test_one_connection_alternates_between_two_rooms(client, room):
    a, b, other = two_rooms(client, room)
    with Relay(client.stack) as c:
        for i in range(12):
            prefix, name = (a, room) if i % 2 == 0 else (b, other)
            c.send(req(prefix, "name"))
            status, fields, body = c.answer()
            assert status == "HTTP/1.1 200 OK", (i, status)
            assert body == name.encode(), (i, body)
            assert value(fields, "x-room") == name, (i, fields)
            assert_kept(fields)
            assert c.open_and_quiet(), f"request {i}: the connection did not stay open and quiet"


def test_heads_that_come_a_byte_at_a_time(client, room):
    """A request head the web server sends a byte at a time, and an answer
    head the room sends a byte a segment: each is found whole (its end may
    straddle any two reads), the answer arrives intact and the connection
    stays for the next request."""
    a, b, other = two_rooms(client, room)
    with Relay(client.stack) as c:
        raw = req(a, "dribble")
        for i in range(len(raw)):   # paced, so that the relay reads them apart
            c.send(raw[i:i + 1])
            time.sleep(0.0005)
        status, fields, body = c.answer()
        assert status == "HTTP/1.1 200 OK", status
        assert body == b"dribbled " + room.encode(), body
        assert value(fields, "x-room") == room, fields
        assert_kept(fields)
        c.send(req(b, "name"))
        status, fields, body = c.answer()
        assert body == other.encode(), body


def test_hostile_extra_answer_never_reaches_the_next_request(client, room):
    """A room sending a second, fake answer (and garbage) after its first:
    the web server gets exactly the first, and the next request on the
    connection, another room's, gets that room's answer."""
    a, b, other = two_rooms(client, room)
    with Relay(client.stack) as c:
        for i in range(4):
            c.send(req(a, "hostile"))
            status, fields, body = c.answer()
            assert status == "HTTP/1.1 200 OK" and body == b"hello", (i, status, body)
            assert_kept(fields)
            c.send(req(b, "name"))
            status, fields, body = c.answer()
            assert status == "HTTP/1.1 200 OK", (i, status, c.buf)
            assert body == other.encode(), (i, body)
            assert PWNED not in c.buf
        assert c.open_and_quiet()


def test_connection_fields_are_dropped_both_ways(client, room):
    """The web server's Connection and Keep-Alive never reach the room (its
    connection is the relay's, kept by HTTP/1.1's default:
    test_preview_pool.py), nor the room's the web server."""
    a = serving_room(client, room)
    with Relay(client.stack) as c:
        for extra in ([], ["Connection: keep-alive", "Keep-Alive: timeout=30"],
                      ["Connection: Keep-Alive"]):
            c.send(req(a, "echo", headers=extra + ["X-Mine: 1"]))
            status, fields, body = c.answer()
            assert status == "HTTP/1.1 200 OK", status
            seen = body.decode("latin-1").split("\r\n")
            assert seen[0] == "GET /echo HTTP/1.1", seen
            assert not [l for l in seen if l.lower().startswith("connection:")], seen
            assert not [l for l in seen if l.lower().startswith("keep-alive:")], seen
            assert "X-Mine: 1" in seen, seen
            # the room sent Connection, Keep-Alive and Proxy-Connection:
            # none of them reaches the web server, nor "close"
            assert_kept(fields)
            assert value(fields, "content-length") == str(len(body))
            assert value(fields, "x-room") == room


def test_chunked_answer_whole_then_reused_and_broken_chunking_ends(client, room):
    a, b, other = two_rooms(client, room)
    with Relay(client.stack) as c:
        for _ in range(2):
            c.send(req(a, "chunked"))
            status, fields, body = c.answer()
            assert status == "HTTP/1.1 200 OK", status
            assert value(fields, "transfer-encoding") == "chunked", fields
            assert body == CHUNKED_BODY
            assert_kept(fields)
            c.send(req(b, "name"))
            status, fields, body = c.answer()
            assert (status, body) == ("HTTP/1.1 200 OK", other.encode()), (status, body, c.buf)
    with Relay(client.stack) as c:
        c.send(req(a, "badchunk"))
        status, fields = c.head()
        assert status == "HTTP/1.1 200 OK", status
        got = c.rest()   # the relay ends the connection where the framing breaks
        assert PWNED not in got, got
        # a request after it is never answered
        try:
            c.send(req(b, "name"))
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert c.ended(), "a request after a broken chunked answer was answered"


def test_close_delimited_answers_say_close_and_end(client, room):
    a = serving_room(client, room)
    for path, proto in (("close10", "HTTP/1.0"), ("close11", "HTTP/1.1")):
        with Relay(client.stack) as c:
            c.send(req(a, path))
            status, fields = c.head()
            assert status == f"{proto} 200 OK", (path, status)
            assert_closing(fields)
            assert "content-length" not in names(fields)
            assert c.rest() == BIG, path
    # HTTP/1.0 with a Content-Length: kept, as HTTP/1.1
    with Relay(client.stack) as c:
        c.send(req(a, "len10"))
        status, fields, body = c.answer()
        assert (status, body) == ("HTTP/1.1 200 OK", b"ten!"), (status, body)
        assert_kept(fields)
        c.send(req(a, "name"))
        assert c.answer()[2] == room.encode()


def test_answers_of_unsure_framing_say_close_and_end(client, room):
    """Both Content-Length and Transfer-Encoding, a coding besides chunked:
    the web server is told to close, and the relay passes the room's bytes
    to its close, then ends the connection."""
    a = serving_room(client, room)
    tail = b"5\r\nhello\r\n0\r\n\r\n" + FAKE
    for path, want_status, want_rest in (
            ("clte", "HTTP/1.1 200 OK", tail),
            ("gzipchunked", "HTTP/1.1 200 OK", tail)):
        with Relay(client.stack) as c:
            c.send(req(a, path))
            status, fields = c.head()
            assert status == want_status, (path, status)
            assert_closing(fields)
            assert c.rest() == want_rest, path


def test_interim_answers_are_dropped(client, room):
    """A 1xx before the answer is not passed on (nginx 1.22 would take it
    for the answer, nginx 1.29 frames the answer by the final head alone):
    the final answer is framed and kept, the room's bytes after it are
    dropped, and the next request (another room's) gets its own answer."""
    a, b, other = two_rooms(client, room)
    with Relay(client.stack) as c:
        c.send(req(a, "100"))
        status, fields, body = c.answer()
        assert (status, body) == ("HTTP/1.1 200 OK", b"ok"), (status, body)
        assert_kept(fields)
        c.send(req(b, "name"))
        status, fields, body = c.answer()
        assert (status, body) == ("HTTP/1.1 200 OK", other.encode()), (status, body, c.buf)
        assert PWNED not in c.buf


def test_a_request_saying_close_gets_close(client, room):
    """lighttpd's requests carry Connection: close: the answer says close
    (a Content-Length answer too) and the connection ends after it."""
    a = serving_room(client, room)
    for extra in (["Connection: close"], ["Connection: keep-alive, close"]):
        with Relay(client.stack) as c:
            c.send(req(a, "name", headers=extra))
            status, fields, body = c.answer()
            assert (status, body) == ("HTTP/1.1 200 OK", room.encode()), (status, body)
            assert_closing(fields)
            assert c.ended(), extra


def test_head_204_and_304_are_kept(client, room):
    a, b, other = two_rooms(client, room)
    with Relay(client.stack) as c:
        for method, path, want in (("HEAD", "name", "HTTP/1.1 200 OK"),
                                   ("GET", "204", "HTTP/1.1 204 No Content"),
                                   ("GET", "304", "HTTP/1.1 304 Not Modified")):
            c.send(req(a, path, method=method))
            status, fields, _ = c.answer(method)
            assert status == want, (path, status)
            assert_kept(fields)
            if method == "HEAD":   # the length of the GET's body, and no body
                assert value(fields, "content-length") == str(len(room)), fields
            c.send(req(b, "name"))
            status, fields, body = c.answer()
            assert (status, body) == ("HTTP/1.1 200 OK", other.encode()), (path, status, body, c.buf)
            assert PWNED not in c.buf


def test_post_body_is_forwarded_exactly_and_chunked_request_is_not_kept(client, room):
    a = serving_room(client, room)
    with Relay(client.stack) as c:
        for n in (10, 300_000):
            data = os.urandom(n)
            c.send(req(a, "post", method="POST", body=data))
            status, fields, body = c.answer()
            assert status == "HTTP/1.1 200 OK", status
            assert body == b"%d %s" % (n, hashlib.sha256(data).hexdigest().encode())
            assert_kept(fields)
            c.send(req(a, "name"))
            assert c.answer()[2] == room.encode()
    # the next request sent at once after a large body (as a client would
    # not): the room still gets the body and nothing past it; the next
    # request, if the relay reads it at all, gets its own answer
    a2 = serving_room(client, unique_room(), 8001)
    with Relay(client.stack) as c:
        data = os.urandom(300_000)
        c.send(req(a, "post", method="POST", body=data) + req(a2, "echo", headers=["X-Next: 1"]))
        status, fields, body = c.answer()
        assert (status, body) == ("HTTP/1.1 200 OK", b"300000 %s" % hashlib.sha256(
            data).hexdigest().encode()), (status, body)
        if "connection" not in names(fields):
            status, fields, body = c.answer()
            assert status == "HTTP/1.1 200 OK" and body.startswith(b"GET /echo HTTP/1.1\r\n"), \
                (status, body)
        else:
            assert_closing(fields)
            assert c.ended()
    # what the room received on each POST's connection: the head, the body,
    # nothing after it but, maybe, the next request to this room (GET
    # /name: the relay keeps its connections into the room,
    # test_preview_pool.py), never the other room's
    name_head = b"GET /name HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    for got, total in room_log(client, room, "/post", 3):
        head = got.partition(b"\r\n\r\n")[0]
        n = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")][0]
                .split(b":")[1])
        assert total - (len(head) + 4 + n) in (0, len(name_head)), (n, total - len(head) - 4)
        if total <= len(got) and total > len(head) + 4 + n:
            assert got[len(head) + 4 + n:] == name_head, got[len(head) + 4 + n:]
    # a chunked request: not kept
    with Relay(client.stack) as c:
        c.send(req(a, "post", method="POST", headers=["Transfer-Encoding: chunked"]) +
               b"4\r\nabcd\r\n0\r\n\r\n")
        status, fields, body = c.answer()
        assert (status, body) == ("HTTP/1.1 200 OK", b"chunked " + room.encode()), (status, body)
        assert_closing(fields)
        assert c.ended(), "the connection stayed open after an answer that said close"


def test_pipelined_request_waits_for_its_turn(client, room):
    """A second request sent before the first's answer (here another
    room's): it never reaches the first room (its target carries the other
    room's token); it is read once the first answer has ended, and answered
    by its own room, in order."""
    a, b, other = two_rooms(client, room)
    with Relay(client.stack) as c:
        c.send(req(a, "echo") + req(b, "echo", headers=["X-Second: 1"]))
        status, fields, body = c.answer()
        assert status == "HTTP/1.1 200 OK", status
        assert body.startswith(b"GET /echo HTTP/1.1\r\n"), body
        assert b"X-Second" not in body, body
        assert_kept(fields)
        status, fields, body = c.answer()
        assert status == "HTTP/1.1 200 OK", status
        assert value(fields, "x-room") == other, fields
        assert b"X-Second: 1\r\n" in body, body
        assert c.open_and_quiet()
    (got, total), = room_log(client, room, "/echo")
    assert total == len(got)
    assert got.count(b" HTTP/1.1\r\n") == 1 and b"X-Second" not in got, \
        f"the room received the pipelined request: {got!r}"


def test_unusable_answers_are_the_relays_502(client, room):
    a = serving_room(client, room)
    cases = {
        "bighead": "the answer's head from the room is too large",
        "silent": "the server on port 8000 in the room closed without an answer",
        "halfhead": "the server on port 8000 in the room closed without an answer",
        "interims": "the answer's head from the room is too large",   # 100 KB of 1xx
    }
    for path, msg in cases.items():
        with Relay(client.stack) as c:
            c.send(req(a, path))
            status, fields, body = c.answer()
            assert status.startswith("HTTP/1.1 502 "), (path, status)
            assert value(fields, "content-type").split(";")[0] == "application/json", fields
            assert json.loads(body) == {"error": msg}, (path, body)
            assert b"X-Pad" not in body and b"Content-Le" not in body


def preview_sock_connections(stack):
    """Connected sockets on preview.sock's path (the relay's accepted ends)."""
    path = str(stack.dir / "preview.sock")
    n = 0
    with open("/proc/net/unix") as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            if len(parts) >= 8 and parts[7] == path and parts[5] == "03":
                n += 1
    return n


def test_nginx_reuses_its_connections_across_rooms(client, room):
    a, b, other = two_rooms(client, room)
    for i in range(50):
        prefix, name = (a, room) if i % 2 == 0 else (b, other)
        r = client.request("GET", prefix + "name", auth=False, check_json=False, timeout=10)
        assert (r.status, r.body) == (200, name.encode()), (i, r)
        assert r.header("x-room") == name, (i, r.headers)
    # a hostile room's extra answer never reaches the other room's clients
    for i in range(10):
        r = client.request("GET", a + "hostile", auth=False, check_json=False, timeout=10)
        assert (r.status, r.body) == (200, b"hello"), (i, r)
        r = client.request("GET", b + "name", auth=False, check_json=False, timeout=10)
        assert (r.status, r.body) == (200, other.encode()), (i, r)
    # nginx holds its idle connections to the relay open: kept, not closed
    assert preview_sock_connections(client.stack) >= 1
