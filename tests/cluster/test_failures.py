"""Two failures a cluster is for, as a user of the router sees them.

A host SIGKILLed mid-write (every process of it: its etcd member,
roombox-fcgi, nginx, the helper, its rooms' keepers and whatever runs in
them, as a power loss would): the other hosts' writers never notice; the
dead host's rooms get a fast 503 with Retry-After from the router, never a
room served by another host, and no empty twin of them appears anywhere;
started again with the state it left (hN/start.sh, from run-cluster), the
host serves them again with every acknowledged message and every synced
line.

A host cut off by a partition (its veth down, the host running on): its
lease expires in etcd, and the room is restored from a backup onto another
host (roomboxctl restore --force, the operator's assertion that the old
host is gone).  Cut off, the old host cannot tell a partition from a
quorum lost everywhere and answers a client beside it from what it last
knew; once healed and back in touch with etcd (its host key written
again), it never serves the stale room (421 or 503, not even in the
moments before its watch has caught up) and removes its copy, keeping only
the epoch tombstone."""

import base64
import http.client
import os
import secrets
import subprocess
import threading
import time

import pytest

from conftest import gone, wait_until

# bound for an answer that must come at once: fails on a hang (the
# client's own timeout is longer)
FAST_S = 10.0
CLIENT_TIMEOUT_S = 30


def fresh_room():
    return "f" + secrets.token_hex(6)


def conf_value(c, host, key):
    for line in (c.run / host / "roombox.conf").read_text().splitlines():
        k, _, v = line.partition("=")
        if k.strip() == key:
            return v.strip()
    raise AssertionError(f"{host}/roombox.conf has no {key}")


def host_uid_range(c, host):
    base = int(conf_value(c, host, "uid_base"))
    return base, base + int(conf_value(c, host, "max_rooms")) * 65536


def proc_uids(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("Uid:"):
                return [int(u) for u in line.split()[1:3]]
    except (FileNotFoundError, ProcessLookupError):
        pass
    return []


def host_pids(c, host):
    """Every live process of the host: those in its network namespace, and
    its rooms' (in namespaces of their own, under its uid range)."""
    out = subprocess.run(["ip", "netns", "pids", f"roombox-{host}"], capture_output=True,
                         text=True).stdout
    pids = {int(p) for p in out.split()}
    lo, hi = host_uid_range(c, host)
    for d in os.listdir("/proc"):
        if d.isdigit() and any(lo <= u < hi for u in proc_uids(d)):
            pids.add(int(d))
    return {p for p in pids if not gone(p)}


def power_off(c, host):
    """SIGKILL every process of the host, until none is left (a room's
    processes may fork meanwhile)."""
    def killed():
        left = host_pids(c, host)
        for p in left:
            try:
                os.kill(p, 9)
            except ProcessLookupError:
                pass
        return not left
    wait_until(killed, 20, f"every process of {host} to be killed")


def router_sees(c, host, up):
    state = c.admin_cmd("show servers state roombox_hosts")
    rows = [line.split() for line in state.splitlines() if line.startswith(tuple("0123456789"))]
    return any(len(row) > 5 and row[3] == host and (row[5] == "2") == up for row in rows)


def room_paths(c, host, room):
    """What the host's state_dir holds of the room (two levels down)."""
    state = c.run / host / "state"
    found = []
    for d in [state] + [p for p in state.iterdir() if p.is_dir()]:
        found += [str(p.relative_to(state)) for p in d.iterdir() if p.name.startswith(room)]
    return sorted(found)


def drop(c, room):
    """The room cleaned up through the router, its record gone with it."""
    a = c.request("DELETE", f"/api/rooms/{room}")
    assert a.status == 200, a
    assert c.etcd_get(f"/roombox/rooms/{room}") is None


class Writer:
    """Through the router, one after the other until stopped: a message
    posted, then a numbered line appended to /root/lines and synced.  What
    got a 2xx is kept; so is every other answer, as a failure."""

    def __init__(self, c, room):
        self.c, self.room = c, room
        self.messages, self.lines, self.failures = [], [], []
        self.stop_flag = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        i = 0
        while not self.stop_flag.is_set():
            i += 1
            try:
                text = f"msg-{self.room}-{i}"
                a = self.c.request("POST", f"/api/rooms/{self.room}/messages",
                                   {"role": "user", "content": text}, timeout=CLIENT_TIMEOUT_S)
                if 200 <= a.status < 300:
                    self.messages.append(text)
                else:
                    self.failures.append(("message", i, a))
                a = self.c.request("POST", f"/api/rooms/{self.room}/sandbox/exec",
                                   {"cmd": f"echo line-{i} >> /root/lines && sync /root/lines"},
                                   timeout=CLIENT_TIMEOUT_S)
                if a.status == 200 and a.json["result"]["exitCode"] == 0:
                    self.lines.append(f"line-{i}")
                else:
                    self.failures.append(("line", i, a))
            except (OSError, http.client.HTTPException) as e:
                self.failures.append(("error", i, repr(e)))
            if self.failures and self.failures[-1][1] == i:
                self.stop_flag.wait(0.1)   # a host down answers at once: not a busy loop

    def acks(self):
        return len(self.lines)

    def stop(self):
        self.stop_flag.set()
        self.thread.join(CLIENT_TIMEOUT_S * 2 + 10)
        assert not self.thread.is_alive(), f"the writer of {self.room} hangs"


def check_everything_acked_is_there(c, w):
    a = c.request("GET", f"/api/rooms/{w.room}/messages")
    assert a.status == 200, a
    have = {m["content"] for m in a.json["messages"]}
    lost = [m for m in w.messages if m not in have]
    assert not lost, f"room {w.room}: acknowledged messages lost: {lost}"
    a = c.exec(w.room, "cat /root/lines")
    assert a.status == 200, a
    have = set(a.json["result"]["stdout"].split())
    lost = [line for line in w.lines if line not in have]
    assert not lost, f"room {w.room}: synced lines lost: {lost}"


@pytest.fixture
def host_back(cluster):
    """Hosts to start again (hN/start.sh) should a test end early."""
    down = []
    yield down
    for h in down:
        if not c_alive(cluster, h):
            subprocess.run([str(cluster.run / h / "start.sh")], timeout=120, check=False)
        wait_until(lambda: router_sees(cluster, h, True), 60, f"the router to see {h} up")


def c_alive(c, host):
    try:
        return c.request("GET", "/api/health", host=host, timeout=2).status == 200
    except OSError:
        return False


def test_host_killed_mid_write(cluster_mode, host_back):
    c = cluster_mode
    rooms = {h: fresh_room() for h in c.hosts}
    for h, r in rooms.items():
        a = c.exec(r, "echo start > /root/lines && sync /root/lines", host=h)
        assert a.status == 200 and a.host == h, a
    c.ctl("route-sync")
    for h, r in rooms.items():
        a = c.exec(r, "true")
        assert a.status == 200 and a.host == h, a
    lost = rooms["h2"]
    epoch = c.etcd_get(f"/roombox/rooms/{lost}")["epoch"]

    writers = {h: Writer(c, r) for h, r in rooms.items()}
    try:
        wait_until(lambda: all(w.acks() >= 3 for w in writers.values()), 60,
                   "every writer to have 3 lines acknowledged")
        lo, hi = host_uid_range(c, "h2")
        keepers = [p for p in host_pids(c, "h2") if any(lo <= u < hi for u in proc_uids(p))]
        assert keepers, "h2's rooms have no process to kill"
        host_back.append("h2")
        power_off(c, "h2")
        assert not host_pids(c, "h2")

        # the others write on; a little more than before, so that the kill
        # happened in the midst of their writing
        after = {h: writers[h].acks() for h in ("h1", "h3")}
        wait_until(lambda: all(writers[h].acks() >= after[h] + 5 for h in after), 60,
                   "h1's and h3's writers to go on")

        # h2's room: a fast 503 from the router, with Retry-After, never
        # an answer from another host
        for method, path, body in (("POST", f"/api/rooms/{lost}/sandbox/exec", {"cmd": "true"}),
                                   ("POST", f"/api/rooms/{lost}/messages",
                                    {"role": "user", "content": "lost?"}),
                                   ("GET", f"/api/rooms/{lost}/messages", None)):
            t0 = time.monotonic()
            a = c.request(method, path, body, timeout=CLIENT_TIMEOUT_S)
            took = time.monotonic() - t0
            assert a.status == 503 and "retry-after" in a.headers, (method, path, a)
            assert a.host is None, f"{method} {path}: answered by a host: {a}"
            assert took < FAST_S, f"{method} {path}: {took:.1f} s for its 503"
        assert c.etcd_get(f"/roombox/rooms/{lost}") == {"host": "h2", "epoch": epoch}
        # the other hosts, asked straight, make no empty twin
        for h in ("h1", "h3"):
            a = c.exec(lost, "echo twin > /root/twin", host=h)
            assert a.status == 421 and a.json["error"] == f"room {lost} lives on host h2", a
            assert room_paths(c, h, lost) == [], f"{h} holds a copy of {lost}"
    finally:
        for w in writers.values():
            w.stop()
    for h in ("h1", "h3"):
        assert writers[h].failures == [], f"{h}'s writer: {writers[h].failures[:5]}"
        assert writers[h].acks() > 0
    assert writers["h2"].acks() >= 3

    # h2 back, with the state it left
    subprocess.run([str(c.run / "h2" / "start.sh")], timeout=120, check=True)
    host_back.clear()
    wait_until(lambda: router_sees(c, "h2", True), 60, "the router to see h2 up")

    def served():
        a = c.exec(lost, "true")
        return a if a.status == 200 else None
    a = wait_until(served, 120, f"{lost} to serve again")
    assert a.host == "h2", a
    assert c.etcd_get(f"/roombox/rooms/{lost}") == {"host": "h2", "epoch": epoch}
    for w in writers.values():
        check_everything_acked_is_there(c, w)
    for r in rooms.values():
        drop(c, r)


class InsideProbe:
    """A client beside h2, in its network namespace (`ip netns exec
    roombox-h2 curl`), asking its own nginx for the room again and again:
    (monotonic time sent, status) of each answer."""

    def __init__(self, c, room):
        self.answers = []
        self.stop_flag = threading.Event()
        self.cmd = ["ip", "netns", "exec", "roombox-h2", "curl", "-sS", "-o", "/dev/null",
                    "-w", "%{http_code}", "--max-time", str(CLIENT_TIMEOUT_S),
                    "-H", f"Authorization: Bearer {c.token}",
                    "-H", "Content-Type: application/json", "-d", '{"cmd":"cat /root/f"}',
                    f"http://10.77.0.2/api/rooms/{room}/sandbox/exec"]
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self):
        while not self.stop_flag.is_set():
            t = time.monotonic()
            out = subprocess.run(self.cmd, capture_output=True, text=True).stdout.strip()
            self.answers.append((t, int(out) if out.isdigit() else 0))
            self.stop_flag.wait(0.1)

    def since(self, t):
        return [s for ts, s in self.answers if ts >= t]

    def stop(self):
        self.stop_flag.set()
        self.thread.join(CLIENT_TIMEOUT_S + 10)


def link(state):
    subprocess.run(["ip", "link", "set", "rbxv2", state], check=True)


def test_partitioned_host_never_serves_a_restored_room(cluster_mode, tmp_path):
    c = cluster_mode
    room = fresh_room()
    a = c.exec(room, "echo backup-era > /root/f", host="h2")
    assert a.status == 200 and a.host == "h2", a
    c.ctl("route-sync")
    # the backup: the room's export through the router (roomboxctl export
    # speaks to its own host's socket only)
    backup = tmp_path / "room.rbx"
    conn = http.client.HTTPConnection(*c.addr(), timeout=120)
    conn.request("GET", f"/api/rooms/{room}/export", headers={"Authorization": f"Bearer {c.token}"})
    r = conn.getresponse()
    backup.write_bytes(r.read())
    conn.close()
    assert r.status == 200, r.status
    # written after the backup: what the restore loses
    a = c.exec(room, "echo after-backup > /root/f")
    assert a.status == 200 and a.host == "h2", a
    epoch = c.etcd_get(f"/roombox/rooms/{room}")["epoch"]
    others = [f"http://10.77.0.{n}:2379" for n in (1, 3)]

    probe = InsideProbe(c, room)
    healed = False
    try:
        wait_until(lambda: probe.since(0), 30, "the probe inside h2 to get an answer")
        link("down")

        def lease_gone():
            ans = c.etcd("/v3/kv/range", {"key": base64.b64encode(
                b"/roombox/hosts/h2").decode()}, endpoints=others)
            return not ans.get("kvs")
        wait_until(lease_gone, 60, "h2's lease to expire in etcd")

        out = c.ctl("restore", room, "--to", "h3", "--from", str(backup), "--force").stdout
        assert f"room {room}: restored from h2 to h3" in out, out
        assert c.etcd_get(f"/roombox/rooms/{room}") == {"host": "h3", "epoch": epoch + 1}
        a = c.exec(room, "cat /root/f")
        assert a.status == 200 and a.host == "h3", a
        assert a.json["result"]["stdout"] == "backup-era\n", a

        # healed: once h2 is back in touch, straight to it 421 or 503,
        # never the stale room
        link("up")
        healed = True

        def back_in_touch():
            ans = c.etcd("/v3/kv/range", {"key": base64.b64encode(
                b"/roombox/hosts/h2").decode()}, endpoints=others)
            return bool(ans.get("kvs"))
        wait_until(back_in_touch, 60, "h2 to register in etcd again")
        t_back = time.monotonic()
        seen = []

        def knows():
            try:
                a = c.exec(room, "cat /root/f", host="h2")
            except OSError as e:
                seen.append(repr(e))
                return False
            seen.append(a.status)
            assert a.status in (421, 503), a
            return a.status == 421
        wait_until(knows, 60, f"h2 to answer 421 for {room} (answers: {seen[-5:]})")
        wait_until(lambda: len(probe.since(t_back)) >= 3, 60,
                   "the probe inside h2 to get answers after h2 was back")
    finally:
        if not healed:
            link("up")
        probe.stop()
    # from the moment h2 was back in touch with etcd, never the stale room
    assert probe.since(t_back) and all(s != 200 for s in probe.since(t_back)), probe.since(t_back)

    # its copy goes, its epoch stays as the tombstone
    wait_until(lambda: room_paths(c, "h2", room) == [f"epochs/{room}"], 60,
               f"h2 to remove its copy of {room} (has {room_paths(c, 'h2', room)})")
    assert (c.run / "h2" / "state" / "epochs" / room).read_text().strip() == str(epoch)
    wait_until(lambda: router_sees(c, "h2", True), 60, "the router to see h2 up")
    a = c.exec(room, "cat /root/f")
    assert a.status == 200 and a.host == "h3" and a.json["result"]["stdout"] == "backup-era\n", a
    drop(c, room)
