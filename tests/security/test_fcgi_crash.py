"""roombox-fcgi killed with SIGKILL in the middle of an exec, then started
again: the client gets a JSON error from the web
server, the room keeps working, and the orphaned exec does not outlive its
timeout (a warm exec runs over the room's exec channel, which ends with
roombox-fcgi: the keeper kills it then; one through a helper runs on to
its timeout).  Through both web servers (behind lighttpd, lighttpd respawns
roombox-fcgi itself)."""

import signal

from conftest import pid_alive, proc_cmdline, proc_pids, procs_of_room, procs_with_uid, wait_until
from security_helpers import Background

EXEC_TIMEOUT_MS = 4000


def helpers_of(stack):
    conf = str(stack.conf_path)
    return [p for p in proc_pids()
            if "roombox-helper" in proc_cmdline(p) and conf in proc_cmdline(p) and pid_alive(p)]


def test_fcgi_killed_mid_exec_then_restarted(client, stack, room):
    uid = client.room_uid(room)
    client.sh(room, "cd /tmp; export KEPT=yes")

    ex = Background(client, room, {"cmd": "echo started > /workspace/started; sleep 300",
                                   "timeout": EXEC_TIMEOUT_MS})
    wait_until(lambda: [p for p in procs_with_uid(uid) if p[1] == "sleep 300"] or not ex.running(),
               10, "the exec's sleep to start")
    assert ex.running(), ex.join(1).json
    stack.restart_fcgi(signal.SIGKILL)

    # the web server's own error (nginx 502, lighttpd 500), as JSON: the
    # client checks the body
    r = ex.join(30)
    assert 500 <= r.status < 600, (r.status, r.json)
    assert r.json.get("error"), r.json

    # the room works, with its files and session
    assert client.sh(room, "cat /workspace/started; pwd; echo $KEPT") == "started\n/tmp\nyes\n"
    # and the killed exec ends at its timeout: its process tree and helper go
    wait_until(lambda: not [p for p in procs_of_room(uid) if p[1] == "sleep 300"],
               EXEC_TIMEOUT_MS / 1000 + 10, "the orphaned exec's sleep to be killed")
    wait_until(lambda: not helpers_of(stack), 10, f"the orphaned helper to exit: {helpers_of(stack)}")
    assert "sleep 300" not in client.sh(room, "ps -e -o args=")
    assert client.sh(room, "echo fine") == "fine\n"
