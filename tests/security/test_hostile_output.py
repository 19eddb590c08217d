"""Hostile commands seen through HTTP: output no client
expects, commands that fight their timeout, sessions too big to keep.
Through both web servers (the answer must stay valid JSON through each).

Covered already in tests/integration/test_output.py and not repeated here:
base64 of the 256 byte values on stdout, invalid UTF-8 repair, daemonised
children ignoring SIGTERM at a timeout, a body over max_body (413)."""

import base64
import hashlib
import inspect

from conftest import procs_of_room

ROOMBOX_CONFIG = {"max_body": "1M"}     # stdin larger than a pipe buffer


def stream(seed, n):
    out, i = bytearray(), 0
    while len(out) < n:
        out += hashlib.sha256(b"%s-%d" % (seed, i)).digest()
        i += 1
    return bytes(out[:n])


# the room runs the same stream() as the test compares with
PSEUDO_RANDOM = "import hashlib, sys\n" + inspect.getsource(stream) + r'''
sys.stdout.buffer.write(stream(b"out", 300000))
sys.stdout.buffer.flush()
sys.stderr.buffer.write(stream(b"err", 100000) + bytes(range(256)))
'''


def test_binary_output_on_both_streams_round_trips_in_base64(client, room):
    res = client.exec(room, "python3 -", stdin=PSEUDO_RANDOM, encoding="base64")
    assert res["exitCode"] == 0, res
    assert base64.b64decode(res["stdout"], validate=True) == stream(b"out", 300000)
    assert base64.b64decode(res["stderr"], validate=True) == stream(b"err", 100000) + bytes(range(256))
    assert res["truncated"] == {"stdout": False, "stderr": False}


def test_every_byte_value_in_utf8_mode_gives_valid_json(client, room):
    r = client.exec_raw(room, {"cmd": "python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 2)'"})
    assert r.status == 200      # and client checked the body is strict UTF-8 JSON
    expected = (bytes(range(128)).decode("ascii") + "\ufffd" * 128) * 2
    assert r.json["result"]["stdout"] == expected


def test_nul_bytes_in_utf8_output(client, room):
    r = client.exec_raw(room, {"cmd": r"printf 'a\000b\000\000c'; printf '\000err\000' >&2"})
    assert r.status == 200
    assert b"\\u0000" in r.body, r.body
    res = r.json["result"]
    assert res["stdout"] == "a\x00b\x00\x00c"
    assert res["stderr"] == "\x00err\x00"


def test_command_that_closes_its_output_early(client, room):
    res = client.exec(room, "echo before; exec >&- 2>&-; sleep 0.3; echo gone; "
                            "echo finished > /tmp/finished; exit 7")
    # the exec ended with the shell, not at the end of its output
    assert res["stdout"] == "before\n" and res["stderr"] == "", res
    assert res["exitCode"] == 7 and res["timedOut"] is False, res
    assert client.sh(room, "cat /tmp/finished") == "finished\n"


def test_command_that_closes_stdin_before_reading_it(client, room):
    # more stdin than a pipe holds: the helper is still writing when the
    # command closes its end
    res = client.exec(room, "exec <&-; echo closed; exit 3", stdin="z" * (600 << 10))
    assert res["stdout"] == "closed\n" and res["exitCode"] == 3, res
    assert res["timedOut"] is False
    assert client.sh(room, "head -c 5; echo", stdin="z" * (600 << 10)) == "zzzzz\n"


IGNORES_TERM = r'''
import os, signal, sys, time
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1):
    signal.signal(s, signal.SIG_IGN)
if os.fork() == 0:                       # a daemon that ignores them too
    os.setsid()
    if os.fork() == 0:
        os.close(1); os.close(2)
        while True:
            time.sleep(0.1)
    os._exit(0)
print("stubborn", flush=True)
while True:
    time.sleep(0.1)
'''


def test_process_ignoring_sigterm_dies_at_its_timeout(client, room):
    uid = client.room_uid(room)
    r = client.exec_raw(room, {"cmd": "python3 -c \"$PROG\"", "env": {"PROG": IGNORES_TERM},
                               "timeout": 1000})
    assert r.status == 200, r.json
    res = r.json["result"]
    assert res["timedOut"] is True and res["exitCode"] == 124, res
    assert res["stdout"] == "stubborn\n"
    assert r.elapsed < 10, f"answered after {r.elapsed:.1f} s"
    assert "python3" not in client.sh(room, "ps -e -o comm=")
    assert not [p for p in procs_of_room(uid) if "python3" in p[1]]


def test_session_too_large_to_keep_does_not_break_the_room(client, room):
    client.sh(room, "cd /tmp; export SMALL=1")
    res = client.exec(room, "export BIG=$(head -c 300000 /dev/zero | tr '\\0' x); echo ${#BIG}")
    assert res["stdout"] == "300000\n" and res["exitCode"] == 0, res
    # whether BIG could be kept or not, the rest of the session is there
    out = client.sh(room, 'pwd; echo "[$SMALL]"; echo ok')
    assert out == "/tmp\n[1]\nok\n", out
    assert client.sh(room, "echo still ok") == "still ok\n"


def test_body_over_max_body_never_reaches_a_room(client, room):
    big = {"cmd": "touch /workspace/ran", "stdin": "x" * (1 << 20)}     # max_body is 1M here
    r = client.exec_raw(room, big)
    assert r.status == 413, r.json
    assert isinstance(r.json.get("error"), str) and r.json["error"]
    assert client.get(f"/api/rooms/{room}").status == 404       # no room was made for it
