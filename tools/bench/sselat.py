#!/usr/bin/env python3
"""sselat -- the streamed-output figure of `make bench`.

    sselat.py PORT TOKENFILE ROOM LINES

POSTs an exec with `Accept: text/event-stream` through nginx on
127.0.0.1:PORT whose command prints CLOCK_REALTIME in nanoseconds (`date
+%s%N`) every 100 ms, LINES times, and reads the stream from a plain socket
(no buffering library in between), taking CLOCK_REALTIME as each chunk
arrives.  Both clocks are the host's (the room shares the host's kernel).
Prints "n=N p50_ms=.. p90_ms=.. p99_ms=.. max_ms=.. complete=0|1": the time
from the command's timestamp to its arrival at the client.  The timestamp is
taken just before `date` writes it, so the figure includes date's own write
but not its start-up.
"""
import json
import re
import socket
import sys
import time


def pct(v, p):
    s = sorted(v)
    return s[min(len(s) - 1, int(p / 100.0 * len(s)))]


def main():
    port, tokfile, room, lines = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    token = open(tokfile).readline().strip()
    cmd = f"for i in $(seq {lines}); do date +%s%N; sleep 0.1; done"
    body = json.dumps({"cmd": cmd}).encode()
    head = (f"POST /api/rooms/{room}/sandbox/exec HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n").encode()
    s = socket.create_connection(("127.0.0.1", int(port)), timeout=60)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    s.sendall(head + body)
    buf = b""
    lat = []
    complete = 0
    status = None
    while True:
        d = s.recv(65536)
        now = time.clock_gettime_ns(time.CLOCK_REALTIME)
        if not d:
            break
        buf += d
        if status is None:
            if b"\r\n\r\n" not in buf:
                continue
            h, buf = buf.split(b"\r\n\r\n", 1)
            status = h.split(b" ", 2)[1].decode()
            if status != "200":
                print(f"n=0 status={status} complete=0 body={buf[:200]!r}")
                return
        # chunked transfer framing lines never look like "data: {...}"
        for line in re.findall(rb"^data: (\{.*\})\r?$", buf, re.M):
            ev = json.loads(line)
            if ev.get("type") == "stdout":
                for t in re.findall(r"\d{18,20}", ev.get("data", "")):
                    lat.append((now - int(t)) / 1e6)
            elif ev.get("type") == "complete":
                complete = 1
        buf = buf[buf.rfind(b"\n") + 1:]
    if not lat:
        print(f"n=0 status={status} complete={complete}")
        return
    print(f"n={len(lat)} p50_ms={pct(lat, 50):.3f} p90_ms={pct(lat, 90):.3f} "
          f"p99_ms={pct(lat, 99):.3f} max_ms={max(lat):.3f} complete={complete}")


if __name__ == "__main__":
    main()
