"""Errors the web servers answer themselves, before or instead of roombox: a
request they cannot parse, a method they refuse, a body past their limit, a
request line or headers too long, a transfer coding or HTTP version they do
not know.  Each answer is a JSON object with "error" and the status the
server chose (Content-Type application/json), never the server's HTML page.
Sent over raw sockets: an HTTP client library would not send them."""

import json
import socket

import pytest

from conftest import (LIGHTTPD_ERROR_PAGES, REPO, STARTUP_TIMEOUT, Stack, free_port,
                      wait_until)

HOST = b"Host: localhost\r\n"
CLOSE = b"Connection: close\r\n"
EXEC = b"/api/rooms/server-errors/sandbox/exec"


def both(status):
    return {"nginx": status, "lighttpd": status}


# name: (the request's bytes, the status each server answers it with)
CASES = {
    "malformed request line": (b"GARBAGE\r\n\r\n", both(400)),
    "request line with a fourth word": (
        b"GET /api/health HTTP/1.1 extra\r\n" + HOST + CLOSE + b"\r\n", both(400)),
    "HTTP/1.1 without Host": (b"GET /api/health HTTP/1.1\r\n" + CLOSE + b"\r\n", both(400)),
    "header line without a colon": (
        b"GET /api/health HTTP/1.1\r\n" + HOST + b"no colon here\r\n" + CLOSE + b"\r\n",
        both(400)),
    "two Content-Lengths": (
        b"POST " + EXEC + b" HTTP/1.1\r\n" + HOST + b"Content-Length: 2\r\n"
        b"Content-Length: 3\r\n" + CLOSE + b"\r\n{}", both(400)),
    "malformed chunked body": (
        b"POST " + EXEC + b" HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: chunked\r\n"
        + CLOSE + b"\r\nzz\r\n", both(400)),
    # nginx refuses TRACE itself; lighttpd passes it on and roombox answers
    "TRACE": (b"TRACE /api/health HTTP/1.1\r\n" + HOST + CLOSE + b"\r\n", both(405)),
    # lighttpd refuses a method it does not know; nginx passes it on
    "unknown method": (b"FOO /api/health HTTP/1.1\r\n" + HOST + CLOSE + b"\r\n",
                       {"nginx": 405, "lighttpd": 501}),
    # past client_max_body_size / server.max-request-size (2 MiB); refused
    # from Content-Length before any of the body is sent
    "body too large": (
        b"POST " + EXEC + b" HTTP/1.1\r\n" + HOST + b"Content-Length: 5000000\r\n"
        + CLOSE + b"\r\n", both(413)),
    "headers too large": (
        b"GET /api/health HTTP/1.1\r\n" + HOST + b"X-Big: " + b"a" * 70000 + b"\r\n"
        + CLOSE + b"\r\n", both(431)),
    # lighttpd counts the request line with the headers
    "URI too long": (b"GET /api/" + b"a" * 70000 + b" HTTP/1.1\r\n" + HOST + CLOSE + b"\r\n",
                     {"nginx": 414, "lighttpd": 431}),
    "unknown transfer coding": (
        b"POST " + EXEC + b" HTTP/1.1\r\n" + HOST + b"Transfer-Encoding: gzip\r\n"
        + CLOSE + b"\r\n", both(501)),
    "unknown HTTP version": (b"GET /api/health HTTP/9.9\r\n" + HOST + CLOSE + b"\r\n",
                             both(505)),
    # lighttpd wants a length; nginx passes it on and roombox asks for a token
    "HTTP/1.0 POST without a length": (b"POST " + EXEC + b" HTTP/1.0\r\n\r\n",
                                       {"nginx": 401, "lighttpd": 411}),
    # nginx.conf.example's own error locations are not served
    "an error location": (b"GET /_roombox_errors/400 HTTP/1.1\r\n" + HOST + CLOSE + b"\r\n",
                          both(404)),
}


def raw_request(port, data, timeout=30):
    """Send `data` as is and read one answer: (status, headers, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(data)
        except OSError:
            pass        # the server answered and closed before taking it all
        got = b""
        while b"\r\n\r\n" not in got:
            chunk = s.recv(65536)
            assert chunk, f"the connection closed before a whole head: {got!r}"
            got += chunk
        head, _, body = got.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        length = int(headers.get("content-length", "-1"))
        while length < 0 or len(body) < length:
            chunk = s.recv(65536)
            if not chunk:
                break
            body += chunk
    return int(lines[0].split()[1]), headers, body


@pytest.mark.parametrize("case", CASES)
def test_server_answers_json(stack, case):
    request, statuses = CASES[case]
    status, headers, body = raw_request(stack.port, request)
    shown = f"{stack.server}, {case}: {status} {headers} {body[:200]!r}"
    assert status == statuses[stack.server], shown
    assert headers.get("content-type", "").startswith("application/json"), shown
    try:
        answer = json.loads(body)
    except ValueError:
        raise AssertionError(f"not JSON: {shown}")
    assert isinstance(answer, dict) and isinstance(answer.get("error"), str) \
        and answer["error"], shown


# The Debian package's snippets, enabled in a site that serves other things
# too: they make JSON of the errors nginx or lighttpd answer for /api/.
SNIPPET_CASES = {
    "body too large": CASES["body too large"][0],
    "malformed chunked body": CASES["malformed chunked body"][0],
}
SNIPPET_STATUSES = {"body too large": 413, "malformed chunked body": 400}


def snippet_site(s, snippet, replacements):
    """The packaged snippet with its paths replaced, written beside the
    stack; a directory and a port for the site that includes it."""
    text = (REPO / "conf" / snippet).read_text()
    for old, new in replacements:
        text = text.replace(old, new)
    (s.dir / snippet).write_text(text)
    d = s.dir / f"site-{snippet}"
    d.mkdir()
    return s.dir / snippet, d, free_port()


def start_nginx_with_snippet(s):
    snippet, d, port = snippet_site(s, "nginx-roombox.conf", [
        ("unix:/run/roombox/fcgi/", f"unix:{s.socket.parent}/")])
    (d / "nginx.conf").write_text(f"""
user root;
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
        include {snippet};
    }}
}}
""")
    s.spawn(["nginx", "-e", d / "error.log", "-c", d / "nginx.conf", "-g", "daemon off;"],
            "snippet-nginx.out")
    return port


def start_lighttpd_with_snippet(s):
    snippet, d, port = snippet_site(s, "lighttpd-roombox.conf", [
        ("/run/roombox/fcgi/", f"{s.socket.parent}/"),
        ("/usr/share/roombox/lighttpd/", f"{LIGHTTPD_ERROR_PAGES}/")])
    (d / "lighttpd.conf").write_text(f"""
server.modules = ( "mod_fastcgi" )
server.bind          = "127.0.0.1"
server.port          = {port}
server.document-root = "{d}"
server.pid-file      = "{d}/lighttpd.pid"
server.errorlog      = "{d}/error.log"
server.max-request-size = 2048
include "{snippet}"
""")
    s.spawn(["lighttpd", "-D", "-f", d / "lighttpd.conf"], "snippet-lighttpd.out")
    return port


def answers_health(port):
    try:
        return raw_request(port, b"GET /api/health HTTP/1.1\r\n" + HOST + CLOSE + b"\r\n",
                           timeout=2)[0] == 200
    except OSError:
        return False


def test_packaged_snippets_answer_json_for_errors_under_api():
    s = Stack("nginx", {})
    s.start()
    try:
        for server, start in (("nginx", start_nginx_with_snippet),
                              ("lighttpd", start_lighttpd_with_snippet)):
            port = start(s)
            wait_until(lambda: answers_health(port), STARTUP_TIMEOUT,
                       f"{server} with roombox's snippet to answer /api/health")
            for case, request in SNIPPET_CASES.items():
                status, headers, body = raw_request(port, request)
                shown = f"{server} snippet, {case}: {status} {headers} {body[:200]!r}"
                assert status == SNIPPET_STATUSES[case], shown
                assert headers.get("content-type", "").startswith("application/json"), shown
                assert json.loads(body)["error"], shown
    finally:
        problems = s.stop()
    assert not problems, problems
