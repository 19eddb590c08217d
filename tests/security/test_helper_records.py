"""The helper reads fixed, size-checked records (common/protocol.h) and
nothing else: every malformed request gets a clear error and a non-zero
exit, and nothing is done for it -- no room is made.  The helper links no
JSON parser at all.  Its command line (for scripts) makes the same
requests, with the same caller checks.

The helper runs directly as root, as roombox-fcgi would run it.
"""

import os
import struct
import subprocess

import pytest

from conftest import HELPER, REPO, decode_answer, encode_request, record, unique_room
from helper_records import EXEC_ARGS, LIMITS_ARGS, OPS, PAIR, REQ
from security_helpers import run_with_io

SERVERS = ("nginx",)


def run(stack, data, *args):
    r = subprocess.run([str(HELPER), "-c", str(stack.conf_path), *args], input=data,
                       capture_output=True, timeout=60, cwd="/")
    return r


def assert_refused_and_nothing_done(stack, room, data, words):
    r = run(stack, data)
    out = decode_answer(r.stdout)
    assert r.returncode != 0, out
    assert out.get("code") == "invalid" and words in out.get("error", ""), out
    for top in (stack.state_dir, stack.run_dir):
        assert not (top / "rooms" / room).exists(), f"{top}/rooms/{room} made for a refused request"


def create(room):
    return encode_request({"op": "create", "room": room})


def exec_record(room, nenv, strings):
    return record(OPS["exec"], room, EXEC_ARGS.pack(0, 0, nenv, 0, 0), strings)


CASES = {
    "truncated": lambda room: create(room)[:-1],
    "header-only-half": lambda room: create(room)[:REQ.size // 2],
    "empty": lambda room: b"",
    "oversized": lambda room: exec_record(room, 0, [b"true"]) + b"x",
    "declared-oversized": lambda room: record(OPS["create"], room, size=0xffffffff),
    "wrong-magic": lambda room: record(OPS["create"], room, magic=0x7b226f70),   # '{"op'
    "wrong-version": lambda room: record(OPS["create"], room, version=2),
    "wrong-op": lambda room: record(99, room),
    "op-zero": lambda room: record(0, room),
    "unterminated-string": lambda room: exec_record(room, 0, [b"true"])[:-1] + b"x",
    "count-overflow": lambda room: exec_record(room, 0xffffffff, [b"true"]),
    "more-strings-than-counted": lambda room: exec_record(room, 0, [b"true", b"A=1"]),
    "strings-past-the-end": lambda room: record(OPS["exec"], room, EXEC_ARGS.pack(0, 0, 1, 0, 0),
                                                [b"true", b"A=1"], nstrings=5),
    "args-cut-short": lambda room: record(OPS["port-connect"], room, b"\0\0"),
    "strings-where-none": lambda room: record(OPS["create"], room, strings=[b"x"]),
    "limits-cut-short": lambda room: record(OPS["set-limits"], room, LIMITS_ARGS.pack(*[0] * 8)[:-4]),
}
WORDS = {
    "truncated": "truncated", "header-only-half": "truncated", "empty": "truncated",
    "oversized": "longer than its declared", "declared-oversized": "out of range",
    "wrong-magic": "wrong magic", "wrong-version": "version 2", "wrong-op": "unknown op 99",
    "op-zero": "unknown op 0", "unterminated-string": "not NUL-terminated",
    "count-overflow": "strings expected", "more-strings-than-counted": "strings expected",
    "strings-past-the-end": "strings expected", "args-cut-short": "truncated",
    "strings-where-none": "takes no strings", "limits-cut-short": "truncated",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_malformed_request_is_refused_and_nothing_is_done(stack, case):
    room = unique_room("rec")
    assert_refused_and_nothing_done(stack, room, CASES[case](room), WORDS[case])


@pytest.mark.parametrize("rid", [b"..", b"../rooms", b"a/b", b".hidden", b"-x", b"a\nb", b"a" * 65])
def test_bad_room_id_is_refused_and_nothing_is_done(stack, rid):
    r = run(stack, record(OPS["create"], rid))
    out = decode_answer(r.stdout)
    assert r.returncode != 0 and out["code"] == "invalid" and "invalid room id" in out["error"], out
    for top in (stack.state_dir, stack.run_dir):
        names = os.listdir(top / "rooms")
        assert all(".." not in n and "/" not in n and not n.startswith((".", "-")) for n in names), names


def test_exec_values_are_checked_before_the_room_is_touched(stack):
    """An exec whose values the configuration refuses (a relative cwd, a
    timeout past exec_timeout_max), or one that may only read a room that
    does not exist: refused, and nothing of the room made, not even its
    lock."""
    room = unique_room("rec")
    assert_refused_and_nothing_done(stack, room, encode_request(
        {"op": "exec", "room": room, "cmd": "true", "cwd": "tmp"}), "cwd must be absolute")
    assert_refused_and_nothing_done(stack, room, encode_request(
        {"op": "exec", "room": room, "cmd": "true", "timeout_ms": 10 ** 12}), "timeout_ms")
    r, _, _ = run_with_io([HELPER, "-c", stack.conf_path],
                          {"op": "exec", "room": room, "cmd": "true", "existing": True})
    out = decode_answer(r.stdout)
    assert r.returncode != 0 and out["code"] == "not_found", out
    for top in (stack.state_dir, stack.run_dir):
        assert not (top / "rooms" / room).exists()


def test_room_field_garbage_after_its_end_is_refused(stack):
    room = unique_room("rec")
    data = bytearray(create(room))
    data[REQ.size - 1] = ord("x")     # the room field's last byte: not NUL-padded
    assert_refused_and_nothing_done(stack, room, bytes(data), "NUL")


def test_a_well_formed_record_does_what_it_says(stack):
    """Control for the refusals above: the same request, whole, makes the
    room; a status then sees it; destroy removes it."""
    room = unique_room("rec")
    r = run(stack, create(room))
    assert r.returncode == 0, decode_answer(r.stdout)
    assert (stack.state_dir / "rooms" / room).is_dir()
    out = decode_answer(run(stack, encode_request({"op": "status", "room": room})).stdout)
    assert out["room"] == room and out["running"] is True, out
    assert run(stack, encode_request({"op": "destroy", "room": room})).returncode == 0
    assert not (stack.state_dir / "rooms" / room).exists()


def test_touch_marks_only_a_room_that_exists(stack, client):
    """touch moves a room's lastActiveAt and does nothing else: a stopped
    room stays stopped; a room that does not exist is not_found and
    nothing of it is made; a record with arguments is refused."""
    room = unique_room("touch")
    client.sh(room, "true")
    assert client.post(f"/api/rooms/{room}/sandbox/stop").status == 200
    before = client.get(f"/api/rooms/{room}").json["lastActiveAt"]
    r = run(stack, encode_request({"op": "touch", "room": room}))
    assert r.returncode == 0, decode_answer(r.stdout)
    after = client.get(f"/api/rooms/{room}").json
    assert after["lastActiveAt"] > before and after["state"] == "stopped", (before, after)
    absent = unique_room("touch")
    out = decode_answer(run(stack, encode_request({"op": "touch", "room": absent})).stdout)
    assert out.get("code") == "not_found", out
    assert not (stack.state_dir / "rooms" / absent).exists()
    assert_refused_and_nothing_done(stack, absent, record(OPS["touch"], absent, b"\0" * 8), "")


def test_an_exec_for_a_running_room_only_never_starts_one(stack, client):
    """HX_RUNNING (a terminal's last kill of its session): a stopped room
    answers conflict and stays stopped, nothing run; a running one runs
    it.  The command is a file's creation, looked for afterwards."""
    room = unique_room("running")
    client.sh(room, "true")
    assert client.post(f"/api/rooms/{room}/sandbox/stop").status == 200
    req = {"op": "exec", "room": room, "cmd": "touch /workspace/ran", "running_only": True}
    r, _, _ = run_with_io([HELPER, "-c", stack.conf_path], req)
    out = decode_answer(r.stdout)
    assert r.returncode != 0 and out.get("code") == "conflict" and "not running" in out["error"], out
    assert client.get(f"/api/rooms/{room}").json["state"] == "stopped"
    assert client.sh(room, "ls /workspace") == ""      # (this starts it)
    r, _, _ = run_with_io([HELPER, "-c", stack.conf_path], req)
    assert r.returncode == 0, decode_answer(r.stdout)
    assert client.sh(room, "ls /workspace") == "ran\n"


def test_port_connect_argument_values(stack):
    room = unique_room("rec")
    for port, serve in ((0, 0), (65536, 0), (80, 1), (0, 2)):
        r = run(stack, record(OPS["port-connect"], room, PAIR.pack(port, serve)))
        out = decode_answer(r.stdout)
        assert r.returncode != 0 and out["code"] == "invalid" and "port" in out["error"], out


def test_kill_all_flags(stack, client):
    """kill-all's only flag is "at the limit"; anything else is refused, and
    with it a room far from its limit loses nothing."""
    room = unique_room("rec")
    client.sh(room, "sleep 3600 >/dev/null 2>&1 &")
    for flags, reserved in ((2, 0), (1 << 31, 0), (0, 1)):
        r = run(stack, record(OPS["kill-all"], room, PAIR.pack(flags, reserved)))
        out = decode_answer(r.stdout)
        assert r.returncode != 0 and out["code"] == "invalid" and "flags" in out["error"], out
    r = run(stack, encode_request({"op": "kill-all", "room": room, "at_limit": True}))
    assert r.returncode == 0 and decode_answer(r.stdout) == {"killed": 0}, r
    r = run(stack, encode_request({"op": "kill-all", "room": room}))
    assert r.returncode == 0 and decode_answer(r.stdout) == {"killed": 1}, r


def test_set_limits_values(stack, client):
    """set-limits: unknown fields and values above the maximum (here the
    configuration's own, no room_limits_max) are refused before the room
    is touched; a room that does not exist is not made; what it sets is
    kept and reported by status."""
    room = unique_room("lim")
    for values, mask, reserved, words in (
            ([0] * 6, 64, 0, "unknown fields"), ([0] * 6, 0, 1, "unknown fields"),
            ([1 << 40, 0, 0, 0, 0, 0], 1, 0, "memory above"),
            ([0, 100000, 0, 0, 0, 0], 2, 0, "pids above"),
            ([0, 0, 64000, 0, 0, 0], 4, 0, "cpu above")):
        assert_refused_and_nothing_done(
            stack, room, record(OPS["set-limits"], room, LIMITS_ARGS.pack(*values, mask, reserved)),
            words)
    r = run(stack, encode_request({"op": "set-limits", "room": room, "limits": {"pids": 50}}))
    assert r.returncode != 0 and decode_answer(r.stdout)["code"] == "not_found", r
    assert not (stack.state_dir / "rooms" / room).exists()
    client.sh(room, "true")
    r = run(stack, encode_request({"op": "set-limits", "room": room, "limits": {"pids": 50}}))
    out = decode_answer(r.stdout)
    assert r.returncode == 0 and out["limits"]["pids"] == 50 and out["limits"]["memory"] == 0, out
    out = decode_answer(run(stack, encode_request({"op": "status", "room": room})).stdout)
    assert out["limits"]["pids"] == 50, out


# ---------------------------------------------------------------- every room listed

MANY = 7000   # more than the 6,145 rooms the old helper's allocator could list


def test_list_holds_every_room(stack, client):
    """GET /api/rooms lists every room, however many: the old helper ran
    out of its own allocator's budget near 6,145 rooms and left the rest
    out without a word.  The rooms here are records only (a state
    directory with its meta, never started): list reads no more of a room
    than that."""
    made = []
    try:
        for i in range(MANY):
            d = stack.state_dir / "rooms" / f"many-{i:05d}"
            d.mkdir(mode=0o700)
            made.append(d)
            (d / "meta").write_text('{"slot":0,"createdAt":"2026-01-01T00:00:00.000Z","ids":"room"}\n')
        r = client.get("/api/rooms")
        assert r.status == 200, r
        ids = {room["roomId"] for room in r.json["rooms"]}
        assert sum(1 for i in ids if i.startswith("many-")) == MANY, len(ids)
        out = decode_answer(run(stack, encode_request({"op": "list"})).stdout)
        assert sum(1 for room in out["rooms"] if room["room"].startswith("many-")) == MANY
    finally:
        for d in made:
            (d / "meta").unlink()
            d.rmdir()


# ---------------------------------------------------------------- what root keeps

def test_reading_ops_run_with_only_the_reading_capabilities(stack, client):
    """status and list give up every capability but the reading ones
    before they look at a room (strace shows the capset); an op that
    builds rooms keeps them."""
    room = unique_room("caps")
    assert run(stack, b"", "create", room).returncode == 0
    for args in (["status", room], ["list"]):
        r = subprocess.run(["strace", "-qq", "-e", "trace=capset", "-o", "/dev/stderr",
                            str(HELPER), "-c", str(stack.conf_path), *args],
                           capture_output=True, text=True, timeout=60, cwd="/")
        assert r.returncode == 0 and room in r.stdout, r
        calls = [l for l in r.stderr.splitlines() if l.startswith("capset(")]
        assert len(calls) == 1, r.stderr
        assert "CAP_DAC_READ_SEARCH" in calls[0] and "CAP_SYS_ADMIN" not in calls[0], calls
        assert "CAP_KILL" not in calls[0] and "CAP_SETUID" not in calls[0], calls
    # control: stop (it kills, unmounts) keeps root's
    r = subprocess.run(["strace", "-qq", "-e", "trace=capset", "-o", "/dev/stderr",
                        str(HELPER), "-c", str(stack.conf_path), "stop", room],
                       capture_output=True, text=True, timeout=60, cwd="/")
    assert r.returncode == 0 and "capset(" not in r.stderr, r
    assert run(stack, b"", "destroy", room).returncode == 0


# ---------------------------------------------------------------- no JSON in the helper

JSON_SYMBOLS = ("mj_parse", "mj_get", "mjw_", "json_", "cJSON", "yajl", "jsmn", "bump_malloc")


def test_helper_links_no_json_parser():
    """Neither the setuid binary nor the objects it is linked from hold a
    JSON reader or writer (nor the old allocator of its own)."""
    syms = subprocess.run(["nm", "--defined-only", str(HELPER)], capture_output=True, text=True,
                          check=True).stdout
    names = [line.split()[-1] for line in syms.splitlines() if line.strip()]
    assert len(names) > 100, "nm saw no symbols: the test would prove nothing"
    assert "request_decode" in names     # control: the record reader is there
    found = [n for n in names if any(n.startswith(s) or s in n.lower() for s in JSON_SYMBOLS)]
    assert not found, found
    for src in ("sandbox-helper/minijson.c", "sandbox-helper/minijson.h",
                "sandbox-helper/alloc/bump_malloc.c"):
        assert not (REPO / src).exists(), src


def test_helper_links_no_session_reader():
    """A room's saved session is bytes the room wrote: the keeper reads it
    (as the room's root), the setuid binary only carries it on, and holds
    no code that parses it."""
    syms = subprocess.run(["nm", "--defined-only", str(HELPER)], capture_output=True, text=True,
                          check=True).stdout
    names = {line.split()[-1] for line in syms.splitlines() if line.strip()}
    assert "shell_env_build" in names     # control: the session is carried
    found = names & {"session_vars_parse", "shell_env_direct", "session_var_name"}
    assert not found, found


# ---------------------------------------------------------------- the command line

def test_command_line_operations(stack, client):
    room = unique_room("cli")
    r = run(stack, b"", "create", room)
    assert r.returncode == 0 and r.stdout.decode().startswith(f"{room} running=1 "), r
    r = run(stack, b"", "status", room)
    assert r.returncode == 0 and f"{room} running=1" in r.stdout.decode(), r
    r = run(stack, b"", "list")
    assert r.returncode == 0 and f"{room} running=1" in r.stdout.decode(), r
    r = run(stack, b"", "exec", room, "echo hi; exit 3")
    assert r.returncode == 3 and r.stdout == b"hi\n", r
    r = run(stack, b"", "info")
    assert r.returncode == 0 and r.stdout.decode().startswith("cgroup="), r
    r = run(stack, b"", "stop", room)
    assert r.returncode == 0 and stack.keeper_pid(room) is None, r
    # stop-all, as the service's stop and the package's prerm run it
    assert run(stack, b"", "exec", room, "true").returncode == 0
    assert stack.keeper_pid(room)
    r = run(stack, b"", "stop-all")
    assert r.returncode == 0 and f"stopped {room}\n".encode() in r.stdout, r
    assert stack.keeper_pid(room) is None
    r = run(stack, b"", "destroy", room)
    assert r.returncode == 0 and not (stack.state_dir / "rooms" / room).exists(), r
    # errors are words on stderr and a non-zero exit
    r = run(stack, b"", "status", room)
    assert r.returncode == 1 and b"not_found" in r.stderr, r
    r = run(stack, b"", "status", "../etc")
    assert r.returncode == 1 and b"invalid room id" in r.stderr, r
    r = run(stack, b"", "no-such-op")
    assert r.returncode == 2 and b"usage" in r.stderr, r
    r = run(stack, b"", "destroy")
    assert r.returncode == 2 and b"usage" in r.stderr, r


def test_command_line_has_the_same_caller_checks(stack):
    """`-c` names another configuration only for root: as nobody, refused
    before anything is read (the binary here is not setuid, so the refusal
    is the setuid check's; test_helper.py covers the group checks on a
    setuid copy)."""
    r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                        str(HELPER), "-c", str(stack.conf_path), "stop-all"],
                       capture_output=True, timeout=60, cwd="/")
    assert r.returncode == 1 and r.stderr.startswith(b"roombox-helper: denied: "), r
