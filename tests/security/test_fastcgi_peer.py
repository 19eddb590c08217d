"""A FastCGI peer that does not behave like nginx (anyone who may connect to
roombox-fcgi's socket): a request whose input never ends -- after its whole
body, or with no input at all -- still gets its answer, and the worker is
given back; a peer that stops in the middle of its parameters is closed
after 10 s.  Spoken with raw FastCGI records on the socket, no web server
in between."""

import socket
import struct
import time

from conftest import wait_until
from fcgi_records import PARAMS, STDIN, begin, name_value, params, read_answer, record

SERVERS = ("nginx",)


def post_without_end(sock, token, room, body):
    """A POST with its body, exactly CONTENT_LENGTH bytes, but not the empty
    STDIN record that ends a FastCGI request's input."""
    sock.sendall(begin() + params({
        "REQUEST_METHOD": "POST", "REQUEST_URI": f"/api/rooms/{room}/messages",
        "SCRIPT_NAME": f"/api/rooms/{room}/messages", "SERVER_PROTOCOL": "HTTP/1.1",
        "GATEWAY_INTERFACE": "CGI/1.1", "CONTENT_TYPE": "application/json",
        "CONTENT_LENGTH": str(len(body)), "HTTP_AUTHORIZATION": f"Bearer {token}"}) +
        record(STDIN, body))


def get_without_input(sock):
    """GET /api/health's parameters, and no STDIN record at all."""
    sock.sendall(begin() + params({
        "REQUEST_METHOD": "GET", "REQUEST_URI": "/api/health", "SCRIPT_NAME": "/api/health",
        "SERVER_PROTOCOL": "HTTP/1.1", "GATEWAY_INTERFACE": "CGI/1.1"}))


BODY = b'{"role":"user","content":"hello"}'


def test_a_body_without_the_end_of_input_still_gets_its_answer(stack, room):
    """roombox-fcgi reads one record past the body to see the input's end
    (then it may close the connection plainly); that read is bounded, so
    the answer comes even when the end never does."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(stack.socket))
        post_without_end(s, stack.token, room, BODY)
        out, ended = read_answer(s, 20)
    assert ended, f"no END_REQUEST within 20 s (stdout so far: {out[:200]!r})"
    assert out.startswith(b"Status: 201"), out[:300]
    assert b'"content":"hello"' in out, out[-300:]


def test_peers_that_never_end_their_input_do_not_use_up_the_workers(stack, client, room):
    """More such peers than roombox-fcgi has workers, all left open: every
    one is answered, and a normal request through nginx after them is too."""
    peers = []
    try:
        for _ in range(40):       # the test stacks run the default 32 workers
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(stack.socket))
            post_without_end(s, stack.token, room, BODY)
            peers.append(s)
        for s in peers:
            out, ended = read_answer(s, 30)
            assert ended and out.startswith(b"Status: 201"), out[:200]
        r = client.get(f"/api/rooms/{room}/messages")
        assert r.status == 200 and len(r.json["messages"]) == 40, (r.status, r.json)
    finally:
        for s in peers:
            s.close()


def test_a_request_without_any_input_still_gets_its_answer(stack):
    """roombox-fcgi reads a body-less request's input to its end (so that
    nginx is never cut off mid-write); that read waits 10 s at most."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(stack.socket))
        get_without_input(s)
        out, ended = read_answer(s, 40)
    assert ended, f"no END_REQUEST within 40 s (stdout so far: {out[:200]!r})"
    assert out.startswith(b"Status: 200"), out[:200]
    assert b'"ok":true' in out.replace(b" ", b""), out[-200:]


def params_cut_short(sock):
    """BEGIN_REQUEST, then a PARAMS record whose header promises more bytes
    than follow: the peer stops inside its parameters."""
    pairs = name_value(b"REQUEST_METHOD", b"GET") + name_value(b"REQUEST_URI", b"/api/health")
    head = struct.pack(">BBHHBB", 1, PARAMS, 1, len(pairs) + 100, 0, 0)
    sock.sendall(begin() + head + pairs)


def closed_unanswered(sock):
    """True once the service has closed the connection.  It must not have
    answered: a request cut short inside its parameters is not served."""
    sock.settimeout(0.05)
    try:
        data = sock.recv(4096)
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True
    assert data == b"", f"a request cut short inside its parameters was answered: {data[:200]!r}"
    return True


def test_peers_stalled_inside_their_parameters_do_not_hold_the_workers(stack, client):
    """As many peers as roombox-fcgi has workers (the test stacks run the
    default 32), each stopped inside its parameters: a request through nginx
    after them is still answered, at the latest once their reads time out
    (10 s; sooner when it comes on a connection nginx kept and a worker is
    still free), and the service closes every stalled connection without
    serving it (libfcgi takes a failed read between two parameters for their
    end), within 10 s of its read and libfcgi's 2 s wait on close."""
    workers = 32
    peers = []
    try:
        for _ in range(workers):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(stack.socket))
            params_cut_short(s)
            peers.append(s)
        t0 = time.monotonic()
        r = client.get("/api/health", timeout=40)
        took = time.monotonic() - t0
        assert r.status == 200, r
        assert took < 20, f"answered after {took:.1f} s"
        # counted from the stall, not from the answer, which may come first
        wait_until(lambda: all(closed_unanswered(s) for s in peers),
                   max(0.0, t0 + 25 - time.monotonic()),
                   "the service to close every stalled connection")
    finally:
        for s in peers:
            s.close()
