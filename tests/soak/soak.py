"""make soak: mixed load with faults over a pool of rooms for SOAK_S
seconds, watching that nothing grows and no acknowledged write is lost.

Theory of operation.  One stack as the integration tests make it
(tests/integration/conftest.py: nginx -> roombox-fcgi -> roombox-helper, in
a fresh /tmp/rbx-* folder), with network = egress, a short idle_timeout and
small limits, plus a test host of the soak's own: a network namespace joined
by a veth pair, holding 203.0.113.150 (TEST-NET-3, "the internet" to the
rooms) behind a route of the host's, serving a 2 MiB file.  No packet
leaves this machine; the rooms' `dns` is the test host, where nothing
answers on port 53.

Threads:
  workers (3)    each takes a room of the pool (a lease: one user of a pool
                 room at a time, so a check that fails is the product's)
                 and does one request of a random kind: exec, streamed exec,
                 files up and down (up to 4 MiB), a managed process and its
                 logs, a preview (a server in the room behind a preview URL,
                 several requests over one kept connection through nginx), a
                 download from the test host, messages with run tags, status,
                 or the room's recycling (destroyed, checked gone, replaced).
  appenders (2)  one room each, never leased: numbered lines appended to a
                 file by exec (`echo N >> f && sync`) or by files PUT (the
                 whole file with the line added), every 2xx recorded; a 503
                 with Retry-After is retried, any other failure is not
                 acknowledged and the next number is used.
  faults (1)     in turn: SIGKILL a pool room's keeper (its files must stay),
                 SIGKILL an appender's keeper under load, an idle stop (the
                 room rests past idle_timeout, is seen stopped, comes back
                 with files and session), and a room crossing each limit
                 (memory, pids, disk, output, exec timeout) and working
                 after.  roombox-fcgi is restarted (SIGKILL, then SIGTERM,
                 alternately, as stack.restart_fcgi does) at set points in
                 the first half of the run: requests that overlapped a
                 restart may fail without counting against the product.
  sampler (main) every minute, at the start and at the end: pauses the load
                 (waits for requests in flight), wakes every room, checks
                 that the API lists exactly the rooms the driver has, and
                 records the resources of judge.py.

At the end: every appender's file is read back and checked, every room is
destroyed and checked gone, the stack is stopped and swept (anything left
is a failure), and the run fails on growth, on a lost acknowledged append,
or on any request that failed outside a fault's reach.

SOAK_INJECT (the soak's self-test: the run must fail, saying why):
  lose-append   after an append is acknowledged, the driver deletes that
                line from the file itself (as a lost write would)
  leak-room     every minute the driver makes a room with a running process
                and forgets it (a leaked room)
"""

import base64
import hashlib
import http.client
import importlib.util
import json
import os
import random
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import judge  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "roombox_integration_conftest", HERE.parent / "integration" / "conftest.py")
rbx = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = rbx
_spec.loader.exec_module(rbx)

POOL = int(os.environ.get("SOAK_ROOMS", "12"))
WORKERS = int(os.environ.get("SOAK_WORKERS", "3"))
SAMPLE_S = 60
# roombox-fcgi signals a DELETEd process's tree and KILLs it this much later,
# from a thread of its own (KILL_GRACE_S in fcgi-app/processes/processes.c)
KILL_GRACE_S = 5
PREVIEW_QUIET_S = 36
INJECT = set(filter(None, os.environ.get("SOAK_INJECT", "").split(",")))

NET_ADDR = "203.0.113.150"              # not the security suite's .10 nor bench's .110
LINK_HOST, LINK_NS = "198.51.100.233", "198.51.100.234"
BLOB_SIZE = 2 << 20
IDLE_S = 10
GONE_S = 60     # a destroyed room's processes must be gone within this
MEMORY_LIMIT = 128 << 20
PIDS_LIMIT = 64
DISK_LIMIT = 64 << 20
OUTPUT_LIMIT = 256 << 10
CONFIG = {
    "network": "egress",
    "dns": NET_ADDR,
    "idle_timeout": f"{IDLE_S}s",
    "memory_limit": "128M",
    "pids_limit": str(PIDS_LIMIT),
    "disk_limit": "64M",
    "output_limit": "256K",
    "log_max": "64K",
    "max_rooms": "64",
    "max_file": "16M",
}

WEB_CMD = ("mkdir -p /workspace/www && echo \"$ROOM\" > /workspace/www/hello.txt && "
           "for i in 1 2 3 4 5 6 7 8; do head -c $((i * 3000)) /dev/zero | tr '\\0' $i "
           "> /workspace/www/p$i.txt; done && "
           "exec python3 -m http.server 8000 --bind 127.0.0.1 --directory /workspace/www "
           ">/dev/null 2>&1")


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


def log(msg):
    print(f"[soak {time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Failed(Exception):
    """A check of the soak's own failed: what the product answered is not
    what it promises."""


def need(cond, msg):
    if not cond:
        raise Failed(msg)


# ---------------------------------------------------------------- the test host

class TestHost:
    """A network namespace on a veth pair, holding NET_ADDR behind a route
    of the host's own, with an HTTP server of a 2 MiB file."""

    def __init__(self, tmp):
        sfx = secrets.token_hex(2)
        self.ns, self.ifname = f"soak-{sfx}", f"soak{sfx}"
        self.www = tmp / "www"
        self.proc = None
        self.made = False
        with open("/proc/sys/net/ipv4/ip_forward") as f:
            self.forward_before = f.read().strip()

    def run(self, *argv):
        r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=30)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(map(str, argv))}: {r.stderr.strip()}")

    def start(self):
        r = subprocess.run(["ip", "route", "show", f"{NET_ADDR}/32"], capture_output=True, text=True)
        if r.stdout.strip():
            raise RuntimeError(f"{NET_ADDR} is routed already ({r.stdout.strip()}): "
                               "is another soak running on this machine?")
        self.www.mkdir()
        blob = os.urandom(BLOB_SIZE)
        (self.www / "blob.bin").write_bytes(blob)
        self.sha = hashlib.sha256(blob).hexdigest()
        self.run("ip", "netns", "add", self.ns)
        self.made = True
        self.run("ip", "link", "add", self.ifname, "type", "veth", "peer", "name", "eth0",
                 "netns", self.ns)
        self.run("ip", "addr", "add", f"{LINK_HOST}/30", "dev", self.ifname)
        self.run("ip", "link", "set", self.ifname, "up")
        self.run("ip", "-n", self.ns, "link", "set", "lo", "up")
        self.run("ip", "-n", self.ns, "addr", "add", f"{LINK_NS}/30", "dev", "eth0")
        self.run("ip", "-n", self.ns, "addr", "add", f"{NET_ADDR}/32", "dev", "eth0")
        self.run("ip", "-n", self.ns, "link", "set", "eth0", "up")
        self.run("ip", "route", "add", f"{NET_ADDR}/32", "via", LINK_NS, "dev", self.ifname)
        out = open(self.www.parent / "testhost.log", "wb")
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns, "/usr/bin/python3", "-m", "http.server", "80",
             "--bind", NET_ADDR, "--directory", str(self.www)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True)
        out.close()

        def listening():
            r = subprocess.run(["ip", "netns", "exec", self.ns, "ss", "-Hlnt"],
                               capture_output=True, text=True)
            return f"{NET_ADDR}:80" in r.stdout
        rbx.wait_until(listening, 15, "the test host's HTTP server")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
        if self.made:
            subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)
        subprocess.run(["ip", "link", "del", self.ifname], capture_output=True)
        with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
            f.write(self.forward_before)


# ---------------------------------------------------------------- requests

class Api:
    """conftest's Client (a fresh connection per request, JSON checked),
    with 503 + Retry-After retried a few times."""

    def __init__(self, stack):
        self.c = rbx.Client(stack)

    def call(self, method, path, body=rbx.NO_BODY, **kw):
        for _ in range(6):
            r = self.c.request(method, path, body, **kw)
            if r.status == 503 and r.header("retry-after"):
                time.sleep(min(5, int(r.header("retry-after") or 1)))
                continue
            return r
        return r

    def exec(self, room, cmd, **fields):
        r = self.call("POST", f"/api/rooms/{room}/sandbox/exec", dict(cmd=cmd, **fields))
        need(r.status == 200, f"exec {cmd[:60]!r} in {room}: {r.status} {r.json}")
        return r.json["result"]

    def sh(self, room, cmd, **fields):
        res = self.exec(room, cmd, **fields)
        need(res["exitCode"] == 0, f"{cmd[:60]!r} in {room} failed: {res}")
        return res["stdout"]


# ---------------------------------------------------------------- the run

class Gate:
    """Requests hold it shared; the sampler holds it alone, so that a
    sample sees no request in flight."""

    def __init__(self):
        self.cv = threading.Condition()
        self.active = 0
        self.closed = False

    def enter(self):
        with self.cv:
            while self.closed:
                self.cv.wait()
            self.active += 1

    def leave(self):
        with self.cv:
            self.active -= 1
            self.cv.notify_all()

    def close(self):
        with self.cv:
            self.closed = True
            while self.active:
                self.cv.wait()

    def open(self):
        with self.cv:
            self.closed = False
            self.cv.notify_all()


class Slot:
    def __init__(self, index):
        self.index = index
        self.lock = threading.Lock()
        self.room = None
        self.gen = 0
        self.token = None       # preview token of port 8000
        self.counter = 0


class Soak:
    def __init__(self, seconds):
        self.seconds = seconds
        self.run_id = secrets.token_hex(3)
        self.stack = rbx.Stack("nginx", CONFIG)
        self.host = TestHost(self.stack.dir)
        self.api = Api(self.stack)
        self.gate = Gate()
        self.stopping = threading.Event()
        self.slots = [Slot(i) for i in range(POOL)]
        self.stats = {}           # kind -> [ok, forgiven, failed]
        self.failures = []        # (kind, room, message)
        self.faults = {}          # kind -> count
        self.lock = threading.Lock()
        self.disrupt = 0          # odd while roombox-fcgi restarts
        self.disrupt_lock = threading.Lock()
        self.appenders = []
        self.leaked = []
        self.samples = []
        self.t0 = None
        self.iid = None
        self.next_sample = None
        self.slow_ends = []       # (seconds, room, what was left after 5 s)
        self.orphans_possible = 0 # POST /api/rooms that a restart cut off

    # -- bookkeeping

    def count(self, kind, outcome, room=None, msg=None):
        with self.lock:
            row = self.stats.setdefault(kind, [0, 0, 0])
            row[("ok", "forgiven", "failed").index(outcome)] += 1
            if outcome == "failed":
                self.failures.append((kind, room, msg))
                log(f"FAILED {kind} in {room}: {msg}")

    def disrupted_since(self, mark):
        with self.disrupt_lock:
            return self.disrupt != mark or self.disrupt % 2 == 1

    def mark(self):
        with self.disrupt_lock:
            return self.disrupt

    def attempt(self, kind, room, fn, *args):
        """Run one request kind; classify what happened."""
        m = self.mark()
        try:
            fn(*args)
            self.count(kind, "ok")
            return True
        except Exception as e:     # noqa: BLE001 -- every failure is counted
            msg = f"{type(e).__name__}: {e}"[:600]
            if self.disrupted_since(m):
                self.count(kind, "forgiven")
            else:
                self.count(kind, "failed", room, msg)
            return False

    def now(self):
        return time.monotonic() - self.t0

    def preview_quiet(self):
        """No preview requests in the last PREVIEW_QUIET_S before a sample:
        a room's connector (a helper holding a pool of sockets made in the
        room, in roombox-fcgi's descriptors) ends 30 s after its last use,
        so a sample finds none and roombox-fcgi's descriptors compare."""
        ns = self.next_sample
        return ns is not None and ns - time.monotonic() < PREVIEW_QUIET_S

    # -- rooms

    def new_room(self, slot):
        slot.gen += 1
        slot.token = None
        if slot.gen % 2 == 0:
            mark = self.mark()
            try:
                r = self.api.call("POST", "/api/rooms")
                need(r.status == 201, f"POST /api/rooms: {r.status} {r.json}")
            except Exception:
                # roombox-fcgi killed after the helper made the room, before
                # the 201: the room exists and only the API's list names it
                if self.disrupted_since(mark):
                    with self.lock:
                        self.orphans_possible += 1
                raise
            slot.room = r.json["roomId"]
            need(r.json["sandboxName"] == f"sandbox-{slot.room}", r.json)
        else:
            slot.room = f"soak-{self.run_id}-p{slot.index}-{slot.gen}"
            self.api.sh(slot.room, "true")

    def rooms(self):
        # a slot whose recycling a restart cut off may hold no room for a while
        return [s.room for s in self.slots if s.room] + [a.room for a in self.appenders] \
            + list(self.leaked)

    # -- request kinds (each on a leased pool room)

    def op_exec(self, s):
        x, y = random.randrange(1000), random.randrange(1000)
        kind = random.randrange(3)
        if kind == 0:
            res = self.api.exec(s.room, f"echo $(({x}*{y})); echo err >&2")
            need(res["stdout"] == f"{x * y}\n" and res["stderr"] == "err\n"
                 and res["exitCode"] == 0, f"exec answered {res}")
        elif kind == 1:
            data = secrets.token_hex(200)
            res = self.api.exec(s.room, "cat; echo; echo $V; exit 3", stdin=data,
                                env={"V": str(x)})
            need(res["stdout"] == f"{data}\n{x}\n" and res["exitCode"] == 3
                 and res["success"] is False, f"exec answered {res}")
        else:
            res = self.api.exec(s.room, f"printf '\\377{x}'", encoding="base64")
            need(base64.b64decode(res["stdout"]) == b"\xff" + str(x).encode(), f"exec answered {res}")

    def op_stream(self, s):
        conn = http.client.HTTPConnection("127.0.0.1", self.stack.port, timeout=60)
        try:
            body = json.dumps({"cmd": "for i in 1 2 3 4 5; do echo s$i; sleep 0.05; done; echo e >&2"})
            conn.request("POST", f"/api/rooms/{s.room}/sandbox/exec", body=body, headers={
                "Authorization": f"Bearer {self.stack.token}", "Content-Type": "application/json",
                "Accept": "text/event-stream"})
            r = conn.getresponse()
            raw_body = r.read()
            need(r.status == 200 and r.getheader("Content-Type", "").startswith("text/event-stream"),
                 f"stream: {r.status} {r.getheader('Content-Type')} {raw_body[:200]!r}")
            events = []
            for raw in raw_body.decode().split("\n\n"):
                for line in raw.split("\n"):
                    if line.startswith("data: "):
                        events.append(json.loads(line[6:]))
        finally:
            conn.close()
        need(events and events[0]["type"] == "start", f"stream began with {raw_body[:300]!r}")
        need(events[-1]["type"] == "complete", f"stream ended with {events[-1:]}")
        out = "".join(e["data"] for e in events if e["type"] == "stdout")
        want = "".join(f"s{i}\n" for i in range(1, 6))
        res = events[-1]["result"]
        need(out == want and res["stdout"] == want and res["stderr"] == "e\n"
             and res["exitCode"] == 0, f"stream events {events}")

    def op_files(self, s):
        s.counter += 1
        size = random.randrange(1, 64 << 10) if random.random() < 0.8 \
            else random.randrange(1 << 20, 4 << 20)
        data = os.urandom(size)
        name = f"f{s.counter}.bin"
        base = f"/api/rooms/{s.room}/sandbox/files"
        r = self.api.call("PUT", f"{base}/up/{name}", data=data,
                          headers={"Content-Type": "application/octet-stream"})
        need(r.status == 201 and r.json.get("size") == size, f"PUT {name}: {r.status} {r.json}")
        r = self.api.call("GET", f"{base}/up/{name}", check_json=False)
        need(r.status == 200 and r.body == data,
             f"GET {name}: {r.status}, {len(r.body)} bytes of {size}, same: {r.body == data}")
        if random.random() < 0.3:
            r = self.api.call("GET", f"{base}/up/")
            need(r.status == 200 and name in [e["name"] for e in r.json["entries"]],
                 f"list: {r.status} {str(r.json)[:300]}")
        r = self.api.call("POST", f"{base}/up/{name}", {"to": f"up/moved-{name}"})
        need(r.status == 200 and r.json.get("path") == f"/workspace/up/moved-{name}",
             f"move: {r.status} {r.json}")
        r = self.api.call("DELETE", f"{base}/up/moved-{name}")
        need(r.status == 200 and r.json.get("deleted") == f"/workspace/up/moved-{name}",
             f"delete: {r.status} {r.json}")

    def wait_process(self, s, pid, statuses, timeout=30):
        def ended():
            r = self.api.call("GET", f"/api/rooms/{s.room}/sandbox/processes/{pid}")
            need(r.status == 200, f"GET process {pid}: {r.status} {r.json}")
            return r.json["process"] if r.json["process"]["status"] in statuses else None
        try:
            return rbx.wait_until(ended, timeout, f"process {pid} in {s.room} to end", 0.1)
        except AssertionError as e:
            raise Failed(str(e))

    def op_process(self, s):
        base = f"/api/rooms/{s.room}/sandbox/processes"
        if random.random() < 0.7:
            r = self.api.call("POST", base, {"cmd": "for i in $(seq 1 200); do echo out $i; done; "
                                                    "echo bye >&2; exit 7"})
            need(r.status == 201, f"POST process: {r.status} {r.json}")
            pid = r.json["process"]["id"]
            p = self.wait_process(s, pid, ("exited", "killed", "lost"))
            if not (p["status"] == "exited" and p["exitCode"] == 7):
                r = self.api.call("GET", f"{base}/{pid}/logs")
                raise Failed(f"process ended as {p}; stderr {str(r.json.get('stderr'))[-300:]!r}")
            r = self.api.call("GET", f"{base}/{pid}/logs")
            want = "".join(f"out {i}\n" for i in range(1, 201))
            need(r.status == 200 and r.json["stdout"] == want and r.json["stderr"] == "bye\n",
                 f"logs: {r.status} {str(r.json)[:300]}")
        else:
            r = self.api.call("POST", base, {"cmd": "echo up; exec sleep 300"})
            need(r.status == 201, f"POST process: {r.status} {r.json}")
            pid = r.json["process"]["id"]
            r = self.api.call("DELETE", f"{base}/{pid}?signal=TERM")
            need(r.status == 200, f"DELETE process: {r.status} {r.json}")
            p = self.wait_process(s, pid, ("exited", "killed", "lost"))
            need(p["status"] == "killed" and p["signal"] == "SIGTERM", f"process ended as {p}")

    def preview_get(self, conn, s, path):
        conn.request("GET", f"/preview/{s.token}/{path}")
        r = conn.getresponse()
        return r.status, r.read(), r.will_close

    def op_preview(self, s):
        if s.token is None:
            r = self.api.call("POST", f"/api/rooms/{s.room}/sandbox/ports", {"port": 8000})
            need(r.status in (200, 201), f"expose: {r.status} {r.json}")
            s.token = r.json["token"]
        conn = http.client.HTTPConnection("127.0.0.1", self.stack.port, timeout=30)
        try:
            status, body, _ = self.preview_get(conn, s, "hello.txt")
            if status == 502:       # nothing listens (new room, or its server ended)
                conn.close()
                r = self.api.call("POST", f"/api/rooms/{s.room}/sandbox/processes",
                                  {"cmd": WEB_CMD, "name": "web", "env": {"ROOM": s.room}})
                need(r.status in (201, 409), f"start web: {r.status} {r.json}")

                def answers():
                    c = http.client.HTTPConnection("127.0.0.1", self.stack.port, timeout=30)
                    try:
                        st, b, _ = self.preview_get(c, s, "hello.txt")
                        return (st, b) if st != 502 else None
                    finally:
                        c.close()
                try:
                    status, body = rbx.wait_until(answers, 20, f"the preview of {s.room}", 0.2)
                except AssertionError as e:
                    raise Failed(str(e))
            need(status == 200 and body == f"{s.room}\n".encode(),
                 f"preview hello.txt: {status} {body[:200]!r}")
            closed = 0
            for _ in range(random.randrange(3, 9)):
                i = random.randrange(1, 9)
                st, b, will_close = self.preview_get(conn, s, f"p{i}.txt")
                need(st == 200 and b == str(i).encode() * (i * 3000),
                     f"preview p{i}.txt: {st}, {len(b)} bytes")
                closed += will_close
            need(closed == 0, f"preview: {closed} answers closed the kept connection")
        finally:
            conn.close()

    def op_egress(self, s):
        res = self.api.exec(s.room, f"curl -sS --max-time 30 http://{NET_ADDR}/blob.bin | sha256sum",
                            timeout=60000)
        need(res["exitCode"] == 0 and res["stdout"].split()[:1] == [self.host.sha],
             f"download from the test host: {res}")

    def op_messages(self, s):
        s.counter += 1
        path = f"/api/rooms/{s.room}/messages"
        r = self.api.call("POST", path, {"role": "user", "content": f"hello {s.counter}"})
        need(r.status == 201 and r.json["message"]["content"] == f"hello {s.counter}",
             f"user message: {r.status} {r.json}")
        r = self.api.call("POST", path, {"role": "assistant",
                                         "content": f"Here: <run>echo msg-{s.counter}</run>"})
        want = f"Output (echo msg-{s.counter}):\nmsg-{s.counter}"
        need(r.status == 201 and want in r.json["message"]["content"], f"assistant: {r.status} {r.json}")
        mid = r.json["message"]["id"]
        if random.random() < 0.3:
            r = self.api.call("GET", path)
            need(r.status == 200 and r.json["messages"][-1]["id"] == mid,
                 f"GET messages: {r.status} last {str(r.json.get('messages', [])[-1:])[:200]}")

    def op_status(self, s):
        r = self.api.call("GET", f"/api/rooms/{s.room}")
        need(r.status == 200 and r.json["state"] in ("running", "stopped"), f"status: {r.status} {r.json}")
        r = self.api.call("GET", "/api/rooms")
        need(r.status == 200 and s.room in [x["roomId"] for x in r.json["rooms"]],
             f"GET /api/rooms lacks {s.room}")
        r = self.api.call("GET", "/api/health", auth=False)
        need(r.status == 200 and r.json["ok"] is True, f"health: {r.status} {r.json}")

    def op_recycle(self, s):
        self.destroy(s.room)        # fails: the slot keeps its room, which may still exist
        s.room = None
        self.new_room(s)            # fails: the slot has no room; the next lease makes one

    def left_of(self, room, uid):
        """The processes under the destroyed room's host ids that are not
        another room's: its slot (so its ids) goes to the next new room,
        whose processes are in that room's cgroup from before they take
        the ids."""
        slot = (uid - self.stack.uid_base) // rbx.ROOM_IDS
        try:
            owner = os.readlink(self.stack.state_dir / "slots" / str(slot))
        except OSError:
            owner = None
        left = rbx.procs_of_room(uid)
        if owner is None or owner == room:
            return left
        return [(p, c) for p, c in left if not in_cgroup_of(p, owner)]

    def destroy(self, room):
        """DELETE the room; then none of its processes may be left.  They
        get GONE_S (the integration tests give them 5 s); slower ends are
        counted and the slowest reported."""
        r = self.api.call("GET", f"/api/rooms/{room}")
        uid = self.api.c.room_uid(room) if r.status == 200 else None
        recorded = self.stack.keeper_pid(room)
        before = [p for p, c in rbx.procs_of_room(uid)] if uid is not None else []
        r = self.api.call("DELETE", f"/api/rooms/{room}")
        need(r.status == 200 and r.json == {"cleaned": True, "roomId": room},
             f"DELETE {room}: {r.status} {r.json}")
        if uid is None:
            return
        t = time.monotonic()
        seen = None
        while (left := self.left_of(room, uid)) and time.monotonic() - t < GONE_S:
            if seen is None and time.monotonic() - t > rbx.GONE_TIMEOUT:
                seen = [(pid, cmd, (rbx.proc_status(pid) or {}).get("State"), wchan(pid),
                         "ran before the DELETE" if pid in before else "started after the DELETE",
                         "the room's recorded keeper" if pid == recorded else
                         f"not the recorded keeper ({recorded})")
                        for pid, cmd in left]
                log(f"destroy {room}: after {rbx.GONE_TIMEOUT:.0f} s still running: {seen}; "
                    f"keeping the stack's folder for its logs")
                os.environ["ROOMBOX_KEEP_TMP"] = "1"
            time.sleep(0.05)
        took = time.monotonic() - t
        with self.lock:
            self.slow_ends.append((took, room, seen))
        need(not left, f"destroy {room}: its processes still run {GONE_S} s after the 200: "
                       f"{[(p, c, (rbx.proc_status(p) or {}).get('State'), wchan(p)) for p, c in left]}")

    # SNAPSHOTS GO HERE: once the API has snapshots, forks, export and
    # import, add their kinds to this table (take one, restore it, fork a
    # room, export and import one, each checked against the files it held)
    # and, in finish(), destroy what they made.
    OPS = (("exec", op_exec, 25), ("stream", op_stream, 10), ("files", op_files, 14),
           ("process", op_process, 8), ("preview", op_preview, 12), ("egress", op_egress, 6),
           ("messages", op_messages, 8), ("status", op_status, 4), ("recycle", op_recycle, 2))

    def worker(self):
        kinds = [k for k in self.OPS for _ in range(k[2])]
        while not self.stopping.is_set():
            s = random.choice(self.slots)
            if not s.lock.acquire(timeout=1):
                continue
            try:
                self.gate.enter()
                try:
                    name, fn, _ = random.choice(kinds)
                    while name == "preview" and self.preview_quiet():
                        name, fn, _ = random.choice(kinds)
                    if s.room is None:
                        self.attempt("new-room", None, self.new_room, s)
                    elif not self.attempt(name, s.room, fn, self, s) and name == "recycle" \
                            and s.room is None:
                        self.attempt("new-room", None, self.new_room, s)
                finally:
                    self.gate.leave()
            finally:
                s.lock.release()
            self.stopping.wait(random.uniform(0, 0.3))     # pacing, not synchronisation

    # -- appenders

    class Appender:
        def __init__(self, soak, how):
            self.soak, self.how = soak, how
            self.room = f"soak-{soak.run_id}-append-{how}"
            self.acked = []
            self.unacked = 0
            self.retried = 0
            self.content = b""
            self.n = 0
            self.statuses = {}

        def step(self):
            api = self.soak.api
            self.n += 1
            for _ in range(20):
                try:
                    ok, retry = self.once(api)
                except (OSError, http.client.HTTPException, AssertionError) as e:
                    ok, retry = False, False
                    self.statuses[type(e).__name__] = self.statuses.get(type(e).__name__, 0) + 1
                if not retry:
                    break
                self.retried += 1
            if ok:
                self.acked.append(self.n)
                if "lose-append" in INJECT and len(self.acked) == 20 and self.how == "exec":
                    api.sh(self.room, f"sed -i '/^{self.n}$/d' /workspace/appends.txt")
                    log(f"injected: deleted acknowledged line {self.n} of {self.room}")
            else:
                self.unacked += 1
                if self.how == "files":
                    self.reread(api)

        def once(self, api):
            if self.how == "exec":
                r = api.c.request("POST", f"/api/rooms/{self.room}/sandbox/exec",
                                  {"cmd": f"echo {self.n} >> /workspace/appends.txt && sync"})
            else:
                new = self.content + f"{self.n}\n".encode()
                r = api.c.request("PUT", f"/api/rooms/{self.room}/sandbox/files/appends.txt",
                                  data=new, headers={"Content-Type": "application/octet-stream"})
            self.statuses[r.status] = self.statuses.get(r.status, 0) + 1
            if r.status == 503 and r.header("retry-after"):
                time.sleep(min(5, int(r.header("retry-after"))))
                return False, True
            if self.how == "exec":
                return r.status == 200 and r.json["result"]["exitCode"] == 0, False
            if r.status in (200, 201):
                self.content = new
                return True, False
            return False, False

        def reread(self, api):
            """After a PUT that was not acknowledged the file holds the old
            content or the new: read which."""
            def got():
                try:
                    r = api.c.request("GET", f"/api/rooms/{self.room}/sandbox/files/appends.txt",
                                      check_json=False)
                except (OSError, http.client.HTTPException):
                    return None
                if r.status == 200:
                    return ("file", r.body)
                if r.status == 404:
                    return ("none", b"")
                return None
            _, self.content = rbx.wait_until(got, 60, f"{self.room}'s file to be readable", 0.2)

        def read_back(self):
            r = self.soak.api.call("GET", f"/api/rooms/{self.room}/sandbox/files/appends.txt",
                                   check_json=False)
            need(r.status == 200, f"read back {self.room}: {r.status} {r.body[:200]!r}")
            return r.body.decode().splitlines()

    def appender(self, a):
        while not self.stopping.is_set():
            self.gate.enter()
            try:
                a.step()
            except Exception as e:      # a broken driver must not look like a quiet run
                self.count("append", "failed", a.room, f"driver: {e!r}")
            finally:
                self.gate.leave()
            self.stopping.wait(random.uniform(0.02, 0.15))     # pacing

    # -- faults

    def fault_keeper(self, s):
        mark = secrets.token_hex(8)
        self.api.sh(s.room, f"echo {mark} > /workspace/keeper-mark")
        pid = self.stack.keeper_pid(s.room)
        need(pid, f"no keeper for {s.room}")
        os.kill(pid, signal.SIGKILL)
        try:
            rbx.wait_until(lambda: not rbx.pid_alive(pid), 10, f"keeper {pid} to die")
        except AssertionError as e:
            raise Failed(str(e))
        need(self.api.sh(s.room, "cat /workspace/keeper-mark") == f"{mark}\n",
             f"{s.room}: file lost with its keeper")
        new = self.stack.keeper_pid(s.room)
        need(new and new != pid, f"{s.room}: keeper {pid} -> {new}")

    def fault_keeper_appender(self, _s):
        a = random.choice(self.appenders)
        pid = self.stack.keeper_pid(a.room)
        log(f"killing the keeper ({pid}) of {a.room}, under its appends")
        if pid:
            os.kill(pid, signal.SIGKILL)

    def fault_idle(self, s):
        mark = secrets.token_hex(8)
        self.api.call("DELETE", f"/api/rooms/{s.room}/sandbox/processes/web?signal=KILL")
        self.api.sh(s.room, f"echo {mark} > /workspace/idle-mark; cd /tmp")

        def stopped():
            r = self.api.call("GET", f"/api/rooms/{s.room}")
            need(r.status == 200, f"status {s.room}: {r.status} {r.json}")
            return r.json["state"] == "stopped"
        try:
            rbx.wait_until(stopped, 3 * IDLE_S + 30, f"{s.room} to stop as idle", 0.5)
        except AssertionError as e:
            raise Failed(str(e))
        need(self.stack.keeper_pid(s.room) is None, f"{s.room} stopped but its keeper runs")
        out = self.api.sh(s.room, "pwd; cat /workspace/idle-mark; cd /workspace")
        need(out == f"/tmp\n{mark}\n", f"{s.room} after its idle stop: {out!r}")

    def fault_memory(self, s):
        res = self.api.exec(s.room, f"exec python3 -c 'a = b\"x\" * {2 * MEMORY_LIMIT}; print(len(a))'")
        need(res["exitCode"] == 137 and res["signal"] == "SIGKILL", f"memory hog: {res}")
        self.check_alive(s)

    def fault_pids(self, s):
        uid = self.api.c.room_uid(s.room)
        res = self.api.exec(s.room, "bash -c ':(){ :|:& };:'", timeout=3000)
        need(res["exitCode"] in (0, 124, 137) or res["timedOut"], f"fork bomb: {res}")
        # a command that forks: one that cannot is what frees the room
        self.check_alive(s)
        try:
            rbx.wait_until(lambda: len(rbx.procs_of_room(uid)) < 8, 60,
                           f"the fork bomb in {s.room} to end", 0.2)
        except AssertionError as e:
            raise Failed(f"{e}: {len(rbx.procs_of_room(uid))} processes")

    def fault_disk(self, s):
        res = self.api.exec(s.room, f"dd if=/dev/zero of=/workspace/fill bs=1M count={2 * DISK_LIMIT >> 20}")
        need(res["exitCode"] != 0 and "No space left on device" in res["stderr"], f"disk fill: {res}")
        r = self.api.call("PUT", f"/api/rooms/{s.room}/sandbox/files/more.bin",
                          data=os.urandom(4 << 20), headers={"Content-Type": "application/octet-stream"})
        need(r.status == 507, f"PUT into a full room: {r.status} {r.json}")
        self.api.sh(s.room, "rm -f /workspace/fill")
        self.check_alive(s)

    def fault_output(self, s):
        res = self.api.exec(s.room, f"head -c {4 * OUTPUT_LIMIT} /dev/zero | tr '\\0' x")
        need(res["truncated"]["stdout"] is True and len(res["stdout"]) == OUTPUT_LIMIT
             and res["exitCode"] == 0, f"output past the limit: {str(res)[:300]}")
        self.check_alive(s)

    def fault_timeout(self, s):
        res = self.api.exec(s.room, "sleep 60", timeout=1000)
        need(res["timedOut"] is True and res["exitCode"] == 124, f"exec past its timeout: {res}")
        self.check_alive(s)

    def check_alive(self, s):
        def answers():
            try:
                return self.api.sh(s.room, "x=$(/bin/echo ok) && /bin/echo $x",
                                   timeout=10000) == "ok\n"
            except Failed:
                return False
        try:
            rbx.wait_until(answers, 60, f"{s.room} to answer after the fault", 0.5)
        except AssertionError as e:
            raise Failed(str(e))

    FAULTS = (("keeper-kill", fault_keeper), ("keeper-kill-appender", fault_keeper_appender),
              ("idle-stop", fault_idle), ("memory-limit", fault_memory), ("pids-limit", fault_pids),
              ("disk-limit", fault_disk), ("output-limit", fault_output),
              ("exec-timeout", fault_timeout))

    def restart_fcgi(self, sig):
        with self.disrupt_lock:
            self.disrupt += 1
        try:
            pid = self.stack.restart_fcgi(sig)
            log(f"roombox-fcgi restarted after {signal.Signals(sig).name}: pid {pid}")
        finally:
            # requests that started before the restart may answer a while after
            with self.disrupt_lock:
                self.disrupt += 1

    def faulter(self):
        restarts = [self.seconds * f for f in (0.1, 0.2, 0.3, 0.4, 0.5)] if self.seconds >= 1800 \
            else [self.seconds * f for f in ((0.2, 0.4) if self.seconds >= 300 else (0.3,))]
        sigs = [signal.SIGKILL, signal.SIGTERM]
        order = []
        while not self.stopping.wait(random.uniform(8, 16)):
            if restarts and self.now() >= restarts[0]:
                restarts.pop(0)
                sig = sigs[self.faults.get("fcgi-restart", 0) % 2]     # SIGKILL first
                self.gate.enter()
                try:
                    self.restart_fcgi(sig)
                    self.count("fcgi-restart", "ok")
                except Exception as e:     # noqa: BLE001
                    self.count("fcgi-restart", "failed", None, f"{type(e).__name__}: {e}")
                finally:
                    self.gate.leave()
                self.faults["fcgi-restart"] = self.faults.get("fcgi-restart", 0) + 1
                continue
            if not order:
                order = list(self.FAULTS)
                random.shuffle(order)
            name, fn = order.pop()
            s = random.choice(self.slots)
            with s.lock:
                if s.room is None:
                    order.append((name, fn))
                    continue
                self.gate.enter()
                try:
                    self.faults[name] = self.faults.get(name, 0) + 1
                    if name != "keeper-kill-appender":
                        log(f"fault {name} on {s.room}")
                    self.attempt(name, s.room, fn, self, s)
                finally:
                    self.gate.leave()

    # -- samples

    def sample(self):
        self.gate.close()
        try:
            if "leak-room" in INJECT and self.samples:
                room = f"soak-{self.run_id}-leak-{len(self.leaked)}"
                r = self.api.call("POST", f"/api/rooms/{room}/sandbox/processes", {"cmd": "sleep 100000"})
                self.leaked.append(room)
                log(f"injected: leaked room {room} ({r.status})")
            for room in self.rooms():
                self.attempt("wake", room, self.api.sh, room, "true")
            listed = self.api.call("GET", "/api/rooms")
            have = sorted(x["roomId"] for x in listed.json.get("rooms", []))
            known = sorted(set(self.rooms()) - set(self.leaked))
            orphans = [r for r in have if r not in known and UUID.fullmatch(r)][:self.orphans_possible]
            for room in orphans:
                log(f"room {room}: made by a POST /api/rooms a restart cut off; destroying it")
                self.orphans_possible -= 1
                self.attempt("orphan-destroy", room, self.destroy, room)
            have = [r for r in have if r not in orphans]
            if have != known:
                self.count("room-set", "failed", None,
                           f"the API lists {len(have)} rooms, the driver has {len(known)}: "
                           f"extra {sorted(set(have) - set(known))}, missing {sorted(set(known) - set(have))}")
            managed = 0
            for room in self.rooms():
                r = self.api.call("GET", f"/api/rooms/{room}/sandbox/processes")
                if r.status == 200:
                    managed += sum(p["status"] == "running" for p in r.json["processes"])
            s = measure(self.stack, self.iid, managed)
            s["t"] = self.now()
            s["rooms"] = len(have)
            self.samples.append(s)
            print_row(s, header=len(self.samples) == 1)
        finally:
            self.gate.open()

    # -- the whole run

    def run(self):
        self.host.start()
        self.stack.start()
        self.iid = instance_hash(str(self.stack.state_dir))
        log(f"stack {self.stack.dir} on port {self.stack.port}, instance {self.iid:08x}; "
            f"test host {NET_ADDR} in netns {self.host.ns}; {POOL} rooms, {WORKERS} workers, "
            f"{self.seconds} s" + (f"; injecting {sorted(INJECT)}" if INJECT else ""))
        self.t0 = time.monotonic()
        for s in self.slots:
            self.new_room(s)
        self.appenders = [self.Appender(self, "exec"), self.Appender(self, "files")]
        for a in self.appenders:
            self.api.sh(a.room, "touch /workspace/appends.txt")
        self.sample()
        threads = [threading.Thread(target=self.worker, daemon=True) for _ in range(WORKERS)]
        threads += [threading.Thread(target=self.appender, args=(a,), daemon=True)
                    for a in self.appenders]
        threads.append(threading.Thread(target=self.faulter, daemon=True))
        for t in threads:
            t.start()
        end = self.t0 + self.seconds
        self.next_sample = min(self.t0 + SAMPLE_S, end)
        while time.monotonic() < end:
            time.sleep(max(0.0, self.next_sample - time.monotonic()))
            if time.monotonic() < end - 5:
                self.sample()
            self.next_sample = min(self.next_sample + SAMPLE_S, end)
        self.stopping.set()
        for t in threads:
            t.join(timeout=300)
            if t.is_alive():
                self.failures.append(("driver", None, f"thread {t.name} did not end"))
        self.settle()
        self.sample()

    def settle(self):
        """The load is over; what roombox-fcgi still does on its own ends
        before the last sample (a process DELETE's KILL comes KILL_GRACE_S
        later, from a thread of its own: with deletes in the run's last
        seconds, up to one such thread each).  So the last sample is of
        the service at rest, and a thread still there then is one it kept:
        its thread count has gone KILL_GRACE_S + 1 s without falling (at
        most 30 s)."""
        deadline = time.monotonic() + 30
        low, since = None, time.monotonic()
        while time.monotonic() < deadline and time.monotonic() - since < KILL_GRACE_S + 1:
            n = fcgi_figures(self.stack)[1].get("fcgi_threads")
            if n is not None and (low is None or n < low):
                low, since = n, time.monotonic()
            time.sleep(0.5)

    def finish(self):
        """Read back the appends, destroy every room, stop the stack; the
        problems, each a line."""
        problems = []
        for a in self.appenders:
            try:
                lines = a.read_back()
            except (Failed, OSError, http.client.HTTPException) as e:
                problems.append(f"appends of {a.room} could not be read: {e}")
                continue
            bad = judge.append_problems(a.acked, lines)
            extra = len(lines) - len(a.acked)
            log(f"appends by {a.how} in {a.room}: {len(a.acked)} acknowledged, {a.unacked} not "
                f"({a.retried} retried after 503), file has {len(lines)} lines "
                f"({extra} of unacknowledged appends); answers {a.statuses}")
            problems += [f"appends by {a.how} in {a.room}: {p}" for p in bad[:20]]
            if len(bad) > 20:
                problems.append(f"appends by {a.how} in {a.room}: {len(bad) - 20} more problems")
        for room in self.rooms():
            try:
                self.destroy(room)
            except (Failed, AssertionError, OSError, http.client.HTTPException) as e:
                problems.append(f"destroy {room}: {e}")
        return problems


# ---------------------------------------------------------------- measuring

def in_cgroup_of(pid, room):
    """Whether pid is in a cgroup of that room (a folder named after it, in
    any hierarchy)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return False
    return any(room in line.split(":", 2)[-1].split("/") for line in lines)


def wchan(pid):
    try:
        return Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return None


def instance_hash(state_dir):
    """FNV-1a (32 bit) of state_dir: the helper names the instance's
    cgroup group, nft table and interfaces after it."""
    h = 2166136261
    for b in state_dir.encode():
        h = ((h ^ b) * 16777619) & 0xffffffff
    return h


def fcgi_figures(stack):
    pids = stack.fcgi_pids()
    if len(pids) != 1:
        return None, {}
    pid = pids[0]
    st = rbx.proc_status(pid) or {}
    try:
        fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        fds = None
    rss = int(st["VmRSS"].split()[0]) * 1024 if "VmRSS" in st else None
    return pid, {"fcgi_fds": fds, "fcgi_threads": int(st.get("Threads", 0)) or None, "fcgi_rss": rss}


def count_cgroups(group):
    n = 0
    root = Path("/sys/fs/cgroup")
    tops = [p / group for p in root.iterdir() if (p / group).is_dir()] + \
        ([root / group] if (root / group).is_dir() else [])
    for top in tops:
        for _, dirs, _ in os.walk(top):
            n += len(dirs)
    return n


def nft_elements(table):
    r = subprocess.run(["nft", "-j", "list", "table", "inet", table], capture_output=True, text=True)
    if r.returncode != 0:
        return 0            # no table: no room has egress running
    n = 0
    for item in json.loads(r.stdout).get("nftables", []):
        if "set" in item:
            n += len(item["set"].get("elem", []))
    return n


def du(path, *exclude):
    r = subprocess.run(["du", "-s", "-B1", *[f"--exclude={e}" for e in exclude], str(path)],
                       capture_output=True, text=True)
    try:
        return int(r.stdout.split()[0])
    except (IndexError, ValueError):
        return None


def measure(stack, iid, managed):
    s = {"skipped": {}, "managed": managed}
    s["fcgi_pid"], f = fcgi_figures(stack)
    s.update(f)
    if s.get("fcgi_fds") is not None:
        # roombox-fcgi's logger holds 3 pipes of each running managed process
        s["fcgi_fds_raw"] = s["fcgi_fds"]
        s["fcgi_fds"] -= 3 * managed
    span = (stack.uid_base, stack.uid_base + stack.max_rooms * rbx.ROOM_IDS)
    procs = rbx.procs_with_uid_in(*span)
    keepers = [p for p, _, cmd in procs if cmd.startswith("roombox-keeper")]
    s["keepers"] = len(keepers)
    s["room_procs"] = len(procs)
    rm = 0
    for k in keepers:
        try:
            with open(f"/proc/{k}/mountinfo") as fh:
                rm += sum(1 for _ in fh)
        except OSError:
            pass
    s["room_mounts"] = rm
    with open("/proc/self/mountinfo") as fh:
        lines = fh.readlines()
    s["mounts"] = len(lines)
    s["mounts_own"] = sum(1 for l in lines if str(stack.dir) in l)
    r = subprocess.run(["losetup", "-a"], capture_output=True, text=True)
    s["loops"] = len(r.stdout.splitlines())
    s["loops_own"] = len(rbx.loop_devices_backed_by(str(stack.dir)))
    s["cgroups"] = count_cgroups(f"roombox-{iid:08x}")
    r = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True)
    prefix = f"rb{iid & 0xffffff:06x}-"
    s["veths"] = sum(1 for l in r.stdout.splitlines() if l.split(": ")[1].startswith(prefix))
    s["nft_elems"] = nft_elements(f"roombox_{iid:08x}")
    block = f"src=100.{64 + iid % 64}."
    try:
        with open("/proc/net/nf_conntrack") as fh:
            ct = fh.readlines()
        s["conntrack_all"] = len(ct)
        s["conntrack"] = sum(1 for l in ct if block in l)
    except OSError as e:
        s["conntrack_all"] = s["conntrack"] = None
        s["skipped"]["conntrack"] = f"/proc/net/nf_conntrack: {e.strerror}"
    s["state_du"] = du(stack.state_dir)
    s["state_rest"] = du(stack.state_dir, "*.img")
    s["helpers"] = sum(1 for p in rbx.proc_pids() if rbx.proc_cmdline(p).startswith(str(rbx.HELPER)))
    return s


COLUMNS = (("t", "t/s", 5), ("rooms", "rooms", 5), ("managed", "mgd", 3), ("fcgi_fds_raw", "fds", 4),
           ("fcgi_fds", "fds-3m", 6), ("fcgi_threads", "thr", 4),
           ("fcgi_rss", "rss", 9), ("keepers", "keep", 4), ("room_procs", "procs", 5),
           ("room_mounts", "rmnt", 5), ("mounts", "mnt", 4), ("mounts_own", "mnt*", 4),
           ("loops", "loop", 4), ("loops_own", "loop*", 5), ("cgroups", "cg*", 4),
           ("veths", "veth*", 5), ("nft_elems", "nft*", 4), ("conntrack", "ct*", 4),
           ("conntrack_all", "ct", 5), ("state_rest", "state*", 9), ("state_du", "du", 9),
           ("helpers", "hlp", 3))


def print_row(s, header=False):
    if header:
        print("  ".join(h.rjust(w) for _, h, w in COLUMNS), flush=True)
    cells = []
    for key, _, w in COLUMNS:
        v = s.get(key)
        cells.append((f"{v:.0f}" if key == "t" else judge.fmt(key, v)).rjust(w))
    print("  ".join(cells), flush=True)


def summary(samples):
    print("\nresource        first       last        max    baseline   margin  judged")
    problems = dict(judge.growth_problems(samples))
    skipped = dict(judge.skipped_judgements(samples))
    for key, _, _ in COLUMNS[3:]:
        vals = [s.get(key) for s in samples if s.get(key) is not None]
        if not vals:
            print(f"{key:14} skipped: {skipped.get(key, 'not measured')}")
            continue
        if key in judge.RESOURCES:
            b_sample = judge.baseline(samples, key)
            base = b_sample.get(key) if b_sample else None
            verdict = "GREW" if key in problems else ("skipped: " + skipped[key] if key in skipped else "flat")
            m = judge.fmt(key, judge.margin(key, base or 0))
            b = judge.fmt(key, base)
        else:
            verdict, m, b = "info", "", ""
        print(f"{key:14} {judge.fmt(key, vals[0]):>9} {judge.fmt(key, vals[-1]):>10} "
              f"{judge.fmt(key, max(vals)):>10} {b:>11} {m:>8}  {verdict}")
    return problems


def main():
    seconds = int(os.environ.get("SOAK_S", "3600"))
    soak = Soak(seconds)
    problems = []
    crashed = False
    try:
        soak.run()
    except BaseException:
        crashed = True
        traceback.print_exc()
        problems.append("the driver stopped early (traceback above)")
        soak.stopping.set()
    finally:
        if not crashed:
            problems += soak.finish()
        leftovers = soak.stack.stop()
        soak.host.stop()
    problems += [f"left after the stack stopped: {l}" for l in leftovers]

    print("\nrequests       ok  forgiven  failed   (forgiven: overlapped a roombox-fcgi restart)")
    for kind, (ok, fg, fl) in sorted(soak.stats.items()):
        print(f"{kind:20} {ok:6} {fg:6} {fl:6}")
    print("faults: " + ", ".join(f"{k} {v}" for k, v in sorted(soak.faults.items())))
    slow = sorted(soak.slow_ends, key=lambda x: x[0], reverse=True)
    if slow:
        n = sum(1 for x in slow if x[0] > rbx.GONE_TIMEOUT)
        print(f"destroys: {len(slow)}, slowest {slow[0][0]:.1f} s ({slow[0][1]}); "
              f"{n} took over {rbx.GONE_TIMEOUT:.0f} s")
        for took, room, seen in slow[:3]:
            if seen:
                print(f"  {room}: {took:.1f} s; after {rbx.GONE_TIMEOUT:.0f} s: {seen}")
    if soak.samples:
        for name, msg in summary(soak.samples).items():
            problems.append(f"growth: {name}: {msg}")
    by_kind = {}
    for kind, room, msg in soak.failures:
        by_kind.setdefault(kind, []).append(f"{kind} in {room}: {msg}")
    for kind, lines in sorted(by_kind.items()):
        problems += lines[:5]
        if len(lines) > 5:
            problems.append(f"{kind}: {len(lines) - 5} more failures like these")
    print()
    if problems:
        for p in problems:
            print(f"make soak: FAIL: {p}")
        return 1
    print(f"make soak: passed ({seconds} s, {sum(sum(v) for v in soak.stats.values())} requests, "
          f"{sum(soak.faults.values())} faults, {len(soak.samples)} samples)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
