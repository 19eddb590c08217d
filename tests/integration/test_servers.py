"""How each web server is wired to roombox-fcgi: lighttpd spawns it and
hands it the socket on fd 0; nginx answers with JSON when it is down."""

import os
import signal

from conftest import Client, Stack, proc_cmdline, proc_pids, proc_status

SERVERS = ("lighttpd",)


def test_lighttpd_spawns_roombox_fcgi_on_fd0(stack, client, room):
    conf = str(stack.conf_path)
    fcgi = [pid for pid in proc_pids()
            if "roombox-fcgi" in proc_cmdline(pid) and conf in proc_cmdline(pid)]
    assert len(fcgi) == 1, fcgi
    lighttpd = stack.procs[0].pid
    assert int(proc_status(fcgi[0])["PPid"]) == lighttpd
    # fd 0 is the listening socket lighttpd made; the configured socket is
    # not used
    assert os.readlink(f"/proc/{fcgi[0]}/fd/0").startswith("socket:")
    assert not stack.socket.exists()
    assert client.sh(room, "echo ok") == "ok\n"


def test_nginx_answers_json_when_roombox_fcgi_is_down():
    s = Stack("nginx", {})
    s.start()
    try:
        c = Client(s)
        assert c.get("/api/health", auth=False).status == 200
        fcgi = s.procs[0]
        os.killpg(fcgi.pid, signal.SIGKILL)
        fcgi.wait(timeout=10)
        os.unlink(s.socket)
        r = c.get("/api/health", auth=False)
        assert r.status == 502, r
        assert r.json["error"]
        r = c.exec_raw("down-room", {"cmd": "true"})
        assert r.status == 502, r
    finally:
        problems = s.stop()
    assert not problems, problems
