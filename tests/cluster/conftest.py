"""Fixtures for the cluster tests: one real cluster for the whole session.

The cluster is tools/run-cluster.sh itself (what `make run-cluster` runs),
started with its state in a fresh /tmp/rbx-cluster-* folder and HAProxy on a
free port: hosts h1..h3 in network namespaces roombox-h1.., each with an etcd
member, nginx and roombox-fcgi; HAProxy on 127.0.0.1.  It is stopped with
SIGTERM at the end, as Ctrl-C would, and must leave no namespace behind.

Fixtures:
  cluster        the running cluster (session scope)
  cluster_mode   the cluster, checked to serve in cluster mode (X-Roombox-Host)
  room           a fresh, unique room id

Nothing here sleeps to synchronise: every wait is a bounded poll.
"""

import http.client
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
RUN_CLUSTER = REPO / "tools" / "run-cluster.sh"
CTL = REPO / "build" / "roomboxctl"
HOSTS = 3
START_TIMEOUT = 90.0
PREVIEW_DOMAIN = "rbx.test"


def wait_until(pred, timeout, what):
    end = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


def gone(pid):
    """The process has ended (a zombie waiting for its parent counts)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Answer:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def json(self):
        return json.loads(self.body)

    @property
    def host(self):
        return self.headers.get("x-roombox-host")

    def __repr__(self):
        return f"<{self.status} host={self.host} {self.body[:200]!r}>"


class Cluster:
    def __init__(self, run, port, proc):
        self.run = run
        self.port = port
        self.proc = proc
        self.token = (run / "tokens").read_text().strip()
        self.endpoints = (run / "etcd-endpoints").read_text().strip().split(",")
        self.hosts = [f"h{n}" for n in range(1, HOSTS + 1)]
        self.admin = run / "haproxy" / "admin.sock"

    # ---- HTTP: through the router, or straight to a host's nginx
    def addr(self, host=None):
        if host is None:
            return ("127.0.0.1", self.port)
        return (f"10.77.0.{host[1:]}", 80)

    def request(self, method, path, body=None, host=None, timeout=60, headers=None, auth=True):
        h = {"Authorization": f"Bearer {self.token}"} if auth else {}
        if body is not None:
            body = json.dumps(body)
            h["Content-Type"] = "application/json"
        h.update(headers or {})
        c = http.client.HTTPConnection(*self.addr(host), timeout=timeout)
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            return Answer(r.status, {k.lower(): v for k, v in r.getheaders()},
                          r.read().decode("utf-8", "replace"))
        finally:
            c.close()

    def exec(self, room, cmd, host=None):
        return self.request("POST", f"/api/rooms/{room}/sandbox/exec", {"cmd": cmd}, host=host)

    # ---- roomboxctl and etcd
    def ctl(self, *args, check=True, timeout=60):
        r = subprocess.run([str(CTL), "-c", str(self.run / "h1" / "roombox.conf"),
                            "-e", ",".join(self.endpoints), "-a", str(self.admin), *args],
                           capture_output=True, text=True, timeout=timeout)
        if check:
            assert r.returncode == 0, f"roomboxctl {' '.join(args)}: {r.returncode} {r.stdout} {r.stderr}"
        return r

    def etcd(self, path, req, endpoints=None):
        """One call to etcd's JSON gateway, on the first member that answers."""
        last = None
        for url in endpoints or self.endpoints:
            u = urllib.parse.urlsplit(url)
            c = http.client.HTTPConnection(u.hostname, u.port, timeout=5)
            try:
                c.request("POST", path, body=json.dumps(req))
                r = c.getresponse()
                data = r.read()
                if r.status == 200:
                    return json.loads(data)
                last = f"{url}: {r.status} {data[:200]!r}"
            except OSError as e:
                last = f"{url}: {e}"
            finally:
                c.close()
        raise AssertionError(f"no etcd member answered {path}: {last}")

    def etcd_get(self, key):
        b64 = __import__("base64")
        ans = self.etcd("/v3/kv/range", {"key": b64.b64encode(key.encode()).decode()})
        kvs = ans.get("kvs") or []
        return json.loads(b64.b64decode(kvs[0]["value"])) if kvs else None

    def etcd_put(self, key, value):
        b64 = __import__("base64")
        self.etcd("/v3/kv/put", {"key": b64.b64encode(key.encode()).decode(),
                                 "value": b64.b64encode(json.dumps(value).encode()).decode()})

    def etcd_del(self, key):
        b64 = __import__("base64")
        self.etcd("/v3/kv/deleterange", {"key": b64.b64encode(key.encode()).decode()})

    def owner(self, room):
        rec = self.etcd_get(f"/roombox/rooms/{room}")
        return rec and rec["host"]

    # ---- the router's runtime API
    def admin_cmd(self, cmd):
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(str(self.admin))
            s.sendall((cmd + "\n").encode())
            out = b""
            while chunk := s.recv(65536):
                out += chunk
        return out.decode()

    def map_name(self):
        return str(self.run / "haproxy" / "hosts.map")

    # ---- a host's web server down and up again (the host, for the router)
    def nginx_stop(self, host):
        pid = int((self.run / host / "nginx.pid").read_text())
        try:
            os.killpg(pid, signal.SIGKILL)     # its workers too: they would go on serving
        except ProcessLookupError:
            pass
        wait_until(lambda: gone(pid), 10, f"{host}'s nginx to end")

    def nginx_start(self, host):
        conf = self.run / host / "nginx" / "nginx.conf"
        p = subprocess.Popen(["nsenter", f"--net=/run/netns/roombox-{host}", "nginx",
                              "-e", str(self.run / host / "nginx" / "error.log"),
                              "-c", str(conf), "-g", "daemon off;"],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
        (self.run / host / "nginx.pid").write_text(str(p.pid))
        wait_until(lambda: self._health(host), 20, f"{host}'s nginx to answer")

    def _health(self, host):
        try:
            return self.request("GET", "/api/health", host=host, timeout=2).status == 200
        except OSError:
            return False

    # ---- etcd members down and up again
    def etcd_pid(self, host):
        return int((self.run / host / "etcd.pid").read_text())

    def etcd_stop(self, host):
        pid = self.etcd_pid(host)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        wait_until(lambda: gone(pid), 10, f"{host}'s etcd to end")

    def etcd_has_leader(self):
        """A linearizable read answers: the members left have a leader (after
        the leader is killed, the others elect one within a few seconds)."""
        def read():
            try:
                self.etcd("/v3/kv/range", {"key": "AA=="})
                return True
            except AssertionError:
                return False
        wait_until(read, 30, "etcd's members to have a leader")

    def etcd_start(self, host):
        p = subprocess.Popen([str(self.run / host / "etcd.sh")], stdin=subprocess.DEVNULL,
                             stdout=open(self.run / host / "etcd.log", "ab"),
                             stderr=subprocess.STDOUT, start_new_session=True)
        (self.run / host / "etcd.pid").write_text(str(p.pid))
        url = f"http://10.77.0.{host[1:]}:2379"

        def healthy():
            try:
                self.etcd("/v3/kv/range", {"key": "AA=="}, endpoints=[url])
                return True
            except AssertionError:
                return False
        wait_until(healthy, 30, f"{host}'s etcd to answer with the quorum")


@pytest.fixture(scope="session")
def cluster():
    if os.geteuid() != 0:
        pytest.fail("the cluster needs root (network namespaces, rooms)")
    for tool in ("etcd", "haproxy", "nginx"):
        if not shutil.which(tool):
            pytest.fail(f"{tool} is not installed (tools/deps.sh installs it)")
    run = Path(tempfile.mkdtemp(prefix="rbx-cluster-"))
    # host-style previews (<port>-<room>-<token>.rbx.test) for test_preview.py
    (run / "local.conf").write_text(f"preview_domain = {PREVIEW_DOMAIN}\n")
    port = free_port()
    # ROUTE_SYNC_S=0: the tests run route-sync themselves, when they mean to
    # (a wiped map must stay wiped while test_placement.py looks)
    # CLUSTER_LOCK_WAIT from the environment when given: on a machine where
    # others run clusters too, 600 s may not be enough
    lock_wait = int(os.environ.get("CLUSTER_LOCK_WAIT") or 600)
    env = dict(os.environ, CLUSTER_RUN_DIR=str(run), PORT=str(port), HOSTS=str(HOSTS),
               ROUTE_SYNC_S="0", CLUSTER_LOCK_WAIT=str(lock_wait))
    log = open(run / "run-cluster.out", "w+")
    proc = subprocess.Popen([str(RUN_CLUSTER)], env=env, stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)

    def started():
        text = (run / "run-cluster.out").read_text()
        if proc.poll() is not None:
            raise AssertionError(f"tools/run-cluster.sh exited {proc.returncode}:\n{text}")
        return "Press Ctrl-C to stop." in text
    def waiting():   # another cluster holds the machine (CLUSTER_LOCK_WAIT)
        return "waiting for another cluster to stop" in (run / "run-cluster.out").read_text()
    wait_until(lambda: started() or waiting(), START_TIMEOUT, "tools/run-cluster.sh to start the cluster")
    if not started():
        wait_until(started, lock_wait + START_TIMEOUT, "the other cluster to stop, then this one to start")
    c = Cluster(run, port, proc)
    yield c
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    # run-cluster.sh itself fails if it left a namespace: it checks while it
    # still holds the machine's cluster lock (after it, another cluster may
    # already be starting under the same names)
    out = (run / "run-cluster.out").read_text()
    # ROOMBOX_KEEP_CLUSTER=1: the hosts' state and logs stay, for a look
    if not os.environ.get("ROOMBOX_KEEP_CLUSTER"):
        shutil.rmtree(run, ignore_errors=True)
    assert proc.returncode == 0, f"tools/run-cluster.sh exited {proc.returncode}:\n{out}"


@pytest.fixture(scope="session")
def cluster_mode(cluster):
    """The cluster, once its hosts are seen to serve in cluster mode."""
    a = cluster.request("GET", "/api/health", host="h1")
    assert a.host == "h1", f"h1 answers without X-Roombox-Host: not in cluster mode: {a}"
    return cluster


@pytest.fixture
def room():
    return "c" + secrets.token_hex(6)


# tools/integration.sh runs a suite in two passes, the second for tests
# marked serial (ROOMBOX_TEST_PASS=serial).  This suite shares one cluster
# (and run-cluster's machine-wide lock) among all its tests, so it runs in
# one process (make cluster-test passes -n 0) and entirely in the first
# pass: nothing is left for the second.
def pytest_collection_modifyitems(config, items):
    if os.environ.get("ROOMBOX_TEST_PASS") == "serial" and items:
        config.hook.pytest_deselected(items=list(items))
        items[:] = []
