"""A room's exec channel (common/exec_channel.h) is restricted: over it
only plain execs, every record checked as untrusted.  A truncated,
oversized, wrong-magic, wrong-version or wrong-op record is answered
KC_BAD with the reason, nothing runs, and the keeper closes the channel;
the keeper's own requests (a tool) cannot be made on it.  What a channel
exec does -- session, marks, limits -- is what the helper's exec does.

The helper runs directly as root, as roombox-fcgi would run it.
"""

import os
import socket
import struct
import subprocess

from conftest import HELPER, encode_request, decode_answer, wait_until

SERVERS = ("nginx",)

KC_MAGIC, KC_VERSION = 0x7262636B, 1
KC_EXEC = 1
KC_EXITED, KC_FAILED, KC_ELSEWHERE, KC_BAD = 1, 2, 3, 4
KC_AS_USER, KC_CWD, KC_TIMEOUT_CAP, KC_INLINE = 1, 2, 4, 8
KC_INLINE_MAX = 16 * 1024
REQ = struct.Struct("=IIIIQII")
ANS = struct.Struct("=IIIiIIQq160s")


def open_channel(stack, room):
    """exec-channel through the helper: (exit status, answer, channel or None)."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        r = subprocess.run(["bash", "-c", f'exec "$0" -c "$1" 3<&{b.fileno()}', str(HELPER),
                            str(stack.conf_path)],
                           input=encode_request({"op": "exec-channel", "room": room}),
                           capture_output=True, timeout=60, pass_fds=(b.fileno(),))
        ans = decode_answer(r.stdout)
        if r.returncode != 0:
            return r.returncode, ans, None
        msg, fds, _, _ = socket.recv_fds(a, 1, 4)
        assert msg == b"C" and len(fds) == 1, (msg, fds)
        return 0, ans, socket.socket(fileno=fds[0])


def text_fd(data):
    fd = os.memfd_create("text")
    os.write(fd, data)
    return fd


def request(cmd, *, flags=0, timeout=10000, env=(), cwd=None, **over):
    """(record, text) of an exec; over replaces a field of the record."""
    text = cmd.encode() + b"\0"
    if cwd is not None:
        flags |= KC_CWD
        text += cwd.encode() + b"\0"
    text += b"".join(e.encode() + b"\0" for e in env)
    f = dict(magic=KC_MAGIC, version=KC_VERSION, op=KC_EXEC, flags=flags, timeout=timeout,
             nenv=len(env), size=len(text))
    f.update(over)
    return REQ.pack(f["magic"], f["version"], f["op"], f["flags"], f["timeout"], f["nenv"],
                    f["size"]), text


def send(ch, rec, text, nfds=4, inline=False):
    """Send one request with its text (in a memfd, or inline: after the
    record, in the same message) and fresh pipes; (answer dict or None at
    the channel's end, stdout bytes, stderr bytes)."""
    tfd = None if inline else text_fd(text)
    i_r, i_w = os.pipe()
    o_r, o_w = os.pipe()
    e_r, e_w = os.pipe()
    base = [i_r, o_w, e_w] if inline else [tfd, i_r, o_w, e_w]
    fds = base[:nfds] if nfds <= len(base) else base + [i_r] * (nfds - len(base))
    try:
        socket.send_fds(ch, [rec + text if inline else rec], fds)
    finally:
        for fd in (tfd, i_r, o_w, e_w, i_w):
            if fd is not None:
                os.close(fd)
    ch.settimeout(30)
    data = ch.recv(ANS.size + 16)
    with os.fdopen(o_r, "rb") as so, os.fdopen(e_r, "rb") as se:
        out, err = so.read(), se.read()
    if not data:
        return None, out, err
    assert len(data) == ANS.size, data
    magic, version, typ, status, timed_out, _, dur, started, why = ANS.unpack(data)
    assert (magic, version) == (KC_MAGIC, KC_VERSION)
    return {"type": typ, "status": status, "timed_out": timed_out,
            "why": why.split(b"\0")[0].decode()}, out, err


def channel_closed(ch):
    ch.settimeout(10)
    return ch.recv(ANS.size) == b""


def test_channel_runs_plain_execs_and_shares_the_session(client, room):
    stack = client.stack
    client.sh(room, "export FROM_HELPER=1; cd /tmp")
    rc, ans, ch = open_channel(stack, room)
    assert rc == 0, ans
    with ch:
        a, out, _ = send(ch, *request("echo $FROM_HELPER $PWD; export FROM_CHANNEL=2; cd /etc"))
        assert a["type"] == KC_EXITED and os.WEXITSTATUS(a["status"]) == 0, a
        assert out == b"1 /tmp\n"
        a, out, _ = send(ch, *request("id -u; echo $FROM_CHANNEL", flags=KC_AS_USER))
        assert out == b"1000\n\n", out      # the user's session is its own
        a, out, _ = send(ch, *request("exit 7"))
        assert a["type"] == KC_EXITED and os.WEXITSTATUS(a["status"]) == 7, a
    assert client.sh(room, "echo $FROM_CHANNEL $PWD") == "2 /etc\n"


def test_stopped_room_gives_no_channel(client, room):
    stack = client.stack
    client.sh(room, "true")
    assert client.post(f"/api/rooms/{room}/sandbox/stop").status == 200
    rc, ans, ch = open_channel(stack, room)
    assert rc != 0 and "not running" in ans["error"], ans
    assert stack.keeper_pid(room) is None


def test_channel_ends_when_the_room_stops(client, room):
    client.sh(room, "true")
    rc, ans, ch = open_channel(client.stack, room)
    assert rc == 0, ans
    with ch:
        assert client.post(f"/api/rooms/{room}/sandbox/stop").status == 200
        assert channel_closed(ch)


BAD = {
    "truncated": lambda: (request("touch /tmp/ran")[0][:-1], request("touch /tmp/ran")[1]),
    "oversized": lambda: (request("touch /tmp/ran")[0] + b"x", request("touch /tmp/ran")[1]),
    "wrong-magic": lambda: request("touch /tmp/ran", magic=0x72626870),
    "wrong-version": lambda: request("touch /tmp/ran", version=2),
    "wrong-op": lambda: request("touch /tmp/ran", op=2),
    "unknown-flags": lambda: request("touch /tmp/ran", flags=64),
    "text-size-lies": lambda: request("touch /tmp/ran", size=3),
    "text-too-big": lambda: request("touch /tmp/ran", size=1 << 30),
    "count-overflow": lambda: request("touch /tmp/ran", nenv=0xffffffff),
    "env-not-pairs": lambda: request("touch /tmp/ran", env=("NOEQUALS",)),
    "relative-cwd": lambda: request("touch /tmp/ran", cwd="tmp"),
    "no-timeout": lambda: request("touch /tmp/ran", timeout=0),
}


def test_bad_records_are_refused_and_close_the_channel(client, room):
    stack = client.stack
    client.sh(room, "rm -f /tmp/ran")
    for name, make in BAD.items():
        rc, ans, ch = open_channel(stack, room)
        assert rc == 0, ans
        with ch:
            a, out, _ = send(ch, *make())
            assert a and a["type"] == KC_BAD and a["why"], (name, a)
            assert channel_closed(ch), name
    for nfds in (3, 5):
        rc, ans, ch = open_channel(stack, room)
        with ch:
            a, _, _ = send(ch, *request("touch /tmp/ran"), nfds=nfds)
            assert a["type"] == KC_BAD and "descriptors" in a["why"], (nfds, a)
            assert channel_closed(ch)
    assert client.sh(room, "test -e /tmp/ran && echo ran || echo no") == "no\n"


def test_a_small_text_may_ride_in_the_record(client, room):
    """KC_INLINE: the text follows the record in the same message, and only
    stdin, stdout and stderr come with it."""
    client.sh(room, "true")
    rc, ans, ch = open_channel(client.stack, room)
    assert rc == 0, ans
    with ch:
        a, out, err = send(ch, *request("echo in; echo $X >&2; pwd", flags=KC_INLINE, env=("X=y",),
                                        cwd="/tmp"), nfds=3, inline=True)
        assert a["type"] == KC_EXITED and os.WEXITSTATUS(a["status"]) == 0, a
        assert (out, err) == (b"in\n/tmp\n", b"y\n")
        # the largest text a record may carry
        cmd = "echo big #" + "x" * (KC_INLINE_MAX - len("echo big #") - 1)
        a, out, _ = send(ch, *request(cmd, flags=KC_INLINE), nfds=3, inline=True)
        assert a["type"] == KC_EXITED and out == b"big\n", a


def inline(cmd, **over):
    rec, text = request(cmd, flags=KC_INLINE, **over)
    return rec, text


BAD_INLINE = {
    "text-longer-than-said": lambda: (inline("touch /tmp/ran")[0],
                                      inline("touch /tmp/ran")[1] + b"x\0"),
    "text-shorter-than-said": lambda: inline("touch /tmp/ran", size=len(b"touch /tmp/ran\0") + 1),
    "no-text": lambda: (inline("touch /tmp/ran")[0], b""),
    "text-too-big": lambda: inline("touch /tmp/ran #" + "x" * KC_INLINE_MAX),
    "size-past-the-inline-limit": lambda: inline("touch /tmp/ran", size=KC_INLINE_MAX + 1),
}


def test_bad_inline_records_are_refused_and_close_the_channel(client, room):
    stack = client.stack
    client.sh(room, "rm -f /tmp/ran")
    for name, make in BAD_INLINE.items():
        rc, ans, ch = open_channel(stack, room)
        assert rc == 0, ans
        with ch:
            a, _, _ = send(ch, *make(), nfds=3, inline=True)
            assert a and a["type"] == KC_BAD and a["why"], (name, a)
            assert channel_closed(ch), name
    # an inline text with a text descriptor too, or without stdin
    for nfds in (2, 4):
        rc, ans, ch = open_channel(stack, room)
        with ch:
            a, _, _ = send(ch, *inline("touch /tmp/ran"), nfds=nfds, inline=True)
            assert a["type"] == KC_BAD and "descriptors" in a["why"], (nfds, a)
            assert channel_closed(ch)
    assert client.sh(room, "test -e /tmp/ran && echo ran || echo no") == "no\n"


def test_a_tool_cannot_be_asked_on_the_channel(client, room):
    """The keeper's own request (keeper_proto.h: KP_EXEC with a blob naming
    its put tool) sent on a channel is not a channel record: refused, the
    file is not written, the channel closed."""
    stack = client.stack
    client.sh(room, "rm -f /tmp/tool-ran")
    kp_blob = struct.pack("=IIIIQII", 0x72626b36, 2, 0, 0, 10000, 0, 2)   # KP_TOOL
    blob = kp_blob + b"put\0/tmp/tool-ran\0"
    kp_msg = struct.pack("=Iii200s", 1, 0, 0, b"")                       # KP_EXEC
    rc, ans, ch = open_channel(stack, room)
    assert rc == 0, ans
    with ch:
        a, _, _ = send(ch, kp_msg, blob, nfds=4)
        assert a["type"] == KC_BAD, a
        assert channel_closed(ch)
    # the record's op field set to anything but KC_EXEC is refused too
    rc, ans, ch = open_channel(stack, room)
    with ch:
        for op in (2, 0xffffffff):
            a, _, _ = send(ch, *request("put /tmp/tool-ran", op=op))
            assert a["type"] == KC_BAD and "not allowed" in a["why"], a
            break
    assert client.sh(room, "test -e /tmp/tool-ran && echo ran || echo no") == "no\n"


def test_timeout_above_the_rooms_maximum_goes_to_the_helper(client, room):
    client.sh(room, "true")
    r = client.request("PATCH", f"/api/rooms/{room}", {"limits": {"execTimeoutMax": 2000}})
    assert r.status == 200, r.json
    rc, ans, ch = open_channel(client.stack, room)
    with ch:
        a, _, _ = send(ch, *request("touch /tmp/late", timeout=5000))
        assert a["type"] == KC_ELSEWHERE, a
        # capped instead when asked as a bound; the channel still serves
        a, _, _ = send(ch, *request("sleep 5", timeout=5000, flags=KC_TIMEOUT_CAP))
        assert a["type"] == KC_EXITED and a["timed_out"], a
    assert client.sh(room, "test -e /tmp/late && echo ran || echo no") == "no\n"


def test_channel_exec_marks_the_room_busy_and_active(client, room):
    stack = client.stack
    client.sh(room, "true")
    active = stack.room_state_dir(room) / "active"
    before = active.stat().st_mtime_ns
    rc, ans, ch = open_channel(stack, room)
    with ch:
        a, _, _ = send(ch, *request("true"))
        assert a["type"] == KC_EXITED
    assert active.stat().st_mtime_ns > before
