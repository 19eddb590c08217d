"""A terminal's ticket expires: 60 s after it was given it lets nobody in.
Through nginx only: the ticket is roombox-fcgi's, not the web server's, and
the wait is a minute."""

import time

from test_terminals import WS, terminal

SERVERS = ["nginx"]


def test_a_ticket_expires_after_60_s(client, room):
    t = terminal(client, room)
    path = f"/api/rooms/{room}/sandbox/terminals/{t['id']}/ws"
    fresh = client.post(f"/api/rooms/{room}/sandbox/terminals/{t['id']}/ticket").json["ticket"]
    old = client.post(f"/api/rooms/{room}/sandbox/terminals/{t['id']}/ticket").json["ticket"]
    given = time.monotonic()
    ws = WS(client, f"{path}?ticket={fresh}")
    assert ws.status == 101          # the control: a ticket within its time lets in
    ws.close()
    # the clock is what is tested: nothing but waiting says 60 s have passed
    time.sleep(max(0.0, given + 61 - time.monotonic()))
    assert WS(client, f"{path}?ticket={old}").status == 401
    # and the terminal is still there for a new ticket
    new = client.post(f"/api/rooms/{room}/sandbox/terminals/{t['id']}/ticket").json["ticket"]
    ws = WS(client, f"{path}?ticket={new}")
    assert ws.status == 101
    ws.close()
