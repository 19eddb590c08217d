"""What the preview tests share: a WebSocket echo server for inside a room
(Python's stdlib only), a raw-socket WebSocket client, and helpers to start
a server in a room and wait until its preview URL answers."""

import base64
import hashlib
import os
import re
import socket
import struct
import urllib.parse

from conftest import wait_until

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TOKEN = re.compile(r"[a-z0-9]{16}")

# What the servers below share: the request head, and a thread per
# connection on 127.0.0.1:PORT (argv[1]).
READ_HEAD = r'''
def read_head(c):
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = c.recv(4096)
        if not d:
            raise EOFError
        buf += d
    return buf.split(b"\r\n\r\n", 1)
'''
SERVE_EACH = r'''
def run(c):
    try:
        serve(c)
    except Exception:
        pass
    finally:
        c.close()

s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(64)
while True:
    c, _ = s.accept()
    threading.Thread(target=run, args=(c,), daemon=True).start()
'''

# Runs in the room: accepts WebSocket upgrades on 127.0.0.1:PORT and echoes
# every frame back unmasked; answers a close with a close.  The upgrade
# answer carries the request target it saw (X-Seen-Target).
WS_ECHO_SERVER = READ_HEAD + r'''
import base64, hashlib, socket, struct, sys, threading
GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

def recv_exact(c, buf, n):
    while len(buf) < n:
        d = c.recv(65536)
        if not d:
            raise EOFError
        buf += d
    return buf[:n], buf[n:]

def serve(c):
    head, buf = read_head(c)
    lines = head.decode("latin-1").split("\r\n")
    target = lines[0].split(" ")[1]
    hdrs = dict((k.strip().lower(), v.strip()) for k, v in
                (l.split(":", 1) for l in lines[1:] if ":" in l))
    acc = base64.b64encode(hashlib.sha1((hdrs["sec-websocket-key"] + GUID).encode()).digest())
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Accept: " + acc +
              b"\r\nX-Seen-Target: " + target.encode() + b"\r\n\r\n")
    while True:
        h, buf = recv_exact(c, buf, 2)
        op, n = h[0] & 15, h[1] & 127
        if n == 126:
            x, buf = recv_exact(c, buf, 2); n = struct.unpack(">H", x)[0]
        elif n == 127:
            x, buf = recv_exact(c, buf, 8); n = struct.unpack(">Q", x)[0]
        mask = b"\0\0\0\0"
        if h[1] & 128:
            mask, buf = recv_exact(c, buf, 4)
        data, buf = recv_exact(c, buf, n)
        data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        if n < 126:
            out = bytes([0x80 | op, n])
        elif n < 65536:
            out = bytes([0x80 | op, 126]) + struct.pack(">H", n)
        else:
            out = bytes([0x80 | op, 127]) + struct.pack(">Q", n)
        c.sendall(out + data)
        if op == 8:
            return

''' + SERVE_EACH


# Runs in the room: answers every request on 127.0.0.1:PORT with the
# request head it got, as its body (what the room sees of a request).
ECHO_HEAD_SERVER = READ_HEAD + r'''
import socket, sys, threading

def serve(c):
    head = read_head(c)[0] + b"\r\n"
    c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: close\r\n"
              b"Content-Length: %d\r\n\r\n" % len(head) + head)
''' + SERVE_EACH


def header_lines(head):
    """The header lines of a request head the room echoed, as
    (lower-case name, value) pairs, in order."""
    lines = head.decode("latin-1").split("\r\n")[1:]
    return [(k.strip().lower(), v.strip()) for k, v in
            (l.split(":", 1) for l in lines if ":" in l)]


def expose(client, room, port):
    r = client.post(f"/api/rooms/{room}/sandbox/ports", {"port": port})
    assert r.status == 201, r
    assert set(r.json) == {"port", "url", "token"}, r.json
    assert r.json["port"] == port and TOKEN.fullmatch(r.json["token"]), r.json
    return r.json


def target_of(url):
    """The path (and query) of a preview URL, to send to the stack."""
    u = urllib.parse.urlsplit(url)
    return u.path + (f"?{u.query}" if u.query else "")


def preview_get(client, url, headers=None, path_extra=""):
    """GET a preview URL through the stack, without the API token."""
    return client.request("GET", target_of(url) + path_extra, auth=False,
                          headers=headers, check_json=False, timeout=30)


def start_in_room(client, room, cmd, log):
    """Start a server in the background of the room (an exec with `&`)."""
    client.sh(room, f"nohup {cmd} >{log} 2>&1 </dev/null &")


def wait_serving(client, url, what, headers=None, path_extra=""):
    """Poll the preview URL until the room's server answers (not our 502)."""
    def answered():
        r = preview_get(client, url, headers, path_extra)
        return r if r.status != 502 else None
    return wait_until(answered, 20, what, interval=0.1)


def ws_handshake(port, target, host=None):
    """Open a WebSocket through the stack; (socket, status line, headers)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET {target} HTTP/1.1\r\nHost: {host or f'127.0.0.1:{port}'}\r\n"
               "Upgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        d = s.recv(4096)
        assert d, f"connection closed during the handshake: {buf!r}"
        buf += d
    head, rest = buf.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    hdrs = {k.strip().lower(): v.strip() for k, v in
            (l.split(":", 1) for l in lines[1:] if ":" in l)}
    want = base64.b64encode(hashlib.sha1((key + WS_GUID).encode()).digest()).decode()
    return s, lines[0], hdrs, want, rest


def ws_send(s, payload, opcode=1):
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([0x80 | opcode]) + (bytes([0x80 | n]) if n < 126 else
                                     bytes([0x80 | 126]) + struct.pack(">H", n))
    s.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))


def ws_recv(s, buf=b""):
    def need(n):
        nonlocal buf
        while len(buf) < n:
            d = s.recv(65536)
            assert d, "connection closed before a whole frame"
            buf += d
        out, buf = buf[:n], buf[n:]
        return out
    h = need(2)
    n = h[1] & 127
    if n == 126:
        n = struct.unpack(">H", need(2))[0]
    assert not h[1] & 128, "a server's frame must not be masked"
    return h[0] & 15, need(n)
