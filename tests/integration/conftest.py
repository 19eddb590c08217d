"""Fixtures for the integration tests: a real roombox stack per test module.

A stack is build/roombox-fcgi behind a real web server, with its own
configuration, token, state and run directories in a fresh /tmp/rbx-* folder:

  nginx     configuration generated from nginx.conf.example (paths, port and
            worker user substituted); roombox-fcgi started by us on the
            configuration's `socket`.
  lighttpd  configuration generated from conf/lighttpd.conf.example;
            lighttpd itself spawns roombox-fcgi (listening socket on fd 0).

A test module runs against both servers unless it sets
    SERVERS = ("nginx",)
and may add or override configuration keys with
    ROOMBOX_CONFIG = {"output_limit": "64K"}

Fixtures:
  stack   the running stack (module scope, parametrised over SERVERS)
  client  a small HTTP client for it (function scope).  Every room the test
          touched is destroyed through the API afterwards, and the teardown
          checks that no process of that room is left on the host.
  room    a fresh, unique room id (not created yet)

stack.restart_fcgi(sig) sends sig (default SIGKILL) to roombox-fcgi and
returns once a new roombox-fcgi with the same configuration answers.

Nothing here sleeps to synchronise: every wait is a bounded poll.
"""

import fcntl
import http.client
import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))   # helper_records, for security/ too
from helper_records import decode_answer, encode_request, record  # noqa: E402  (re-exported)

REPO = Path(__file__).resolve().parents[2]
FCGI = REPO / "build" / "roombox-fcgi"
HELPER = REPO / "build" / "roombox-helper"
NGINX_EXAMPLE = REPO / "nginx.conf.example"
LIGHTTPD_EXAMPLE = REPO / "conf" / "lighttpd.conf.example"
CONSOLE = REPO / "build" / "console"     # the console's static files (make)

ALL_SERVERS = ("nginx", "lighttpd")
ROOM_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")

# Keys every test stack sets (paths are added per stack).  Small where a
# test wants to cross a limit quickly.
BASE_CONFIG = {
    "auth": "token",
    "max_body": "64K",
    "max_rooms": "200",
    # Rooms of 1G images each, a hundred at a time in some tests and written
    # little, on whatever /tmp has free (other stacks share it): the check
    # that images never promise more than is free would refuse them.
    # test_disk_commit.py checks it with a file system of its own.
    "disk_overcommit": "1000",
}

ROOM_IDS = 65536         # host ids per room: its user namespace's ids 0-65535
STARTUP_TIMEOUT = 20.0   # seconds for a stack to answer /api/health
GONE_TIMEOUT = 5.0       # seconds for processes to disappear after a kill


# ---------------------------------------------------------------- polling

# seconds an idle_timeout of 2 s takes at most to stop a room: 2 s of
# idleness + the sweep's 0.5 s cadence, with room to spare
IDLE_STOP_WAIT = 20


def room_state(client, room):
    """"running" or "stopped", from GET /api/rooms/{room}."""
    r = client.get(f"/api/rooms/{room}")
    assert r.status == 200, r.json
    return r.json["state"]


def wait_idle_stopped(client, room):
    """Until the idle sweep (idle_timeout 2 s) has stopped room."""
    wait_until(lambda: room_state(client, room) == "stopped", IDLE_STOP_WAIT,
               f"room {room} to be stopped as idle", interval=0.1)


def wait_until(pred, timeout, what, interval=0.02):
    """Call pred() until it returns something truthy; return that value.
    Fails the test with `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


def unique_room(prefix="t"):
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


# ---------------------------------------------------------------- host views

def proc_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def proc_status(pid):
    """{'Name':..., 'Uid': [real, eff, saved, fs], 'State':...} or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            text = f.read()
    except OSError:
        return None
    out = {}
    for line in text.splitlines():
        key, _, value = line.partition(":")
        out[key] = value.strip()
    if "Uid" in out:
        out["Uid"] = [int(x) for x in out["Uid"].split()]
    return out


def proc_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return ""


def procs_with_uid(uid, include_zombies=False):
    """[(pid, cmdline)] of live host processes whose real or effective uid
    is `uid`."""
    found = []
    for pid in proc_pids():
        st = proc_status(pid)
        if not st or "Uid" not in st:
            continue
        if not include_zombies and st.get("State", "").startswith("Z"):
            continue
        if uid in st["Uid"][:2]:
            found.append((pid, proc_cmdline(pid)))
    return found


def procs_with_uid_in(lo, hi):
    found = []
    for pid in proc_pids():
        st = proc_status(pid)
        if not st or "Uid" not in st or st.get("State", "").startswith("Z"):
            continue
        if any(lo <= u < hi for u in st["Uid"][:2]):
            found.append((pid, st["Uid"][0], proc_cmdline(pid)))
    return found


def procs_of_room(uid):
    """[(pid, cmdline)] of live host processes under any of the room's host
    ids (`uid`: its root's, the first of its 65536), the keeper included."""
    return [(pid, cmd) for pid, _, cmd in procs_with_uid_in(uid, uid + ROOM_IDS)]


def pid_alive(pid):
    st = proc_status(pid)
    return st is not None and not st.get("State", "").startswith("Z")


def ns_inode(pid, ns):
    try:
        return os.readlink(f"/proc/{pid}/ns/{ns}")
    except OSError:
        return None


def procs_in_ns(ns, link):
    """Host pids whose namespace `ns` is `link` (e.g. 'pid:[4026532...]')."""
    return [pid for pid in proc_pids()
            if ns_inode(pid, ns) == link and pid_alive(pid)]


def host_mountinfo_lines(*needles):
    with open("/proc/self/mountinfo") as f:
        return [l.rstrip("\n") for l in f if any(n in l for n in needles)]


def loop_devices():
    """The host's loop devices: name -> what each reads (a path, with
    " (deleted)" once unlinked, "/memfd:<name> (deleted)" for a memfd), ""
    for one that is there but bound to nothing."""
    found = {}
    for dev in Path("/sys/block").glob("loop*"):
        try:
            found[dev.name] = (dev / "loop" / "backing_file").read_text().strip()
        except OSError:
            if dev.exists():
                found[dev.name] = ""
    return found


def loop_devices_backed_by(prefix):
    return [(name, backing) for name, backing in loop_devices().items()
            if backing and backing.startswith(prefix)]


def stalled_export(client, room):
    """An export of room begun and then not read: its cut made and
    mounted, its stream stalled on us.  The connection, to close."""
    conn = http.client.HTTPConnection(client.host, client.port, timeout=120)
    conn.request("GET", f"/api/rooms/{room}/export",
                 headers={"Authorization": f"Bearer {client.token}"})
    resp = conn.getresponse()
    assert resp.status == 200, resp.status
    resp.read(65536)
    return conn


def cgroup_group(state_dir):
    """The cgroup folder of the instance with this state_dir (not the
    default one): "roombox-<FNV-1a of state_dir>", as the helper's
    cgroup_set_instance names it."""
    h = 2166136261
    for b in str(state_dir).encode():
        h = ((h ^ b) * 16777619) & 0xffffffff
    return f"roombox-{h:08x}"


def cgroup_dirs_named(name, group="roombox*"):
    """Directories called `name` below a roombox/ folder in any cgroup
    hierarchy: any instance's, or only the `group` folder's (a stack's
    cgroup_group: another stack running at the same time, another
    engineer's test run among them, may have a room of the same name)."""
    assert ROOM_ID.fullmatch(name), f"not a room id: {name!r}"
    found = []
    root = Path("/sys/fs/cgroup")
    # "roombox" for the default state_dir, "roombox-<hash>" for any other
    # (every test stack): the helper's cgroup_set_instance
    candidates = list(root.glob(f"{group}/{name}"))
    if root.is_dir():
        candidates += list(root.glob(f"*/{group}/{name}"))
    for c in candidates:
        if c.is_dir():
            found.append(str(c))
    return found


def paths_naming(top, name):
    """Every path under `top` with a component equal to `name`."""
    hits = []
    for dirpath, dirnames, filenames in os.walk(top):
        for n in dirnames + filenames:
            if n == name:
                hits.append(os.path.join(dirpath, n))
    return hits


# ---------------------------------------------------------------- HTTP

class Response:
    def __init__(self, status, headers, body, elapsed):
        self.status = status
        self.headers = headers          # {lower-case name: value}
        self.body = body                # bytes
        self.elapsed = elapsed          # seconds
        self._json = None

    def header(self, name):
        return self.headers.get(name.lower())

    @property
    def json(self):
        return self._json

    def check_json(self):
        """Every answer of roombox is a JSON object with a JSON content
        type; parse it (as strict UTF-8) or fail saying what came back."""
        ctype = self.header("content-type") or ""
        assert ctype.split(";")[0].strip() == "application/json", \
            f"status {self.status}: content-type {ctype!r}, body {self.body[:300]!r}"
        try:
            self._json = json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise AssertionError(f"status {self.status}: body is not JSON ({e}): "
                                 f"{self.body[:300]!r}")
        assert isinstance(self._json, dict), f"answer is not a JSON object: {self._json!r}"
        return self

    def __repr__(self):
        return f"<Response {self.status} {self.body[:200]!r}>"


NO_BODY = object()


class Client:
    """HTTP over http.client: the path goes on the wire exactly as given
    (no normalisation, no re-quoting)."""

    def __init__(self, stack):
        self.stack = stack
        self.host = "127.0.0.1"
        self.port = stack.port
        self.token = stack.token
        self.rooms = []                 # rooms this test touched, in order

    def touch(self, room):
        if room not in self.rooms:
            self.rooms.append(room)

    def request(self, method, path, body=NO_BODY, *, data=None, headers=None,
                auth=True, timeout=120, check_json=True):
        h = {}
        if auth is True:
            h["Authorization"] = f"Bearer {self.token}"
        elif isinstance(auth, str):
            h["Authorization"] = auth
        if body is not NO_BODY:
            data = json.dumps(body).encode()
            h["Content-Type"] = "application/json"
        if headers:
            h.update(headers)
        m = re.match(r"/api/rooms/([^/?]+)", path)
        if m and ROOM_ID.fullmatch(m.group(1)):
            self.touch(m.group(1))
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        t0 = time.monotonic()
        try:
            chunked = any(k.lower() == "transfer-encoding" for k in h)
            conn.request(method, path, body=data, headers=h, encode_chunked=chunked)
            r = conn.getresponse()
            payload = r.read()
            hdrs = {k.lower(): v for k, v in r.getheaders()}
            resp = Response(r.status, hdrs, payload, time.monotonic() - t0)
        finally:
            conn.close()
        if check_json:
            resp.check_json()
        return resp

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=NO_BODY, **kw):
        return self.request("POST", path, body, **kw)

    def delete(self, path, **kw):
        return self.request("DELETE", path, **kw)

    def exec_raw(self, room, body, **kw):
        return self.post(f"/api/rooms/{room}/sandbox/exec", body, **kw)

    def exec(self, room, cmd, **fields):
        """Run cmd in room; assert a 200 answer and return its "result"."""
        timeout = fields.pop("http_timeout", 120)
        r = self.exec_raw(room, dict(cmd=cmd, **fields), timeout=timeout)
        assert r.status == 200, f"exec {cmd!r} in {room}: {r.status} {r.json}"
        assert r.json.get("sandboxName") == f"sandbox-{room}", r.json
        return r.json["result"]

    def sh(self, room, cmd, **fields):
        """exec that must succeed; returns stdout."""
        res = self.exec(room, cmd, **fields)
        assert res["exitCode"] == 0, f"{cmd!r} in {room} failed: {res}"
        return res["stdout"]

    def room_uid(self, room):
        """The host uid of the room's root: the first of the room's own 65536
        host ids (its user namespace maps room ids 0-65535 onto them).  From
        the room's meta when it exists (a room whose root took its own system
        apart runs no shell), else from inside the room, which creates it."""
        try:
            slot = json.loads((self.stack.room_state_dir(room) / "meta").read_text())["slot"]
            return self.stack.uid_base + slot * ROOM_IDS
        except FileNotFoundError:
            pass
        # shell builtins only: a room on a prepared rootfs may have no id(1)
        inside, outside, count = self.sh(room, 'read a b c < /proc/self/uid_map; echo "$a $b $c"').split()
        assert (int(inside), int(count)) == (0, ROOM_IDS), f"uid_map of {room}: {inside} {outside} {count}"
        return int(outside)

    def room_ids(self, room):
        """The room's host ids, as a range."""
        lo = self.room_uid(room)
        return range(lo, lo + ROOM_IDS)

    def destroy(self, room):
        r = self.delete(f"/api/rooms/{room}")
        assert r.status == 200, f"DELETE {room}: {r.status} {r.json}"
        assert r.json == {"cleaned": True, "roomId": room}, r.json
        return r


# ---------------------------------------------------------------- the stack

def _substitute(text, replacements, source):
    """Apply (regex, replacement) pairs, each of which must match: if the
    example changes shape the tests say so instead of testing something
    else."""
    for pattern, repl in replacements:
        text, n = re.subn(pattern, lambda m, r=repl: r, text, flags=re.M)
        assert n >= 1, f"{source}: no line matches {pattern!r}; update conftest.py"
    return text


def nginx_config(text, port, socket_path, d, tmp):
    reps = [
        (r"^user\s+[^;]*;", "user root;"),      # the test's fcgi socket is root's
        (r"^pid\s+[^;]*;", f"pid {d}/nginx.pid;"),
        (r"^error_log\s+\S+", f"error_log {d}/nginx-error.log"),
        (r"^(\s*)access_log\s+[^;]*;", f"    access_log {d}/nginx-access.log;"),
        (r"listen\s+127\.0\.0\.1:8080;", f"listen 127.0.0.1:{port};"),
        (r"unix:/run/roombox/fcgi/fcgi\.sock", f"unix:{socket_path}"),
        (r"unix:/run/roombox/fcgi/preview\.sock", f"unix:{Path(socket_path).parent}/preview.sock"),
        (r"unix:/run/roombox/fcgi/term\.sock", f"unix:{Path(socket_path).parent}/term.sock"),
        (r"alias /usr/share/roombox/console/;", f"alias {CONSOLE}/;"),
    ]
    text = _substitute(text, reps, NGINX_EXAMPLE)
    text, n = re.subn(r"^(\s*)(\w+)_temp_path(\s+)\S+;",
                      lambda m: f"{m.group(1)}{m.group(2)}_temp_path{m.group(3)}{tmp}/{m.group(2)};",
                      text, flags=re.M)
    assert n == 5, f"{NGINX_EXAMPLE}: expected 5 *_temp_path lines, found {n}"
    return text


# lighttpd serves <prefix><status>.html for the errors it makes itself: the
# files the Debian package ships (/usr/share/roombox/lighttpd/).
LIGHTTPD_ERROR_PAGES = REPO / "conf" / "lighttpd-errors"


def lighttpd_config(port, conf_path, d):
    pages = LIGHTTPD_ERROR_PAGES
    text = LIGHTTPD_EXAMPLE.read_text()
    return _substitute(text, [
        (r"^server\.port\s*=\s*8080\s*$", f"server.port = {port}"),
        (r"^server\.username\s*=.*$", "# server.username: lighttpd runs as root in the tests"),
        (r"^server\.groupname\s*=.*$", "# server.groupname: see above"),
        (r"^server\.document-root\s*=.*$", f'server.document-root = "{d}"'),
        (r"^server\.pid-file\s*=.*$", f'server.pid-file = "{d}/lighttpd.pid"'),
        (r"^server\.errorlog\s*=.*$", f'server.errorlog = "{d}/lighttpd-error.log"'),
        (r"^server\.errorfile-prefix\s*=.*$", f'server.errorfile-prefix = "{pages}/status-"'),
        (r'"bin-path"\s*=>\s*"[^"]*"', f'"bin-path" => "{FCGI} -c {conf_path}"'),
        (r'"socket"\s*=>\s*"/run/lighttpd/[^"]*"', f'"socket" => "{d}/lighttpd-fcgi.sock"'),
        # roombox-fcgi's preview socket: beside its `socket` (d/fcgi.sock)
        (r'"socket"\s*=>\s*"/run/roombox/fcgi/preview\.sock"', f'"socket" => "{d}/preview.sock"'),
        (r'"socket"\s*=>\s*"/run/roombox/fcgi/term\.sock"', f'"socket" => "{d}/term.sock"'),
        # the console's files: the build's (make), not the package's
        (r'"/console/"\s*=>\s*"/usr/share/roombox/console/"', f'"/console/" => "{CONSOLE}/"'),
    ], LIGHTTPD_EXAMPLE)


def free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The uid ranges of the running test stacks on this machine, this session's
# and any other's (several test runs at once, each with its own stacks): a
# file "<first>-<end>" per range in UID_CLAIMS, holding the claiming
# process's pid, made under a lock.  A stack started while another runs must
# not overlap its range even where no process of it runs yet: its later
# rooms would count as the new stack's leftovers, and the two stacks' rooms
# would share host ids.
UID_CLAIMS = Path("/tmp/rbx-uid-claims")


def _claimed_uid_ranges():
    """The ranges claimed by live processes; the claims of dead ones are
    removed."""
    ranges = []
    for f in UID_CLAIMS.glob("*-*"):
        try:
            lo, hi = (int(n) for n in f.name.split("-"))
            owner = int(f.read_text())
        except (OSError, ValueError):
            continue
        if pid_alive(owner):
            ranges.append((lo, hi))
        else:
            f.unlink(missing_ok=True)
    return ranges


UID_TESTS_FIRST = 70_000_000
UID_TESTS_END = 300_000_000    # make bench's stacks start here (tools/bench.sh)


def pick_uid_base(span):
    """A uid range no host process uses and no running test stack claims,
    away from the default 200000 (and the default max_rooms' 1000 * 65536
    ids after it) so a test stack never shares uids with a `make run`
    stack, and below UID_TESTS_END: make bench picks its ranges from there
    up by the processes it sees, without claims, so a test stack's range
    there could take a bench's ids before their processes exist.  Claimed
    until release_uid_base."""
    slots = (UID_TESTS_END - UID_TESTS_FIRST - span) // ROOM_IDS
    assert slots > 0, f"a span of {span} host ids does not fit the tests' range"
    UID_CLAIMS.mkdir(exist_ok=True)
    with open(UID_CLAIMS / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        claimed = _claimed_uid_ranges()
        for _ in range(200):
            base = UID_TESTS_FIRST + random.randrange(0, slots + 1) * ROOM_IDS
            if any(base < hi and lo < base + span for lo, hi in claimed):
                continue
            if not procs_with_uid_in(base, base + span):
                (UID_CLAIMS / f"{base}-{base + span}").write_text(str(os.getpid()))
                return base
    raise AssertionError("no free uid range for the test stack")


def release_uid_base(base):
    for f in UID_CLAIMS.glob(f"{base}-*"):
        try:
            if int(f.read_text()) == os.getpid():
                f.unlink()
        except (OSError, ValueError):
            pass


class Stack:
    def __init__(self, server, extra_config, state_dir=None):
        """state_dir: where the state goes (a file system of the test's
        own), else a folder of the stack's."""
        self.server = server
        self.dir = Path(tempfile.mkdtemp(prefix="rbx-", dir="/tmp"))
        os.chmod(self.dir, 0o755)
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        self.token = secrets.token_hex(24)
        self.second_token = secrets.token_hex(24)   # tokens_file: one a line
        self.state_dir = Path(state_dir) if state_dir else self.dir / "state"
        self.run_dir = self.dir / "run"
        self.socket = self.dir / "fcgi.sock"
        self.tokens_file = self.dir / "tokens"
        self.conf_path = self.dir / "roombox.conf"
        self.procs = []                 # Popen objects we started
        self.logs = []                  # log files worth showing on failure
        self.rooms = set()              # every room any client touched
        self.fcgi_wrap = []             # argv roombox-fcgi runs under (e.g. prlimit)

        cfg = dict(BASE_CONFIG)
        cfg.update(extra_config)
        self.max_rooms = int(cfg["max_rooms"])
        self.uid_base = int(cfg.get("uid_base") or pick_uid_base(self.max_rooms * ROOM_IDS))
        cfg.update({
            "state_dir": str(self.state_dir),
            "run_dir": str(self.run_dir),
            "socket": str(self.socket),
            "tokens_file": str(self.tokens_file),
            "helper": str(HELPER),
            "uid_base": str(self.uid_base),
        })
        self.config = cfg
        self.tokens_file.write_text(self.token + "\n" + self.second_token + "\n")
        os.chmod(self.tokens_file, 0o600)
        self.write_config()

    def write_config(self):
        """roombox.conf from self.config (again, after a test changed it)."""
        self.conf_path.write_text(
            "# generated by tests/integration/conftest.py\n"
            + "".join(f"{k} = {v}\n" for k, v in self.config.items()))
        os.chmod(self.conf_path, 0o644)

    # -- processes

    def spawn(self, argv, log_name):
        """Start a process of the stack (stopped with it), its output in
        log_name in the stack's directory."""
        log = self.dir / log_name
        if log not in self.logs:
            self.logs.append(log)
        f = open(log, "ab")
        p = subprocess.Popen([str(a) for a in argv], stdin=subprocess.DEVNULL,
                             stdout=f, stderr=subprocess.STDOUT,
                             start_new_session=True)
        f.close()
        self.procs.append(p)
        return p

    def start(self):
        for b in (FCGI, HELPER):
            assert os.access(b, os.X_OK), f"{b} is not built (run make)"
        if self.server == "nginx":
            fcgi = self.fcgi_proc = self.spawn([*self.fcgi_wrap, FCGI, "-c", self.conf_path],
                                               "fcgi.log")
            wait_until(lambda: self.socket.exists() or fcgi.poll() is not None,
                       STARTUP_TIMEOUT, f"roombox-fcgi to create {self.socket}")
            assert fcgi.poll() is None, \
                f"roombox-fcgi exited {fcgi.returncode}\n{self.log_tail()}"
            conf = self.dir / "nginx.conf"
            conf.write_text(nginx_config(NGINX_EXAMPLE.read_text(), self.port,
                                         self.socket, self.dir, self._mk("nginx-tmp")))
            self.logs.append(self.dir / "nginx-error.log")
            subprocess.run(["nginx", "-t", "-q", "-e", self.dir / "nginx-error.log",
                            "-c", conf], check=True)
            self.spawn(["nginx", "-e", self.dir / "nginx-error.log", "-c", conf,
                         "-g", "daemon off;"], "nginx.out")
        else:
            conf = self.dir / "lighttpd.conf"
            conf.write_text(lighttpd_config(self.port, self.conf_path, self.dir))
            self.logs.append(self.dir / "lighttpd-error.log")
            subprocess.run(["lighttpd", "-tt", "-f", conf], check=True)
            self.spawn(["lighttpd", "-D", "-f", conf], "lighttpd.out")
        self.wait_healthy()

    def _mk(self, name):
        p = self.dir / name
        p.mkdir(exist_ok=True)
        return p

    def health(self):
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
            conn.request("GET", "/api/health")
            r = conn.getresponse()
            body = r.read()
            conn.close()
            return r.status == 200 and json.loads(body).get("ok") is True
        except (OSError, ValueError, http.client.HTTPException):
            return False

    def wait_healthy(self):
        def ready():
            for p in self.procs:
                if p.poll() is not None:
                    raise AssertionError(
                        f"{p.args[0]} exited {p.returncode} during start-up\n{self.log_tail()}")
            return self.health()
        try:
            wait_until(ready, STARTUP_TIMEOUT, f"{self.server} stack to answer /api/health")
        except AssertionError as e:
            raise AssertionError(f"{e}\n{self.log_tail()}")

    def log_tail(self, lines=30):
        out = []
        for log in self.logs:
            try:
                text = log.read_text(errors="replace").splitlines()[-lines:]
            except OSError:
                continue
            out.append(f"--- {log}\n" + "\n".join(text))
        return "\n".join(out)

    # -- roombox-fcgi itself

    def fcgi_pids(self):
        """Host pids of this stack's live roombox-fcgi processes."""
        conf = str(self.conf_path)
        return [pid for pid in proc_pids()
                if (cmd := proc_cmdline(pid)).startswith(f"{FCGI} ")
                and conf in cmd and pid_alive(pid)]

    def restart_fcgi(self, sig=signal.SIGKILL, timeout=30, while_down=None):
        """Send `sig` to roombox-fcgi (only to it: not to its process group),
        wait until it is gone, and have it running again with the same
        configuration: behind nginx we start it again ourselves, lighttpd
        spawns it again by itself.  Returns the new pid.  Behind nginx,
        while_down() is called once it is gone and before it starts again
        (lighttpd may start it again at any time: no such moment)."""
        old = self.fcgi_pids()
        assert len(old) == 1, f"expected one roombox-fcgi, found {old}"
        os.kill(old[0], sig)
        if self.server == "nginx":
            self.fcgi_proc.wait(timeout=timeout)
            self.procs.remove(self.fcgi_proc)
        wait_until(lambda: not pid_alive(old[0]), timeout,
                   f"roombox-fcgi (pid {old[0]}) to end after signal {sig}")
        if self.server == "nginx":
            try:
                if while_down:
                    while_down()
            finally:
                self.fcgi_proc = self.spawn([FCGI, "-c", self.conf_path], "fcgi.log")
        self.wait_healthy()
        new = self.fcgi_pids()
        assert len(new) == 1 and new != old, f"roombox-fcgi before {old}, after {new}"
        return new[0]

    # -- helper, for the safety net and for white-box views

    def helper(self, request):
        """One request (a dict, see helper_records.py) to the helper run
        directly: (exit status, the answer as a dict)."""
        r = subprocess.run([str(HELPER), "-c", str(self.conf_path)],
                           input=encode_request(request),
                           capture_output=True, timeout=60)
        try:
            return r.returncode, decode_answer(r.stdout)
        except AssertionError:
            return r.returncode, {"error": r.stdout.decode(errors="replace")}

    def keeper_pid(self, room):
        """The keeper's host pid from <run_dir>/rooms/<room>/keeper, if that
        process is alive."""
        try:
            text = (self.run_dir / "rooms" / room / "keeper").read_text()
        except OSError:
            return None
        m = re.match(r"\s*(\d+)", text)
        if not m:
            return None
        pid = int(m.group(1))
        return pid if pid_alive(pid) else None

    def room_state_dir(self, room):
        return self.state_dir / "rooms" / room

    # -- stopping

    def stop(self):
        problems = []
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in reversed(self.procs):
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                problems.append(f"{p.args[0]} ignored SIGTERM for 10 s")
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=10)
        # roombox-fcgi spawned by lighttpd must be gone with it.
        conf = str(self.conf_path)

        def fcgi_left():
            return [pid for pid in proc_pids() if conf in proc_cmdline(pid)
                    and "roombox-fcgi" in proc_cmdline(pid) and pid_alive(pid)]
        try:
            wait_until(lambda: not fcgi_left(), 10, "roombox-fcgi to stop")
        except AssertionError:
            pass
        left = fcgi_left()
        if left:
            problems.append(f"roombox-fcgi left running after {self.server} stopped: {left}")
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        problems += self.sweep()
        release_uid_base(self.uid_base)
        if not problems and not os.environ.get("ROOMBOX_KEEP_TMP"):
            shutil.rmtree(self.dir, ignore_errors=True)
        return problems

    def sweep(self):
        """Remove whatever the stack left on the host (rooms, processes,
        mounts, loop devices, cgroups) and say what there was."""
        problems = []
        rc, listing = self.helper({"op": "list"})
        for st in (listing.get("rooms") or []) if rc == 0 else []:
            rid = st.get("room")      # the helper's <status> (common/protocol.h)
            problems.append(f"room {rid} still existed at the end of the module")
            self.helper({"op": "destroy", "room": rid})
        span = (self.uid_base, self.uid_base + self.max_rooms * ROOM_IDS)
        # a keeper killed by the last destroy may still be on its way out
        deadline = time.monotonic() + GONE_TIMEOUT
        while (left := procs_with_uid_in(*span)) and time.monotonic() < deadline:
            time.sleep(0.05)
        if left:
            problems.append(f"processes of the stack's rooms left: {left}")
            for pid, _, _ in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for room_dir in (self.run_dir / "rooms").glob("*") if (self.run_dir / "rooms").is_dir() else []:
            pid = self.keeper_pid(room_dir.name)
            if pid:
                problems.append(f"keeper of {room_dir.name} (pid {pid}) left running")
                os.kill(pid, signal.SIGKILL)
        mounts = [l.split()[4] for l in host_mountinfo_lines(str(self.dir))]
        for mnt in sorted(set(mounts), key=len, reverse=True):
            subprocess.run(["umount", "-l", mnt], capture_output=True)
        if mounts:
            problems.append(f"mounts left under {self.dir}: {mounts}")
        for dev, backing in loop_devices_backed_by(str(self.dir)):
            subprocess.run(["losetup", "-d", f"/dev/{dev}"], capture_output=True)
            problems.append(f"loop device {dev} left on {backing}")
        for room in self.rooms:
            for cg in cgroup_dirs_named(room, cgroup_group(self.state_dir)):
                problems.append(f"cgroup left: {cg}")
                # only the room's own layout: <room>/<leaf>/ and <room>/
                for leaf in Path(cg).iterdir():
                    if leaf.is_dir():
                        try:
                            os.rmdir(leaf)
                        except OSError:
                            pass
                try:
                    os.rmdir(cg)
                except OSError:
                    pass
        return problems


def started_stack(extra, server="nginx", state_dir=None):
    """A stack of a test's own, started (and stopped again if it does not
    come up); the test stops it."""
    return started(Stack(server, extra, state_dir))


def started(s):
    """Stack s started, or stopped again if it does not come up."""
    try:
        s.start()
    except BaseException:
        s.stop()
        raise
    return s


@pytest.fixture(scope="module")
def stack(request):
    extra = getattr(request.module, "ROOMBOX_CONFIG", {})
    s = Stack(request.param, extra)
    try:
        s.start()
    except BaseException:
        problems = s.stop()
        if problems:
            print("\n".join(problems))
        raise
    yield s
    problems = s.stop()
    assert not problems, f"{s.server} stack teardown:\n" + "\n".join(problems) + \
        f"\n{s.log_tail()}"


def pytest_generate_tests(metafunc):
    if "stack" in metafunc.fixturenames:
        servers = getattr(metafunc.module, "SERVERS", ALL_SERVERS)
        metafunc.parametrize("stack", servers, indirect=True, scope="module")


@pytest.fixture
def room():
    return unique_room()


def destroy_and_check(client, room):
    """DELETE the room and check that nothing of it is left running."""
    st = client.get(f"/api/rooms/{room}")
    uid = keeper = pid_ns = None
    if st.status == 200:
        uid = client.room_uid(room)
        keeper = client.stack.keeper_pid(room)
        pid_ns = ns_inode(keeper, "pid") if keeper else None
    client.destroy(room)
    if uid is not None:
        # every host id of the room: its root's, its user's, any other
        wait_until(lambda: not procs_with_uid_in(uid, uid + ROOM_IDS), GONE_TIMEOUT,
                   f"processes of room {room} (uids {uid}-{uid + ROOM_IDS - 1}) to end: "
                   f"{procs_with_uid_in(uid, uid + ROOM_IDS)}")
    if keeper:
        wait_until(lambda: not pid_alive(keeper), GONE_TIMEOUT,
                   f"keeper {keeper} of room {room} to end")
    if pid_ns:
        wait_until(lambda: not procs_in_ns("pid", pid_ns), GONE_TIMEOUT,
                   f"processes in room {room}'s pid namespace to end")


@pytest.fixture
def client(stack):
    c = Client(stack)
    yield c
    stack.rooms.update(c.rooms)
    errors = []
    for r in c.rooms:
        if not ROOM_ID.fullmatch(r):
            continue
        try:
            destroy_and_check(c, r)
        except AssertionError as e:
            errors.append(str(e))
    assert not errors, "room teardown:\n" + "\n".join(errors)


KERNEL_SKIP = "this kernel lacks "


def kernel_lacks(what):
    """The reason for `pytest.skip(kernel_lacks(what))`, once a control has
    just shown that the kernel lacks `what`: the only skip that is not
    turned into a failure below.  (Raised in the test itself, so that the
    summary names the test's own line.)"""
    return KERNEL_SKIP + what


OFFLINE_SKIP = "this machine cannot reach "


def offline(what):
    """The reason for `pytest.skip(offline(what))`, once a control has just
    shown that `what` (a package registry) cannot be reached from here: a
    tool the test installs from it cannot be had.  Listed, not failed."""
    return OFFLINE_SKIP + what


NOT_SERVED_SKIP = "this service has no route "


def not_served(what):
    """The reason for `pytest.skip(not_served(what))`, once a control
    request has just shown that the running service answers 404 for the
    route a test is about (a route that is not built yet): listed, not
    failed, so the test runs the day the route lands."""
    return NOT_SERVED_SKIP + what


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # A skipped test is not a passed test: report it as a failure so that a
    # missing tool or a broken fixture can never turn the suite green.  Only
    # kernel_lacks(), offline() and not_served() stay (listed) skips.
    outcome = yield
    rep = outcome.get_result()
    reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
    if rep.skipped and reason.startswith(("Skipped: " + KERNEL_SKIP, "Skipped: " + OFFLINE_SKIP,
                                  "Skipped: " + NOT_SERVED_SKIP)):
        return
    if rep.skipped and not hasattr(rep, "wasxfail"):
        rep.outcome = "failed"
        rep.longrepr = f"skipped tests count as failures here: {rep.longrepr}"


# ---------------------------------------------------------------- serial tests

# tools/integration.sh runs a suite in two passes: first every test not
# marked serial, on several pytest-xdist workers at once (a module's tests on
# one worker, with that module's own stacks), then the serial ones alone.  A
# test is serial when, while it runs, it changes something host-wide that
# the rooms of other tests would feel (a sysctl, the host's accounts, from
# which every new room's /etc/passwd is made) or measures the whole host.
# ROOMBOX_TEST_PASS names the pass: "parallel" leaves the serial tests out,
# "serial" keeps only them; unset (pytest run by hand) every test runs.
TEST_PASSES = ("parallel", "serial")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "serial: changes or measures something host-wide; run alone, "
        "after the parallel pass (tools/integration.sh)")


def pytest_collection_modifyitems(config, items):
    which = os.environ.get("ROOMBOX_TEST_PASS")
    if not which:
        return
    if which not in TEST_PASSES:
        raise pytest.UsageError(f"ROOMBOX_TEST_PASS={which!r}: not one of {TEST_PASSES}")
    want = which == "serial"
    keep = [i for i in items if (i.get_closest_marker("serial") is not None) == want]
    if len(keep) < len(items):   # both folders' copies of this hook may run
        kept = set(keep)
        config.hook.pytest_deselected(items=[i for i in items if i not in kept])
        items[:] = keep
