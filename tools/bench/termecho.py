#!/usr/bin/env python3
"""termecho -- the terminal figure of `make bench`.

    termecho.py PORT TOKENFILE ROOM KEYS

Opens a terminal in ROOM through nginx on 127.0.0.1:PORT (POST
…/sandbox/terminals, a ticket, its WebSocket), waits for the shell's
prompt, then types KEYS single keystrokes one at a time, each a masked
binary frame of one byte, and times each from its send to the arrival of
its echo (the terminal's own echo of the typed character, through the
room's pty, roombox-fcgi and nginx), on a plain socket with TCP_NODELAY.
Every 50 keystrokes a Ctrl-U clears the line (not timed).  Prints
"n=N p50_ms=.. p90_ms=.. p99_ms=.. max_ms=..", then deletes the terminal.
"""
import base64
import json
import os
import socket
import struct
import sys
import time
import urllib.request


def pct(v, p):
    s = sorted(v)
    return s[min(len(s) - 1, int(p / 100.0 * len(s)))]


def api(port, token, method, path, body=None):
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {token}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read())


class WS:
    def __init__(self, port, path):
        self.s = socket.create_connection(("127.0.0.1", int(port)), timeout=30)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        key = base64.b64encode(os.urandom(16)).decode()
        self.s.sendall((f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                        "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            self.buf += self.s.recv(65536)
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        assert head.split(b" ")[1] == b"101", head

    def send(self, data):
        k = os.urandom(4)
        self.s.sendall(struct.pack("!BB", 0x82, 0x80 | len(data)) + k +
                       bytes(c ^ k[i % 4] for i, c in enumerate(data)))

    def output(self):
        """The next binary frame's payload."""
        while True:
            while len(self.buf) < 2:
                self.buf += self.s.recv(65536)
            n, off = self.buf[1] & 0x7f, 2
            if n == 126:
                while len(self.buf) < 4:
                    self.buf += self.s.recv(65536)
                n, off = struct.unpack("!H", self.buf[2:4])[0], 4
            while len(self.buf) < off + n:
                self.buf += self.s.recv(65536)
            op, p, self.buf = self.buf[0] & 0x0f, self.buf[off:off + n], self.buf[off + n:]
            if op == 0x2:
                return p
            assert op != 0x8, "closed"


def main():
    port, tokfile, room, keys = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    token = open(tokfile).readline().strip()
    base = f"/api/rooms/{room}/sandbox/terminals"
    tid = api(port, token, "POST", base, {"cols": 200, "rows": 50})["terminal"]["id"]
    ticket = api(port, token, "POST", f"{base}/{tid}/ticket")["ticket"]
    ws = WS(port, f"{base}/{tid}/ws?ticket={ticket}")
    ws.send(b"echo ready-$((40+2))\r")
    seen = b""
    while b"ready-42" not in seen:
        seen += ws.output()
    lat = []
    for i in range(keys):
        if i % 50 == 0:
            ws.send(b"\x15")
            while True:             # the line's erasure comes back: wait for it
                try:
                    ws.s.settimeout(0.2)
                    ws.output()
                except socket.timeout:
                    break
            ws.s.settimeout(30)
        c = b"abcdefghijklmnopqrstuvwxyz"[i % 26:i % 26 + 1]
        t0 = time.perf_counter()
        ws.send(c)
        got = b""
        while c not in got:
            got += ws.output()
        lat.append((time.perf_counter() - t0) * 1000)
    api(port, token, "DELETE", f"{base}/{tid}")
    print(f"n={len(lat)} p50_ms={pct(lat, 50):.3f} p90_ms={pct(lat, 90):.3f} "
          f"p99_ms={pct(lat, 99):.3f} max_ms={max(lat):.3f}")


if __name__ == "__main__":
    main()
