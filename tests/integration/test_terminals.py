"""Terminals: …/sandbox/terminals and their WebSocket, through nginx and
lighttpd.  The WebSocket client is written out here (RFC 6455, a few lines)
so the tests can also send what no library would: unmasked, oversized and
fragmented control frames.  Every wait is bounded by a socket timeout."""

import base64
import json
import os
import socket
import struct
from concurrent.futures import ThreadPoolExecutor

import pytest

from conftest import wait_until


class WS:
    """One WebSocket connection to the service."""

    def __init__(self, client, path, headers=None, timeout=30):
        self.s = socket.create_connection(("127.0.0.1", client.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self.s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                        f"Sec-WebSocket-Version: 13\r\n{extra}\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            data = self.s.recv(65536)
            assert data, f"connection closed before an answer: {self.buf!r}"
            self.buf += data
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        self.status = int(head.split(b" ")[1])
        self.head = head.decode("latin-1")
        self.closed = None          # (code, reason) once a close frame came

    def send(self, opcode, payload=b"", fin=True, mask=True, rsv=0):
        b0 = (0x80 if fin else 0) | rsv | opcode
        n = len(payload)
        m = 0x80 if mask else 0
        if n < 126:
            h = struct.pack("!BB", b0, m | n)
        elif n < 65536:
            h = struct.pack("!BBH", b0, m | 126, n)
        else:
            h = struct.pack("!BBQ", b0, m | 127, n)
        if mask:
            k = os.urandom(4)
            payload = bytes(c ^ k[i % 4] for i, c in enumerate(payload)) if n < 1 << 16 else \
                (int.from_bytes(payload, "big") ^ int.from_bytes((k * (n // 4 + 1))[:n], "big")).to_bytes(n, "big")
            h += k
        self.s.sendall(h + payload)

    def keys(self, text):
        self.send(0x2, text.encode())

    def resize(self, cols, rows):
        self.send(0x1, json.dumps({"type": "resize", "cols": cols, "rows": rows}).encode())

    def _need(self, n):
        while len(self.buf) < n:
            data = self.s.recv(65536)
            if not data:
                return False
            self.buf += data
        return True

    def frame(self):
        """(opcode, payload), or (None, b"") when the connection ends."""
        if not self._need(2):
            return None, b""
        b0, b1 = self.buf[0], self.buf[1]
        assert not b1 & 0x80, "a server frame must not be masked"
        n, off = b1 & 0x7f, 2
        if n == 126:
            self._need(4)
            n, off = struct.unpack("!H", self.buf[2:4])[0], 4
        elif n == 127:
            self._need(10)
            n, off = struct.unpack("!Q", self.buf[2:10])[0], 10
        if not self._need(off + n):
            return None, b""
        payload, self.buf = self.buf[off:off + n], self.buf[off + n:]
        op = b0 & 0x0f
        if op == 0x8:
            self.closed = (struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else None,
                           payload[2:].decode())
        return op, payload

    def output_until(self, needle, limit=1 << 26):
        """The terminal's bytes up to and including needle."""
        out = b""
        while needle not in out:
            op, p = self.frame()
            assert op is not None, f"connection ended before {needle!r}: {out[-500:]!r}"
            if op == 0x2:
                out += p
            elif op == 0x8:
                raise AssertionError(f"closed {self.closed} before {needle!r}: {out[-500:]!r}")
            assert len(out) < limit, f"no {needle!r} in {len(out)} bytes"
        return out

    def until_close(self):
        """Text frames until the close frame: (texts, (code, reason))."""
        texts = []
        while True:
            op, p = self.frame()
            if op is None or op == 0x8:
                return texts, self.closed
            if op == 0x1:
                texts.append(json.loads(p))

    def close(self):
        self.s.close()


def terminal(client, room, **body):
    r = client.post(f"/api/rooms/{room}/sandbox/terminals", body)
    assert r.status == 201, r
    t = r.json["terminal"]
    assert set(t) == {"id", "pid", "cols", "rows", "user", "status", "exitCode", "startTime"}, t
    assert t["status"] == "running" and t["exitCode"] is None, t
    return t


def attach(client, room, tid, **kw):
    r = client.post(f"/api/rooms/{room}/sandbox/terminals/{tid}/ticket")
    assert r.status == 201, r
    ws = WS(client, f"/api/rooms/{room}/sandbox/terminals/{tid}/ws?ticket={r.json['ticket']}", **kw)
    assert ws.status == 101, ws.head
    return ws


def test_type_and_read_the_echo(client, room):
    t = terminal(client, room)
    ws = attach(client, room, t["id"])
    ws.keys("echo hello-$((6*7))\r")
    assert b"hello-42" in ws.output_until(b"hello-42\r\n")
    # it runs in the room, as its root by default, in /workspace
    ws.keys("echo \"$(id -u) $PWD $TERM\"\r")
    assert b"0 /workspace xterm-256color" in ws.output_until(b"0 /workspace xterm-256color")
    ws.close()
    listed = client.get(f"/api/rooms/{room}/sandbox/terminals").json["terminals"]
    assert [x["id"] for x in listed] == [t["id"]]


def test_as_the_user_with_a_command(client, room):
    t = terminal(client, room, user="user", cmd="id -u; read line; echo got:$line", cols=90, rows=20)
    assert t["user"] == "user" and (t["cols"], t["rows"]) == (90, 20)
    ws = attach(client, room, t["id"])
    ws.output_until(b"1000")
    ws.keys("abc\r")
    ws.output_until(b"got:abc")
    texts, closed = ws.until_close()
    assert texts == [{"type": "exit", "exitCode": 0}], texts
    assert closed[0] == 1000, closed
    got = client.get(f"/api/rooms/{room}/sandbox/terminals/{t['id']}").json["terminal"]
    assert got["status"] == "exited" and got["exitCode"] == 0, got


def test_clients_share_one_screen_and_a_late_one_gets_the_scrollback(client, room):
    t = terminal(client, room)
    a, b = attach(client, room, t["id"]), attach(client, room, t["id"])
    a.keys("echo shared-$((1+1))\r")
    out_a, out_b = a.output_until(b"shared-2\r\n"), b.output_until(b"shared-2\r\n")
    assert b"shared-2\r\n" in out_a and b"shared-2\r\n" in out_b
    # b types; a sees it
    b.keys("echo from-b-$((2+2))\r")
    a.output_until(b"from-b-4\r\n")
    c = attach(client, room, t["id"])
    assert b"shared-2" in c.output_until(b"from-b-4\r\n")
    for w in (a, b, c):
        w.close()


def test_resize_reaches_the_terminal(client, room):
    t = terminal(client, room, cols=80, rows=24)
    ws = attach(client, room, t["id"])
    ws.keys("stty size\r")
    ws.output_until(b"24 80")
    ws.resize(132, 43)
    ws.keys("stty size\r")
    ws.output_until(b"43 132")
    got = client.get(f"/api/rooms/{room}/sandbox/terminals/{t['id']}").json["terminal"]
    assert (got["cols"], got["rows"]) == (132, 43)
    ws.close()


def test_exit_code_and_delete(client, room):
    t = terminal(client, room)
    ws = attach(client, room, t["id"])
    ws.keys("exit 3\r")
    texts, closed = ws.until_close()
    assert texts == [{"type": "exit", "exitCode": 3}] and closed[0] == 1000, (texts, closed)
    t2 = terminal(client, room)
    ws = attach(client, room, t2["id"])
    ws.keys("sleep 1000 & echo bg-started\r")
    ws.output_until(b"bg-started")
    r = client.delete(f"/api/rooms/{room}/sandbox/terminals/{t2['id']}")
    assert r.status == 200 and r.json == {"deleted": t2["id"]}, r
    texts, closed = ws.until_close()
    assert texts and texts[0]["type"] == "exit", texts
    # nothing of it is left running in the room (the background sleep included)
    wait_until(lambda: "sleep 1000" not in client.sh(room, "ps -eo args"), 10, "the terminal's sleep to end")
    assert client.delete(f"/api/rooms/{room}/sandbox/terminals/{t2['id']}").status == 200
    assert client.delete(f"/api/rooms/{room}/sandbox/terminals/t00000000000").status == 404


def test_delete_ends_a_shell_that_ignores_the_hangup(client, room):
    t = terminal(client, room, cmd="trap '' HUP; echo trapped; while :; do sleep 1; done")
    ws = attach(client, room, t["id"])
    ws.output_until(b"trapped")
    r = client.delete(f"/api/rooms/{room}/sandbox/terminals/{t['id']}")
    assert r.status == 200, r
    texts, closed = ws.until_close()
    assert texts and texts[0]["type"] == "exit", texts
    got = client.get(f"/api/rooms/{room}/sandbox/terminals/{t['id']}").json["terminal"]
    assert got["status"] == "exited" and got["exitCode"] == 128 + 9, got
    assert "while" not in client.sh(room, "ps -eo args")


def test_a_room_stop_ends_its_terminals(client, room):
    t = terminal(client, room)
    ws = attach(client, room, t["id"])
    ws.keys("echo up\r")
    ws.output_until(b"up\r\n")
    assert client.post(f"/api/rooms/{room}/sandbox/stop").status == 200
    texts, closed = ws.until_close()
    assert texts == [{"type": "exit", "exitCode": None}], texts
    got = client.get(f"/api/rooms/{room}/sandbox/terminals/{t['id']}").json["terminal"]
    assert got["status"] == "lost", got


def test_tickets_are_single_use_and_bound_to_their_terminal(client, room):
    t = terminal(client, room)
    other = terminal(client, room)
    path = f"/api/rooms/{room}/sandbox/terminals/{t['id']}/ws"
    ticket = client.post(f"/api/rooms/{room}/sandbox/terminals/{t['id']}/ticket").json["ticket"]
    ws = WS(client, f"{path}?ticket={ticket}")
    assert ws.status == 101
    ws.close()
    assert WS(client, f"{path}?ticket={ticket}").status == 401          # used
    ticket = client.post(f"/api/rooms/{room}/sandbox/terminals/{other['id']}/ticket").json["ticket"]
    assert WS(client, f"{path}?ticket={ticket}").status == 401          # another terminal's
    assert WS(client, f"{path}?ticket={'0' * 32}").status == 401
    assert WS(client, path).status == 401                              # nothing
    assert WS(client, path, headers={"Authorization": "Bearer wrong"}).status == 401
    ws = WS(client, path, headers={"Authorization": f"Bearer {client.token}"})
    assert ws.status == 101                                            # the API token
    ws.close()
    r = client.post(f"/api/rooms/{room}/sandbox/terminals/t00000000000/ticket")
    assert r.status == 404


def test_hostile_frames_get_their_close_codes(client, room):
    t = terminal(client, room)
    cases = [
        (dict(opcode=0x2, payload=b"x", mask=False), 1002),           # unmasked
        (dict(opcode=0x2, payload=b"x", rsv=0x40), 1002),             # reserved bit
        (dict(opcode=0x3, payload=b"x"), 1002),                       # unknown opcode
        (dict(opcode=0x9, payload=b"p", fin=False), 1002),            # fragmented ping
        (dict(opcode=0x9, payload=b"p" * 126), 1002),                 # ping too long
        (dict(opcode=0x2, payload=b"x" * (64 * 1024 + 1)), 1009),     # too big
        (dict(opcode=0x1, payload=b"\xff"), 1007),                    # text not UTF-8
        (dict(opcode=0x1, payload=b"{\"type\":\"paint\"}"), 1008),    # not a resize
        (dict(opcode=0x1, payload=b"{\"type\":\"resize\",\"cols\":0,\"rows\":5}"), 1008),
        (dict(opcode=0x0, payload=b"x"), 1002),                       # continuation first
    ]
    for frame, code in cases:
        ws = attach(client, room, t["id"])
        ws.send(**frame)
        _, closed = ws.until_close()
        assert closed and closed[0] == code, (frame.get("opcode"), closed)
        ws.close()
    # a flood of resizes closes that client (1008) and harms nothing
    ws = attach(client, room, t["id"])
    try:
        for i in range(300):
            ws.resize(80 + i % 20, 24)
    except (BrokenPipeError, ConnectionResetError):
        pass                        # closed by then: the close frame says why
    _, closed = ws.until_close()
    assert closed and closed[0] == 1008, closed
    ws.close()
    ws = attach(client, room, t["id"])
    ws.keys("echo still-$((3*3))\r")
    ws.output_until(b"still-9")
    ws.close()


def test_bad_handshakes(client, room):
    t = terminal(client, room)
    ticket = client.post(f"/api/rooms/{room}/sandbox/terminals/{t['id']}/ticket").json["ticket"]
    s = socket.create_connection(("127.0.0.1", client.port), timeout=30)
    s.sendall(f"GET /api/rooms/{room}/sandbox/terminals/{t['id']}/ws?ticket={ticket} HTTP/1.1\r\n"
              f"Host: x\r\n\r\n".encode())
    head = s.recv(65536)
    assert head.split(b" ")[1] in (b"426", b"400"), head
    s.close()
    # an upgrade whose key is empty is no upgrade
    ticket = client.post(f"/api/rooms/{room}/sandbox/terminals/{t['id']}/ticket").json["ticket"]
    s = socket.create_connection(("127.0.0.1", client.port), timeout=30)
    s.sendall(f"GET /api/rooms/{room}/sandbox/terminals/{t['id']}/ws?ticket={ticket} HTTP/1.1\r\n"
              "Host: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
              "Sec-WebSocket-Key: \r\n\r\n".encode())
    head = s.recv(65536)
    assert head.split(b" ")[1] in (b"426", b"400"), head
    s.close()
    for bad in ("t0000000000z", "short", "t00000000000/../x"):
        ws = WS(client, f"/api/rooms/{room}/sandbox/terminals/{bad}/ws?ticket={ticket}")
        assert ws.status in (400, 401, 404), (bad, ws.status)


def test_a_program_that_writes_without_end_never_waits_on_a_client(client, room):
    """A client attached that never reads; the program writes 100 MB and
    goes on (it never blocks on the terminal); a client attaching then gets
    at most the scrollback (256 KiB), ending with the newest output."""
    t = terminal(client, room)
    idle = attach(client, room, t["id"])
    feeder = attach(client, room, t["id"])
    # typed only once the shell is reading: input typed ahead of its start
    # may be flushed with the terminal's set-up
    feeder.output_until(b"# ")
    feeder.keys("head -c 100000000 /dev/zero | tr '\\0' x; echo; echo big-done-$((5*5)) > /workspace/marker\r")
    feeder.close()
    wait_until(lambda: "big-done-25" in client.sh(room, "cat /workspace/marker 2>/dev/null; true"), 120,
               "the 100 MB writer to finish")
    late = attach(client, room, t["id"])
    late.keys("echo after-$((7*7))\r")
    out = late.output_until(b"after-49\r\n")
    assert len(out) < 300 * 1024, len(out)
    late.close()
    idle.close()



def fcgi_fds(stack):
    (pid,) = stack.fcgi_pids()
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_ended_terminals_hold_no_descriptors_and_go_with_their_room(client, stack, room):
    """An ended terminal stays listed (its exit code) but holds nothing of
    roombox-fcgi's: ten of them leave its descriptors as they were.  The
    room's destruction takes their records: the same id made again lists
    none, and a ticket asked for before cannot open one."""
    client.sh(room, "true")
    before = fcgi_fds(stack)
    ended = []
    for i in range(10):
        t = terminal(client, room, cmd=f"exit {i % 3}")
        ended.append(t["id"])
        wait_until(lambda: client.get(f"/api/rooms/{room}/sandbox/terminals/{t['id']}")
                   .json["terminal"]["status"] == "exited", 10, "the terminal to end")
    listed = client.get(f"/api/rooms/{room}/sandbox/terminals").json["terminals"]
    assert {x["id"] for x in listed} == set(ended[-8:]), listed      # 8 kept per room
    # room for what else moves (a kept FastCGI connection, an exec
    # channel): ten terminals' worth of pipes would be 20
    assert fcgi_fds(stack) <= before + 3, (before, fcgi_fds(stack))
    running = terminal(client, room)
    ticket = client.post(f"/api/rooms/{room}/sandbox/terminals/{running['id']}/ticket").json["ticket"]
    assert client.delete(f"/api/rooms/{room}").status == 200
    client.sh(room, "true")     # the same id, a new room
    assert client.get(f"/api/rooms/{room}/sandbox/terminals").json["terminals"] == []
    ws = WS(client, f"/api/rooms/{room}/sandbox/terminals/{running['id']}/ws?ticket={ticket}")
    assert ws.status in (401, 404), ws.head


def test_terminals_asked_for_at_once_stay_within_the_room_limit(client, room):
    """Twelve creations at once in one room: eight terminals (the most a
    room runs), the rest 503 with Retry-After; then eight running."""
    client.sh(room, "true")
    with ThreadPoolExecutor(12) as pool:
        answers = list(pool.map(lambda _: client.post(f"/api/rooms/{room}/sandbox/terminals", {}),
                                range(12)))
    made = [r for r in answers if r.status == 201]
    refused = [r for r in answers if r.status == 503]
    assert len(made) == 8 and len(refused) == 4, [(r.status, r.json) for r in answers]
    assert all("too many terminals in this room" in r.json["error"] for r in refused), refused[0].json
    listed = client.get(f"/api/rooms/{room}/sandbox/terminals").json["terminals"]
    assert sum(t["status"] == "running" for t in listed) == 8, listed
    for r in made:
        client.delete(f"/api/rooms/{room}/sandbox/terminals/{r.json['terminal']['id']}")
