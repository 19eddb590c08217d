"""Preview ports through nginx and lighttpd: a server on a
room's own loopback (network = none: the room has only lo) is reached
through its preview URL without the API token, WebSockets included; wrong,
revoked or unexposed tokens are 404, nothing listening is 502, exposures
survive a stop and restart of the room, and cleanup ends them."""

import json
import os
import secrets
import socket
import subprocess
import time

import pytest

from conftest import (GONE_TIMEOUT, HELPER, decode_answer, encode_request, proc_cmdline, proc_pids,
                      unique_room, wait_until)
from preview_util import (ECHO_HEAD_SERVER, READ_HEAD, SERVE_EACH, WS_ECHO_SERVER, expose,
                          header_lines, preview_get, start_in_room, target_of, wait_serving,
                          ws_handshake, ws_recv, ws_send)

# pids_limit: the WebSocket echo server runs a thread per connection, and
# test_one_rooms_websockets_hold_only_its_share_of_relays holds up to 256
ROOMBOX_CONFIG = {"network": "none", "pids_limit": "1024"}


def helpers_of(stack):
    """Pids of this stack's roombox-helper processes still running."""
    pids = []
    for pid in proc_pids():
        try:
            cmd = proc_cmdline(pid)
        except OSError:
            continue
        if cmd.startswith(str(HELPER)) and str(stack.conf_path) in cmd:
            pids.append(pid)
    return pids


def ports(room):
    return f"/api/rooms/{room}/sandbox/ports"


def put_file(client, room, path, data):
    r = client.request("PUT", f"/api/rooms/{room}/sandbox/files/{path}", data=data)
    assert r.status in (200, 201), r


def http_server(client, room, data):
    """A room serving `data` as /workspace/site/data.bin on port 8000."""
    put_file(client, room, "site/data.bin", data)
    start_in_room(client, room, "python3 -m http.server 8000 --bind 127.0.0.1 "
                  "--directory /workspace/site", "/tmp/http.log")


def test_http_server_in_room_through_preview_url(client, room):
    data = os.urandom(200_000)
    http_server(client, room, data)
    e = expose(client, room, 8000)
    assert e["url"] == f"http://127.0.0.1:{client.port}/preview/{e['token']}/", e
    r = wait_serving(client, e["url"], "the room's http.server", path_extra="data.bin")
    assert r.status == 200, r
    assert r.body == data
    # the room's own log saw the request, with the /preview/<token> prefix gone
    log = client.sh(room, "cat /tmp/http.log")
    assert '"GET /data.bin HTTP/1.' in log, log
    assert e["token"] not in log
    # the listing shows it
    r = client.get(ports(room))
    assert r.status == 200 and r.json == {"ports": [e]}, r


ECHO_SERVER = r'''
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        n = int(self.headers["Content-Length"])
        body = b""
        while len(body) < n:
            chunk = self.rfile.read(n - len(body))
            if not chunk:
                break
            body += chunk
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[::-1])
    def log_message(self, *a):
        pass
http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
'''


def test_large_bodies_both_ways_through_preview_url(client, room):
    """Megabytes each way through one relay (the client's body into the
    room, the room's answer out), byte-exact, on both web servers."""
    client.exec(room, "cat > /workspace/echo.py", stdin=ECHO_SERVER)
    start_in_room(client, room, "python3 /workspace/echo.py 8010", "/tmp/echo.log")
    e = expose(client, room, 8010)
    body = os.urandom(12 << 20)

    def posted():
        r = client.request("POST", target_of(e["url"]) + "up", data=body, auth=False,
                           check_json=False, timeout=60)
        return r if r.status != 502 else None
    r = wait_until(posted, 20, "the room's echo server", interval=0.1)
    assert r.status == 200, r
    assert len(r.body) == len(body) and r.body == body[::-1]


def relay_request(stack, raw):
    """Talk to the relay's own socket (where the web servers proxy to), as a
    web server that half-closes after its request; all it answers."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(30)
        s.connect(str(stack.dir / "preview.sock"))
        s.sendall(raw)
        s.shutdown(socket.SHUT_WR)
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return got
            got += chunk


def test_an_answer_after_the_clients_half_close_arrives_whole(client, room):
    """A peer that ends its request with a half-close gets the room's whole
    answer (the room's server closes right after it: both ends are shut
    while the answer's last bytes still wait in the relay)."""
    data = os.urandom(300_000)
    http_server(client, room, data)
    e = expose(client, room, 8000)
    wait_serving(client, e["url"], "the room's http.server", path_extra="data.bin")
    req = f"GET {target_of(e['url'])}data.bin HTTP/1.0\r\nHost: x\r\n\r\n".encode()
    for i in range(8):
        got = relay_request(client.stack, req)
        head, _, body = got.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 200"), (i, head[:100])
        assert body == data, (i, len(body))


def test_a_connect_that_hangs_does_not_busy_the_relay(client, room):
    """A room whose server never accepts (its backlog full): the next
    preview connection's connect stays under way until its bound, while the
    web server has sent a body; the relay waits without spinning, and answers
    502 at the bound."""
    client.exec(room, "cat > /workspace/stuck.py", stdin=(
        "import socket, time\n"
        "s = socket.socket(); s.bind(('127.0.0.1', 8030)); s.listen(0)\n"
        "time.sleep(600)\n"))
    start_in_room(client, room, "python3 /workspace/stuck.py", "/tmp/stuck.log")
    e = expose(client, room, 8030)
    pids = client.stack.fcgi_pids()
    # fill the backlog: these connections complete in the kernel, unaccepted
    held = []
    try:
        def connected_one():
            s = socket.create_connection(("127.0.0.1", client.port), timeout=10)
            s.sendall(f"GET {target_of(e['url'])} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            held.append(s)
            s.settimeout(0.5)
            try:   # a 502 (not listening yet) comes at once; a held one waits
                return b" 502 " not in s.recv(100)
            except socket.timeout:
                return True
        wait_until(connected_one, 20, "the room's stuck server to listen", interval=0.1)
        for _ in range(3):
            s = socket.create_connection(("127.0.0.1", client.port), timeout=10)
            s.sendall(f"GET {target_of(e['url'])} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            held.append(s)
        cpu0 = sum(proc_cpu_s(p) for p in pids)
        t0 = time.monotonic()
        r = client.request("POST", target_of(e["url"]), data=os.urandom(1 << 20), auth=False,
                           check_json=False, timeout=60)
        wall = time.monotonic() - t0
        cpu = sum(proc_cpu_s(p) for p in pids) - cpu0
        assert r.status == 502, r
        assert wall >= 4, f"answered after {wall:.1f} s: the connect was not left pending"
        assert cpu < wall / 4, f"roombox-fcgi used {cpu:.1f} s of CPU in {wall:.1f} s"
    finally:
        for s in held:
            s.close()


def proc_cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_websocket_echo_through_preview_url(client, room):
    client.exec(room, "cat > /workspace/ws.py", stdin=WS_ECHO_SERVER)
    start_in_room(client, room, "python3 /workspace/ws.py 9001", "/tmp/ws.log")
    e = expose(client, room, 9001)
    target = target_of(e["url"]) + "chat?x=1"

    def handshake():
        s, status, hdrs, want, rest = ws_handshake(client.port, target)
        if " 502 " in status:
            s.close()
            return None
        return s, status, hdrs, want, rest
    s, status, hdrs, want, rest = wait_until(handshake, 20, "the room's WebSocket server",
                                             interval=0.1)
    with s:
        assert status.startswith("HTTP/1.1 101"), status
        assert hdrs.get("sec-websocket-accept") == want, hdrs
        assert hdrs.get("x-seen-target") == "/chat?x=1", hdrs
        msg = "héllo roombox ".encode() + secrets.token_bytes(300)
        ws_send(s, msg, opcode=2)
        op, payload = ws_recv(s, rest)
        assert (op, payload) == (2, msg)
        ws_send(s, b"second", opcode=1)
        assert ws_recv(s) == (1, b"second")


def test_wrong_revoked_and_unexposed_tokens_are_404(client, room):
    http_server(client, room, b"secret page\n")
    e = expose(client, room, 8000)
    assert wait_serving(client, e["url"], "http.server", path_extra="data.bin").body == b"secret page\n"

    wrong = "/preview/" + ("a" * 16) + "/data.bin"
    r = client.request("GET", wrong, auth=False, check_json=False)
    assert r.status == 404, r
    assert r.check_json().json == {"error": "not found"}
    for bad in ("/preview/", "/preview/short/data.bin", "/preview/" + e["token"].upper() + "/"):
        assert client.request("GET", bad, auth=False, check_json=False).status == 404, bad

    # a second port, then unexpose the first: its URL is 404, the other works
    start_in_room(client, room, "python3 -m http.server 8001 --bind 127.0.0.1 "
                  "--directory /workspace/site", "/tmp/http2.log")
    e2 = expose(client, room, 8001)
    assert wait_serving(client, e2["url"], "second server", path_extra="data.bin").status == 200
    assert client.get(ports(room)).json == {"ports": [e, e2]}
    r = client.delete(f"{ports(room)}/8000")
    assert r.status == 200 and r.json == {"port": 8000}, r
    r = preview_get(client, e["url"], path_extra="data.bin")
    assert r.status == 404 and r.check_json().json == {"error": "not found"}, r
    assert preview_get(client, e2["url"], path_extra="data.bin").status == 200
    assert client.get(ports(room)).json == {"ports": [e2]}
    r = client.delete(f"{ports(room)}/8000")
    assert r.status == 404 and r.json == {"error": "port 8000 is not exposed"}, r
    # exposing again gives a new token; the old one stays dead
    e3 = expose(client, room, 8000)
    assert e3["token"] != e["token"]
    assert preview_get(client, e["url"], path_extra="data.bin").status == 404
    assert preview_get(client, e3["url"], path_extra="data.bin").status == 200


def test_nothing_listening_is_502(client, room):
    client.sh(room, "true")
    e = expose(client, room, 8765)
    r = preview_get(client, e["url"])
    assert r.status == 502, r
    assert r.check_json().json == {"error": "nothing listens on port 8765 in the room"}
    # the same with a body the relay never reads: still its 502 (the web
    # server finishes sending the body into the lingering connection; were
    # it closed at once, nginx would answer an error of its own, a 413)
    for _ in range(3):
        r = client.request("POST", target_of(e["url"]) + "up", data=os.urandom(12 << 20),
                           auth=False, check_json=False, timeout=60)
        assert r.status == 502, r
        assert r.check_json().json == {"error": "nothing listens on port 8765 in the room"}


def test_expose_again_keeps_the_token_and_validates(client, room):
    e = expose(client, room, 3000)
    r = client.post(ports(room), {"port": 3000})
    assert r.status == 200 and r.json == e, r
    cases = [
        ({}, {"port": ["Invalid input: expected number, received undefined"]}),
        ({"port": "80"}, {"port": ["Invalid input: expected number, received string"]}),
        ({"port": 1.5}, {"port": ["Invalid input: expected int, received number"]}),
        ({"port": 0}, {"port": ["Too small: expected number to be >=1"]}),
        ({"port": 65536}, {"port": ["Too big: expected number to be <=65535"]}),
        ({"port": -5}, {"port": ["Too small: expected number to be >=1"]}),
        ({"port": 1e300}, {"port": ["Too big: expected int to be <=9007199254740991",
                                    "Too big: expected number to be <=65535"]}),
        ({"port": None}, {"port": ["Invalid input: expected number, received null"]}),
        ([8000], {}),
    ]
    for body, details in cases:
        r = client.post(ports(room), body)
        assert r.status == 400 and r.json == {"error": "invalid request", "details": details}, (body, r)
    for bad in ("0", "x", "65536", "80a"):
        assert client.delete(f"{ports(room)}/{bad}").status == 400, bad
    r = client.get(ports(room), auth=False)
    assert r.status == 401


def test_exposure_survives_stop_and_restart(client, room):
    http_server(client, room, b"before\n")
    e = expose(client, room, 8000)
    assert wait_serving(client, e["url"], "http.server", path_extra="data.bin").body == b"before\n"
    assert helpers_of(client.stack), "no connector helper while a preview is in use"
    r = client.post(f"/api/rooms/{room}/sandbox/stop")
    assert r.status == 200, r
    # the room's connector (a helper in its network namespace) ends with it
    wait_until(lambda: not helpers_of(client.stack), GONE_TIMEOUT,
               f"the connector helper to end: {helpers_of(client.stack)}")
    # stopped: nothing can listen, the exposure is still there
    r = preview_get(client, e["url"], path_extra="data.bin")
    assert r.status == 502, r
    assert client.get(ports(room)).json == {"ports": [e]}
    # a new exec restarts the room; its server answers on the same URL
    put_file(client, room, "site/data.bin", b"after\n")
    start_in_room(client, room, "python3 -m http.server 8000 --bind 127.0.0.1 "
                  "--directory /workspace/site", "/tmp/http.log")
    assert wait_serving(client, e["url"], "http.server again", path_extra="data.bin").body == b"after\n"


def test_cleanup_ends_exposures(client, room):
    http_server(client, room, b"x\n")
    e = expose(client, room, 8000)
    assert wait_serving(client, e["url"], "http.server", path_extra="data.bin").status == 200
    store = client.stack.state_dir / "previews"
    assert (store / e["token"]).exists()
    client.destroy(room)
    assert not (store / e["token"]).exists()
    r = preview_get(client, e["url"], path_extra="data.bin")
    assert r.status == 404, r
    assert client.get(ports(room)).status == 404   # the room is gone: nothing to list


def test_an_unexpose_that_cannot_remove_its_exposure_says_so(client, room):
    """The exposure's record cannot be removed (here an immutable file;
    an I/O error or a read-only state directory alike): the URL would
    keep working, so the DELETE is a 500 saying so, not a 200; once it
    can be removed, the DELETE is a 200 and the URL answers 404."""
    http_server(client, room, b"still here\n")
    e = expose(client, room, 8000)
    wait_serving(client, e["url"], "the room's http.server", path_extra="data.bin")
    record = client.stack.state_dir / "previews" / e["token"]
    assert record.exists(), sorted(p.name for p in record.parent.iterdir())
    if subprocess.run(["chattr", "+i", str(record)], capture_output=True).returncode != 0:
        pytest.skip("chattr +i is not supported on the test's file system (the control)")
    try:
        r = client.delete(f"/api/rooms/{room}/sandbox/ports/8000")
        assert r.status == 500 and "remove port 8000" in r.json["error"], r
        ports = client.get(f"/api/rooms/{room}/sandbox/ports").json
        assert [p["port"] for p in ports["ports"]] == [8000], ports
    finally:
        subprocess.run(["chattr", "-i", str(record)], check=True)
    r = client.delete(f"/api/rooms/{room}/sandbox/ports/8000")
    assert r.status == 200 and r.json == {"port": 8000}, r
    assert preview_get(client, e["url"], path_extra="data.bin").status == 404


def test_unexpose_closes_an_open_websocket(client, room):
    client.exec(room, "cat > /workspace/ws.py", stdin=WS_ECHO_SERVER)
    start_in_room(client, room, "python3 /workspace/ws.py 9002", "/tmp/ws.log")
    e = expose(client, room, 9002)

    def handshake():
        s, status, hdrs, want, rest = ws_handshake(client.port, target_of(e["url"]))
        if " 502 " in status:
            s.close()
            return None
        return s, status, rest
    s, status, rest = wait_until(handshake, 20, "the room's WebSocket server", interval=0.1)
    with s:
        assert status.startswith("HTTP/1.1 101"), status
        ws_send(s, b"ping")
        assert ws_recv(s, rest) == (1, b"ping")
        assert client.delete(f"{ports(room)}/9002").status == 200
        s.settimeout(10)
        try:
            tail = s.recv(4096)
        except ConnectionResetError:
            tail = b""
        assert tail == b"", f"the relay kept the WebSocket open after unexpose: {tail!r}"


def test_host_loopback_is_not_the_rooms(client, room):
    """A server on the host's 127.0.0.1 is not what a room's exposure
    reaches: the connection is made in the room's network namespace."""
    with socket.socket() as host_srv:
        host_srv.bind(("127.0.0.1", 0))
        host_srv.listen(4)
        port = host_srv.getsockname()[1]
        client.sh(room, "true")
        e = expose(client, room, port)
        r = preview_get(client, e["url"])
        assert r.status == 502, r
        assert r.check_json().json == {"error": f"nothing listens on port {port} in the room"}


def helper_port_connect(stack, request, fd3):
    """Run the helper's port-connect with fd3 (a socket or a pipe end) as
    its fd 3; (exit status, answer, the received fd or None)."""
    r = subprocess.run(["bash", "-c", f'exec "$0" -c "$1" 3<&{fd3}', str(HELPER),
                        str(stack.conf_path)],
                       input=encode_request(request), capture_output=True,
                       timeout=60, pass_fds=(fd3,))
    return r.returncode, decode_answer(r.stdout)


def test_helper_port_connect_checks(client, room):
    stack = client.stack
    client.sh(room, "true")
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        base = {"op": "port-connect", "room": room}
        for port in (0, 65536, 0xffffffff):
            rc, ans = helper_port_connect(stack, dict(base, port=port), b.fileno())
            assert rc != 0 and ans["code"] == "invalid", (port, ans)
            assert "port must be a whole number from 1 to 65535" in ans["error"]
        # fd 3 must be a unix stream socket
        rd, wr = os.pipe()
        try:
            rc, ans = helper_port_connect(stack, dict(base, port=80), rd)
            assert rc != 0 and ans["code"] == "invalid" and "fd 3" in ans["error"], ans
        finally:
            os.close(rd)
            os.close(wr)
        # a stopped room is not started: refused
        assert client.post(f"/api/rooms/{room}/sandbox/stop").status == 200
        rc, ans = helper_port_connect(stack, dict(base, port=80), b.fileno())
        assert rc != 0 and ans["code"] == "refused", ans
        assert stack.keeper_pid(room) is None
        # a listening server: the connection comes back over fd 3
        start_in_room(client, room, "python3 -m http.server 8080 --bind 127.0.0.1", "/tmp/h.log")

        def connected():
            rc, ans = helper_port_connect(stack, dict(base, port=8080), b.fileno())
            return ans if rc == 0 else None
        assert wait_until(connected, 20, "port-connect to succeed", interval=0.1) == {"connected": True}
        msg, fds, _, _ = socket.recv_fds(a, 1, 4)
        assert msg == b"c" and len(fds) == 1
        with socket.socket(fileno=fds[0]) as conn:
            conn.sendall(b"GET / HTTP/1.0\r\n\r\n")
            assert conn.recv(64).startswith(b"HTTP/1.0 200")
    # serve mode: batches of sockets made in the room's namespace, not
    # connected; each reaches the room's loopback, never the host's
    import struct
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b, socket.socket() as host_srv:
        host_srv.bind(("127.0.0.1", 0))
        host_srv.listen(4)
        host_port = host_srv.getsockname()[1]
        with socket.create_connection(("127.0.0.1", host_port), timeout=5):
            pass   # control: a socket of the host's namespace reaches it
        p = subprocess.Popen(["bash", "-c", f'exec "$0" -c "$1" 3<&{b.fileno()}', str(HELPER),
                              str(stack.conf_path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, pass_fds=(b.fileno(),))
        p.stdin.write(encode_request({"op": "port-connect", "room": room, "serve": True}))
        p.stdin.close()
        b.close()
        a.settimeout(30)
        a.sendall(struct.pack("HH", 0, 3))
        msg, fds, _, _ = socket.recv_fds(a, 1, 40)
        assert msg == b"s" and len(fds) == 3, (msg, fds)
        # once in the room's namespace the serving helper keeps nothing of
        # root's capabilities, for the hours a preview may last
        with open(f"/proc/{p.pid}/status") as f:
            caps = dict(l.split(":", 1) for l in f if l.startswith("Cap"))
        assert int(caps["CapEff"], 16) == 0 and int(caps["CapPrm"], 16) == 0, caps
        assert int(caps["CapBnd"], 16) == 0, caps
        for fd in fds:
            with socket.socket(fileno=fd) as s:
                assert s.family == socket.AF_INET and s.type & socket.SOCK_STREAM
                with pytest.raises(OSError):
                    s.getpeername()   # not connected
                s.setblocking(True)
                assert s.connect_ex(("127.0.0.1", host_port)) != 0   # the host's: not there
        a.sendall(struct.pack("HH", 0, 1))
        msg, fds, _, _ = socket.recv_fds(a, 1, 40)
        assert msg == b"s" and len(fds) == 1
        with socket.socket(fileno=fds[0]) as s:
            s.setblocking(True)
            s.connect(("127.0.0.1", 8080))   # the room's http.server
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            assert s.recv(64).startswith(b"HTTP/1.0 200")
        for bad in ((0, 0), (0, 33), (80, 1)):
            a.sendall(struct.pack("HH", *bad))
            msg, fds, _, _ = socket.recv_fds(a, 1, 40)
            assert msg == b"i" and not fds, (bad, msg)
        a.shutdown(socket.SHUT_RDWR)
        assert p.wait(30) == 0
        assert decode_answer(p.stdout.read()) == {"connected": True}


RELAYS_MAX = 256   # fcgi-app/preview/preview_relay.h PREVIEW_RELAYS_MAX
ROOM_RELAYS = 64   # a room's share of them, a quarter (PREVIEW_ROOM_RELAYS)


def refusal_body(s, hdrs, rest):
    """The JSON body of a relay's answer to a handshake it refused."""
    want = int(hdrs.get("content-length", "0"))
    while len(rest) < want:
        d = s.recv(4096)
        if not d:
            break
        rest += d
    return json.loads(rest[:want])


def test_one_rooms_websockets_hold_only_its_share_of_relays(client, room):
    """WebSockets of one room are relayed up to the room's share; the next
    one gets 503 + Retry-After naming the room, and another room's preview
    still answers 200 meanwhile."""
    other = unique_room("pvo")
    http_server(client, other, b"the other room\n")
    eo = expose(client, other, 8000)
    wait_serving(client, eo["url"], "the other room's http.server", path_extra="data.bin")
    client.exec(room, "cat > /workspace/ws.py", stdin=WS_ECHO_SERVER)
    start_in_room(client, room, "python3 /workspace/ws.py 9003", "/tmp/ws.log")
    e = expose(client, room, 9003)
    target = target_of(e["url"])

    def handshake():
        s, status, hdrs, want, rest = ws_handshake(client.port, target)
        if " 502 " in status:
            s.close()
            return None
        return s, status
    held = [wait_until(handshake, 20, "the room's WebSocket server", interval=0.1)[0]]
    try:
        refused = None
        while refused is None and len(held) <= RELAYS_MAX:
            s, status, hdrs, _, rest = ws_handshake(client.port, target)
            if status.startswith("HTTP/1.1 101"):
                held.append(s)
                continue
            with s:
                refused = (status, hdrs, refusal_body(s, hdrs, rest))
        assert refused is not None, f"{len(held)} WebSockets of one room, all relayed"
        # another room's preview answers while this one holds its share
        r = preview_get(client, eo["url"], path_extra="data.bin")
        assert r.status == 200 and r.body == b"the other room\n", (len(held), r)
        status, hdrs, body = refused
        assert " 503 " in status, (len(held), status)
        assert hdrs.get("retry-after") == "1", hdrs
        assert set(body) == {"error"} and room in body["error"], body
    finally:
        for s in held:
            s.close()

    def answers_again():
        s, status, _, _, _ = ws_handshake(client.port, target)
        s.close()
        return status.startswith("HTTP/1.1 101")
    wait_until(answers_again, 20, "the room's previews to answer after its relays closed",
               interval=0.1)


# Runs in the room: completes a WebSocket upgrade, then holds the
# connection without ever reading or writing (nor seeing its client go).
SILENT_WS_SERVER = READ_HEAD + r'''
import socket, sys, threading, time

def serve(c):
    read_head(c)
    c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\n\r\n")
    time.sleep(3600)
''' + SERVE_EACH


def test_websockets_whose_clients_left_hold_no_relay(client, room):
    """A WebSocket's client that goes away ends its relay once what it sent
    is passed on, even when the room's server ignores the end and says
    nothing: nobody can read what it might send.  Before, each such relay
    was held until the 10 minutes' idle timeout, and after the room's
    share of them (64) its previews answered 503."""
    client.exec(room, "cat > /workspace/silent.py", stdin=SILENT_WS_SERVER)
    start_in_room(client, room, "python3 /workspace/silent.py 9004", "/tmp/silent.log")
    target = target_of(expose(client, room, 9004)["url"])

    def handshake():
        s, status, _, _, _ = ws_handshake(client.port, target)
        s.close()
        return None if " 502 " in status else status
    wait_until(handshake, 20, "the room's silent WebSocket server", interval=0.1)
    for i in range(ROOM_RELAYS + 4):
        s, status, _, _, _ = ws_handshake(client.port, target)
        s.close()
        assert status.startswith("HTTP/1.1 101"), (i, status)


def test_relays_are_bounded_503(client, room):
    """Past PREVIEW_RELAYS_MAX open connections to the relay (here ones
    that have sent no head yet) a new preview request gets 503 with
    Retry-After; once they close, previews answer again."""
    http_server(client, room, b"bounded\n")
    e = expose(client, room, 8000)
    wait_serving(client, e["url"], "the room's http.server", path_extra="data.bin")
    req = f"GET {target_of(e['url'])}data.bin HTTP/1.0\r\nHost: x\r\n\r\n".encode()
    held = []
    try:
        for _ in range(RELAYS_MAX):
            s = socket.socket(socket.AF_UNIX)
            s.connect(str(client.stack.dir / "preview.sock"))
            held.append(s)
        head, _, body = relay_request(client.stack, req).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503"), head
        assert b"\r\nRetry-After: 1\r\n" in head + b"\r\n", head
        assert json.loads(body) == {"error": "too many preview connections"}
    finally:
        for s in held:
            s.close()

    def answers_again():
        return relay_request(client.stack, req).startswith(b"HTTP/1.0 200")
    wait_until(answers_again, 20, "previews to answer after the connections closed", interval=0.1)


def test_the_api_token_and_cookies_do_not_reach_the_room(client, room):
    """A path-style preview shares the API's origin: a browser may send
    the API token and that origin's cookies with it.  The room's server
    gets neither; an Authorization of the app's own (not an API token)
    and every other header reach it as sent."""
    client.exec(room, "cat > /workspace/echo.py", stdin=ECHO_HEAD_SERVER)
    start_in_room(client, room, "python3 /workspace/echo.py 8040", "/tmp/echo.log")
    e = expose(client, room, 8040)
    wait_serving(client, e["url"], "the room's echo server")
    sent = {"Authorization": f"Bearer {client.token}", "Cookie": "session=abc; theme=dark",
            "X-Probe": "kept"}
    for path in ("page", "page?x=1"):
        r = preview_get(client, e["url"], headers=sent, path_extra=path)
        assert r.status == 200, r
        got = header_lines(r.body)
        assert ("x-probe", "kept") in got, got
        names = [k for k, _ in got]
        assert "authorization" not in names and "cookie" not in names, got
    # the token in another spelling of the scheme is the API's all the same
    r = preview_get(client, e["url"], headers={"Authorization": f"bearer  {client.token}"})
    assert "authorization" not in [k for k, _ in header_lines(r.body)], r.body
    for own in ("Bearer app-own-token", "Basic dXNlcjpwYXNz"):
        r = preview_get(client, e["url"], headers={"Authorization": own})
        assert ("authorization", own) in header_lines(r.body), r.body
