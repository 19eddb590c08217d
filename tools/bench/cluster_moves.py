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


def host_addr(h):
    return (f"10.77.0.{h[1:]}", 80)


def timed_transfer(room, src, dst):
    """The room's export straight from its host, then that stream imported
    as a new room straight into dst: (export s, import s)."""
    path = os.path.join(run, f"bench-export-{room}")
    c = http.client.HTTPConnection(*host_addr(src), timeout=600)
    t0 = time.monotonic()
    c.request("GET", f"/api/rooms/{room}/export", headers={"Authorization": f"Bearer {token}"})
    r = c.getresponse()
    if r.status != 200:
        sys.exit(f"cluster_moves.py: export of {room}: {r.status} {r.read()[:200]!r}")
    with open(path, "wb") as f:
        while chunk := r.read(1 << 20):
            f.write(chunk)
    t_export = time.monotonic() - t0
    c.close()
    copy = room + "i"
    c = http.client.HTTPConnection(*host_addr(dst), timeout=600)
    with open(path, "rb") as f:
        t0 = time.monotonic()
        c.request("PUT", f"/api/rooms/{copy}/import", body=f,
                  headers={"Authorization": f"Bearer {token}",
                           "Content-Length": str(os.path.getsize(path))})
        r = c.getresponse()
        answer = r.read()
        t_import = time.monotonic() - t0
    c.close()
    os.unlink(path)
    if r.status != 201:
        sys.exit(f"cluster_moves.py: import of {room}'s export as {copy}: {r.status} {answer[:200]!r}")
    request("DELETE", f"/api/rooms/{copy}", addr=host_addr(dst))
    return t_export, t_import


def tar_zstd_nc(mib, src, dst):
    """The reference: a tree of one file of mib MiB of random bytes sent
    from src's namespace to dst's by `tar -c | zstd | nc`, unpacked there
    by `nc -l | zstd -d | tar -x`: seconds, sender start to receiver end."""
    base = os.path.join(run, f"bench-ref-{tag}")
    tree, out = os.path.join(base, "tree"), os.path.join(base, "out")
    os.makedirs(tree)
    os.makedirs(out)
    subprocess.run(["head", "-c", f"{mib}M", "/dev/urandom"], stdout=open(os.path.join(tree, "data"), "wb"),
                   check=True)
    nsx = lambda h: ["ip", "netns", "exec", f"roombox-{h}"]
    port_ = 19000 + secrets.randbelow(1000)
    rx = subprocess.Popen(nsx(dst) + ["sh", "-c", f"nc -l {port_} | zstd -q -d | tar -x -C {out}"])
    for _ in range(500):   # until dst's nc listens (ss, in its namespace)
        ls = subprocess.run(nsx(dst) + ["ss", "-Hltn", f"sport = :{port_}"], capture_output=True,
                            text=True).stdout
        if ls.strip():
            break
        time.sleep(0.01)
    else:
        sys.exit("cluster_moves.py: nc -l did not listen within 5 s")
    t0 = time.monotonic()
    subprocess.run(nsx(src) + ["sh", "-c", f"tar -C {tree} -cf - . | zstd -q | "
                               f"nc -N 10.77.0.{dst[1:]} {port_}"], check=True, timeout=600)
    rx.wait(timeout=600)
    t = time.monotonic() - t0
    ok = os.path.getsize(os.path.join(out, "data")) == mib << 20
    subprocess.run(["rm", "-rf", base])
    if not ok:
        sys.exit("cluster_moves.py: the reference transfer lost bytes")
    return t


# ---- 1, 2: a room of MOVE_MIB MiB moved, with an appender on it
room = f"bm{tag}"
st, hd, body = exec_(room, f"head -c {MOVE_MIB}M /dev/urandom > /root/data && echo 0 > /root/appended")
if st != 200:
    sys.exit(f"cluster_moves.py: filling room {room}: {st} {body[:200]!r}")
src = owner(hd)
t_export, t_import = timed_transfer(room, src, other_host(src))
t_ref = tar_zstd_nc(MOVE_MIB, src, other_host(src))
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
gap = ap.longest_gap(room)
print(f"unavailability during that move, seen by an exec every 50 ms through the router: "
      f"longest time between two 200s {gap:.2f} s; "
      f"{sum(1 for a in ap.answers if a[3] == 503)} answers 503 + Retry-After, "
      f"{len(fails)} other failures")
print(f"the same room's export straight from {src} {t_export:.2f} s, imported straight into "
      f"{other_host(src)} as a new room {t_import:.2f} s; `tar -c | zstd | nc` of {MOVE_MIB} MiB "
      f"of random bytes from {src}'s namespace to `nc -l | zstd -d | tar -x` in "
      f"{other_host(src)}'s: {t_ref:.2f} s, i.e. {t_ref * 1024 / MOVE_MIB:.1f} s per GiB")
print()
row = "%-46s %-34s %-22s %s"
print(row % ("figure", "target (same run)", "measured", "verdict"))
if m:
    per_gib, ref_gib = secs * 1024 / MOVE_MIB, t_ref * 1024 / MOVE_MIB
    print(row % ("cluster: move, time per GiB", f"<= 1.5 x {ref_gib:.1f} s (tar|zstd|nc)",
                 f"{per_gib:.1f} s ({per_gib / ref_gib:.2f} x)",
                 "MET" if per_gib <= 1.5 * ref_gib else "MISSED"))
else:
    print(row % ("cluster: move, time per GiB", "<= 1.5 x tar|zstd|nc", "move failed", "MISSED"))
print(row % ("cluster: move, room unavailable", f"<= 2 x {t_export + t_import:.2f} s (export+import)",
             f"{gap:.2f} s", "MET" if m and not fails and gap <= 2 * (t_export + t_import) else "MISSED"))
print()
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
