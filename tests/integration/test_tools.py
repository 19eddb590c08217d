"""The developer tools: `make run` (tools/run.sh) end to end, and the root
checks of the scripts that need root."""

import json
import os
import queue
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from conftest import (FCGI, HELPER, REPO, free_port, ns_inode, pid_alive,
                      proc_cmdline, proc_pids, procs_in_ns, unique_room, wait_until)

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def read_lines_into(stream, q):
    for line in iter(stream.readline, ""):
        q.put(line)
    q.put(None)


def start_make_run(env, sigint_ignored=False):
    """tools/run.sh in a session of its own, as a terminal's foreground job
    (os.killpg(p.pid, SIGINT) is then a Ctrl-C), its output lines in p.lines.
    sigint_ignored: started the way a script's background command is (`make
    check &`), with SIGINT ignored."""
    argv = [str(REPO / "tools" / "run.sh")]
    if sigint_ignored:
        argv = ["bash", "-c", 'trap "" INT; exec "$0"'] + argv
    p = subprocess.Popen(argv, cwd=REPO, env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    p.lines = queue.Queue()
    threading.Thread(target=read_lines_into, args=(p.stdout, p.lines), daemon=True).start()
    return p


def read_until(p, seen, prefix, timeout=30):
    """Append p's output lines to `seen` until one starts with `prefix` (that
    line) or the output ends or `timeout` passes (None)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = p.lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if line.startswith(prefix):
            return line
    return None


def stop_make_run(p, rundir):
    """Whatever is left of a make run stack after a failed test: run.sh's
    group, and the servers (in a session of their own) named by rundir."""
    if p.poll() is None:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    for pid in proc_pids():
        if rundir in proc_cmdline(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_make_run_prints_a_working_curl_line_and_stops_on_ctrl_c():
    assert os.access(FCGI, os.X_OK) and os.access(HELPER, os.X_OK), "run make first"
    port = free_port()
    rundir = tempfile.mkdtemp(prefix="rbx-run-", dir="/tmp")
    env = dict(os.environ, PORT=str(port), ROOMBOX_RUN_DIR=rundir)
    p = start_make_run(env)
    seen = []
    room = unique_room("run")
    try:
        curl = read_until(p, seen, "curl ")
        curl = curl and curl.strip()
        assert curl, "run.sh printed no curl line:\n" + "".join(seen)
        assert curl == ('curl -H "Authorization: Bearer $(cat %s/tokens)" '
                        '-d \'{"cmd":"echo hi"}\' '
                        'localhost:%d/api/rooms/room-123/sandbox/exec' % (rundir, port)), curl

        # the line works as printed (in a room of our own rather than room-123)
        out = subprocess.run(["bash", "-c", curl.replace("room-123", room)], cwd=REPO,
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        answer = json.loads(out.stdout)
        assert answer["sandboxName"] == f"sandbox-{room}"
        assert answer["result"]["stdout"] == "hi\n"
        assert answer["result"]["exitCode"] == 0

        # the token was generated and is kept across restarts
        token = open(f"{rundir}/tokens").read().strip()
        assert re.fullmatch(r"[0-9a-f]{32,}", token), token

        keeper = int(open(f"{rundir}/run/rooms/{room}/keeper").read().split()[0])
        assert pid_alive(keeper)
        room_pid_ns = ns_inode(keeper, "pid")
        pids = [pid for pid in proc_pids() if rundir in proc_cmdline(pid)]
        assert pids, "no process of the stack names its run directory"

        # Ctrl-C: SIGINT to the whole foreground process group
        os.killpg(p.pid, signal.SIGINT)
        p.wait(timeout=30)
        assert p.returncode == 0, "".join(seen)
        assert not [pid for pid in pids if pid_alive(pid)], "run.sh left processes running"
        wait_until(lambda: not procs_in_ns("pid", room_pid_ns), 10,
                   "the room's processes to stop")
        assert open(f"{rundir}/tokens").read().strip() == token
    finally:
        stop_make_run(p, rundir)
        # remove the room for good, then the directory
        conf = f"{rundir}/roombox.conf"
        if os.path.exists(conf):
            subprocess.run([str(HELPER), "-c", conf, "destroy", room],
                           capture_output=True, timeout=60)
        shutil.rmtree(rundir, ignore_errors=True)


def test_make_run_refuses_without_root():
    r = subprocess.run(NOBODY + [str(REPO / "tools" / "run.sh")], capture_output=True,
                       text=True, timeout=30, env=dict(os.environ, PORT="1"))
    assert r.returncode == 1
    assert "needs root" in r.stderr


def test_integration_tests_refuse_without_root():
    r = subprocess.run(NOBODY + [str(REPO / "tools" / "integration.sh"), "tests/integration"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "need root" in r.stderr


def test_make_run_appends_local_conf():
    """.run/local.conf (here $ROOMBOX_RUN_DIR/local.conf) is appended to the
    generated configuration: the service runs with it.  No room is made, so
    no packet goes anywhere."""
    port = free_port()
    rundir = tempfile.mkdtemp(prefix="rbx-run-", dir="/tmp")
    with open(f"{rundir}/local.conf", "w") as f:
        f.write("network = egress\ndns = 198.51.100.53\nidle_timeout = 7m")  # no final newline
    env = dict(os.environ, PORT=str(port), ROOMBOX_RUN_DIR=rundir)
    p = start_make_run(env)
    seen = []
    try:
        read_until(p, seen, "  health:")
        health = [l for l in seen if l.startswith("  health:")]
        assert health, "run.sh printed no health line:\n" + "".join(seen)
        answer = json.loads(health[0].split(":", 1)[1])
        assert answer["network"] == "egress" and answer["dns"] == ["198.51.100.53"], answer
        conf = open(f"{rundir}/roombox.conf").read()
        assert conf.endswith("network = egress\ndns = 198.51.100.53\nidle_timeout = 7m\n"), conf
        os.killpg(p.pid, signal.SIGINT)
        p.wait(timeout=30)
        assert p.returncode == 0, "".join(seen)

        # a key the generated part sets is refused, naming the line
        with open(f"{rundir}/local.conf", "w") as f:
            f.write("state_dir = /tmp/elsewhere\n")
        r = subprocess.run([str(REPO / "tools" / "run.sh")], cwd=REPO, env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
        assert r.returncode != 0
        assert "duplicate key 'state_dir'" in r.stdout + r.stderr, r
    finally:
        stop_make_run(p, rundir)
        shutil.rmtree(rundir, ignore_errors=True)


# Enough tries for a Ctrl-C to land while run.sh waits on its servers, and
# while it is still printing its banner.
CTRL_C_TRIES = 5


def test_make_run_stops_cleanly_on_ctrl_c_however_it_was_started():
    """Ctrl-C stops make run with status 0 and nothing left running, again
    and again, whether it was started from a terminal or with SIGINT ignored
    (a background command of a script, as `make check &` starts it): never
    "a server exited", whichever of run.sh and its servers sees the signal
    first.  No room is made."""
    port = free_port()
    rundir = tempfile.mkdtemp(prefix="rbx-run-", dir="/tmp")
    env = dict(os.environ, PORT=str(port), ROOMBOX_RUN_DIR=rundir)
    p = None
    try:
        for sigint_ignored in (False, True):
            for attempt in range(CTRL_C_TRIES):
                how = f"try {attempt + 1}, SIGINT ignored at start: {sigint_ignored}"
                p = start_make_run(env, sigint_ignored)
                seen = []
                assert read_until(p, seen, "Press Ctrl-C"), f"{how}: " + "".join(seen)
                servers = [pid for pid in proc_pids() if rundir in proc_cmdline(pid)]
                assert servers, f"{how}: no process of the stack names its run directory"
                os.killpg(p.pid, signal.SIGINT)
                p.wait(timeout=60)
                read_until(p, seen, "\0")          # the rest of its output
                assert p.returncode == 0, f"{how}: exit {p.returncode}\n" + "".join(seen)
                assert "a server exited" not in "".join(seen), f"{how}: " + "".join(seen)
                assert not [pid for pid in servers if pid_alive(pid)], \
                    f"{how}: run.sh left processes running"
    finally:
        if p is not None:
            stop_make_run(p, rundir)
        shutil.rmtree(rundir, ignore_errors=True)
