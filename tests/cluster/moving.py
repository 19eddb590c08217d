"""What the move tests share (test_move_big.py, test_move_crash.py): a
client that appends a numbered line to a room every 50 ms through the
router and records every answer, a room's files described from inside the
room, what a host keeps of a room in its state_dir, and a host's
roombox-fcgi killed and started again as tools/run-cluster.sh starts it.

Nothing here sleeps to synchronise: the appender's 50 ms is its load, every
wait is a bounded poll (conftest.wait_until)."""

import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from conftest import REPO, gone, wait_until

APPEND_EVERY_S = 0.05
# An answer slower than this is a hang, not an unavailability.
APPEND_TIMEOUT_S = 30


class Appender:
    """A numbered line appended to the room's LOG every 50 ms through the
    router (exec `echo N >> LOG; sync`), each answer recorded: acked holds
    the numbers whose exec answered 200 with exit code 0, bad every answer
    that was neither that nor 503 + Retry-After (or that did not come)."""

    def __init__(self, c, room, log="/srv/appended"):
        self.c, self.room, self.log = c, room, log
        self.acked, self.bad, self.answers = [], [], []   # answers: (t0, t1, status)
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._t.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        self._stop.set()
        self._t.join()

    def _run(self):
        n = 1
        while not self._stop.is_set():
            t0 = time.monotonic()
            try:
                a = self.c.request("POST", f"/api/rooms/{self.room}/sandbox/exec",
                                   {"cmd": f"echo {n} >> {self.log}; sync"},
                                   timeout=APPEND_TIMEOUT_S)
            except OSError as e:        # no answer in time, or the connection cut
                self.answers.append((t0, time.monotonic(), None))
                self.bad.append((n, repr(e)))
                continue
            t1 = time.monotonic()
            self.answers.append((t0, t1, a.status))
            if a.status == 200 and a.json["result"].get("exitCode") == 0:
                self.acked.append(n)
                n += 1
            elif not (a.status == 503 and "retry-after" in a.headers):
                self.bad.append((n, a))
            self._stop.wait(max(0.0, APPEND_EVERY_S - (t1 - t0)))

    def wait_acks(self, count, timeout=60):
        have = len(self.acked)
        wait_until(lambda: len(self.acked) >= have + count, timeout,
                   f"{count} appends to room {self.room} to be acknowledged")

    def longest_gap(self):
        """The longest time between two acknowledged appends (s): the
        longest the room was unavailable to this client."""
        ok = [t1 for t0, t1, s in self.answers if s == 200]
        return max((b - a for a, b in zip(ok, ok[1:])), default=0.0)

    def unavailable_answers(self):
        return sum(1 for _, _, s in self.answers if s != 200)

    def check_log(self, lines):
        """Every acknowledged append in the room's log, in order, and
        nothing the appender was not told was written: an append answered
        503 never ran."""
        got = [int(x) for x in lines.split()]
        assert got == self.acked, (f"room {self.room}: {self.log} holds {len(got)} lines, "
                                   f"{len(self.acked)} acknowledged; first difference at "
                                   f"{next((i for i, (a, b) in enumerate(zip(got, self.acked)) if a != b), min(len(got), len(self.acked)))}")


def served(c, room, cmd, timeout=30, body=None):
    """The room's answer once it serves again through the router: until
    then only 503 + Retry-After is allowed."""
    def answer():
        a = c.request("POST", f"/api/rooms/{room}/sandbox/exec", dict(body or {}, cmd=cmd),
                      timeout=300)
        assert a.status in (200, 503), a
        if a.status == 503:
            assert "retry-after" in a.headers, a
            return None
        return a
    return wait_until(answer, timeout, f"room {room} to serve")


# A room's files described from inside it: per path its type, owner, group,
# mode, size and target, a SHA-256 of every regular file, and the 512-byte
# blocks each regular file holds (sparse files hold few).
# In a subshell: the room's session (its working directory) stays as it was.
DESCRIBE = ("(cd {d} && find . -xdev -printf '%p %y %U %G %m %s %l\\n' | LC_ALL=C sort && "
            "echo --- && find . -xdev -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum && "
            "echo --- && find . -xdev -type f -printf '%p %b\\n' | LC_ALL=C sort)")


def describe(c, room, d, host=None):
    a = c.request("POST", f"/api/rooms/{room}/sandbox/exec",
                  {"cmd": DESCRIBE.format(d=d), "timeout": 300000}, host=host, timeout=330)
    assert a.status == 200 and a.json["result"]["exitCode"] == 0, \
        (a.status, {k: v for k, v in a.json.get("result", a.json).items() if k != "stdout"})
    tree, sums, blocks = stdout(a).split("---\n")
    return tree, sums, {p: int(b) for p, b in (l.rsplit(" ", 1) for l in blocks.splitlines())}


def stdout(a):
    return a.json["result"]["stdout"]


def room_paths(c, host, room, sandbox):
    """What host's state_dir holds of room: every path whose name holds the
    room's id or its sandbox name (its epoch file, epochs/ROOM, included)."""
    state = c.run / host / "state"
    found = []
    for dirpath, dirnames, filenames in os.walk(state):
        for name in dirnames + filenames:
            if room in name or (sandbox and sandbox in name):
                found.append(str(Path(dirpath, name).relative_to(state)))
    return sorted(found)


def tombstone_only(c, host, room, sandbox):
    return room_paths(c, host, room, sandbox) == [f"epochs/{room}"]


def no_trace(c, host, room, sandbox):
    return room_paths(c, host, room, sandbox) in ([], [f"epochs/{room}"])


# ---- a host's roombox-fcgi killed and started again

def fcgi_pid(c, host):
    return int((c.run / host / "fcgi.pid").read_text())


def fcgi_kill(c, host):
    pid = fcgi_pid(c, host)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    wait_until(lambda: gone(pid), 10, f"{host}'s roombox-fcgi to end")


def fcgi_start(c, host):
    """As tools/run-cluster.sh starts it: in the host's namespace, in a
    session of its own, its output added to hN/fcgi.log, its pid (the
    roombox-fcgi itself: nsenter execs it) in hN/fcgi.pid."""
    h = c.run / host
    sock = h / "run" / "fcgi.sock"
    if sock.exists():
        sock.unlink()
    # no setsid(1): start_new_session makes the child a group leader, and
    # setsid would fork, leaving hN/fcgi.pid naming a process that ended
    p = subprocess.Popen(["nsenter", f"--net=/run/netns/roombox-{host}",
                          str(REPO / "build" / "roombox-fcgi"), "-c", str(h / "roombox.conf")],
                         stdin=subprocess.DEVNULL, stdout=open(h / "fcgi.log", "ab"),
                         stderr=subprocess.STDOUT, start_new_session=True)
    (h / "fcgi.pid").write_text(str(p.pid))
    wait_until(sock.exists, 20, f"{host}'s roombox-fcgi to listen")

    def up():
        try:
            return c.request("GET", "/api/health", host=host, timeout=2).status == 200
        except OSError:
            return False
    wait_until(up, 20, f"{host} to answer again")
