"""A request that waits for its room's share of roombox-fcgi's workers
(parked without a worker) and whose client leaves meanwhile is dropped when
the share frees, never run for nobody.  nginx only: its access log says
when it has given up on a request (499) and closed its FastCGI connection,
which is what roombox-fcgi sees; lighttpd logs nothing of it.

workers = 8 gives a share of 2 (as in test_fair_share.py); every wait is a
bounded poll."""

import json
import socket

import pytest

from conftest import unique_room, wait_until
from test_fair_share import hold_with_gate

SERVERS = ("nginx",)
WORKERS = 8
ROOMBOX_CONFIG = {"workers": str(WORKERS), "max_concurrent_execs": "64"}


def exec_and_leave(client, room, cmd):
    """Send an exec of room and close the connection without waiting for
    its answer, as a client that gives up does."""
    body = json.dumps({"cmd": cmd}).encode()
    head = (f"POST /api/rooms/{room}/sandbox/exec HTTP/1.1\r\nHost: roombox\r\n"
            f"Authorization: Bearer {client.token}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection((client.host, client.port), timeout=10) as s:
        s.sendall(head + body)


def service_log(client):
    return "".join(p.read_text(errors="replace") for p in client.stack.logs if p.exists())


def test_a_waiting_request_whose_client_left_is_not_run(client):
    """The room's share is held by execs that wait for a file a managed
    process makes when it is killed; an exec sent meanwhile waits (parked)
    and its client leaves.  When the share frees, that exec is dropped,
    never run for nobody."""
    access_log = client.stack.dir / "nginx-access.log"
    room = unique_room("fsg")
    client.sh(room, "rm -f /tmp/ran-for-nobody")
    answers, open_gate = hold_with_gate(client, room, 2)   # the room's share
    before = service_log(client).count("dropped: the web server closed its connection")
    exec_and_leave(client, room, "touch /tmp/ran-for-nobody")
    # nginx logs 499 once it has closed its connection to roombox-fcgi
    wait_until(lambda: f"POST /api/rooms/{room}/sandbox/exec HTTP/1.1\" 499" in access_log.read_text(),
               30, "nginx to log that the client left")
    open_gate()

    def outcome():
        if client.exec(room, "test -e /tmp/ran-for-nobody && echo ran || true")["stdout"]:
            return "ran"
        if service_log(client).count("dropped: the web server closed its connection") > before:
            return "dropped"
        return None
    try:
        got = wait_until(outcome, 20, "the exec whose client left to be run or dropped")
    except AssertionError:
        pytest.skip("the web server never passed the request on (it saw its client leave first)")
    assert got == "dropped", "an exec whose client had left was run when its room's share freed"
