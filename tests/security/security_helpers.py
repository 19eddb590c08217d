"""Helpers of the security suite (the shared fixtures and host views come
from tests/integration/conftest.py, through tests/security/conftest.py)."""

import hashlib
import json

from helper_records import decode_answer, encode_request
import os
import re
import shlex
import stat
import subprocess
import threading
from pathlib import Path

from conftest import cgroup_dirs_named, wait_until


# A fork bomb that stays at its room's pids_limit until killed: every
# process forks in a loop and goes on when the kernel refuses.  (The shell's
# classic `bomb(){ bomb|bomb& }; bomb` does not stay: under dash a process
# whose fork fails exits, and the bomb often dies out within a second of
# reaching the limit.)
FORK_LOOP = ("python3 -c 'import os\n"
             "while True:\n"
             "    try:\n"
             "        os.fork()\n"
             "    except OSError:\n"
             "        pass\n'")


def pids_refused(room):
    """How many forks the kernel has refused for the room's pids_limit: the
    "max" count of pids.events in the room's pids cgroup (the v1 pids
    hierarchy or the v2 unified one), which the service itself reads to
    tell a room at its process limit.  Unlike a count of the room's
    processes, which a bomb keeps moving, it only grows: a bomb at the limit
    is seen whenever it is sampled.  None when the room has no such file."""
    for d in cgroup_dirs_named(room):
        try:
            events = Path(d, "pids.events").read_text()
        except OSError:
            continue
        m = re.search(r"^max (\d+)$", events, re.M)
        if m:
            return int(m.group(1))
    return None


def wait_for_pids_limit_hit(room, after, timeout, what):
    """Wait until the kernel has refused a fork for the room's pids_limit
    more than `after` times (a bomb pressing on the limit since then);
    return that count."""
    seen = {}

    def hit():
        seen["n"] = pids_refused(room)
        assert seen["n"] is not None, f"room {room} has no pids.events: no pids controller?"
        return seen["n"] > after
    wait_until(hit, timeout, what)
    return seen["n"]


def room_python(client, room, script, *args, **fields):
    """Run a python3 script (given on stdin, with args) in the room; the
    exec result."""
    cmd = " ".join(["python3", "-"] + [shlex.quote(str(a)) for a in args])
    return client.exec(room, cmd, stdin=script, **fields)


def room_python_json(client, room, script, *args, **fields):
    """Run a python3 script that prints one JSON document; return it."""
    res = room_python(client, room, script, *args, **fields)
    assert res["exitCode"] == 0, f"script failed in {room}: {res}"
    try:
        return json.loads(res["stdout"])
    except ValueError:
        raise AssertionError(f"script in {room} printed no JSON: {res}")


def file_fingerprint(path):
    """What must not change about a host file: type, mode, owner, size,
    mtime and content hash (or link target).  None if it does not exist."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    fp = (stat.S_IFMT(st.st_mode), stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid,
          st.st_size, st.st_mtime_ns, st.st_ino)
    if stat.S_ISLNK(st.st_mode):
        return fp + (os.readlink(path),)
    if stat.S_ISREG(st.st_mode):
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return fp + (h.hexdigest(),)
    if stat.S_ISDIR(st.st_mode):
        return fp + (tuple(sorted(os.listdir(path))),)
    return fp


def tree_fingerprint(top):
    """{relative path: file_fingerprint} of every entry below top (symlinks
    not followed)."""
    out = {".": file_fingerprint(top)}
    for dirpath, dirnames, filenames in os.walk(top):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            out[os.path.relpath(p, top)] = file_fingerprint(p)
    return out


def room_ps(client, room, user="root"):
    """[(pid, ppid, user, comm)] of every process the room's `ps` shows,
    the ps itself and its shell included (run as the room's `user`)."""
    rows = []
    for line in client.sh(room, "ps -e -o pid=,ppid=,user=,comm=", user=user).splitlines():
        pid, ppid, user, comm = line.split(None, 3)
        rows.append((int(pid), int(ppid), user, comm))
    return rows


def assert_room_holds_only_keeper_and_this_exec(client, room):
    """The room's ps shows PID 1 (the keeper, the room's root), this exec's
    shell (the room's user, child of PID 1) and its ps: nothing else."""
    rows = room_ps(client, room, user="user")
    by_pid = {r[0]: r for r in rows}
    ps = [r for r in rows if r[3] == "ps"]
    assert len(ps) == 1, rows
    shell = by_pid.get(ps[0][1])
    assert shell and shell[2] == "user" and shell[1] == 1, rows
    keeper = by_pid.get(1)
    assert keeper and keeper[2] == "root", rows
    expected = {1, shell[0], ps[0][0]}
    assert set(by_pid) == expected, f"processes left in room {room}: " + \
        repr([r for r in rows if r[0] not in expected])


class Background:
    """An exec running in a thread; .response once it answered."""

    def __init__(self, client, room, body, http_timeout=120):
        self.response = None
        self.error = None

        def run():
            try:
                self.response = client.exec_raw(room, body, timeout=http_timeout)
            except BaseException as e:       # reported by join()
                self.error = e
        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()

    def running(self):
        return self.thread.is_alive()

    def join(self, timeout):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), f"the exec did not answer within {timeout} s"
        if self.error:
            raise self.error
        return self.response


def helper_answer(r):
    """The answer record of common/protocol.h as a dict (helper_records.py);
    an error as "error"/"code"."""
    try:
        return decode_answer(r.stdout)
    except AssertionError as e:
        raise AssertionError(f"the helper did not answer with a record: rc {r.returncode}, "
                             f"stdout {r.stdout[:300]!r}, stderr {r.stderr[:300]!r} ({e})")


def run_with_io(argv, request, stdin=b"", *, env=None, pass_fds=(), timeout=60, stdin_path=None):
    """Run argv (a helper, maybe behind setpriv, time...) with one request on
    its stdin and, as roombox-fcgi does (passed I/O), pipes of our own as
    its fds 3, 4, 5: `stdin` written into the first, the other two read to
    their ends.  With stdin_path, fd 3 is that file opened for reading
    instead.  (the CompletedProcess, the command's stdout bytes, its
    stderr bytes)."""
    data = request if isinstance(request, bytes) else encode_request(request)
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    got = {out_r: [], err_r: []}

    def read(fd):
        while True:
            b = os.read(fd, 1 << 16)
            if not b:
                break
            got[fd].append(b)

    def write():
        try:
            view = memoryview(stdin)
            while view:
                view = view[os.write(in_w, view):]
        except OSError:
            pass
        finally:
            os.close(in_w)

    # bash, not dash: its redirections take descriptors above 9
    three = f"<&{in_r}" if stdin_path is None else f"<{shlex.quote(stdin_path)}"
    shell = ["bash", "-c", f'exec "$@" 3{three} 4>&{out_w} 5>&{err_w} '
                           f'{in_r}<&- {out_w}>&- {err_w}>&-', "bash"]
    threads = [threading.Thread(target=read, args=(fd,), daemon=True) for fd in (out_r, err_r)]
    threads.append(threading.Thread(target=write, daemon=True))
    try:
        proc = subprocess.Popen(shell + [str(a) for a in argv], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=env if env is not None else {"PATH": "/usr/bin:/bin"},
                                pass_fds=(in_r, out_w, err_w) + tuple(pass_fds), cwd="/")
    finally:
        for fd in (in_r, out_w, err_w):
            os.close(fd)
    for t in threads:
        t.start()
    try:
        stdout, stderr = proc.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    for t in threads:
        t.join(timeout)
    for fd in (out_r, err_r):
        os.close(fd)
    r = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    return r, b"".join(got[out_r]), b"".join(got[err_r])


def helper_exec(argv, request, stdin=b"", **kw):
    """An exec through the helper as roombox-fcgi runs it (run_with_io, io:
    true): (exit status, the answer with the command's output added as
    "stdout"/"stderr" text)."""
    r, out, err = run_with_io(argv, request, stdin, **kw)
    answer = helper_answer(r)
    answer["stdout"] = out.decode("utf-8", "replace")
    answer["stderr"] = err.decode("utf-8", "replace")
    return r.returncode, answer
