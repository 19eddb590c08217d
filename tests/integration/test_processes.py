"""Managed processes: start, list, get, logs (kept on disk,
the last log_max bytes), logs as a live event stream, stdin, signals to
the whole tree, records of ended ones, a running one keeps its room awake,
`killed` by the room's kill-all, `lost` when the room stops or across a
roombox-fcgi restart, cleanup.  Through nginx and lighttpd.
Every wait is a bounded poll; nothing sleeps to synchronise."""

import http.client
import json
import os
import threading
import time

from conftest import wait_until

LOG_MAX = 64 * 1024
IDLE_S = 4
ROOMBOX_CONFIG = {"log_max": "64K", "idle_timeout": f"{IDLE_S}s"}


def procs_path(room, rest=""):
    return f"/api/rooms/{room}/sandbox/processes{rest}"


def start(client, room, cmd, statuses=("running",), **fields):
    r = client.post(procs_path(room), dict(cmd=cmd, **fields))
    assert r.status == 201, r
    p = r.json["process"]
    assert p["status"] in statuses and p["command"] == cmd, p
    return p


def get(client, room, pid_id):
    r = client.get(procs_path(room, f"/{pid_id}"))
    assert r.status == 200, r
    return r.json["process"]


def logs(client, room, pid_id):
    r = client.get(procs_path(room, f"/{pid_id}/logs"))
    assert r.status == 200, r
    assert set(r.json) == {"stdout", "stderr", "truncated"}, r.json
    return r.json


def wait_status(client, room, pid_id, statuses, timeout=20):
    return wait_until(lambda: (lambda p: p if p["status"] in statuses else None)(
        get(client, room, pid_id)), timeout, f"process {pid_id} to be {statuses}")


def running_metric(client):
    r = client.get("/metrics", check_json=False)
    assert r.status == 200, r
    for line in r.body.decode().splitlines():
        if line.startswith("roombox_processes_running "):
            return float(line.split()[1])
    raise AssertionError("no roombox_processes_running in /metrics")


def room_ps(client, room):
    """Command lines of the room's processes (from its /proc)."""
    return client.sh(room, "for f in /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f 2>/dev/null; "
                           "echo; done")


class LogStream:
    """GET …/logs with Accept: text/event-stream, frame by frame."""

    def __init__(self, client, room, pid_id, timeout=30):
        client.touch(room)
        self.conn = http.client.HTTPConnection("127.0.0.1", client.port, timeout=timeout)
        self.conn.request("GET", procs_path(room, f"/{pid_id}/logs"),
                          headers={"Authorization": f"Bearer {client.token}",
                                   "Accept": "text/event-stream"})
        self.r = self.conn.getresponse()
        self.buf = b""

    def frame(self):
        while b"\n\n" not in self.buf:
            data = self.r.read1(65536)
            if not data:
                assert not self.buf.strip(), f"stream ended mid-event: {self.buf!r}"
                return None
            self.buf += data
        raw, self.buf = self.buf.split(b"\n\n", 1)
        text = raw.decode("utf-8")
        if text.startswith(":"):
            return self.frame()
        assert text.startswith("data: "), text
        return json.loads(text[6:])

    def close(self):
        self.conn.close()


# ---------------------------------------------------------------- a dev server

def test_http_server_runs_and_logs_its_requests(client, room):
    client.sh(room, "mkdir -p /workspace/site && echo hello-from-room > /workspace/site/index.html")
    p = start(client, room, "python3 -m http.server 8000", cwd="/workspace/site", name="web")
    assert p["id"] == "web" and isinstance(p["pid"], int) and p["pid"] > 1, p
    assert p["startTime"].endswith("Z") and p["endTime"] is None
    assert p["exitCode"] is None and p["signal"] is None
    # the server answers a client in the room ...
    body = wait_until(lambda: (lambda r: r["stdout"] if r["exitCode"] == 0 else None)(
        client.exec(room, "curl -sf http://localhost:8000/index.html")), 20,
        "the server to answer")
    assert body == "hello-from-room\n"
    # ... and its log shows the request
    wait_until(lambda: '"GET /index.html HTTP/1.1" 200' in logs(client, room, "web")["stderr"],
               10, "the request in the server's log")
    # list and get: running, with the pid of the server itself
    listed = client.get(procs_path(room)).json["processes"]
    assert [x["id"] for x in listed] == ["web"] and listed[0]["status"] == "running"
    assert get(client, room, "web")["pid"] == p["pid"]
    cmdline = client.sh(room, f"tr '\\0' ' ' < /proc/{p['pid']}/cmdline")
    assert "http.server" in cmdline, cmdline
    # it has outlived the exec that started it; DELETE ends it (TERM)
    r = client.delete(procs_path(room, "/web"))
    assert r.status == 200 and r.json["process"]["id"] == "web", r
    end = wait_status(client, room, "web", ("killed", "exited"))
    assert end["status"] == "killed" and end["signal"] == "SIGTERM", end
    assert end["exitCode"] == 143 and end["endTime"].endswith("Z")
    assert client.exec(room, "curl -sf http://localhost:8000/")["exitCode"] != 0


# ---------------------------------------------------------------- stdin

def test_stdin_reaches_the_process_and_close_ends_it(client, room):
    p = start(client, room, "cat")
    r = client.post(procs_path(room, f"/{p['id']}/stdin"), data=b"hello\n")
    assert r.status == 200 and r.json["written"] == 6, r
    wait_until(lambda: logs(client, room, p["id"])["stdout"] == "hello\n", 10,
               "cat to echo its input")
    assert get(client, room, p["id"])["status"] == "running"
    assert running_metric(client) == 1
    r = client.post(procs_path(room, f"/{p['id']}/stdin?close=1"), data=b"bye\n")
    assert r.status == 200 and r.json["closed"] is True, r
    end = wait_status(client, room, p["id"], ("exited", "killed", "lost"))
    assert end["status"] == "exited" and end["exitCode"] == 0 and end["signal"] is None, end
    assert logs(client, room, p["id"])["stdout"] == "hello\nbye\n"
    assert running_metric(client) == 0
    # closed is closed
    r = client.post(procs_path(room, f"/{p['id']}/stdin"), data=b"more")
    assert r.status == 409, r


# ---------------------------------------------------------------- signals

def test_delete_kills_the_whole_tree(client, room):
    p = start(client, room, "sh -c 'sleep 1001 & sleep 1002 & wait'")
    wait_until(lambda: "sleep 1001" in room_ps(client, room) and
               "sleep 1002" in room_ps(client, room), 10, "the tree to start")
    r = client.delete(procs_path(room, f"/{p['id']}"))
    assert r.status == 200, r
    end = wait_status(client, room, p["id"], ("killed", "exited", "lost"))
    assert end["status"] == "killed" and end["signal"] == "SIGTERM", end
    wait_until(lambda: "sleep 100" not in room_ps(client, room), 10,
               "no process of the tree to be left")


def test_a_process_ignoring_term_is_killed_5_s_later(client, room):
    p = start(client, room, "trap '' TERM; sleep 1003")
    # the shell ignores TERM only once it has run the trap; sleep inherits it
    wait_until(lambda: "sleep 1003" in room_ps(client, room), 10,
               "the shell to set its trap and start sleep")
    t0 = time.monotonic()
    r = client.delete(procs_path(room, f"/{p['id']}"))
    assert r.status == 200 and r.json["process"]["status"] == "running", r
    end = wait_status(client, room, p["id"], ("killed", "exited", "lost"), timeout=20)
    took = time.monotonic() - t0
    assert end["status"] == "killed" and end["signal"] == "SIGKILL", end
    assert end["exitCode"] == 137
    assert 4.5 <= took < 15, f"killed after {took:.1f} s"
    assert "sleep 1003" not in room_ps(client, room)


def test_signal_names_and_a_bad_one(client, room):
    p = start(client, room, "trap 'echo got-usr1; exit 7' USR1; echo ready; "
                            "while :; do sleep 0.1; done")
    wait_until(lambda: logs(client, room, p["id"])["stdout"] == "ready\n", 10,
               "the shell to set its trap")
    r = client.delete(procs_path(room, f"/{p['id']}?signal=NOPE"))
    assert r.status == 400 and "invalid signal" in r.json["error"], r
    r = client.delete(procs_path(room, f"/{p['id']}?signal=SIGUSR1"))
    assert r.status == 200, r
    end = wait_status(client, room, p["id"], ("exited", "killed", "lost"))
    assert end["status"] == "exited" and end["exitCode"] == 7, end
    assert logs(client, room, p["id"])["stdout"] == "ready\ngot-usr1\n"
    # an ended process: DELETE answers its record, signals nothing
    r = client.delete(procs_path(room, f"/{p['id']}"))
    assert r.status == 200 and r.json["process"]["status"] == "exited"


# ---------------------------------------------------------------- logs

def test_logs_keep_the_last_log_max_bytes(client, room):
    p = start(client, room, "seq 1 40000; echo tail >&2", ("running", "exited"))
    wait_status(client, room, p["id"], ("exited",))
    full = "".join(f"{i}\n" for i in range(1, 40001))
    assert len(full) > 3 * LOG_MAX
    got = logs(client, room, p["id"])
    assert got["truncated"] == {"stdout": True, "stderr": False}, got["truncated"]
    assert LOG_MAX // 2 <= len(got["stdout"]) <= LOG_MAX, len(got["stdout"])
    assert full.endswith(got["stdout"])
    assert got["stderr"] == "tail\n"
    # on disk, the files of this process hold no more than that
    d = client.stack.state_dir / "processes" / room
    sizes = sum(f.stat().st_size for f in d.glob(f"{p['id']}.stdout*"))
    assert sizes <= LOG_MAX + 65536, sizes


def test_event_stream_gives_the_kept_output_then_live_then_exit(client, room):
    p = start(client, room, "echo first; read x; echo \"got $x\"; echo oops >&2; exit 3")
    wait_until(lambda: logs(client, room, p["id"])["stdout"] == "first\n", 10, "the first line")
    s = LogStream(client, room, p["id"])
    assert s.r.status == 200
    assert s.r.getheader("Content-Type").startswith("text/event-stream")
    assert s.frame() == {"type": "stdout", "data": "first\n"}
    r = client.post(procs_path(room, f"/{p['id']}/stdin"), data=b"second\n")
    assert r.status == 200
    evs = []
    while True:
        ev = s.frame()
        if ev is None:
            break
        evs.append(ev)
    s.close()
    assert evs[-1]["type"] == "exit", evs
    assert evs[-1]["exitCode"] == 3 and evs[-1]["signal"] is None
    assert "".join(e["data"] for e in evs if e["type"] == "stdout") == "got second\n"
    assert "".join(e["data"] for e in evs if e["type"] == "stderr") == "oops\n"
    # an ended process: what is kept, then the exit, at once
    s = LogStream(client, room, p["id"])
    evs = []
    while (ev := s.frame()) is not None:
        evs.append(ev)
    s.close()
    assert [e["type"] for e in evs] == ["stdout", "stderr", "exit"], evs


# ---------------------------------------------------------------- records

def test_records_survive_a_restart_of_roombox_fcgi(client, room):
    start(client, room, "echo done", ("running", "exited"), name="quick")
    wait_status(client, room, "quick", ("exited",))
    start(client, room, "sleep 1004", name="sleeper")
    client.stack.restart_fcgi()
    quick = get(client, room, "quick")
    assert quick["status"] == "exited" and quick["exitCode"] == 0, quick
    assert logs(client, room, "quick")["stdout"] == "done\n"
    # its pipes ended with the old roombox-fcgi: no longer followed
    sleeper = get(client, room, "sleeper")
    assert sleeper["status"] == "lost" and sleeper["endTime"], sleeper
    assert sleeper["exitCode"] is None
    ids = [x["id"] for x in client.get(procs_path(room)).json["processes"]]
    assert ids == ["quick", "sleeper"], ids


def test_a_room_that_stops_loses_its_process(client, room):
    p = start(client, room, "sleep 1006")
    r = client.post(f"/api/rooms/{room}/sandbox/stop")
    assert r.status == 200, r
    end = wait_status(client, room, p["id"], ("lost", "killed", "exited"))
    assert end["status"] == "lost" and end["signal"] is None and end["exitCode"] is None, end


def test_kill_all_kills_it_and_the_room_runs_on(client, room):
    """`killed` is a process a signal ended, `lost` one whose room
    stopped under it.  DELETE …/sandbox/processes kills every process of the
    room, the wrapper that would report the end too, and the room keeps
    running: the process reads `killed` by SIGKILL, not `lost`."""
    p = start(client, room, "sleep 1009", name="victim")
    assert running_metric(client) == 1
    r = client.delete(procs_path(room))
    assert r.status == 200 and r.json["killed"] >= 2, r   # the wrapper and the command
    end = wait_status(client, room, "victim", ("killed", "lost", "exited"))
    assert end["status"] == "killed" and end["signal"] == "SIGKILL", end
    assert end["exitCode"] == 137 and end["endTime"].endswith("Z") and end["pid"] == p["pid"]
    assert running_metric(client) == 0
    assert client.get(f"/api/rooms/{room}").json["state"] == "running"
    assert "sleep 1009" not in room_ps(client, room)
    # the same as an event stream's end, and across a restart of roombox-fcgi
    s = LogStream(client, room, "victim")
    evs = []
    while (ev := s.frame()) is not None:
        evs.append(ev)
    s.close()
    assert evs[-1] == {"type": "exit", "exitCode": 137, "signal": "SIGKILL",
                       "status": "killed"}, evs
    client.stack.restart_fcgi()
    assert get(client, room, "victim") == end


def test_the_wrapper_outlives_signals_from_the_room(client, room):
    """Only KILL ends the wrapper that reports the end (which is why a
    silent end reads as SIGKILL): signals the room sends it wait until the
    command's own end, which is then told as it was."""
    p = start(client, room, "sleep 1011")
    wrapper = int(client.sh(room, f"cut -d' ' -f4 /proc/{p['pid']}/stat"))
    assert wrapper > 1 and wrapper != p["pid"]
    client.sh(room, f"kill -TERM {wrapper}; kill -HUP {wrapper}; kill -INT {wrapper}")
    assert client.sh(room, f"test -d /proc/{wrapper} && echo alive") == "alive\n"
    assert get(client, room, p["id"])["status"] == "running"
    client.sh(room, f"kill -USR1 {p['pid']}")
    end = wait_status(client, room, p["id"], ("killed", "exited", "lost"))
    assert end["status"] == "killed" and end["signal"] == "SIGUSR1", end
    assert end["exitCode"] == 138


def test_a_room_restart_loses_its_process(client, room):
    """A restart stops the room under the process (and starts it again at
    once, so the room runs when the process's pipes are seen to end): `lost`,
    with no exit code nor signal."""
    p = start(client, room, "sleep 1010")
    r = client.post(f"/api/rooms/{room}/sandbox/restart")
    assert r.status == 200, r
    end = wait_status(client, room, p["id"], ("lost", "killed", "exited"))
    assert end["status"] == "lost" and end["signal"] is None and end["exitCode"] is None, end
    assert client.get(f"/api/rooms/{room}").json["state"] == "running"


def test_ended_records_are_capped_at_100(client, room):
    for i in range(102):
        # the 201 comes with the pid: `true` may have ended by then
        start(client, room, "true", ("running", "exited"), name=f"p{i}")
    wait_until(lambda: all(x["status"] == "exited" for x in
                           client.get(procs_path(room)).json["processes"]), 30,
               "every process to end")
    ids = [x["id"] for x in client.get(procs_path(room)).json["processes"]]
    assert len(ids) == 100 and ids[0] == "p2" and ids[-1] == "p101", ids[:3]
    assert client.get(procs_path(room, "/p0")).status == 404


def test_logs_of_ended_processes_have_a_budget_per_room(client, room):
    """32 x log_max (2 MiB here) for the logs of a room's ended processes
    on the host's disk: past it the oldest ones' logs go, their records
    stay (truncated)."""
    # A log keeps its last half (log_max/2 or more, a rotated file) and
    # what came after: 32-70 KiB of each process's 70000 bytes, depending on
    # how the logger's reads split them.  72 x 32 KiB is past 2 MiB however
    # they split (40 processes were not, when the reads were small).
    n = 72
    for i in range(n):
        start(client, room, "head -c 70000 /dev/zero | tr '\\0' a", ("running", "exited"),
              name=f"big{i}")
    wait_until(lambda: all(x["status"] == "exited" for x in
                           client.get(procs_path(room)).json["processes"]), 30,
               "every process to end")
    # the budget is applied as each one's pipes end, just after its exit
    first = wait_until(lambda: (lambda l: l if l["stdout"] == "" else None)(
        logs(client, room, "big0")), 10, "the oldest logs to go")
    assert first["truncated"]["stdout"] is True, first["truncated"]
    d = client.stack.state_dir / "processes" / room
    on_disk = sum(f.stat().st_size for f in d.iterdir() if ".std" in f.name)
    # (a few of the last ones may still be ending: their logs count later)
    assert on_disk <= 32 * LOG_MAX + 4 * LOG_MAX, on_disk
    assert get(client, room, "big0")["status"] == "exited"
    last = logs(client, room, f"big{n - 1}")
    assert LOG_MAX // 2 <= len(last["stdout"]) <= LOG_MAX and set(last["stdout"]) == {"a"}


def test_cleanup_removes_the_records(client, room):
    start(client, room, "echo x", ("running", "exited"), name="gone")
    wait_status(client, room, "gone", ("exited",))
    d = client.stack.state_dir / "processes" / room
    assert (d / "gone.json").exists()
    client.destroy(room)
    # the room is gone: its list is a 404 (a read creates no room)
    assert client.get(procs_path(room)).status == 404
    assert not d.exists()


def test_a_cwd_that_does_not_exist_ends_it_as_an_exec_would(client, room):
    p = start(client, room, "echo never", ("running", "exited"), cwd="/no/such/dir")
    end = wait_status(client, room, p["id"], ("exited", "killed", "lost"))
    assert end["status"] == "exited" and end["exitCode"] == 1 and end["pid"] is None, end
    got = logs(client, room, p["id"])
    assert got["stdout"] == "" and "/no/such/dir" in got["stderr"], got


def test_env_reaches_the_process(client, room):
    p = start(client, room, 'echo "$GREETING"', ("running", "exited"), env={"GREETING": "hi there"})
    wait_status(client, room, p["id"], ("exited",))
    assert logs(client, room, p["id"])["stdout"] == "hi there\n"


def test_a_live_log_ends_when_the_room_is_cleaned_up(client, room):
    p = start(client, room, "while :; do echo tick; sleep 0.2; done")
    s = LogStream(client, room, p["id"], timeout=20)
    assert s.r.status == 200
    wait_until(lambda: (s.frame() or {}).get("data", "").startswith("tick"), 10, "a live tick")
    client.destroy(room)
    t0 = time.monotonic()
    while s.frame() is not None:   # ticks still queued, then the end
        assert time.monotonic() - t0 < 10, "the stream did not end"
    s.close()
    # the room is gone: its list is a 404 (a read creates no room)
    assert client.get(procs_path(room)).status == 404


def test_bad_requests(client, room):
    r = client.post(procs_path(room), {})
    assert r.status == 400
    assert r.json["details"] == {"cmd": ["Invalid input: expected string, received undefined"]}
    r = client.post(procs_path(room), {"cmd": "true", "name": "a b"})
    assert r.status == 400 and "name" in r.json["details"], r
    r = client.post(procs_path(room), {"cmd": "true", "user": "admin"})
    assert r.status == 400 and "user" in r.json["details"], r
    start(client, room, "sleep 1007", name="one")
    r = client.post(procs_path(room), {"cmd": "true", "name": "one"})
    assert r.status == 409, r
    assert client.get(procs_path(room, "/nope")).status == 404
    assert client.get(procs_path(room, "/nope/logs")).status == 404
    assert client.post(procs_path(room, "/nope/stdin"), data=b"x").status == 404
    assert client.delete(procs_path(room, "/nope")).status == 404
    assert client.request("PUT", procs_path(room)).status == 405


# ---------------------------------------------------------------- idle stop

def test_a_running_process_keeps_its_room_awake(client, room):
    """idle_timeout is 4 s here: the room stays up well past it (and past
    the 10 s deadline of the exec that started the process) while the
    process runs, and stops once it has ended."""
    p = start(client, room, "sleep 1008")
    t0 = time.monotonic()
    while time.monotonic() - t0 < 3 * IDLE_S:
        assert client.get(f"/api/rooms/{room}").json["state"] == "running"
        assert get(client, room, p["id"])["status"] == "running"
        time.sleep(0.5)   # observing over time, not synchronising
    r = client.delete(procs_path(room, f"/{p['id']}?signal=KILL"))
    assert r.status == 200
    wait_status(client, room, p["id"], ("killed",))
    wait_until(lambda: client.get(f"/api/rooms/{room}").json["state"] == "stopped",
               6 * IDLE_S, "the idle room to stop once its process ended")


def test_many_starts_leak_nothing_in_the_keeper(client, stack, room):
    """Each start is a detached exec of the room's keeper: once started
    (its first process ended at once, the shell runs in a session of its
    own) it holds no exec slot nor descriptor of the keeper, so 300
    starts leave the keeper's descriptors as they were and execs run on
    (the keeper has 256 exec slots)."""
    client.sh(room, "true")
    keeper = stack.keeper_pid(room)
    # a busy room: its processes compete with each start's for the CPU
    client.sh(room, "for i in 1 2 3; do (while [ ! -e /tmp/done ]; do :; done) "
                    ">/dev/null 2>&1 & done")
    base = len(os.listdir(f"/proc/{keeper}/fd"))
    errors = []

    def starts(n):
        try:
            for _ in range(n):
                start(client, room, "true", statuses=("running", "exited"))
        except Exception as e:   # noqa: BLE001 -- reported below
            errors.append(repr(e))

    # a few at once, as a busy room's starts come
    threads = [threading.Thread(target=starts, args=(50,)) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(600)
    client.sh(room, "touch /tmp/done")
    assert not errors, errors
    wait_until(lambda: len(os.listdir(f"/proc/{keeper}/fd")) <= base, 30,
               f"the keeper's descriptors to come back to {base} "
               f"(now {len(os.listdir(f'/proc/{keeper}/fd'))})")
    assert client.sh(room, "echo still") == "still\n"
