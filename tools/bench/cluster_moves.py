#!/usr/bin/python3
"""make bench-cluster's figures of moves (tools/bench-cluster.sh runs it on
its cluster): the time a move takes per GiB, how long one room is
unavailable during its move, how long a drain of a host with N rooms takes
and what its rooms' clients see meanwhile, and the first exec of a new room
(the placement claim in etcd included).

Usage: cluster_moves.py PORT RUN_DIR ROOMBOXCTL
  PORT        HAProxy's port on 127.0.0.1
  RUN_DIR     the cluster's folder (tokens, etcd-endpoints, hN/roombox.conf)
Environment: BENCH_MOVE_MIB (256), BENCH_DRAIN_ROOMS (8), BENCH_FIRST_N (20).

Each figure is printed on a line of its own, saying what it is."""

import http.client
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import threading
import time

port, run, ctl = int(sys.argv[1]), sys.argv[2], sys.argv[3]
token = open(os.path.join(run, "tokens")).read().split()[0]
endpoints = open(os.path.join(run, "etcd-endpoints")).read().strip()
MOVE_MIB = int(os.environ.get("BENCH_MOVE_MIB", "256"))
DRAIN_ROOMS = int(os.environ.get("BENCH_DRAIN_ROOMS", "8"))
FIRST_N = int(os.environ.get("BENCH_FIRST_N", "20"))
tag = secrets.token_hex(3)


def request(method, path, body=None, addr=("127.0.0.1", port), timeout=300):
    h = {"Authorization": f"Bearer {token}"}
    data = None
    if body is not None:
        data = json.dumps(body)
        h["Content-Type"] = "application/json"
    c = http.client.HTTPConnection(*addr, timeout=timeout)
    try:
        c.request(method, path, body=data, headers=h)
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        c.close()


def exec_(room, cmd, addr=("127.0.0.1", port), timeout=300):
    return request("POST", f"/api/rooms/{room}/sandbox/exec", {"cmd": cmd, "timeout": 240000},
                   addr=addr, timeout=timeout)


def roomboxctl(*args, check=True):
    r = subprocess.run([ctl, "-c", os.path.join(run, "h1", "roombox.conf"), "-e", endpoints,
                        "-a", os.path.join(run, "haproxy", "admin.sock"), *args],
                       capture_output=True, text=True, timeout=1800)
    if check and r.returncode != 0:
        sys.exit(f"cluster_moves.py: roomboxctl {' '.join(args)}: {r.returncode} {r.stdout} {r.stderr}")
    return r


class Appender(threading.Thread):
    """An exec `echo N >> /root/appended` every 50 ms through the router:
    the answers' statuses and times."""

    def __init__(self, rooms):
        super().__init__(daemon=True)
        self.rooms, self.stop, self.answers = rooms, threading.Event(), []

    def run(self):
        n = 0
        while not self.stop.is_set():
            room = self.rooms[n % len(self.rooms)]
            t0 = time.monotonic()
            try:
                st, hd, _ = exec_(room, f"echo {n} >> /root/appended", timeout=30)
                ok = st == 200 or (st == 503 and "retry-after" in hd)
            except OSError:
                st, ok = None, False
            t1 = time.monotonic()
            self.answers.append((room, t0, t1, st, ok))
            n += 1
            self.stop.wait(max(0.0, 0.05 - (t1 - t0)))

    def longest_gap(self, room):
        ok = [t1 for r, _, t1, st, _ in self.answers if r == room and st == 200]
        return max((b - a for a, b in zip(ok, ok[1:])), default=0.0)

    def failures(self):
        return [a for a in self.answers if not a[4]]


def owner(headers):
    return headers.get("x-roombox-host")


def other_host(h):
    return "h2" if h != "h2" else "h3"


# ---- 1, 2: a room of MOVE_MIB MiB moved, with an appender on it
room = f"bm{tag}"
st, hd, body = exec_(room, f"head -c {MOVE_MIB}M /dev/urandom > /root/data && echo 0 > /root/appended")
if st != 200:
    sys.exit(f"cluster_moves.py: filling room {room}: {st} {body[:200]!r}")
src = owner(hd)
roomboxctl("route-sync")
ap = Appender([room])
ap.start()
time.sleep(1)   # a second of load before the move: the appender's steady state
t0 = time.monotonic()
mv = roomboxctl("move", room, other_host(src), check=False)
t = time.monotonic() - t0
time.sleep(1)   # and after it, so its last 503 window is closed by a 200
ap.stop.set()
ap.join()
m = re.search(r"\(epoch \d+, ([0-9.]+) s\)", mv.stdout)
if m:
    secs = float(m.group(1))
    print(f"move of a room holding {MOVE_MIB} MiB (random bytes) from {src} to {other_host(src)}: "
          f"{secs:.2f} s, i.e. {secs * 1024 / MOVE_MIB:.1f} s per GiB")
else:   # a figure too: what a move does on this machine now
    print(f"move of a room holding {MOVE_MIB} MiB from {src} to {other_host(src)}: FAILED after "
          f"{t:.1f} s (the room stayed): {mv.stderr.strip()}")
fails = ap.failures()
print(f"unavailability during that move, seen by an exec every 50 ms through the router: "
      f"longest time between two 200s {ap.longest_gap(room):.2f} s; "
      f"{sum(1 for a in ap.answers if a[3] == 503)} answers 503 + Retry-After, "
      f"{len(fails)} other failures")
request("DELETE", f"/api/rooms/{room}")

# ---- 3: a drain of a host with DRAIN_ROOMS rooms, an appender cycling over them
host = "h3"
rooms = [f"bd{tag}x{i}" for i in range(DRAIN_ROOMS)]
for r in rooms:
    st, hd, body = exec_(r, "head -c 8M /dev/urandom > /root/data && echo 0 > /root/appended",
                         addr=(f"10.77.0.{host[1:]}", 80))
    if st != 200 or owner(hd) != host:
        sys.exit(f"cluster_moves.py: room {r} on {host}: {st} {owner(hd)} {body[:200]!r}")
roomboxctl("route-sync")
ap = Appender(rooms)
ap.start()
t0 = time.monotonic()
drain = subprocess.run([ctl, "-c", os.path.join(run, "h1", "roombox.conf"), "-e", endpoints,
                        "-a", os.path.join(run, "haproxy", "admin.sock"), "drain", host],
                       capture_output=True, text=True, timeout=1800)
t = time.monotonic() - t0
ap.stop.set()
ap.join()
subprocess.run([ctl, "-c", os.path.join(run, "h1", "roombox.conf"), "-e", endpoints,
                "-a", os.path.join(run, "haproxy", "admin.sock"), "undrain", host],
               capture_output=True, timeout=60)
moved = len(re.findall(r"moved from", drain.stdout))
fails = ap.failures()
print(f"drain of {host} holding {DRAIN_ROOMS} rooms of 8 MiB, under an exec every 50 ms through "
      f"the router cycling over them: {t:.2f} s ({moved} moved, drain exit {drain.returncode}); "
      f"{len(ap.answers)} requests, {sum(1 for a in ap.answers if a[3] == 503)} answered 503 + "
      f"Retry-After, {len(fails)} failures (anything else); longest one room waited "
      f"{max(ap.longest_gap(r) for r in rooms):.2f} s")
for f in fails[:5]:
    print(f"  failure: room {f[0]} status {f[3]}")
for r in rooms:
    request("DELETE", f"/api/rooms/{r}")

# ---- 4: first execs of new rooms (each places its room in etcd, then starts it)
times = []
for i in range(FIRST_N):
    r = f"bf{tag}x{i}"
    t0 = time.monotonic()
    st, hd, body = exec_(r, "true")
    times.append(time.monotonic() - t0)
    if st != 200:
        sys.exit(f"cluster_moves.py: first exec of {r}: {st} {body[:200]!r}")
    request("DELETE", f"/api/rooms/{r}")
print(f"first exec of a new room through the router (placement claim in etcd + room start), "
      f"{FIRST_N} rooms in turn: p50 {statistics.median(times) * 1000:.0f} ms, "
      f"max {max(times) * 1000:.0f} ms")
