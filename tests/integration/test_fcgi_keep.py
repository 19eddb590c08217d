"""nginx keeps its FastCGI connections to roombox-fcgi (nginx.conf.example's
upstream roombox_fcgi, keepalive, and fastcgi_keep_conn on): requests ride
the same few connections instead of one each, roombox-fcgi never closes an
idle one (nginx does), and idle ones hold none of its workers -- this
module's stack runs only two.  The connections are read from
/proc/net/unix, where roombox-fcgi's accepted connections carry the path
of its socket."""

import socket
import time

import pytest

from fcgi_records import KEEP_CONN, STDIN, begin, params, read_answer, record

SERVERS = ("nginx",)          # lighttpd opens a connection per request
ROOMBOX_CONFIG = {"workers": "2"}
NGINX_WORKERS = 2             # nginx.conf.example's worker_processes
INPUT_WAIT_S = 10             # what roombox-fcgi gave a kept connection before


def unix_sockets(path):
    """{inode: state} of the sockets /proc/net/unix lists with `path`."""
    found = {}
    with open("/proc/net/unix") as f:
        next(f)
        for line in f:
            fields = line.split()
            if len(fields) >= 8 and fields[7] == path:
                found[int(fields[6])] = fields[5]
    return found


def fcgi_connections(stack):
    """The inodes of roombox-fcgi's open connections on its socket (state
    03, connected; its listening socket is 01)."""
    return {i for i, st in unix_sockets(str(stack.socket)).items() if st == "03"}


@pytest.fixture
def listed(stack):
    """Control: /proc/net/unix here shows the stack's listening socket."""
    if "01" not in unix_sockets(str(stack.socket)).values():
        pytest.skip(f"/proc/net/unix does not list {stack.socket} here (another network namespace?)")


def test_sequential_requests_ride_the_same_few_connections(stack, client, room, listed):
    """Forty execs one after another: after each answer a connection is still
    open, and all of them came on at most one new connection per nginx worker
    (before, each request had a connection of its own, closed at its end)."""
    client.exec(room, "true")
    before = fcgi_connections(stack)
    seen = set()
    for i in range(40):
        assert client.exec(room, f"echo {i}")["stdout"] == f"{i}\n"
        now = fcgi_connections(stack)
        assert now, f"request {i}: no FastCGI connection open after its answer"
        seen |= now
    new = seen - before
    assert len(new) <= NGINX_WORKERS, \
        f"40 sequential requests opened {len(new)} FastCGI connections"


def test_an_idle_kept_connection_stays_open_and_serves_the_next_post(stack, client, room, listed):
    """A connection left idle longer than roombox-fcgi used to wait for a
    next request is still open (nginx closes idle ones, after its
    keepalive_timeout of 60 s), and the POST sent on it then is answered:
    roombox-fcgi never closes first, which would cost that POST nginx's 502."""
    client.exec(room, "true")
    kept = fcgi_connections(stack)
    assert kept, "no FastCGI connection kept after an answer"
    deadline = time.monotonic() + INPUT_WAIT_S + 3
    while time.monotonic() < deadline:
        gone = kept - fcgi_connections(stack)
        assert not gone, f"roombox-fcgi closed idle kept connection(s) {gone}"
        time.sleep(0.2)
    for i in range(4):            # whichever nginx worker takes it
        assert client.exec(room, f"echo {i}")["stdout"] == f"{i}\n"
    assert not fcgi_connections(stack) - kept, \
        "the requests after the idle time needed new connections"


# -- a FastCGI peer of the test's own that keeps its connections, as nginx does

HEALTH = {"REQUEST_METHOD": "GET", "REQUEST_URI": "/api/health", "SCRIPT_NAME": "/api/health",
          "SERVER_PROTOCOL": "HTTP/1.1", "GATEWAY_INTERFACE": "CGI/1.1"}


def health_request(sock):
    """GET /api/health, whole (its input ended), asking to keep the connection."""
    sock.sendall(begin(KEEP_CONN) + params(HEALTH) + record(STDIN))


def answer(sock, seconds):
    """The STDOUT bytes of a whole answer (END_REQUEST) within `seconds`."""
    out, ended = read_answer(sock, seconds)
    assert ended, f"no END_REQUEST within {seconds} s (so far {out[:200]!r})"
    return out


def still_open(sock):
    """The service has not closed (nor answered anything more on) sock."""
    sock.setblocking(False)
    try:
        data = sock.recv(1)
    except BlockingIOError:
        return True
    finally:
        sock.setblocking(True)
    assert data == b"", f"unasked bytes on an idle connection: {data!r}"
    return False


def test_idle_kept_connections_hold_no_worker(stack, client, room):
    """Three times as many idle kept connections as roombox-fcgi has
    workers: each was answered in turn, a new room's exec through nginx is
    answered while all of them stay open, and each then serves its next
    request (before, each idle one held a worker for 10 s, and the others
    waited behind them)."""
    peers = []
    try:
        for _ in range(3 * int(ROOMBOX_CONFIG["workers"])):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(stack.socket))
            health_request(s)
            assert answer(s, 5).startswith(b"Status: 200"), "health on a kept connection"
            peers.append(s)
        assert client.exec(room, "echo here", http_timeout=30)["stdout"] == "here\n"
        assert all(still_open(s) for s in peers), "an idle kept connection was closed"
        for s in peers:
            health_request(s)
            assert answer(s, 5).startswith(b"Status: 200"), "the next request on it"
    finally:
        for s in peers:
            s.close()


def test_a_refused_body_leaves_a_kept_connection_clean(stack, room):
    """A POST refused (a wrong token) with a body larger than a socket holds,
    on a kept connection: its answer comes, and so does the answer of the
    request sent next on the same connection -- nothing of the first
    request's input is taken for the second's."""
    body = b'{"cmd":"' + b"x" * (512 << 10) + b'"}'
    post = {"REQUEST_METHOD": "POST", "REQUEST_URI": f"/api/rooms/{room}/sandbox/exec",
              "SCRIPT_NAME": f"/api/rooms/{room}/sandbox/exec", "SERVER_PROTOCOL": "HTTP/1.1",
              "GATEWAY_INTERFACE": "CGI/1.1", "CONTENT_TYPE": "application/json",
              "CONTENT_LENGTH": str(len(body)), "HTTP_AUTHORIZATION": "Bearer wrong"}
    chunks = [body[i:i + 65535] for i in range(0, len(body), 65535)]
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(str(stack.socket))
        s.sendall(begin(KEEP_CONN) + params(post) +
                  b"".join(record(STDIN, c) for c in chunks) + record(STDIN))
        assert answer(s, 20).startswith(b"Status: 401"), "the refused POST"
        health_request(s)
        assert answer(s, 20).startswith(b"Status: 200"), "the next request on it"
