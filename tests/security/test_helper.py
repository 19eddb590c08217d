"""roombox-helper trusts nothing from its caller: callers outside
the service group, -c from anyone but root, unsafe configuration files,
oversized requests, symlinks planted in the state and run directories,
descriptors passed by the caller.

The caller tests run a setuid-root copy of build/roombox-helper (with
build/roombox-keeper beside it, as installed) from a root-owned directory
on a filesystem mounted without nosuid, as `nobody` or as a temporary user
of the service group.  Through nginx for the tests that need rooms.
"""

import grp
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import HELPER, REPO, ROOM_ID, encode_request, pid_alive, record, unique_room
from security_helpers import file_fingerprint, helper_answer, helper_exec

SERVERS = ("nginx",)
KEEPER = REPO / "build" / "roombox-keeper"
SERVICE_GROUP = "roombox"


def run_helper(argv, request, *, user=None, env=None, pass_fds=(), timeout=60):
    """Run a helper binary with one request on stdin (a dict, see
    helper_records.py, or raw bytes); (exit status, the answer as a dict)."""
    prefix = []
    if user == "nobody":
        prefix = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    elif user:
        prefix = ["setpriv", f"--reuid={user}", "--regid=nogroup", "--init-groups"]
    data = request if isinstance(request, bytes) else encode_request(request)
    r = subprocess.run(prefix + [str(a) for a in argv], input=data, capture_output=True,
                       timeout=timeout, env=env if env is not None else {"PATH": "/usr/bin:/bin"},
                       pass_fds=pass_fds, cwd="/")
    return r.returncode, helper_answer(r)


def denied(rc, out):
    return rc != 0 and out.get("code") == "denied" and isinstance(out.get("error"), str)


# ---------------------------------------------------------------- callers

def suid_capable_dir():
    for parent in ("/var/tmp", "/tmp", "/var/lib", "/root"):
        if os.path.isdir(parent) and not os.statvfs(parent).f_flag & os.ST_NOSUID:
            return parent
    raise AssertionError("no directory on a filesystem without nosuid for the setuid helper copy")


@pytest.fixture(scope="module")
def service_group():
    """The group the helper copy belongs to (as installed: root:roombox),
    created for the module if the host has none."""
    made = False
    try:
        grp.getgrnam(SERVICE_GROUP)
    except KeyError:
        subprocess.run(["groupadd", "--system", SERVICE_GROUP], check=True)
        made = True
    try:
        yield grp.getgrnam(SERVICE_GROUP)
    finally:
        if made:
            subprocess.run(["groupdel", SERVICE_GROUP], capture_output=True)


@pytest.fixture(scope="module")
def suid_helper(service_group):
    """A setuid-root copy owned root:<service group>, mode 4755 (the
    installed 4754 would keep `nobody` from running it at all: here the
    helper's own check is what must refuse)."""
    d = Path(tempfile.mkdtemp(prefix="rbx-sec-helper-", dir=suid_capable_dir()))
    try:
        os.chmod(d, 0o755)
        helper = d / "roombox-helper"
        shutil.copy(HELPER, helper)
        shutil.copy(KEEPER, d / "roombox-keeper")
        os.chown(helper, 0, service_group.gr_gid)
        os.chmod(helper, 0o4755)
        os.chmod(d / "roombox-keeper", 0o755)
        yield helper
    finally:
        shutil.rmtree(d)


@pytest.fixture(scope="module")
def group_member(service_group):
    """A temporary user whose supplementary groups include the service group."""
    name = f"rbxsec{secrets.token_hex(3)}"
    try:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                        "--gid", "nogroup", "--groups", SERVICE_GROUP, name], check=True)
        assert name in grp.getgrnam(SERVICE_GROUP).gr_mem
        yield name
    finally:
        subprocess.run(["userdel", name], capture_output=True)


@pytest.mark.serial   # the service group and its member are host accounts
def test_setuid_copy_works_for_root(suid_helper, stack):
    """Control for the caller tests: the copy is a working helper."""
    rc, out = run_helper([suid_helper, "-c", stack.conf_path], {"op": "info"})
    assert rc == 0 and "cgroup" in out, out


@pytest.mark.serial   # the service group and its member are host accounts
def test_caller_outside_the_service_group_is_denied(suid_helper, stack, service_group):
    assert "nobody" not in service_group.gr_mem
    for argv in ([suid_helper], [suid_helper, "-c", stack.conf_path]):
        rc, out = run_helper(argv, {"op": "list"}, user="nobody")
        assert denied(rc, out), out
        assert "group" in out["error"], out


@pytest.mark.serial   # the service group and its member are host accounts
def test_service_group_member_cannot_name_another_configuration(suid_helper, stack, group_member):
    rc, out = run_helper([suid_helper, "-c", stack.conf_path], {"op": "list"}, user=group_member)
    assert denied(rc, out), out
    assert "-c" in out["error"] and "root" in out["error"], out
    # control: without -c the same caller passes the caller check (and gets
    # as far as the compiled-in configuration)
    rc, out = run_helper([suid_helper], {"op": "info"}, user=group_member)
    assert rc == 0 or ("group" not in out["error"] and "-c" not in out["error"]), out


@pytest.mark.serial   # the service group and its member are host accounts
def test_command_line_has_the_caller_checks(suid_helper, stack, group_member):
    """The scripts' command line (roombox-helper stop-all, destroy ROOM)
    is refused to the same callers, before anything is done."""
    r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                        str(suid_helper), "stop-all"], capture_output=True, timeout=60, cwd="/")
    assert r.returncode == 1 and b"denied" in r.stderr and b"group" in r.stderr, r
    r = subprocess.run(["setpriv", f"--reuid={group_member}", "--regid=nogroup", "--init-groups",
                        str(suid_helper), "-c", str(stack.conf_path), "stop-all"],
                       capture_output=True, timeout=60, cwd="/")
    assert r.returncode == 1 and b"denied" in r.stderr and b"-c" in r.stderr, r
    # control: root may
    r = subprocess.run([str(suid_helper), "-c", str(stack.conf_path), "info"], capture_output=True,
                       timeout=60, cwd="/")
    assert r.returncode == 0 and r.stdout.startswith(b"cgroup="), r


# ---------------------------------------------------------------- configuration

@pytest.mark.parametrize("mode,owner", [(0o664, "root"), (0o646, "root"), (0o666, "root"),
                                        (0o644, "nobody")],
                         ids=["group-writable", "world-writable", "writable-by-all", "not-root's"])
def test_unsafe_configuration_file_is_refused(stack, mode, owner):
    conf = stack.dir / f"unsafe-{secrets.token_hex(4)}.conf"
    conf.write_text(stack.conf_path.read_text())
    os.chown(conf, pwd.getpwnam(owner).pw_uid, 0)
    os.chmod(conf, mode)
    try:
        rc, out = run_helper([HELPER, "-c", conf], {"op": "info"})
        assert denied(rc, out), out
        assert str(conf) in out["error"], out
        # control: the same file, root's and 0644, is accepted
        os.chown(conf, 0, 0)
        os.chmod(conf, 0o644)
        rc, out = run_helper([HELPER, "-c", conf], {"op": "info"})
        assert rc == 0, out
    finally:
        conf.unlink()


# ---------------------------------------------------------------- requests

def test_oversized_request_is_invalid(stack):
    # the stacks' max_body is 64K: the helper reads at most 64K + 64 KiB
    assert stack.config["max_body"] == "64K"
    room = unique_room("big")
    big = record(3, room, b"", [b"x" * 1023] * (8 << 10))
    rc, out = run_helper([HELPER, "-c", stack.conf_path], big)
    assert rc != 0 and out["code"] == "invalid" and "out of range" in out["error"], out
    assert f"to {128 << 10} bytes" in out["error"], out
    assert not (stack.state_dir / "rooms" / room).exists()
    # control: a large request under the bound is read whole (and refused
    # for what it holds, a status taking no strings)
    ok = record(3, room, b"", [b"x" * 1023] * 127)
    rc, out = run_helper([HELPER, "-c", stack.conf_path], ok)
    assert rc != 0 and out["error"] == "status takes no strings", out


def test_exec_output_never_passes_through_the_helper(stack, client):
    """An exec runs only on the caller's own descriptors (fds 3-5): one
    without them is refused and runs nothing (a record has no room for
    input bytes, nor an answer for output)."""
    room = unique_room("io")
    client.touch(room)
    rc, out = run_helper([HELPER, "-c", stack.conf_path],
                         {"op": "exec", "room": room, "cmd": "touch /workspace/ran"})
    assert rc != 0 and out.get("code") == "invalid" and "fds 3-5" in out.get("error", ""), out
    assert client.sh(room, "ls /workspace/ran 2>&1 || echo none").endswith("none\n")
    # control: the same exec with the caller's pipes runs, its output comes
    # on them and the answer holds the facts alone
    rc, out = helper_exec([HELPER, "-c", stack.conf_path],
                          {"op": "exec", "room": room, "cmd": "cat; echo err >&2"}, b"in\n")
    assert rc == 0 and (out["stdout"], out["stderr"], out["wait_status"]) == ("in\n", "err\n", 0), out
    assert set(out) == {"wait_status", "timed_out", "duration_us", "started_ms", "stdout", "stderr"}, out


@pytest.mark.parametrize("rid", ["..", "../rooms", "a/../../etc", "a/b", "", ".hidden", "-x",
                                 "a" * 65, "a\nb", "a b"])
def test_helper_validates_room_ids_itself(stack, rid):
    """roombox-fcgi checks room ids first; the helper must not rely on it."""
    for op in ("exec", "create", "status", "destroy", "stop"):
        rc, out = run_helper([HELPER, "-c", stack.conf_path], {"op": op, "room": rid, "cmd": "true"})
        assert rc != 0 and out.get("code") == "invalid", (op, rid, out)
    for top in (stack.state_dir, stack.run_dir):
        names = os.listdir(top / "rooms")
        assert all(ROOM_ID.fullmatch(n) for n in names), names


# ---------------------------------------------------------------- planted symlinks

def helper_op(stack, request):
    rc, out = run_helper([HELPER, "-c", stack.conf_path], request)
    assert rc == 0, out
    return out


class Planted:
    """Replace `path` with a symlink to a decoy file (content given) in the
    stack's folder; restore the original afterwards."""

    def __init__(self, stack, path, decoy_content):
        self.path = Path(path)
        self.decoy = stack.dir / f"decoy-{secrets.token_hex(4)}"
        self.decoy.write_text(decoy_content)
        os.chmod(self.decoy, 0o600)
        self.saved = stack.dir / f"saved-{secrets.token_hex(4)}"
        self.had = os.path.lexists(self.path)
        if self.had:
            os.rename(self.path, self.saved)
        os.symlink(self.decoy, self.path)
        self.fingerprint = file_fingerprint(self.decoy)

    def decoy_unchanged(self):
        return file_fingerprint(self.decoy) == self.fingerprint

    def restore(self):
        if os.path.lexists(self.path):
            os.unlink(self.path)
        if self.had:
            os.rename(self.saved, self.path)
        self.decoy.unlink()


HOST_ID = "read a b c < /proc/self/uid_map; echo $b"


def test_symlinked_meta_is_not_followed(client, stack, room):
    uid = client.room_uid(room)
    meta = stack.room_state_dir(room) / "meta"
    slot = json.loads(meta.read_text())["slot"]
    other = (slot + 7) % stack.max_rooms
    p = Planted(stack, meta, json.dumps({"slot": other, "createdAt": "2000-01-01T00:00:00.000Z"}))
    try:
        # the host id of the room's root: the slot's range
        r = client.exec_raw(room, {"cmd": HOST_ID})
        # refused, or at least not run as the decoy's slot
        if r.status == 200:
            assert r.json["result"]["stdout"] == f"{uid}\n", r.json
        else:
            assert r.status == 500 and "meta" in r.json["error"], r.json
        assert r.json.get("result", {}).get("stdout") != f"{stack.uid_base + other * 65536}\n"
        assert p.decoy_unchanged()
    finally:
        p.restore()
    assert client.sh(room, HOST_ID) == f"{uid}\n"


@pytest.mark.parametrize("user,name", [("root", "session"), ("user", "session.user")])
def test_symlinked_session_is_neither_read_nor_written(client, stack, room, user, name):
    client.sh(room, "export MINE=1", user=user)
    session = stack.room_state_dir(room) / name
    p = Planted(stack, session, "export PLANTED='from the decoy'\n")
    try:
        res = client.exec(room, 'echo "[$PLANTED]"; export NEW=2', user=user)
        assert res["stdout"] == "[]\n", res
        assert p.decoy_unchanged()
        assert client.sh(room, 'echo "[$PLANTED]"', user=user) == "[]\n"
        assert p.decoy_unchanged()
    finally:
        p.restore()


def test_symlinked_activity_stamp_is_not_touched(client, stack, room):
    client.sh(room, "true")
    active = stack.room_state_dir(room) / "active"
    p = Planted(stack, active, "decoy\n")
    os.utime(p.decoy, (1_000_000_000, 1_000_000_000))
    p.fingerprint = file_fingerprint(p.decoy)
    try:
        assert client.sh(room, "echo ok") == "ok\n"
        assert p.decoy_unchanged()
    finally:
        p.restore()


def test_symlinked_room_lock_is_refused(client, stack, room):
    client.sh(room, "true")
    lock = stack.run_dir / "rooms" / room / "lock"
    p = Planted(stack, lock, "decoy\n")
    try:
        r = client.exec_raw(room, {"cmd": "echo ran"})
        assert r.status == 500 and "lock" in r.json["error"], r.json
        assert p.decoy_unchanged()
    finally:
        p.restore()
    assert client.sh(room, "echo ran") == "ran\n"


def test_symlinked_keeper_record_is_not_followed(client, stack, room):
    """The decoy names a live process of the test as the room's keeper: a
    helper that followed the link would treat it as the keeper (and kill
    it when it does not answer)."""
    client.sh(room, "echo kept > /workspace/f")
    helper_op(stack, {"op": "stop", "room": room})
    assert stack.keeper_pid(room) is None
    bait = subprocess.Popen(["sleep", "300"])
    try:
        with open(f"/proc/{bait.pid}/stat") as f:
            start = f.read().rsplit(")", 1)[1].split()[19]
        record = stack.run_dir / "rooms" / room / "keeper"
        p = Planted(stack, record, f"{bait.pid} {start}\n")
        try:
            assert client.sh(room, "cat /workspace/f") == "kept\n"
            assert pid_alive(bait.pid), "the helper acted on the planted keeper record"
            assert p.decoy_unchanged()
            keeper = stack.keeper_pid(room)
            assert keeper and keeper != bait.pid
        finally:
            p.restore()
    finally:
        bait.kill()
        bait.wait()


@pytest.mark.parametrize("where", ["state", "run"])
def test_symlinked_room_directory_is_not_followed(client, stack, room, where):
    """The room's own directory in the state (or run) directory replaced by
    a symlink to a copy elsewhere: the helper must not use the copy."""
    client.sh(room, "echo original > /workspace/f")
    helper_op(stack, {"op": "stop", "room": room})
    top = stack.state_dir if where == "state" else stack.run_dir
    real = top / "rooms" / room
    elsewhere = stack.dir / f"elsewhere-{secrets.token_hex(4)}"
    os.rename(real, elsewhere)
    os.symlink(elsewhere, real)
    before = {p: file_fingerprint(p) for p in [elsewhere] + sorted(elsewhere.iterdir())}
    try:
        r = client.exec_raw(room, {"cmd": "cat /workspace/f; echo written > /workspace/g"})
        after = {p: file_fingerprint(p) for p in [elsewhere] + sorted(elsewhere.iterdir())}
        followed = r.status == 200 and r.json["result"]["stdout"].startswith("original")
        assert not followed, f"the helper used {real} -> {elsewhere}: {r.json}"
        assert after == before, f"the helper changed files in {elsewhere}"
        # a refusal names the room's directory, not where the host keeps it
        assert str(stack.dir) not in json.dumps(r.json), r.json
    finally:
        if os.path.islink(real):
            os.unlink(real)
        elif real.exists():
            shutil.rmtree(real)       # a fresh room the helper made instead
        os.rename(elsewhere, real)
        helper_op(stack, {"op": "stop", "room": room})
    assert client.sh(room, "cat /workspace/f") == "original\n"


# ---------------------------------------------------------------- environment, descriptors

def test_signals_the_caller_blocked_are_not_blocked_in_the_room(stack):
    """A caller may block signals before it runs the helper; the mask is
    inherited across execve.  The helper clears it (a blocked SIGALRM would
    defeat its own last bound on waiting), so a keeper it starts blocks
    only what the keeper blocks itself (CHLD, TERM, INT, HUP, PIPE)."""
    room = unique_room("sigmask")
    caller_blocks = {signal.SIGUSR1, signal.SIGALRM, signal.SIGQUIT}
    old = signal.pthread_sigmask(signal.SIG_BLOCK, caller_blocks)
    try:
        rc, out = run_helper([HELPER, "-c", stack.conf_path], {"op": "create", "room": room})
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    try:
        assert rc == 0, out
        keeper = stack.keeper_pid(room)
        assert keeper
        with open(f"/proc/{keeper}/status") as f:
            blocked = int(next(l for l in f if l.startswith("SigBlk:")).split()[1], 16)
        for sig in caller_blocks:
            assert not blocked & (1 << (sig - 1)), f"{sig.name} is blocked in the keeper: {blocked:#x}"
        assert blocked & (1 << (signal.SIGCHLD - 1)), f"{blocked:#x}"
    finally:
        rc, out = run_helper([HELPER, "-c", stack.conf_path], {"op": "destroy", "room": room})
        assert rc == 0, out


def test_caller_environment_and_descriptors_do_not_reach_the_room(stack, client):
    room = unique_room("env")
    client.touch(room)
    secret_fd = os.open(stack.tokens_file, os.O_RDONLY)
    try:
        env = {"PATH": "/usr/bin:/bin", "RBX_PLANTED": "caller-secret", "LD_DEBUG": "all"}
        rc, out = helper_exec([HELPER, "-c", stack.conf_path],
                              {"op": "exec", "room": room,
                               "cmd": "env; ls -l /proc/self/fd/ /proc/$$/fd/; cat <&%d" % secret_fd},
                              env=env, pass_fds=(secret_fd,))
    finally:
        os.close(secret_fd)
    assert rc == 0, out
    assert "caller-secret" not in out["stdout"] and "LD_DEBUG" not in out["stdout"], out
    assert stack.token not in out["stdout"] + out["stderr"], out
    assert str(stack.tokens_file) not in out["stdout"], out
    # the keeper this exec started holds no descriptor of the caller's
    keeper = stack.keeper_pid(room)
    assert keeper
    targets = [os.readlink(f"/proc/{keeper}/fd/{fd}") for fd in os.listdir(f"/proc/{keeper}/fd")]
    assert str(stack.tokens_file) not in targets, targets
    assert client.sh(room, "echo ok") == "ok\n"



def test_stdin_may_be_dev_null_but_no_other_file(stack, client):
    """fd 3, the command's stdin, is a pipe's read end or /dev/null (what
    roombox-fcgi passes a command given no input); any other file a caller
    passes there is closed, never given to the room: a host file (here the
    service's token file) cannot become a room's input."""
    room = unique_room("stdin")
    client.touch(room)
    rc, out = helper_exec([HELPER, "-c", stack.conf_path],
                          {"op": "exec", "room": room, "cmd": "cat; readlink /proc/self/fd/0"},
                          stdin_path="/dev/null")
    assert rc == 0 and out["stdout"] == "/dev/null\n", out
    rc, out = helper_exec([HELPER, "-c", stack.conf_path],
                          {"op": "exec", "room": room, "cmd": "cat; echo done"},
                          stdin_path=str(stack.tokens_file))
    assert stack.token not in out["stdout"] + out["stderr"], out
    assert client.sh(room, "echo ok") == "ok\n"


def test_env_value_with_a_nul_byte_is_refused_by_name(stack, client):
    """roombox-fcgi refuses a NUL byte in an env value; the helper, trusting
    no caller, refuses it too: in a record a NUL ends the string, so the
    rest counts as a string more than the request declares, and the whole
    request is refused (nothing cut, nothing run); the room keeps working."""
    room = unique_room("envnul")
    client.touch(room)
    rc, out = helper_exec([HELPER, "-c", stack.conf_path],
                          {"op": "exec", "room": room, "cmd": "echo \"$A\"",
                           "env": {"A": "ab\u0000'; echo injected; '"}})
    assert rc != 0 and out.get("code") == "invalid", out
    assert "after its 2 strings" in out["error"], out
    assert "injected" not in out["stdout"], out
    assert client.sh(room, "echo ok") == "ok\n"


def test_service_cpu_affinity_reaches_the_room_unchanged(stack, client):
    """An admin's CPU affinity for the service (systemd's CPUAffinity) holds
    for the helper and the rooms it starts: neither roombox-fcgi's pin of a
    spawn nor the setuid helper widens it."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs to tell a narrowed affinity from the default")
    cpu = max(os.sched_getaffinity(0))
    pids = stack.fcgi_pids()
    assert pids
    old = {}
    for pid in pids:
        for tid in os.listdir(f"/proc/{pid}/task"):
            old[int(tid)] = os.sched_getaffinity(int(tid))
            os.sched_setaffinity(int(tid), {cpu})
    try:
        room = unique_room("cpu")
        out = client.sh(room, "grep Cpus_allowed_list /proc/self/status")
        assert out.split() == ["Cpus_allowed_list:", str(cpu)], out
        keeper = stack.keeper_pid(room)
        assert keeper and os.sched_getaffinity(keeper) == {cpu}
    finally:
        for tid, mask in old.items():
            try:
                os.sched_setaffinity(tid, mask)
            except OSError:
                pass
