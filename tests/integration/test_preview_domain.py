"""Preview ports with preview_domain: host-style URLs
http://<port>-<roomId>-<token>.<preview_domain>/ through nginx and lighttpd.
No DNS is involved: the test sends the Host header itself to the stack."""

import secrets
import urllib.parse

from conftest import wait_until
from preview_util import (ECHO_HEAD_SERVER, WS_ECHO_SERVER, header_lines, start_in_room, ws_handshake,
                          ws_recv, ws_send)

ROOMBOX_CONFIG = {"preview_domain": "preview.test"}


def host_get(client, host, path="/", **kw):
    return client.request("GET", path, auth=False, check_json=False,
                          headers={"Host": host}, timeout=30, **kw)


def test_host_style_url_serves_and_upgrades(client, room):
    r = client.request("PUT", f"/api/rooms/{room}/sandbox/files/site/index.html",
                       data=b"<h1>host style</h1>\n")
    assert r.status in (200, 201), r
    start_in_room(client, room, "python3 -m http.server 8000 --bind 127.0.0.1 "
                  "--directory /workspace/site", "/tmp/http.log")
    r = client.post(f"/api/rooms/{room}/sandbox/ports", {"port": 8000})
    assert r.status == 201, r
    token = r.json["token"]
    assert r.json["url"] == f"http://8000-{room}-{token}.preview.test/", r.json
    host = urllib.parse.urlsplit(r.json["url"]).netloc

    def served():
        resp = host_get(client, host, "/index.html")
        return resp if resp.status != 502 else None
    resp = wait_until(served, 20, "the room's http.server", interval=0.1)
    assert resp.status == 200 and resp.body == b"<h1>host style</h1>\n", resp
    # with the web server's port in the Host, as a browser sends it
    assert host_get(client, f"{host}:{client.port}", "/index.html").body == b"<h1>host style</h1>\n"
    # the API paths on that host are the room's, not roombox's
    assert host_get(client, host, "/api/health").status == 404

    # a Host whose port or room does not match the token's exposure: 404
    for bad in (f"8001-{room}-{token}.preview.test", f"8000-other-{token}.preview.test",
                f"8000-{room}-{'b' * 16}.preview.test", f"8000-{room}-{token}.elsewhere.test"):
        assert host_get(client, bad, "/index.html").status == 404, bad

    # path-style URLs still work with the same token
    assert client.request("GET", f"/preview/{token}/index.html", auth=False,
                          check_json=False).body == b"<h1>host style</h1>\n"

    # WebSockets too
    client.exec(room, "cat > /workspace/ws.py", stdin=WS_ECHO_SERVER)
    start_in_room(client, room, "python3 /workspace/ws.py 9001", "/tmp/ws.log")
    r = client.post(f"/api/rooms/{room}/sandbox/ports", {"port": 9001})
    ws_host = urllib.parse.urlsplit(r.json["url"]).netloc

    def handshake():
        s, status, hdrs, want, rest = ws_handshake(client.port, "/live", host=ws_host)
        if " 502 " in status:
            s.close()
            return None
        return s, status, hdrs, want, rest
    s, status, hdrs, want, rest = wait_until(handshake, 20, "the WebSocket server", interval=0.1)
    with s:
        assert status.startswith("HTTP/1.1 101"), status
        assert hdrs.get("sec-websocket-accept") == want
        assert hdrs.get("x-seen-target") == "/live"
        msg = secrets.token_bytes(64)
        ws_send(s, msg, opcode=2)
        assert ws_recv(s, rest) == (2, msg)

    # unexposed: the host answers 404
    assert client.delete(f"/api/rooms/{room}/sandbox/ports/8000").status == 200
    assert host_get(client, host, "/index.html").status == 404


def test_host_style_drops_the_api_token_and_keeps_the_rooms_cookies(client, room):
    """A host-style preview is the room's own origin: its cookies are the
    room's and reach it; the API token never does."""
    client.exec(room, "cat > /workspace/echo.py", stdin=ECHO_HEAD_SERVER)
    start_in_room(client, room, "python3 /workspace/echo.py 8040", "/tmp/echo.log")
    r = client.post(f"/api/rooms/{room}/sandbox/ports", {"port": 8040})
    assert r.status == 201, r
    host = urllib.parse.urlsplit(r.json["url"]).netloc

    def served():
        resp = client.request("GET", "/", auth=False, check_json=False, timeout=30,
                              headers={"Host": host, "Authorization": f"Bearer {client.token}",
                                       "Cookie": "session=abc"})
        return resp if resp.status != 502 else None
    resp = wait_until(served, 20, "the room's echo server", interval=0.1)
    assert resp.status == 200, resp
    got = header_lines(resp.body)
    assert ("cookie", "session=abc") in got, got
    assert "authorization" not in [k for k, _ in got], got
