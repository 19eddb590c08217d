"""Moves and drains with roomboxctl (the mover; the hosts' side is
roombox-fcgi's): the room's files arrive byte for byte, the router follows
at once, the old host keeps no copy it would serve, and a drain under load
empties the host with no answer but 200 or 503 + Retry-After, while the
other hosts' rooms answer 200 throughout."""

import re
import threading
import time

from conftest import wait_until
from moving import tombstone_only

LIVES = re.compile(r"room (\S+) lives on host (\S+)")


def served(c, room, cmd):
    """The room's answer once it serves again: right after a commit its new
    host may still answer 503 + Retry-After until its copy of etcd's
    records (a watch) has the commit; nothing else is allowed meanwhile."""
    def answer():
        a = c.exec(room, cmd)
        assert a.status in (200, 503), a
        if a.status == 503:
            assert "retry-after" in a.headers, a
            return None
        return a
    return wait_until(answer, 10, f"room {room} to serve after its move")


def other(c, host):
    return next(h for h in c.hosts if h != host)


def test_move_keeps_the_files_and_the_router_follows(cluster_mode, room):
    c = cluster_mode
    a = c.exec(room, "echo hello > /root/f && head -c 20000000 /dev/urandom > /root/big && "
               "truncate -s 1G /root/sparse && md5sum < /root/big")
    assert a.status == 200, a
    src, md5 = a.host, a.json["result"]["stdout"]
    dst = other(c, src)
    out = c.ctl("move", room, dst).stdout
    assert f"moved from {src} to {dst} (epoch 2" in out, out
    b = served(c, room, "cat /root/f && md5sum < /root/big && du -k /root/sparse | cut -f1 && "
               "stat -c %s /root/sparse")
    assert b.status == 200 and b.host == dst, b
    f, m, du, size = b.json["result"]["stdout"].splitlines()
    assert (f, m + "\n", size) == ("hello", md5, str(1 << 30)) and int(du) < 1024, b
    assert c.etcd_get(f"/roombox/rooms/{room}") == {"host": dst, "epoch": 2}
    old = c.exec(room, "true", host=src)
    assert old.status == 421 and LIVES.search(old.json["error"]).group(2) == dst, old
    assert f"router: {dst}" in c.ctl("where", room).stdout
    c.request("DELETE", f"/api/rooms/{room}")


def test_a_move_waits_for_a_long_exec_and_keeps_what_it_wrote(cluster_mode, room):
    """The source's export starts only once the room's running requests
    have ended; the target's import waits for it longer than a client's
    silence is allowed (10 s)."""
    c = cluster_mode
    a = c.exec(room, "true")
    assert a.status == 200, a
    src = a.host
    dst = other(c, src)
    started = threading.Event()
    long = {}

    def run_long():
        started.set()
        long["a"] = c.exec(room, "sleep 15; echo done > /root/long", host=src)
    t = threading.Thread(target=run_long)
    t.start()
    started.wait()
    # the exec is running once the room reports a busy shell
    wait_until(lambda: "sleep 15" in c.exec(room, "ps -eo args", host=src).json["result"]["stdout"],
               10, "the long exec to run")
    out = c.ctl("move", room, dst).stdout
    t.join()
    assert long["a"].status == 200, long["a"]
    assert f"moved from {src} to {dst} (epoch 2" in out, out
    b = served(c, room, "cat /root/long")
    assert b.host == dst and b.json["result"]["stdout"] == "done\n", b
    c.request("DELETE", f"/api/rooms/{room}")


def test_a_move_that_cannot_happen_leaves_the_room_where_it_was(cluster_mode, room):
    c = cluster_mode
    a = c.exec(room, "echo stay > /root/f")
    assert a.status == 200
    r = c.ctl("move", room, "h9", check=False)
    assert r.returncode == 1 and "not up" in r.stderr, r
    assert c.etcd_get(f"/roombox/moving/{room}") is None
    b = c.exec(room, "cat /root/f")
    assert b.status == 200 and b.host == a.host and b.json["result"]["stdout"] == "stay\n", b
    c.request("DELETE", f"/api/rooms/{room}")


# The drain test's load: rooms on the drained host, rooms on the others,
# and the writer threads that cycle over each set (every room belongs to
# one writer, so its appends are in order).
DRAINED_ROOMS = 50
OTHER_ROOMS_PER_HOST = 3
DRAINED_WRITERS = 4
OTHER_WRITERS = 2
DRAIN_TIMEOUT_S = 600


class Writers:
    """Threads cycling over rooms, each appending the room's next number
    to /root/log through the router; acked[r]: the numbers whose exec
    answered 200, times[r]: when each was answered, answers[r]: every
    status (None: no answer in 30 s)."""

    def __init__(self, c, rooms, threads):
        self.c, self.rooms = c, rooms
        self.acked = {r: [] for r in rooms}
        self.times = {r: [] for r in rooms}
        self.answers = {r: [] for r in rooms}
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(rooms[k::threads],), daemon=True)
                        for k in range(threads)]

    def _run(self, mine):
        n = {r: 1 for r in mine}
        while not self.stop.is_set():
            for r in mine:
                try:
                    a = self.c.request("POST", f"/api/rooms/{r}/sandbox/exec",
                                       {"cmd": f"echo {n[r]} >> /root/log"}, timeout=30)
                except OSError as e:
                    self.answers[r].append((None, repr(e)))
                    continue
                self.answers[r].append((a.status, a))
                if a.status == 200 and a.json["result"]["exitCode"] == 0:
                    self.acked[r].append(n[r])
                    self.times[r].append(time.monotonic())
                    n[r] += 1
                if self.stop.is_set():
                    break

    def start(self):
        for t in self.threads:
            t.start()

    def join(self):
        self.stop.set()
        for t in self.threads:
            t.join()

    def failures(self, allowed=()):
        """Every answer but 200 (and, when allowed holds 503, 503 with
        Retry-After)."""
        return [(r, s, a) for r in self.rooms for s, a in self.answers[r]
                if s != 200 and not (s in allowed and "retry-after" in a.headers)]


def test_drain_under_load_empties_the_host(cluster_mode):
    """A host holding 50 rooms drained while every room of the cluster is
    written through the router: the host ends empty and in maint, its rooms
    answer nothing but 200 or 503 + Retry-After while they move and keep
    every acknowledged append, and the other hosts' rooms answer 200 to
    every request throughout."""
    c = cluster_mode
    host = "h3"
    drained = [f"dr{i}x{c.port}" for i in range(DRAINED_ROOMS)]
    others = [f"st{h}{i}x{c.port}" for h in c.hosts if h != host
              for i in range(OTHER_ROOMS_PER_HOST)]
    placed = {r: host for r in drained}
    placed.update({r: r[2:4] for r in others})

    def make(r):
        a = c.exec(r, ": > /root/log", host=placed[r])
        assert a.status == 200 and a.host == placed[r], (r, a)
    made = list(placed)
    makers = [threading.Thread(target=lambda rs=made[k::4]: [make(r) for r in rs]) for k in range(4)]
    for t in makers:
        t.start()
    for t in makers:
        t.join()
    assert all(c.owner(r) == placed[r] for r in made), "a room was not made where it was asked"
    c.ctl("route-sync")
    sandbox = {r["roomId"]: r["sandboxName"]
               for r in c.request("GET", "/api/rooms", host=host).json["rooms"] if r["roomId"] in placed}
    moving_load = Writers(c, drained, DRAINED_WRITERS)
    still_load = Writers(c, others, OTHER_WRITERS)
    try:
        moving_load.start()
        still_load.start()
        t0 = time.monotonic()
        r = c.ctl("drain", host, check=False, timeout=DRAIN_TIMEOUT_S)
        t1 = time.monotonic()
        print(f"drain of {DRAINED_ROOMS} rooms under load: {t1 - t0:.1f} s")
    finally:
        moving_load.join()
        still_load.join()
    try:
        assert r.returncode == 0 and "0 rooms still on it" in r.stdout, r
        assert not moving_load.failures(allowed=(503,)), moving_load.failures(allowed=(503,))[:5]
        assert not still_load.failures(), still_load.failures()[:5]
        for w in (moving_load, still_load):
            # every room was written while the drain ran
            idle = [r for r in w.rooms if not any(t0 < t < t1 for t in w.times[r])]
            assert not idle, f"rooms not written during the drain: {idle}"
        for r in drained + others:
            a = served(c, r, "cat /root/log")
            assert a.host != host, a
            assert a.host == placed[r] or r in drained, a
            w = moving_load if r in drained else still_load
            # every acknowledged append is there, and no other
            assert [int(x) for x in a.json["result"]["stdout"].split()] == w.acked[r], (r, a, w.acked[r])
        hosts = c.ctl("hosts").stdout
        assert re.search(rf"^{host}\s+maint\s+0\s", hosts, re.M), hosts
        # its copies removed, only the tombstones left
        wait_until(lambda: all(tombstone_only(c, host, r, sandbox[r]) for r in drained), 120,
                   f"{host} to keep only its rooms' tombstones")
        n = c.exec(f"new{c.port}", "true", host=host)
        assert n.status == 503 and "retry-after" in n.headers, n
    finally:
        c.ctl("undrain", host, check=False)
        for r in drained + others:
            c.request("DELETE", f"/api/rooms/{r}")


def test_a_move_to_a_host_that_cannot_be_reached_is_given_up(cluster_mode, room):
    """The target's web server down mid-way: the import fails, the mover
    deletes the moving key, the room serves from its host as before."""
    c = cluster_mode
    a = c.exec(room, "echo stay > /root/f")
    assert a.status == 200, a
    dst = other(c, a.host)
    c.nginx_stop(dst)
    try:
        r = c.ctl("move", room, dst, check=False)
    finally:
        c.nginx_start(dst)
    assert r.returncode == 1 and f"the room stays on {a.host}" in r.stderr, r
    assert c.etcd_get(f"/roombox/moving/{room}") is None
    assert c.etcd_get(f"/roombox/rooms/{room}") == {"host": a.host, "epoch": 1}
    b = c.exec(room, "cat /root/f")
    assert b.status == 200 and b.host == a.host and b.json["result"]["stdout"] == "stay\n", b
    c.request("DELETE", f"/api/rooms/{room}")
