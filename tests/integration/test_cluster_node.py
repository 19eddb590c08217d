"""Cluster mode, one host's side: two roombox stacks (h1, h2) on this
machine share a real etcd (one member, loopback ports of its own, started
and stopped here), and a client sees what the hosts answer: every answer
names its host (X-Roombox-Host), a room lives on the host that placed it
and the other answers 421 naming it, twenty concurrent first execs of one
id through both hosts make one room, the room list covers both hosts, a
room moving answers 503 + Retry-After, a copy older than etcd's record is
never served, a drained host takes no new room, and with etcd gone existing
rooms keep serving while a new one gets a clear 503 (also with three
members, two of them down; one down changes nothing).  A move's steps are
played here as roomboxctl plays them: signed export and import, commit,
the source's tombstone, and a move given up.  No router here: that is
tests/cluster/."""

import base64
import contextlib
import hashlib
import hmac
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import Client, Stack, free_port, started, unique_room, wait_until

SERVERS = ("nginx",)
ETCD = shutil.which("etcd")
ETCDCTL = shutil.which("etcdctl")


def b64(text):
    return base64.b64encode(text.encode()).decode()


class Etcd:
    """One etcd member on loopback; stop() and start() keep its data.  A
    member of a cluster of several is given the cluster's names and peers."""

    def __init__(self, name="e1"):
        self.name = name
        self.dir = Path(tempfile.mkdtemp(prefix="rbx-etcd-"))
        self.client_port, self.peer_port = free_port(), free_port()
        self.url = f"http://127.0.0.1:{self.client_port}"
        self.peer = f"http://127.0.0.1:{self.peer_port}"
        self.initial_cluster = f"{name}={self.peer}"
        self.cluster_token = self.dir.name
        self.proc = None

    def spawn(self):
        log = open(self.dir / "etcd.log", "ab")
        self.proc = subprocess.Popen(
            [ETCD, "--name", self.name, "--data-dir", str(self.dir / "data"),
             "--listen-client-urls", self.url, "--advertise-client-urls", self.url,
             "--listen-peer-urls", self.peer, "--initial-advertise-peer-urls", self.peer,
             "--initial-cluster", self.initial_cluster, "--initial-cluster-token", self.cluster_token],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        log.close()

    def start(self):
        self.spawn()
        wait_until(self.healthy, 20, "etcd to answer")

    def healthy(self):
        assert self.proc.poll() is None, (self.dir / "etcd.log").read_text()[-2000:]
        try:
            with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                return json.load(r).get("health") == "true"
        except OSError:
            return False

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=20)

    def kv_calls(self):
        """How many Range and Txn calls etcd has answered (its own metrics)."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=5) as r:
            text = r.read().decode()
        n = 0
        for line in text.splitlines():
            if line.startswith("grpc_server_handled_total{") and 'grpc_service="etcdserverpb.KV"' in line \
                    and ('grpc_method="Range"' in line or 'grpc_method="Txn"' in line):
                n += int(float(line.rsplit(" ", 1)[1]))
        return n

    def ctl(self, *args):
        return subprocess.run([ETCDCTL, "--endpoints", self.url, *args], check=True,
                              capture_output=True, text=True,
                              env={**os.environ, "ETCDCTL_API": "3"}).stdout

    def txn(self, body):
        with urllib.request.urlopen(urllib.request.Request(
                self.url + "/v3/kv/txn", method="POST", data=json.dumps(body).encode()),
                timeout=5) as r:
            return json.load(r)

    def mod_revision(self, key):
        with urllib.request.urlopen(urllib.request.Request(
                self.url + "/v3/kv/range", method="POST",
                data=json.dumps({"key": b64(key)}).encode()), timeout=5) as r:
            return json.load(r)["kvs"][0]["mod_revision"]

    def get(self, key):
        """The value of key (parsed JSON), or None."""
        with urllib.request.urlopen(urllib.request.Request(
                self.url + "/v3/kv/range", method="POST",
                data=json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()),
                timeout=5) as r:
            kvs = json.load(r).get("kvs") or []
        return json.loads(base64.b64decode(kvs[0]["value"])) if kvs else None


@pytest.fixture(scope="module")
def etcd():
    if not ETCD or not ETCDCTL:
        pytest.fail("etcd and etcdctl are not installed (tools/deps.sh: etcd-server etcd-client)")
    e = Etcd()
    try:
        e.start()
        yield e
    finally:
        e.stop()
        shutil.rmtree(e.dir, ignore_errors=True)


KEY = b"the-hosts-shared-secret-" + os.urandom(16).hex().encode()


def cluster_stack(name, etcd, etcd_urls=None):
    s = Stack("nginx", {"cluster_etcd": etcd_urls or etcd.url, "cluster_host": name,
                        "cluster_url": "http://127.0.0.1:1"})
    key = s.dir / "cluster-key"
    key.write_bytes(KEY + b"\n")
    os.chmod(key, 0o600)
    s.config["cluster_key_file"] = str(key)
    s.config["cluster_url"] = s.base_url   # its port is known now
    s.write_config()
    return started(s)


@pytest.fixture(scope="module")
def hosts(etcd):
    started = []
    try:
        for name in ("h1", "h2"):
            started.append(cluster_stack(name, etcd))
        # both registered under their leases
        wait_until(lambda: all(etcd.get(f"/roombox/hosts/{h}") for h in ("h1", "h2")), 20,
                   "both hosts to register in etcd")
        yield {"h1": Client(started[0]), "h2": Client(started[1])}
    finally:
        problems = []
        for s in started:
            problems += s.stop()
        assert not problems, problems


def run(c, room, cmd):
    """An exec through host c, whatever it answers."""
    return c.exec_raw(room, {"cmd": cmd})


def owner_cleanup(hosts, room):
    for c in hosts.values():
        r = c.delete(f"/api/rooms/{room}")
        if r.status == 200:
            return


def test_a_host_registers_under_its_name_and_url(hosts, etcd):
    rec = etcd.get("/roombox/hosts/h1")
    assert rec == {"url": hosts["h1"].stack.base_url, "state": "ready"}
    lease = etcd.ctl("get", "/roombox/hosts/h1", "-w", "json")
    assert '"lease"' in lease, "the host key is not under a lease"


def test_every_answer_names_its_host(hosts):
    for name, c in hosts.items():
        for r in (c.get("/api/health"), c.get("/api/rooms/none-such"), c.get("/api/nowhere")):
            assert r.header("X-Roombox-Host") == name, (r.status, r.headers)


def test_a_room_lives_where_it_was_placed(hosts, etcd):
    room = unique_room()
    try:
        r = run(hosts["h1"], room, "echo here")
        assert r.status == 200 and r.json["result"]["stdout"] == "here\n", r
        assert r.header("X-Roombox-Host") == "h1"
        assert etcd.get(f"/roombox/rooms/{room}") == {"host": "h1", "epoch": 1}
        # answers written as they go name their host too
        assert run(hosts["h1"], room, "echo x > /workspace/a.txt").status == 200
        r = hosts["h1"].request("GET", f"/api/rooms/{room}/sandbox/files/a.txt", check_json=False)
        assert r.status == 200 and r.body == b"x\n" and r.header("X-Roombox-Host") == "h1", r
        r = hosts["h1"].request("POST", f"/api/rooms/{room}/sandbox/exec", {"cmd": "echo s"},
                                headers={"Accept": "text/event-stream"}, check_json=False)
        assert r.status == 200 and r.header("X-Roombox-Host") == "h1", r
        for method, path, body in (("POST", f"/api/rooms/{room}/sandbox/exec", {"cmd": "true"}),
                                   ("GET", f"/api/rooms/{room}", None),
                                   ("PUT", f"/api/rooms/{room}/sandbox/files/a.txt", None)):
            r = hosts["h2"].request(method, path, *([body] if body is not None else []))
            assert r.status == 421, r
            assert r.json == {"error": f"room {room} lives on host h1"}
            assert r.header("X-Roombox-Host") == "h2"
        # h2 made nothing of it
        assert not hosts["h2"].stack.room_state_dir(room).exists()
    finally:
        owner_cleanup(hosts, room)


def test_a_first_request_that_makes_no_room_leaves_no_placement(hosts, etcd):
    """A room's first request places it in etcd before it runs; when it
    fails and nothing made the room (a bad body here; no room left, or no
    disk, alike), the placement goes again: no host lists the id, a drain
    has nothing to move.  A failure after the room was made keeps it."""
    room, other = unique_room(), unique_room()
    h1, h2 = hosts["h1"], hosts["h2"]
    try:
        r = run(h1, room, 42)
        assert r.status == 400, r
        assert etcd.get(f"/roombox/rooms/{room}") is None
        # a body that is not JSON at all is refused before its handler
        r = h1.request("POST", f"/api/rooms/{room}/sandbox/exec", data=b"{not json",
                       headers={"Content-Type": "application/json"})
        assert r.status == 400, r
        assert etcd.get(f"/roombox/rooms/{room}") is None
        # h2 lists what its own watch has seen: the placement, then its end
        wait_until(lambda: room not in [x["roomId"] for x in h2.get("/api/rooms").json["rooms"]],
                   10, "h2 to list the room no more")
        r = run(h1, room, "echo now")
        assert r.status == 200 and r.json["result"]["stdout"] == "now\n", r
        assert etcd.get(f"/roombox/rooms/{room}") == {"host": "h1", "epoch": 1}
        # made, then a failing request: the placement stays
        r = h1.post(f"/api/rooms/{other}/sandbox/exec", {"cmd": "true"})
        assert r.status == 200, r
        r = h1.request("GET", f"/api/rooms/{other}/sandbox/files/nothing-here", check_json=False)
        assert r.status == 404, r
        assert etcd.get(f"/roombox/rooms/{other}") == {"host": "h1", "epoch": 1}
    finally:
        owner_cleanup(hosts, room)
        owner_cleanup(hosts, other)


def test_a_warm_exec_makes_no_etcd_call(hosts, etcd):
    room, fresh = unique_room(), unique_room()
    try:
        assert run(hosts["h1"], room, "true").status == 200
        before = etcd.kv_calls()
        for _ in range(20):
            assert run(hosts["h1"], room, "true").status == 200
        assert etcd.kv_calls() == before, "warm execs asked etcd"
        # while the first exec of a new room asks it once (its placement)
        assert run(hosts["h1"], fresh, "true").status == 200
        assert etcd.kv_calls() > before
    finally:
        owner_cleanup(hosts, room)
        owner_cleanup(hosts, fresh)


def test_twenty_concurrent_first_execs_make_one_room(hosts, etcd):
    room = unique_room()
    answers = [None] * 20

    def first_exec(i):
        c = hosts["h1" if i % 2 == 0 else "h2"]
        answers[i] = run(c, room, "echo made")

    try:
        threads = [threading.Thread(target=first_exec, args=(i,)) for i in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        served = {r.header("X-Roombox-Host") for r in answers if r.status == 200}
        assert len(served) == 1, [(r.status, r.header("X-Roombox-Host")) for r in answers]
        owner = served.pop()
        other = "h2" if owner == "h1" else "h1"
        for r in answers:
            if r.status == 200:
                assert r.json["result"]["stdout"] == "made\n"
            elif r.status == 503:
                # the owner's own limit: the room's share of its workers
                # (room_workers), held by the first execs while its jail starts
                assert r.header("X-Roombox-Host") == owner and "busy" in r.json["error"], r
                assert int(r.header("Retry-After")) > 0
            else:
                assert r.status == 421, r
                assert r.json == {"error": f"room {room} lives on host {owner}"}
        assert etcd.get(f"/roombox/rooms/{room}") == {"host": owner, "epoch": 1}
        assert hosts[owner].stack.room_state_dir(room).exists()
        assert not hosts[other].stack.room_state_dir(room).exists()
    finally:
        owner_cleanup(hosts, room)


def test_the_room_list_covers_every_host(hosts):
    rooms = [unique_room(), unique_room()]
    try:
        assert run(hosts["h1"], rooms[0], "true").status == 200
        assert run(hosts["h2"], rooms[1], "true").status == 200

        def listed(c):
            return {e["roomId"]: e for e in c.get("/api/rooms").json["rooms"]}
        wait_until(lambda: all(r in listed(hosts["h1"]) for r in rooms), 10,
                   "h1 to list h2's room")
        seen = listed(hosts["h1"])
        assert seen[rooms[0]]["state"] in ("running", "stopped")   # local: its details
        assert seen[rooms[0]]["host"] == "h1"
        assert seen[rooms[1]] == {"roomId": rooms[1], "sandboxName": f"sandbox-{rooms[1]}",
                                  "host": "h2"}
    finally:
        for r in rooms:
            owner_cleanup(hosts, r)


def test_a_room_cleaned_up_frees_its_id(hosts, etcd):
    room = unique_room()
    try:
        assert run(hosts["h1"], room, "true").status == 200
        assert hosts["h1"].delete(f"/api/rooms/{room}").status == 200
        assert etcd.get(f"/roombox/rooms/{room}") is None
        r = run(hosts["h2"], room, "echo again")
        assert r.status == 200 and r.header("X-Roombox-Host") == "h2", r
    finally:
        owner_cleanup(hosts, room)


def test_a_room_moving_answers_503_with_retry_after(hosts, etcd):
    room = unique_room()
    try:
        assert run(hosts["h1"], room, "true").status == 200
        etcd.ctl("put", f"/roombox/moving/{room}", '{"to":"h2"}')
        wait_until(lambda: run(hosts["h1"], room, "true").status == 503, 10,
                   "h1 to see the move")
        r = run(hosts["h1"], room, "true")
        assert int(r.header("Retry-After")) > 0
        assert "moving" in r.json["error"]
        etcd.ctl("del", f"/roombox/moving/{room}")
        wait_until(lambda: run(hosts["h1"], room, "true").status == 200, 10,
                   "h1 to serve the room again")
    finally:
        etcd.ctl("del", f"/roombox/moving/{room}")
        owner_cleanup(hosts, room)


def test_a_copy_older_than_the_record_is_never_served(hosts, etcd):
    room = unique_room()
    try:
        assert run(hosts["h1"], room, "echo v1 > /workspace/f").status == 200
        # the room was restored elsewhere and moved back: etcd's epoch is
        # past the one h1's copy has
        etcd.ctl("put", f"/roombox/rooms/{room}", '{"host":"h1","epoch":3}')
        wait_until(lambda: run(hosts["h1"], room, "cat /workspace/f").status == 503, 10,
                   "h1 to refuse its old copy")
        r = run(hosts["h1"], room, "cat /workspace/f")
        assert "older" in r.json["error"] and "epoch 1" in r.json["error"], r
        r = hosts["h1"].get(f"/api/rooms/{room}")
        assert r.status == 503, r
    finally:
        etcd.ctl("put", f"/roombox/rooms/{room}", '{"host":"h1","epoch":1}')
        wait_until(lambda: run(hosts["h1"], room, "true").status == 200, 10, "h1 to serve again")
        owner_cleanup(hosts, room)


def test_without_etcd_existing_rooms_serve_and_new_ones_get_503(hosts, etcd):
    room = unique_room()
    try:
        assert run(hosts["h1"], room, "echo before").status == 200
        etcd.stop()
        try:
            r = run(hosts["h1"], room, "echo during")
            assert r.status == 200 and r.json["result"]["stdout"] == "during\n", r
            new = unique_room()
            r = run(hosts["h1"], new, "true")
            assert r.status == 503, r
            assert int(r.header("Retry-After")) > 0
            assert "etcd" in r.json["error"] and "existing rooms keep serving" in r.json["error"]
            assert not hosts["h1"].stack.room_state_dir(new).exists()
            r = hosts["h1"].post("/api/rooms")
            assert r.status == 503, r
        finally:
            etcd.start()
        new = unique_room()
        wait_until(lambda: run(hosts["h1"], new, "true").status == 200, 20,
                   "a new room once etcd is back")
        owner_cleanup(hosts, new)
    finally:
        owner_cleanup(hosts, room)


def move_header(room, src, dst, epoch, key=KEY, when=None):
    when = int(time.time()) if when is None else when
    sig = hmac.new(key, f"roombox-move {room} {src} {dst} {epoch} {when}".encode(),
                   hashlib.sha256).hexdigest()
    return {"X-Roombox-Move": f"{src} {dst} {epoch} {when} {sig}"}


def export_signed(src, room, a, b, epoch=2):
    """The mover's export of room at src (host a), signed for b: the
    archive's answer, a 200."""
    exp = src.request("GET", f"/api/rooms/{room}/export", auth=False, check_json=False,
                      headers=move_header(room, a, b, epoch))
    assert exp.status == 200, exp
    return exp


def import_signed(dst, room, a, b, body, epoch=2):
    """The mover's import of the archive at dst (host b): a 201."""
    imp = dst.request("PUT", f"/api/rooms/{room}/import", auth=False, data=body,
                      headers={**move_header(room, a, b, epoch),
                               "Content-Type": "application/x-roombox-room"})
    assert imp.status == 201, imp
    return imp


def commit(etcd, room, host, epoch=2):
    """The mover's commit: the record names host at epoch and the moving
    key goes, in one transaction compared on the record's revision."""
    key = f"/roombox/rooms/{room}"
    out = etcd.txn({
        "compare": [{"key": b64(key), "target": "MOD", "result": "EQUAL",
                     "mod_revision": etcd.mod_revision(key)}],
        "success": [{"request_put": {"key": b64(key),
                                     "value": b64(json.dumps({"host": host, "epoch": epoch},
                                                             separators=(",", ":")))}},
                    {"request_delete_range": {"key": b64(f"/roombox/moving/{room}")}}]})
    assert out.get("succeeded") is True, out


def test_a_room_moves_by_a_signed_export_and_import_and_the_epoch_bump(hosts, etcd):
    """The mover's steps (roomboxctl move): the moving key, the source's
    export and the target's import signed with the hosts' secret, then the
    commit in etcd; the room's files and messages come along, the target
    serves it, the source answers 421 and keeps only a tombstone."""
    room = unique_room()
    h1, h2 = hosts["h1"], hosts["h2"]
    try:
        assert run(h1, room, "echo moved > /workspace/f").status == 200
        assert h1.post(f"/api/rooms/{room}/messages", {"role": "user", "content": "hi"}).status == 201
        # its labels and own limits are the room's, and move with it
        r = h1.request("PATCH", f"/api/rooms/{room}", {"labels": {"team": "blue"},
                                                        "limits": {"pids": 201, "cpu": 0.5}})
        assert r.status == 200, r
        settings = {k: r.json[k] for k in ("labels", "limits")}
        # a write in flight when the move freezes the room is acknowledged
        # and must move with it
        late = {}
        writer = threading.Thread(target=lambda: late.update(r=run(
            h1, room, "echo started > /workspace/g; sleep 1.5; echo acked >> /workspace/f")))
        writer.start()
        wait_until(lambda: run(h1, room, "cat /workspace/g").json["result"]["stdout"] == "started\n",
                   10, "the writer to start")
        etcd.ctl("put", f"/roombox/moving/{room}", '{"to":"h2"}')
        wait_until(lambda: run(h1, room, "true").status == 503, 10, "h1 to freeze the room")

        # a move signed with another key, or for records etcd does not hold
        bad = h1.request("GET", f"/api/rooms/{room}/export", auth=False, check_json=True,
                         headers=move_header(room, "h1", "h2", 2, key=b"wrong"))
        assert bad.status == 403 and "signature" in bad.json["error"], bad
        bad = h1.request("GET", f"/api/rooms/{room}/export", auth=False,
                         headers=move_header(room, "h1", "h2", 5))
        assert bad.status == 409, bad

        exp = export_signed(h1, room, "h1", "h2")
        assert exp.header("X-Roombox-Host") == "h1"
        writer.join()
        assert late["r"].status == 200, late["r"]
        import_signed(h2, room, "h1", "h2", exp.body)
        # imported, not yet committed: the room still moves, on every host
        assert run(h2, room, "true").status == 503
        commit(etcd, room, "h2")

        wait_until(lambda: run(h2, room, "true").status == 200, 10, "h2 to serve the room")
        r = run(h2, room, "cat /workspace/f")
        assert r.json["result"]["stdout"] == "moved\nacked\n", r
        msgs = h2.get(f"/api/rooms/{room}/messages").json
        assert any(m.get("content") == "hi" for m in msgs["messages"]), msgs
        st = h2.get(f"/api/rooms/{room}").json
        assert {k: st[k] for k in ("labels", "limits")} == settings, (st, settings)
        assert settings["labels"] == {"team": "blue"} and settings["limits"]["pids"] == 201
        r = run(h1, room, "true")
        assert r.status == 421 and r.json == {"error": f"room {room} lives on host h2"}, r
        wait_until(lambda: not h1.stack.room_state_dir(room).exists(), 20,
                   "h1 to remove its superseded copy")
        assert (h1.stack.state_dir / "epochs" / room).read_text() == "1\n"   # the tombstone
        assert (h2.stack.state_dir / "epochs" / room).read_text() == "2\n"
    finally:
        etcd.ctl("del", f"/roombox/moving/{room}")
        owner_cleanup(hosts, room)


def test_a_move_given_up_before_its_commit_leaves_the_room_where_it_was(hosts, etcd):
    """The import went through, then the mover gave up (the moving key
    deleted, no commit): the source serves the room as it was, and the
    target's copy, never served, is removed."""
    room = unique_room()
    h1, h2 = hosts["h1"], hosts["h2"]
    try:
        assert run(h1, room, "echo stays > /workspace/f").status == 200
        etcd.ctl("put", f"/roombox/moving/{room}", '{"to":"h2"}')
        wait_until(lambda: run(h1, room, "true").status == 503, 10, "h1 to freeze the room")
        import_signed(h2, room, "h1", "h2", export_signed(h1, room, "h1", "h2").body)
        assert h2.stack.room_state_dir(room).exists()
        etcd.ctl("del", f"/roombox/moving/{room}")
        wait_until(lambda: run(h1, room, "true").status == 200, 10, "h1 to serve again")
        assert run(h1, room, "cat /workspace/f").json["result"]["stdout"] == "stays\n"
        assert etcd.get(f"/roombox/rooms/{room}") == {"host": "h1", "epoch": 1}
        # h2 sees the move given up when its own watch brings it, which on
        # a loaded host may be after h1's
        wait_until(lambda: run(h2, room, "true").status != 503, 10, "h2 to see the move given up")
        r = run(h2, room, "true")
        assert r.status == 421 and r.json == {"error": f"room {room} lives on host h1"}, r
        wait_until(lambda: not h2.stack.room_state_dir(room).exists(), 20,
                   "h2 to remove the copy it was never to serve")
    finally:
        etcd.ctl("del", f"/roombox/moving/{room}")
        owner_cleanup(hosts, room)


class WatchHold:
    """A TCP relay in front of etcd for one host: while held, what etcd
    sends on a watch stream is kept back, so the host's cache lags etcd
    (as a watch behind on a loaded host, or on a slow member, does); every
    other call passes at once."""

    def __init__(self, etcd_url):
        self.target = ("127.0.0.1", int(etcd_url.rsplit(":", 1)[1]))
        self.cond = threading.Condition()
        self.holding = False
        self.watches = 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def hold(self, on):
        with self.cond:
            self.holding = on
            self.cond.notify_all()

    def _accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        try:
            u = socket.create_connection(self.target)
        except OSError:
            c.close()
            return
        first = c.recv(65536)
        watch = first.startswith(b"POST /v3/watch")
        if watch:
            with self.cond:
                self.watches += 1
        u.sendall(first)
        threading.Thread(target=self._pipe, args=(c, u, False), daemon=True).start()
        self._pipe(u, c, watch)

    def _pipe(self, src, dst, holdable):
        try:
            while data := src.recv(65536):
                if holdable:
                    with self.cond:
                        self.cond.wait_for(lambda: not self.holding, 120)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self):
        self.hold(False)
        self.sock.close()


@contextlib.contextmanager
def host_behind(name, etcd, hosts, room):
    """One more host whose etcd traffic goes through a WatchHold relay:
    (relay, its stack, its client), registered and watching; afterwards
    the room cleaned up wherever it is and the host stopped."""
    relay = WatchHold(etcd.url)
    stack = cluster_stack(name, etcd, etcd_urls=relay.url)
    c = Client(stack)
    try:
        wait_until(lambda: etcd.get(f"/roombox/hosts/{name}"), 20, f"{name} to register")
        wait_until(lambda: relay.watches > 0, 20, f"{name}'s watch to start")
        yield relay, stack, c
    finally:
        relay.close()
        etcd.ctl("del", f"/roombox/moving/{room}")
        owner_cleanup({**hosts, name: c}, room)
        problems = stack.stop()
        assert not problems, problems


def test_an_import_whose_watch_lags_keeps_its_copy_and_serves_it_after_the_commit(hosts, etcd):
    """The target's watch has not brought the moving key when the import
    ends (the import's admission read it from etcd itself): the copy it
    just made is kept, not taken for one the move left behind, and after
    the commit the target serves the room with its files, not an empty
    one."""
    room = unique_room()
    h1 = hosts["h1"]
    with host_behind("h3", etcd, hosts, room) as (relay, s3, h3):
        assert run(h1, room, "echo moved > /workspace/f").status == 200
        wait_until(lambda: run(h3, room, "true").status == 421, 10, "h3 to see the room on h1")
        relay.hold(True)
        etcd.ctl("put", f"/roombox/moving/{room}", '{"to":"h3"}')
        wait_until(lambda: run(h1, room, "true").status == 503, 10, "h1 to freeze the room")
        # the control: h3's cache has not seen the move
        r = run(h3, room, "true")
        assert r.status == 421 and r.json == {"error": f"room {room} lives on host h1"}, r
        import_signed(h3, room, "h1", "h3", export_signed(h1, room, "h1", "h3").body)
        log = s3.dir / "fcgi.log"
        said = lambda: [l for l in log.read_text(errors="replace").splitlines()
                        if f"room {room}: cluster: " in l and ("kept" in l or "removed" in l)]
        wait_until(said, 20, "h3 to decide on its copy")
        assert "kept: etcd has a move of it in flight" in said()[0], said()
        assert s3.room_state_dir(room).exists()
        commit(etcd, room, "h3")
        relay.hold(False)
        wait_until(lambda: run(h3, room, "true").status == 200, 10, "h3 to serve the room")
        r = run(h3, room, "cat /workspace/f")
        assert r.json["result"]["stdout"] == "moved\n", r


def test_a_source_whose_watch_lags_takes_no_write_once_its_export_began(hosts, etcd):
    """The source's watch has not brought the moving key when the mover's
    export comes (the export's admission reads it from etcd itself): from
    that export on the source answers the room 503, as it does once its
    watch has the key.  Before, it went on taking writes whose data the
    export's cut had missed: acknowledged, then lost with the move."""
    room = unique_room()
    with host_behind("h6", etcd, hosts, room) as (relay, s6, h6):
        assert run(h6, room, "echo early > /workspace/f").status == 200
        relay.hold(True)
        etcd.ctl("put", f"/roombox/moving/{room}", '{"to":"h2"}')
        # the control: h6's cache has not seen the move
        assert run(h6, room, "true").status == 200
        export_signed(h6, room, "h6", "h2")
        r = run(h6, room, "echo late >> /workspace/f")
        assert r.status == 503 and "moving" in r.json["error"], r
        assert int(r.header("Retry-After")) > 0, r
        relay.hold(False)


def test_a_copy_moved_away_and_cleaned_up_there_is_never_served_again(hosts, etcd):
    """A room moved from h5 to h2 and cleaned up on h2 before h5's watch
    brought the move (a drain's backlog, a watch behind): h5 finds no
    record at all where it saw one naming h2.  Its copy is removed, not
    kept, so that the id's next first request on h5 makes a new room and
    never serves the deleted one's files."""
    room = unique_room()
    h2 = hosts["h2"]
    with host_behind("h5", etcd, hosts, room) as (relay, s5, h5):
        assert run(h5, room, "echo secret > /workspace/f").status == 200
        etcd.ctl("put", f"/roombox/moving/{room}", '{"to":"h2"}')
        wait_until(lambda: run(h5, room, "true").status == 503, 10, "h5 to freeze the room")
        relay.hold(True)
        import_signed(h2, room, "h5", "h2", export_signed(h5, room, "h5", "h2").body)
        commit(etcd, room, "h2")
        wait_until(lambda: run(h2, room, "true").status == 200, 10, "h2 to serve the room")
        assert h2.delete(f"/api/rooms/{room}").status == 200
        assert etcd.get(f"/roombox/rooms/{room}") is None
        assert s5.room_state_dir(room).exists()   # the control: h5 has seen none of it
        relay.hold(False)
        wait_until(lambda: not s5.room_state_dir(room).exists(), 20,
                   "h5 to remove the copy of a room cleaned up where it moved")
        r = run(h5, room, "cat /workspace/f 2>&1 || echo none")
        assert r.status == 200 and "secret" not in r.json["result"]["stdout"], r


def test_a_host_in_maintenance_takes_no_new_room_and_keeps_serving_its_own(hosts, etcd):
    room, new = unique_room(), unique_room()
    h1 = hosts["h1"]
    url = h1.stack.base_url
    probes = []
    try:
        assert run(h1, room, "true").status == 200
        etcd.ctl("put", "--ignore-lease", "/roombox/hosts/h1", json.dumps({"url": url, "state": "maint"}))
        # each probe a new id: one that came before h1 saw its maint is
        # placed (and cleaned up below)

        def refused():
            probes.append(unique_room())
            return run(h1, probes[-1], "true").status == 503
        wait_until(refused, 10, "h1 to see its maint")
        r = run(h1, new, "true")
        assert "maintenance" in r.json["error"] and int(r.header("Retry-After")) > 0, r
        assert etcd.get(f"/roombox/rooms/{new}") is None
        assert run(h1, room, "true").status == 200
    finally:
        etcd.ctl("put", "--ignore-lease", "/roombox/hosts/h1", json.dumps({"url": url, "state": "ready"}))
        wait_until(lambda: run(h1, room, "true").status == 200 and
                   run(h1, new, "true").status == 200, 10, "h1 ready again")
        for r in [room, new, *probes]:
            owner_cleanup(hosts, r)


def test_a_drained_host_stays_drained_when_its_lease_runs_out(hosts, etcd):
    """A host's record, its state with it, lives under its lease: a lease
    that runs out (etcd away longer than its TTL, or a restart that long:
    the usual maintenance reboot) takes it.  The host registers again as it
    last knew itself, "maint", never "ready" on its own."""
    s4 = cluster_stack("h4", etcd)
    h4 = Client(s4)
    key = "/roombox/hosts/h4"
    probes = []

    def refused():
        probes.append(unique_room())
        return run(h4, probes[-1], "true").status == 503

    def revoke():
        lease = json.loads(etcd.ctl("get", key, "-w", "json"))["kvs"][0]["lease"]
        etcd.ctl("lease", "revoke", format(lease, "x"))
        assert etcd.get(key) is None

    try:
        wait_until(lambda: etcd.get(key), 20, "h4 to register")
        url = s4.base_url
        etcd.ctl("put", "--ignore-lease", key, json.dumps({"url": url, "state": "maint"}))
        wait_until(refused, 10, "h4 to see its maint")
        revoke()                            # as etcd does when the lease runs out
        wait_until(lambda: etcd.get(key), 20, "h4 to register again")
        assert etcd.get(key) == {"url": url, "state": "maint"}
        assert refused(), "h4 took a new room"
        s4.restart_fcgi(while_down=revoke)  # down longer than its lease
        wait_until(lambda: etcd.get(key), 20, "h4 to register after its restart")
        assert etcd.get(key) == {"url": url, "state": "maint"}
        assert refused(), "h4 took a new room after its restart"
        etcd.ctl("put", "--ignore-lease", key, json.dumps({"url": url, "state": "ready"}))
        wait_until(lambda: run(h4, probes[-1], "true").status == 200, 10, "h4 ready again")
    finally:
        for r in probes:
            owner_cleanup({"h4": h4}, r)
        problems = s4.stop()
        assert not problems, problems


def test_with_three_etcd_members_one_down_all_works_two_down_only_creating_stops():
    """A host given three etcd members: the member it talks to stopped, it
    goes on with the others; two stopped (no quorum), a new room is a clear
    503 and an existing room keeps serving."""
    if not ETCD:
        pytest.fail("etcd is not installed (tools/deps.sh: etcd-server)")
    members = [Etcd(f"m{i}") for i in range(3)]
    for m in members:
        m.initial_cluster = ",".join(f"{x.name}={x.peer}" for x in members)
        m.cluster_token = members[0].dir.name
    stack = None
    room = placed = "none"
    try:
        for m in members:
            m.spawn()
        for m in members:
            wait_until(m.healthy, 30, f"etcd member {m.name} to answer")
        stack = cluster_stack("h3", None, etcd_urls=" ".join(m.url for m in members))
        h3 = Client(stack)
        room, placed = unique_room(), unique_room()
        assert run(h3, room, "true").status == 200
        members[0].stop()   # the one it talked to first
        r = run(h3, placed, "echo placed")
        assert r.status == 200, r
        assert run(h3, room, "true").status == 200
        members[1].stop()   # no quorum left
        r = run(h3, unique_room(), "true")
        assert r.status == 503 and "etcd" in r.json["error"] and int(r.header("Retry-After")) > 0, r
        assert r.elapsed < 5, f"the 503 took {r.elapsed:.1f} s"
        r = run(h3, room, "echo still")
        assert r.status == 200 and r.json["result"]["stdout"] == "still\n", r
    finally:
        problems = []
        if stack:
            for r in (room, placed):
                Client(stack).delete(f"/api/rooms/{r}")
            problems = stack.stop()
        for m in members:
            m.stop()
            shutil.rmtree(m.dir, ignore_errors=True)
        assert not problems, problems
