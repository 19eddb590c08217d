#!/usr/bin/python3
"""The Debian package, end to end, on this machine (run by `make check`).

  1. build     dpkg-buildpackage -b -us -uc in a copy of the tree (the work
               tree is never written), and a second .deb of the same tree
               with a higher version, for the upgrade;
  2. lint      lintian --fail-on error,warning (every warning is fixed or
               overridden in debian/roombox.lintian-overrides);
  3. install   apt-get install ./roombox_*.deb: user, group, statoverride,
               token, conffile, directories; the service started without
               systemd (`service roombox start`, i.e. /etc/init.d/roombox);
  4. web       the nginx snippet enabled the documented way (the line
               `include snippets/roombox.conf;` in a server block) and the
               lighttpd module the documented way (lighty-enable-mod roombox),
               each in a throwaway server on a free port; API checks through
               both with the token from /etc/roombox/tokens;
  5. upgrade   the higher version installed over it: the room's files and
               messages, the token and the configuration survive;
  6. remove    rooms stopped, data kept; reinstall finds everything again;
  7. purge     with rooms running: no roombox user, statoverride, files,
               room process, mount, loop device or cgroup left.

It installs and purges the package system-wide, so it refuses to run when
roombox is already installed.  Everything it starts (nginx, lighttpd) it
stops; whatever happens, it purges the package and removes its temporary
directory.  Prints one line per check and finally "N passed, N failed".

Hosts without an init (containers, CI machines) usually have a policy-rc.d
that keeps maintainer scripts from starting or stopping services; the test
then does by hand what the administrator would (`service roombox start`)
and says so.  Do not run it at the same time as the integration suites:
they share the helper's cgroup tree (roombox/) and uid range.
"""

import glob
import grp
import http.client
import json
import os
import pwd
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
HELPER = "/usr/lib/roombox/roombox-helper"
TOKENS = "/etc/roombox/tokens"
SOCKET = "/run/roombox/fcgi/fcgi.sock"
STATE = "/var/lib/roombox"
LIGHTTPD_LINK = "/etc/lighttpd/conf-enabled/50-roombox.conf"
FASTCGI_LINK = "/etc/lighttpd/conf-enabled/10-fastcgi.conf"
APT_ENV = dict(os.environ, DEBIAN_FRONTEND="noninteractive")


class Fatal(Exception):
    """A step the rest of the test depends on failed."""


# ---------------------------------------------------------------- reporting

class Report:
    def __init__(self):
        self.passed = 0
        self.failed = 0
        self.t0 = time.monotonic()

    def check(self, name, ok, detail=""):
        if ok:
            self.passed += 1
            print(f"ok   {name}", flush=True)
        else:
            self.failed += 1
            print(f"FAIL {name}" + (f": {detail}" if detail else ""), flush=True)
        return ok

    def note(self, text):
        print(f"     note: {text}", flush=True)

    def phase(self, name):
        print(f"== {name}  (+{time.monotonic() - self.t0:.0f}s)", flush=True)


R = Report()


def run(cmd, check=True, timeout=900, **kw):
    """Run cmd (a list); on failure with check=True raise Fatal with its
    output.  Returns the CompletedProcess (text, stdout+stderr merged)."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout, **kw)
    if check and p.returncode != 0:
        raise Fatal(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-4000:]}")
    return p


def wait_until(pred, timeout, interval=0.1):
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(interval)


# ---------------------------------------------------------------- host views

def pkg_status():
    p = run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}", "roombox"], check=False)
    return p.stdout.strip() if p.returncode == 0 else ""


def getent(db, key):
    p = run(["getent", db, key], check=False)
    return p.stdout.strip() if p.returncode == 0 else ""


def statoverride():
    return run(["dpkg-statoverride", "--list", HELPER], check=False).stdout.strip()


def proc_info(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            text = f.read()
    except OSError:
        return None
    info = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
    return {"name": info.get("Name", "").strip(),
            "uid": int(info.get("Uid", "0").split()[0]),
            "state": info.get("State", "").strip()}


def live_keepers():
    """{room id: keeper pid} of this installation's running rooms, from the
    helper's records <run_dir>/rooms/<id>/keeper."""
    out = {}
    for rec in glob.glob("/run/roombox/rooms/*/keeper"):
        try:
            pid = int(Path(rec).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        st = proc_info(pid)
        if st and st["name"] == "roombox-keeper" and not st["state"].startswith("Z"):
            out[rec.split("/")[4]] = pid
    return out


def pid_ns(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/pid")
    except OSError:
        return None


def start_time(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


class Rooms:
    """The processes of the rooms this test made, told apart from those of
    any other roombox instance on the host (which share the uid range and
    the cgroup tree): the keepers seen running (pid and start time), every
    process in the pid namespace of a keeper still alive (a pid namespace
    dies with its PID 1, and a dead one's number may be reused), and every
    process in a cgroup of one of the test's rooms."""

    def __init__(self):
        self.ids = set()
        self.keepers = {}           # pid -> (start time, pid namespace)

    def remember(self):
        for pid in live_keepers().values():
            self.keepers.setdefault(pid, (start_time(pid), pid_ns(pid)))

    def _in_room_cgroup(self, pid):
        try:
            text = Path(f"/proc/{pid}/cgroup").read_text()
        except OSError:
            return False
        return any(m in self.ids for m in re.findall(r":/roombox/([^/\n]+)", text))

    def processes(self):
        alive = {p for p, (st, _) in self.keepers.items() if st and start_time(p) == st}
        spaces = {self.keepers[p][1] for p in alive}
        found = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            if int(d) in alive or pid_ns(d) in spaces or self._in_room_cgroup(d):
                st = proc_info(d)
                if st and not st["state"].startswith("Z"):
                    found.append(f"{d}:{st['name']}")
        return found


ROOMS = Rooms()


def service_processes(roombox_uid=None):
    """Processes of the service user (roombox-fcgi)."""
    if roombox_uid is None:
        pw = getent("passwd", "roombox").split(":")
        if len(pw) < 3:
            return []
        roombox_uid = int(pw[2])
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = proc_info(d)
            if st and st["uid"] == roombox_uid and not st["state"].startswith("Z"):
                found.append(f"{d}:{st['name']}")
    return found


def fcgi_pids():
    return [int(p.split(":")[0]) for p in service_processes() if p.endswith(":roombox-fcgi")]


def nothing_running():
    ROOMS.remember()
    return not live_keepers() and not ROOMS.processes() and not fcgi_pids()


def roombox_mounts():
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            mnt = fields[4]
            if mnt.startswith((STATE, "/run/roombox")):
                out.append(mnt)
    return out


def roombox_loops():
    out = []
    for bf in glob.glob("/sys/block/loop*/loop/backing_file"):
        try:
            if Path(bf).read_text().startswith(STATE + "/"):
                out.append(bf.split("/")[3])
        except OSError:
            pass
    return out


def roombox_cgroup_tops():
    return [p for p in glob.glob("/sys/fs/cgroup/roombox") + glob.glob("/sys/fs/cgroup/*/roombox")
            if os.path.isdir(p)]


def room_cgroups(rooms):
    return [f"{top}/{r}" for top in roombox_cgroup_tops() for r in rooms if os.path.isdir(f"{top}/{r}")]


def mode_owner(path):
    st = os.lstat(path)
    return (f"{st.st_mode & 0o7777:o}", pwd.getpwuid(st.st_uid).pw_name,
            grp.getgrgid(st.st_gid).gr_name)


def service_denied_by_policy():
    """True when policy-rc.d forbids maintainer scripts to start services."""
    pol = "/usr/sbin/policy-rc.d"
    if not os.access(pol, os.X_OK):
        return False
    return run([pol, "roombox", "start"], check=False).returncode == 101


# ---------------------------------------------------------------- HTTP

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None, token=None, timeout=60):
    """(status, parsed JSON or raw text, headers)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    try:
        c.request(method, path, body=data, headers=headers)
        r = c.getresponse()
        raw = r.read().decode("utf-8", "replace")
        try:
            parsed = json.loads(raw)
        except ValueError:
            parsed = raw
        return r.status, parsed, dict(r.getheaders())
    except OSError as e:
        return 0, str(e), {}
    finally:
        c.close()


def execute(port, token, room, cmd):
    st, body, _ = request(port, "POST", f"/api/rooms/{room}/sandbox/exec", {"cmd": cmd}, token)
    ROOMS.remember()
    if st == 200 and isinstance(body, dict) and "result" in body:
        return body["result"].get("stdout"), body
    return None, (st, body)


def messages(port, token, room):
    st, body, _ = request(port, "GET", f"/api/rooms/{room}/messages", token=token)
    if st == 200 and isinstance(body, dict):
        return [m.get("content") for m in body.get("messages", [])]
    return None


# ---------------------------------------------------------------- web servers

class Server:
    """A throwaway nginx or lighttpd in the foreground, our child."""

    def __init__(self, name, argv, port, log):
        self.name, self.port, self.log = name, port, log
        self.proc = subprocess.Popen(argv, stdout=open(log, "a"), stderr=subprocess.STDOUT)

    def wait_ready(self):
        def up():
            if self.proc.poll() is not None:
                return True
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return True
            except OSError:
                return False
        wait_until(up, 15)
        if self.proc.poll() is not None:
            raise Fatal(f"{self.name} exited {self.proc.returncode}:\n{Path(self.log).read_text()[-3000:]}")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def start_nginx(tmp):
    """The documented step, verbatim, in a throwaway server block:
    `include snippets/roombox.conf;` (snippets/ of this configuration is
    /etc/nginx/snippets, as in a real /etc/nginx)."""
    d = tmp / "nginx"
    d.mkdir()
    (d / "snippets").symlink_to("/etc/nginx/snippets")
    port = free_port()
    (d / "nginx.conf").write_text(f"""
user www-data;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/body;
    fastcgi_temp_path     {d}/fastcgi;
    proxy_temp_path       {d}/proxy;
    uwsgi_temp_path       {d}/uwsgi;
    scgi_temp_path        {d}/scgi;
    server {{
        listen 127.0.0.1:{port};
        server_name localhost;
        include snippets/roombox.conf;
    }}
}}
""")
    run(["nginx", "-t", "-e", f"{d}/error.log", "-c", f"{d}/nginx.conf"])
    s = Server("nginx", ["nginx", "-e", f"{d}/error.log", "-c", f"{d}/nginx.conf",
                         "-g", "daemon off;"], port, d / "stdout.log")
    s.wait_ready()
    return s


def start_lighttpd(tmp):
    """lighttpd reading the modules `lighty-enable-mod roombox` enabled
    (the same include a stock /etc/lighttpd/lighttpd.conf makes, restricted
    to the two files concerned so the host's other modules do not matter)."""
    d = tmp / "lighttpd"
    (d / "www").mkdir(parents=True)
    shutil.chown(d, "www-data", "www-data")     # lighttpd opens its log as www-data
    port = free_port()
    (d / "lighttpd.conf").write_text(f"""
server.modules = ( "mod_access" )
server.bind          = "127.0.0.1"
server.port          = {port}
server.username      = "www-data"
server.groupname     = "www-data"
server.document-root = "{d}/www"
server.pid-file      = "{d}/lighttpd.pid"
server.errorlog      = "{d}/error.log"
include_shell "/usr/share/lighttpd/create-mime.conf.pl"
include "{FASTCGI_LINK}"
include "{LIGHTTPD_LINK}"
""")
    run(["lighttpd", "-tt", "-f", f"{d}/lighttpd.conf"])
    s = Server("lighttpd", ["lighttpd", "-D", "-f", f"{d}/lighttpd.conf"], port, d / "stdout.log")
    s.wait_ready()
    return s


# ---------------------------------------------------------------- the steps

def copy_tree(dest):
    """The tree as `git ls-files` sees it (tracked and untracked, not
    ignored: no build/, no .run/), or, outside git, everything but those."""
    dest.mkdir(parents=True)
    p = run(["git", "-C", str(REPO), "ls-files", "-z", "-co", "--exclude-standard"], check=False)
    if p.returncode == 0:
        names = [n for n in p.stdout.split("\0") if n and os.path.lexists(REPO / n)]
        tar = subprocess.run(["tar", "-C", str(REPO), "--null", "-T", "-", "-cf", "-"],
                             input="\0".join(names).encode(), stdout=subprocess.PIPE, check=True)
        subprocess.run(["tar", "-C", str(dest), "-xf", "-"], input=tar.stdout, check=True)
    else:
        shutil.copytree(REPO, dest, symlinks=True, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns(".git", "build", ".run", "__pycache__"))


def changelog_version(tree):
    first = (tree / "debian/changelog").read_text().splitlines()[0]
    return re.match(r"\S+ \(([^)]+)\)", first).group(1)


def bump_version(tree, new):
    cl = tree / "debian/changelog"
    text = cl.read_text()
    trailer = next(l for l in text.splitlines() if l.startswith(" -- "))
    trailer = re.sub(r">  .*", ">  " + time.strftime("%a, %d %b %Y %H:%M:%S +0000", time.gmtime()), trailer)
    cl.write_text(f"roombox ({new}) unstable; urgency=medium\n\n"
                  f"  * Package test: the same tree, a higher version.\n\n{trailer}\n\n" + text)


def build(tree, log, nocheck=False):
    env = dict(os.environ)
    if nocheck:
        env["DEB_BUILD_OPTIONS"] = (env.get("DEB_BUILD_OPTIONS", "") + " nocheck").strip()
    p = run(["dpkg-buildpackage", "-b", "-us", "-uc", "-J"], cwd=tree, env=env, check=False)
    Path(log).write_text(p.stdout)
    if p.returncode != 0:
        raise Fatal(f"dpkg-buildpackage in {tree} exited {p.returncode}; last lines:\n{p.stdout[-3000:]}")
    arch = run(["dpkg-architecture", "-qDEB_HOST_ARCH"]).stdout.strip()
    deb = tree.parent / f"roombox_{changelog_version(tree)}_{arch}.deb"
    if not deb.exists():
        raise Fatal(f"{deb.name} was not built")
    return deb


def unit_summary(log):
    """The unit tests dh_auto_test ran in the build: their closing line and
    every skip with its reason (a kernel without an i386 entry skips the
    int 0x80 test), so that a skip is seen here and not only in the log."""
    lines = Path(log).read_text(errors="replace").splitlines()
    closing = [l for l in lines if re.fullmatch(r"\d+ passed, \d+ failed, \d+ skipped", l)]
    R.check("dh_auto_test ran the unit tests" + (f": {closing[-1]}" if closing else ""),
            bool(closing), "no closing line of tools/unit.sh in the build log")
    for l in lines:
        if l.startswith("tools/unit.sh: SKIPPED: "):
            R.note("unit test " + l[len("tools/unit.sh: SKIPPED: "):])


def apt_install(deb):
    return run(["apt-get", "install", "-y", "-q", "--no-install-recommends", str(deb)],
               env=APT_ENV, check=False)


def service(action):
    return run(["service", "roombox", action], check=False, timeout=300)


def runs_deleted_binary(pid):
    try:
        return os.readlink(f"/proc/{pid}/exe").endswith(" (deleted)")
    except OSError:
        return False


def ensure_started(what):
    """Start the service unless the maintainer scripts did; restart it if
    it still runs the binary an upgrade replaced."""
    pids = fcgi_pids()
    if any(runs_deleted_binary(p) for p in pids):
        R.note(f"{what}: roombox-fcgi still runs the replaced binary (policy-rc.d "
               "denied the postinst's restart): `service roombox restart`")
        p = service("restart")
        R.check(f"{what}: service roombox restart", p.returncode == 0, p.stdout)
    elif not pids:
        if service_denied_by_policy():
            R.note(f"{what}: policy-rc.d kept the postinst from starting the service: "
                   "`service roombox start`")
        p = service("start")
        R.check(f"{what}: service roombox start", p.returncode == 0, p.stdout)
    log = Path("/var/log/roombox/roombox-fcgi.log")
    ok = wait_until(lambda: os.path.exists(SOCKET) and fcgi_pids(), 20)
    if not R.check(f"{what}: roombox-fcgi listens on {SOCKET}", bool(ok),
                   log.read_text()[-2000:] if log.exists() else ""):
        raise Fatal("the service did not start")


def check_installed(what, token=None):
    """Everything the postinst promises.  Returns the token."""
    R.check(f"{what}: dpkg status ii", pkg_status() == "ii", pkg_status())
    R.check(f"{what}: dpkg-statoverride lists root roombox 4754 {HELPER}",
            statoverride() == f"root roombox 4754 {HELPER}", statoverride())
    R.check(f"{what}: helper is 4754 root:roombox", mode_owner(HELPER) == ("4754", "root", "roombox"),
            str(mode_owner(HELPER)))
    pw = getent("passwd", "roombox").split(":")
    R.check(f"{what}: id roombox", run(["id", "roombox"], check=False).returncode == 0)
    R.check(f"{what}: roombox is a system user without home or login",
            len(pw) == 7 and int(pw[2]) < 1000 and pw[5] == "/nonexistent"
            and pw[6] == "/usr/sbin/nologin", ":".join(pw))
    R.check(f"{what}: group roombox exists", bool(getent("group", "roombox")))
    R.check(f"{what}: {TOKENS} is 640 root:roombox", mode_owner(TOKENS) == ("640", "root", "roombox"),
            str(mode_owner(TOKENS)))
    t = Path(TOKENS).read_text().strip()
    R.check(f"{what}: the token is 64 random hex digits", re.fullmatch(r"[0-9a-f]{64}", t) is not None, t)
    if token is not None:
        R.check(f"{what}: the token was kept", t == token)
    conffiles = run(["dpkg-query", "-W", "-f=${Conffiles}", "roombox"]).stdout
    R.check(f"{what}: /etc/roombox/roombox.conf is a conffile",
            re.search(r"^ /etc/roombox/roombox\.conf ", conffiles, re.M) is not None, conffiles)
    R.check(f"{what}: {STATE} is 711 root", mode_owner(STATE)[:2] == ("711", "root"), str(mode_owner(STATE)))
    R.check(f"{what}: {STATE}/messages is 700 roombox",
            mode_owner(f"{STATE}/messages") == ("700", "roombox", "roombox"), str(mode_owner(f"{STATE}/messages")))
    return t


def check_service_files(what):
    R.check(f"{what}: socket is 660 roombox:www-data",
            mode_owner(SOCKET) == ("660", "roombox", "www-data"), str(mode_owner(SOCKET)))
    R.check(f"{what}: /run/roombox is 711 root", mode_owner("/run/roombox") == ("711", "root", "root"),
            str(mode_owner("/run/roombox")))
    users = {proc_info(p)["uid"] for p in fcgi_pids()}
    uid = int(getent("passwd", "roombox").split(":")[2])
    R.check(f"{what}: roombox-fcgi runs as roombox", users == {uid}, str(users))


def api_checks(srv, token, room, version):
    w = srv.name
    st, body, _ = request(srv.port, "GET", "/api/health")
    R.check(f"{w}: GET /api/health -> 200 ok, version {version}",
            st == 200 and isinstance(body, dict) and body.get("ok") is True and body.get("version") == version,
            f"{st} {body}")
    st, body, hdr = request(srv.port, "GET", "/api/rooms")
    R.check(f"{w}: no token -> 401 JSON", st == 401 and isinstance(body, dict) and "error" in body, f"{st} {body}")
    st, body, _ = request(srv.port, "GET", "/api/rooms", token="0" * 64)
    R.check(f"{w}: wrong token -> 401", st == 401, f"{st} {body}")
    out, body = execute(srv.port, token, room, "echo hi")
    R.check(f"{w}: exec echo hi -> hi", out == "hi\n" and body.get("sandboxName") == f"sandbox-{room}", str(body))
    # the console: the package's static files, with their policy
    for path, ctype in (("/console/", "text/html"), ("/console/app.js", "text/javascript"),
                        ("/console/vendor/xterm.mjs", "text/javascript")):
        st, body, hdr = request(srv.port, "GET", path)
        hdr = {k.lower(): v for k, v in hdr.items()}
        R.check(f"{w}: GET {path} -> 200 {ctype} with its Content-Security-Policy",
                st == 200 and hdr.get("content-type", "").startswith(ctype)
                and "script-src 'self'" in hdr.get("content-security-policy", ""),
                f"{st} {hdr} {str(body)[:200]}")


# ---------------------------------------------------------------- main

def main():
    if os.geteuid() != 0:
        print("tests/package/test_deb.py: installs, runs and purges the roombox package "
              "system-wide: run it (make check) as root.", file=sys.stderr)
        print("0 passed, 1 failed")
        return 1
    if pkg_status():
        print(f"tests/package/test_deb.py: roombox is installed here (dpkg status "
              f"'{pkg_status()}'); this test would purge it. Purge it first "
              "(apt-get purge roombox).", file=sys.stderr)
        print("0 passed, 1 failed")
        return 1
    tops_before = roombox_cgroup_tops()
    if tops_before:
        R.note(f"another roombox instance uses the cgroup tree here: {tops_before}; "
               "its top directories are left alone")

    tmp = Path(tempfile.mkdtemp(prefix="rbx-pkg."))
    os.chmod(tmp, 0o755)             # the web servers' workers (www-data) look inside
    servers = []
    installed = False
    lighty_before = {p: os.path.lexists(p) for p in (FASTCGI_LINK, LIGHTTPD_LINK)}
    try:
        # ---- 1. build
        R.phase("build")
        src = tmp / "v1" / "roombox"
        copy_tree(src)
        version = changelog_version(src)
        new_version = f"{version}+pkgtest1"
        up = tmp / "v2" / "roombox"
        copy_tree(up)
        bump_version(up, new_version)
        def products():
            return ([os.path.exists(REPO / p) for p in ("debian/roombox", "debian/files", "debian/.debhelper")],
                    sorted(glob.glob(str(REPO.parent / "roombox_*"))))
        before = products()
        t = time.monotonic()
        deb = build(src, tmp / "build-v1.log")
        R.check(f"dpkg-buildpackage -b -us -uc builds {deb.name} ({time.monotonic() - t:.0f}s)", True)
        unit_summary(tmp / "build-v1.log")
        R.check("the work tree is left alone (the build ran in a copy)",
                products() == before)
        t = time.monotonic()
        deb2 = build(up, tmp / "build-v2.log", nocheck=True)
        R.check(f"the same tree as {new_version} builds {deb2.name} ({time.monotonic() - t:.0f}s)", True)

        # ---- 2. lint
        R.phase("lint")
        changes = deb.with_name(deb.name[:-4] + ".changes")
        p = run(["lintian", "--fail-on", "error,warning", "--allow-root", str(changes)], check=False)
        print(p.stdout.rstrip() or "     (lintian: no tags)")
        R.check("lintian --fail-on error,warning", p.returncode == 0, f"exit {p.returncode}")
        R.check("lintian: no E:/W: tag left", not re.search(r"^[EW]: ", p.stdout, re.M))

        # ---- 3. install
        R.phase("install")
        p = apt_install(deb)
        installed = True
        if not R.check(f"apt-get install ./{deb.name}", p.returncode == 0, p.stdout[-3000:]):
            raise Fatal("install failed")
        token = check_installed("install")
        ensure_started("install")
        check_service_files("install")
        p = service("status")
        R.check("service roombox status -> 0 (running)", p.returncode == 0, p.stdout)

        # ---- 4. web servers, the documented way
        R.phase("web servers")
        nginx = start_nginx(tmp)
        servers.append(nginx)
        p = run(["lighty-enable-mod", "roombox"], check=False)
        R.check("lighty-enable-mod roombox", p.returncode == 0 and os.path.islink(LIGHTTPD_LINK)
                and os.path.lexists(FASTCGI_LINK), p.stdout)
        lighty = start_lighttpd(tmp)
        servers.append(lighty)

        room = f"pkg-{secrets.token_hex(4)}"
        room_b = f"pkg-{secrets.token_hex(4)}"
        ROOMS.ids = {room, room_b}
        for srv in (nginx, lighty):
            api_checks(srv, token, room, version)

        out, _ = execute(nginx.port, token, room, "echo kept > /workspace/f.txt && cd /tmp && export KEPT=yes")
        R.check("exec: write /workspace/f.txt", out == "", str(_))
        out, _ = execute(lighty.port, token, room, "cat /workspace/f.txt; pwd; echo $KEPT")
        R.check("exec: the file and the session persist between execs", out == "kept\n/tmp\nyes\n", str(out))
        st, body, _ = request(nginx.port, "POST", f"/api/rooms/{room}/messages",
                           {"role": "user", "content": "hello before the upgrade"}, token)
        R.check("POST a user message -> 201", st == 201, f"{st} {body}")
        st, body, _ = request(nginx.port, "POST", f"/api/rooms/{room}/messages",
                           {"role": "assistant", "content": "Look: <run>cat /workspace/f.txt</run>"}, token)
        content = body.get("message", {}).get("content", "") if isinstance(body, dict) else ""
        R.check("POST an assistant message with a run tag -> 201, its output appended",
                st == 201 and content == "Look: \n\nOutput (cat /workspace/f.txt):\nkept", f"{st} {body}")
        before_msgs = messages(nginx.port, token, room)
        R.check("GET messages -> both", before_msgs is not None and len(before_msgs) == 2, str(before_msgs))

        # Errors the web servers make themselves are JSON too.
        p = service("stop")
        R.check("service roombox stop", p.returncode == 0, p.stdout)
        R.check("stop: roombox-fcgi and every room stopped", wait_until(nothing_running, 10),
                f"{live_keepers()} {ROOMS.processes()} {fcgi_pids()}")
        p = service("status")
        R.check("service roombox status -> 3 (stopped)", p.returncode == 3, f"{p.returncode} {p.stdout}")
        st, body, _ = request(nginx.port, "GET", "/api/health")
        R.check("nginx, service stopped -> 502 JSON", st == 502 and isinstance(body, dict) and "error" in body,
                f"{st} {body}")
        st, body, _ = request(lighty.port, "GET", "/api/health")
        R.check("lighttpd, service stopped -> 503 JSON", st == 503 and isinstance(body, dict) and "error" in body,
                f"{st} {body}")
        p = service("start")
        R.check("service roombox start", p.returncode == 0, p.stdout)
        wait_until(lambda: os.path.exists(SOCKET), 20)
        out, _ = execute(nginx.port, token, room, "cat /workspace/f.txt")
        R.check("after a restart: the room's file is there", out == "kept\n", str(_))
        R.check("precondition: the room is running (keeper)", room in live_keepers(), str(live_keepers()))
        ROOMS.remember()

        # ---- 5. upgrade
        R.phase("upgrade")
        conf_before = Path("/etc/roombox/roombox.conf").read_bytes()
        p = apt_install(deb2)
        if not R.check(f"apt-get install ./{deb2.name} (upgrade)", p.returncode == 0, p.stdout[-3000:]):
            raise Fatal("upgrade failed")
        check_installed("upgrade", token)
        R.check("upgrade: roombox.conf unchanged", Path("/etc/roombox/roombox.conf").read_bytes() == conf_before)
        ensure_started("upgrade")
        st, body, _ = request(nginx.port, "GET", "/api/health")
        R.check(f"upgrade: the service is {new_version}", st == 200 and isinstance(body, dict)
                and body.get("version") == new_version, f"{st} {body}")
        out, _ = execute(nginx.port, token, room, "cat /workspace/f.txt")
        R.check("upgrade: the room's file survived", out == "kept\n", str(_))
        R.check("upgrade: the room's messages survived", messages(nginx.port, token, room) == before_msgs,
                str(messages(nginx.port, token, room)))

        # ---- 6. remove (not purge): service and rooms stop, data stays
        R.phase("remove")
        p = run(["apt-get", "remove", "-y", "-q", "roombox"], env=APT_ENV, check=False)
        R.check("apt-get remove roombox", p.returncode == 0, p.stdout[-3000:])
        R.check("remove: dpkg status rc", pkg_status() == "rc", pkg_status())
        R.check("remove: no room keeps running",
                wait_until(lambda: not live_keepers() and not ROOMS.processes(), 10),
                f"{live_keepers()} {ROOMS.processes()}")
        if fcgi_pids() and service_denied_by_policy():
            # (debhelper's postrm made the init script non-executable)
            R.note("remove: policy-rc.d kept the prerm from stopping roombox-fcgi: "
                   "`sh /etc/init.d/roombox stop`")
            p = run(["sh", "/etc/init.d/roombox", "stop"], check=False)
            R.check("remove: /etc/init.d/roombox stop works without the binaries", p.returncode == 0, p.stdout)
        R.check("remove: roombox-fcgi stopped", wait_until(lambda: not fcgi_pids(), 10), str(fcgi_pids()))
        R.check("remove: room files, messages, token, user kept",
                os.path.isdir(f"{STATE}/rooms/{room}") and os.path.exists(TOKENS)
                and bool(os.listdir(f"{STATE}/messages")) and bool(getent("passwd", "roombox")))

        p = apt_install(deb2)
        R.check(f"reinstall ./{deb2.name} after remove", p.returncode == 0, p.stdout[-3000:])
        check_installed("reinstall", token)
        ensure_started("reinstall")
        out, _ = execute(nginx.port, token, room, "cat /workspace/f.txt; sleep 600 > /dev/null 2>&1 &")
        R.check("reinstall: the room's file is there", out == "kept\n", str(_))
        R.check("reinstall: the room's messages are there", messages(lighty.port, token, room) == before_msgs)

        # ---- 7. purge, rooms running
        R.phase("purge")
        out, _ = execute(lighty.port, token, room_b, "echo b > /workspace/b; sleep 600 > /dev/null 2>&1 &")
        R.check("precondition: two rooms running, with background processes",
                out == "" and {room, room_b} <= set(live_keepers()), f"{_} {live_keepers()}")
        ROOMS.remember()
        R.check("precondition: the rooms' background processes run",
                sum(p.endswith(":sleep") for p in ROOMS.processes()) >= 2, str(ROOMS.processes()))
        R.check("precondition: the rooms' disk images are attached (loop devices)",
                len(roombox_loops()) >= 2, str(roombox_loops()))

        # The purge's own clean-up, for rooms the helper could not stop
        # (it runs after the helper is gone): its functions, alone, on the
        # running rooms; then the helper must bring a room back.
        postrm_cleanup(tmp)
        R.check("postrm clean-up alone: no process of the rooms left",
                wait_until(lambda: not ROOMS.processes(), 10), str(ROOMS.processes()))
        R.check("postrm clean-up alone: no loop device left",
                wait_until(lambda: not roombox_loops(), 10), str(roombox_loops()))
        R.check("postrm clean-up alone: no cgroup of the rooms left",
                not room_cgroups((room, room_b)), str(room_cgroups((room, room_b))))
        out, _ = execute(lighty.port, token, room_b, "cat /workspace/b; sleep 600 > /dev/null 2>&1 &")
        R.check("a room whose keeper was killed starts again, files intact", out == "b\n", str(_))
        out, _ = execute(nginx.port, token, room, "sleep 600 > /dev/null 2>&1 &")
        R.check("precondition: both rooms running again before the purge",
                out == "" and {room, room_b} <= set(live_keepers()), f"{_} {live_keepers()}")

        roombox_uid = int(getent("passwd", "roombox").split(":")[2])
        p = run(["apt-get", "purge", "-y", "-q", "roombox"], env=APT_ENV, check=False)
        R.check("apt-get purge roombox", p.returncode == 0, p.stdout[-3000:])
        installed = p.returncode != 0
        check_purged(roombox_uid, (room, room_b), tops_before)
    except Fatal as e:
        R.check("test aborted", False, str(e))
    except Exception as e:                      # a bug here: still report and clean up
        import traceback
        traceback.print_exc()
        R.check("test aborted", False, repr(e))
    finally:
        for s in servers:
            s.stop()
        if installed or pkg_status():
            R.note("cleaning up: purging roombox")
            run(["apt-get", "purge", "-y", "-q", "roombox"], env=APT_ENV, check=False)
        for link, existed in lighty_before.items():
            if not existed and os.path.islink(link):
                os.unlink(link)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{R.passed} passed, {R.failed} failed")
    return 0 if R.failed == 0 else 1


def postrm_cleanup(tmp):
    """Run kill_keepers, remove_cgroups, unmount_all and detach_loops of the
    installed postrm (its function definitions, without its case)."""
    text = Path("/var/lib/dpkg/info/roombox.postrm").read_text()
    funcs = text[text.index("\nHELPER="):text.index('\ncase "$1" in')]
    (tmp / "postrm-functions.sh").write_text(funcs)
    p = run(["sh", "-ec", f". {tmp}/postrm-functions.sh; kill_keepers; remove_cgroups; "
             "unmount_all; detach_loops"], check=False)
    R.check("postrm clean-up functions run", p.returncode == 0, p.stdout)


def check_purged(roombox_uid, rooms, tops_before):
    R.check("purge: package gone from dpkg", pkg_status() == "", pkg_status())
    R.check("purge: no user roombox", not getent("passwd", "roombox"))
    R.check("purge: no group roombox", not getent("group", "roombox"))
    R.check("purge: no statoverride", statoverride() == "", statoverride())
    for path in (STATE, "/etc/roombox", "/run/roombox", "/var/log/roombox", "/usr/lib/roombox",
                 "/run/roombox.pid", "/etc/init.d/roombox", LIGHTTPD_LINK):
        R.check(f"purge: no {path}", not os.path.lexists(path))
    R.check("purge: no rc.d link", not glob.glob("/etc/rc?.d/[SK][0-9][0-9]roombox"))
    R.check("purge: no process of the rooms (keepers, background processes)",
            wait_until(lambda: not ROOMS.processes(), 10), str(ROOMS.processes()))
    R.check("purge: no process of the roombox user (roombox-fcgi)",
            not service_processes(roombox_uid), str(service_processes(roombox_uid)))
    R.check("purge: no mount", not roombox_mounts(), str(roombox_mounts()))
    R.check("purge: no loop device", wait_until(lambda: not roombox_loops(), 10), str(roombox_loops()))
    R.check("purge: no cgroup of the rooms", not room_cgroups(rooms), str(room_cgroups(rooms)))
    if not tops_before:
        R.check("purge: no roombox cgroup directory", not roombox_cgroup_tops(), str(roombox_cgroup_tops()))


if __name__ == "__main__":
    sys.exit(main())
