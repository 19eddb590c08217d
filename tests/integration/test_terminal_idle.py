"""A terminal and idle stop: what a person types in a room's terminal is
the room's activity, as an exec is, though it reaches the room without the
helper; a terminal left open that nobody types in keeps nothing.  Through
nginx, with a 2 s idle_timeout (the idle sweep every 0.5 s)."""

import time

from conftest import room_state, unique_room, wait_idle_stopped
from test_terminals import attach, terminal

SERVERS = ("nginx",)
ROOMBOX_CONFIG = {"idle_timeout": "2s"}


def test_typing_in_a_terminal_keeps_its_room_running(client, stack):
    room = unique_room("typing")
    t = terminal(client, room)
    keeper = stack.keeper_pid(room)
    ws = attach(client, room, t["id"])
    # a person at the keyboard for three idle timeouts: a line every 0.5 s
    # (the pause is the person's, and the time that passes is what is
    # tested), each one's echo read back
    typed_until = time.monotonic() + 6
    i = 0
    while time.monotonic() < typed_until:
        ws.keys(f"echo tick{i}\r")
        ws.output_until(f"tick{i}\r\n".encode())
        i += 1
        time.sleep(0.5)
    assert stack.keeper_pid(room) == keeper, "the room was stopped while someone typed in it"
    assert room_state(client, room) == "running"
    got = client.get(f"/api/rooms/{room}/sandbox/terminals/{t['id']}").json["terminal"]
    assert got["status"] == "running", got
    # once nobody types, the terminal still open and attached, the room
    # stops as idle, and its terminal with it
    wait_idle_stopped(client, room)
    texts, _ = ws.until_close()
    assert texts == [{"type": "exit", "exitCode": None}], texts
