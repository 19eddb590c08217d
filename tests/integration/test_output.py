"""What an exec gives back: stdout/stderr capture and caps, UTF-8 repair,
base64, exit codes and signals, stdin, and timeouts.  Through
both web servers."""

import base64

from conftest import procs_of_room

OUTPUT_LIMIT = 1 << 20   # the default output_limit


def test_stdout_is_capped_and_flagged(client, room):
    r = client.exec_raw(room, {"cmd": "yes | head -c 5000000"})
    assert r.status == 200, r.json
    res = r.json["result"]
    assert res["truncated"] == {"stdout": True, "stderr": False}
    assert len(res["stdout"]) == OUTPUT_LIMIT
    assert res["stdout"] == "y\n" * (OUTPUT_LIMIT // 2)
    assert res["exitCode"] == 0 and res["success"] is True
    assert res["timedOut"] is False
    assert r.elapsed < 10, f"took {r.elapsed:.1f} s"


def test_stderr_is_capped_separately(client, room):
    res = client.exec(room, "head -c 2000000 /dev/zero | tr '\\0' e >&2; echo out")
    assert res["truncated"] == {"stdout": False, "stderr": True}
    assert res["stdout"] == "out\n"
    assert len(res["stderr"]) == OUTPUT_LIMIT and set(res["stderr"]) == {"e"}


def test_output_just_at_the_limit_is_not_truncated(client, room):
    res = client.exec(room, f"head -c {OUTPUT_LIMIT} /dev/zero | tr '\\0' a")
    assert res["truncated"]["stdout"] is False
    assert len(res["stdout"]) == OUTPUT_LIMIT


def test_invalid_utf8_becomes_replacement_character(client, room):
    assert client.exec(room, r"printf '\377'")["stdout"] == "\ufffd"
    assert client.exec(room, r"printf 'a\377b\303'")["stdout"] == "a\ufffdb\ufffd"
    # valid multibyte text is kept as is
    assert client.exec(room, "printf 'caf\\303\\251 \\342\\202\\254'")["stdout"] == "café €"
    assert client.exec(room, r"printf '\376' >&2")["stderr"] == "\ufffd"


def test_base64_gives_the_exact_bytes(client, room):
    res = client.exec(room, r"printf '\377\000\001abc\n'; printf '\376\200' >&2",
                      encoding="base64")
    assert base64.b64decode(res["stdout"], validate=True) == b"\xff\x00\x01abc\n"
    assert base64.b64decode(res["stderr"], validate=True) == b"\xfe\x80"
    assert res["exitCode"] == 0


def test_base64_of_every_byte_value(client, room):
    res = client.exec(room, "python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)))'",
                      encoding="base64")
    assert base64.b64decode(res["stdout"]) == bytes(range(256))


def test_utf8_encoding_is_the_default_and_explicit(client, room):
    assert client.exec(room, "echo hi", encoding="utf8")["stdout"] == "hi\n"


def test_stderr_is_captured(client, room):
    res = client.exec(room, "echo out; echo err >&2")
    assert res["stdout"] == "out\n"
    assert res["stderr"] == "err\n"


def test_exit_status(client, room):
    res = client.exec(room, "exit 3")
    assert res["exitCode"] == 3
    assert res["success"] is False
    assert res["signal"] is None
    assert res["timedOut"] is False
    res = client.exec(room, "false")
    assert res["exitCode"] == 1 and res["success"] is False


def test_killed_by_signal(client, room):
    res = client.exec(room, "kill -9 $$")
    assert res["exitCode"] == 137
    assert res["signal"] == "SIGKILL"
    assert res["success"] is False
    assert res["timedOut"] is False
    res = client.exec(room, "kill -TERM $$")
    assert res["exitCode"] == 143
    assert res["signal"] == "SIGTERM"


def test_stdin_is_given_to_the_command(client, room):
    res = client.exec(room, "cat", stdin="hello\nwörld\n")
    assert res["stdout"] == "hello\nwörld\n"
    res = client.exec(room, "wc -c", stdin="é")
    assert res["stdout"].strip() == "2"


def test_default_stdin_is_empty(client, room):
    # cat must see end-of-file at once rather than wait for input
    r = client.exec_raw(room, {"cmd": "cat; echo done", "timeout": 5000})
    assert r.status == 200
    assert r.json["result"]["stdout"] == "done\n"
    assert r.json["result"]["timedOut"] is False


def ps_args(client, room):
    return client.sh(room, "ps -e -o args=").splitlines()


def test_timeout_kills_the_command(client, room):
    uid = client.room_uid(room)
    r = client.exec_raw(room, {"cmd": "sleep 60", "timeout": 500})
    assert r.status == 200, r.json
    res = r.json["result"]
    assert res["timedOut"] is True
    assert res["exitCode"] == 124
    assert res["success"] is False
    assert r.elapsed < 5, f"answered after {r.elapsed:.1f} s"
    assert 400 <= res["duration"] < 5000
    assert not [a for a in ps_args(client, room) if "sleep" in a]
    assert not [p for p in procs_of_room(uid) if "sleep" in p[1]]


def test_timeout_kills_daemonised_children(client, room):
    uid = client.room_uid(room)
    r = client.exec_raw(room, {
        "cmd": "setsid sh -c 'sleep 120' & (trap '' TERM HUP; exec sleep 121) & sleep 60",
        "timeout": 700})
    assert r.status == 200, r.json
    assert r.json["result"]["timedOut"] is True
    assert r.json["result"]["exitCode"] == 124
    assert r.elapsed < 5, f"answered after {r.elapsed:.1f} s"
    left = [a for a in ps_args(client, room) if "sleep" in a]
    assert not left, left
    assert not [p for p in procs_of_room(uid) if "sleep" in p[1]]


def test_output_before_a_timeout_is_returned(client, room):
    res = client.exec(room, "echo started; echo warn >&2; sleep 60", timeout=500)
    assert res["timedOut"] is True
    assert res["stdout"] == "started\n"
    assert res["stderr"] == "warn\n"


def test_command_is_echoed(client, room):
    cmd = "echo 'quoted \"text\"' ; true"
    assert client.exec(room, cmd)["command"] == cmd
