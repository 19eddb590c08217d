"""Messages and run tags and what clean-up does to them (§2.3),
end to end through both web servers: real roombox-fcgi, helper and jails.

The expected contents are written out by hand from the original service's
executeCommands: append "\\n\\nOutput (<cmd>):\\n<summary>" per tag, then
remove every <run>...</run> from the whole text (outputs included) and trim.
"""

import json
import os
import re
import signal
import subprocess
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import (GONE_TIMEOUT, cgroup_dirs_named, pid_alive, procs_with_uid,
                      wait_until)

# One exec slot for the whole stack, so that a run tag can be refused for
# real ("too many concurrent execs") while another exec holds the slot.
# Nothing else in this module runs two execs at once.
ROOMBOX_CONFIG = {"max_concurrent_execs": "1"}

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
ROLE_MSG = 'Invalid option: expected one of "user"|"assistant"'
EMOJI = "\U0001F600"     # 😀: two UTF-16 code units


def parse_iso(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def utf16_units(s):
    return len(s.encode("utf-16-le")) // 2


def post(client, room, role, content, **kw):
    """POST a message; check the 201 answer's shape; return the message."""
    before = datetime.now(timezone.utc)
    r = client.post(f"/api/rooms/{room}/messages", {"role": role, "content": content}, **kw)
    after = datetime.now(timezone.utc)
    assert r.status == 201, r
    assert set(r.json) == {"message"}, r.json
    m = r.json["message"]
    assert set(m) == {"id", "role", "content", "createdAt"}, m
    assert UUID4.match(m["id"]), m["id"]
    assert m["role"] == role
    assert isinstance(m["content"], str)
    assert ISO_MS.match(m["createdAt"]), m["createdAt"]
    created = parse_iso(m["createdAt"]).timestamp()
    assert before.timestamp() - 1 <= created <= after.timestamp() + 1, (before, m, after)
    return m


def assistant(client, room, content, **kw):
    """POST an assistant message and return its stored content."""
    return post(client, room, "assistant", content, **kw)["content"]


def listed(client, room):
    r = client.get(f"/api/rooms/{room}/messages")
    assert r.status == 200, r
    assert set(r.json) == {"messages"}, r.json
    assert isinstance(r.json["messages"], list)
    return r.json["messages"]


def messages_file(stack, room):
    return stack.state_dir / "messages" / f"{room}.jsonl"


def chattr(flag, path):
    subprocess.run(["chattr", flag, str(path)], check=True, capture_output=True)


def room_gone(client, stack, room, keeper):
    """The sandbox part of a clean-up was done: the API no longer knows the
    room, its keeper has ended, its cgroup and state folder are gone."""
    r = client.get(f"/api/rooms/{room}")
    assert r.status == 404, r
    assert r.json == {"error": "room not found"}
    wait_until(lambda: not pid_alive(keeper), GONE_TIMEOUT, f"keeper {keeper} to end")
    assert not cgroup_dirs_named(room)
    assert not stack.room_state_dir(room).exists()


# ---------------------------------------------------------------- run tags

def test_two_tags_the_second_reads_what_the_first_wrote(client, room):
    m = post(client, room, "assistant", "Let me.\n<run>echo hi > f</run>\n<run>cat f</run>")
    # tags removed ("Let me.\n" + "\n"), both outputs appended, then trimmed:
    # the final "\n" of "hi\n" goes.
    assert m["content"] == ("Let me.\n\n"
                            "\n\nOutput (echo hi > f):\n[no output]"
                            "\n\nOutput (cat f):\nhi")
    assert listed(client, room) == [m]
    # the commands ran in the room's sandbox, in its working directory
    assert client.sh(room, "cat /workspace/f") == "hi\n"


def test_the_seeds_hello_txt_example(client, room):
    content = assistant(client, room, "I'll create the file for you.\n"
                                      "<run>echo 'Hello World' > hello.txt</run>")
    assert content == ("I'll create the file for you.\n"
                       "\n\nOutput (echo 'Hello World' > hello.txt):\n[no output]")
    # The original service's description shows the same lines (it renders blank lines
    # loosely: one where the algorithm leaves two).
    assert [l for l in content.split("\n") if l] == [
        "I'll create the file for you.",
        "Output (echo 'Hello World' > hello.txt):",
        "[no output]"]
    assert client.sh(room, "cat hello.txt") == "Hello World\n"


def test_a_tag_runs_in_this_rooms_sandbox_and_keeps_the_session(client, room):
    assert assistant(client, room, "<run>hostname</run>") == \
        f"Output (hostname):\nsandbox-{room}"
    assert assistant(client, room, "<run>cd /tmp; export A=1</run>") == \
        "Output (cd /tmp; export A=1):\n[no output]"
    assert client.sh(room, 'pwd; echo "$A"') == "/tmp\n1\n"


@pytest.mark.parametrize("content,expected", [
    # a non-zero exit is still "Output"; stdout wins over stderr
    ("<run>echo out; echo err >&2; exit 7</run>",
     "Output (echo out; echo err >&2; exit 7):\nout"),
    # stderr only
    ("<run>echo oops >&2; exit 3</run>",
     "Output (echo oops >&2; exit 3):\noops"),
    # failure without output
    ("<run>false</run>", "Output (false):\n[no output]"),
    # whitespace-only stdout counts as output ("\n" is truthy in JavaScript)
    ("Before <run>echo</run>", "Before \n\nOutput (echo):"),
    # the command is the trimmed inner text; tags may span lines
    ("x<run> \n\techo a \n</run>y", "xy\n\nOutput (echo a):\na"),
    ("<run>for i in 1 2 3\ndo echo $i\ndone</run>",
     "Output (for i in 1 2 3\ndo echo $i\ndone):\n1\n2\n3"),
    # empty and blank tags run nothing but are removed
    ("A <run>   </run> B <run></run> C", "A  B  C"),
    # non-greedy: each <run> ends at the nearest </run>
    ("<run>echo 1</run> and <run>echo 2</run>",
     "and \n\nOutput (echo 1):\n1\n\n\nOutput (echo 2):\n2"),
    # case-sensitive, and an unclosed tag is no tag: stored as is (trimmed)
    ("  <RUN>echo no</RUN> <Run>echo no</Run> <run>echo no  ",
     "<RUN>echo no</RUN> <Run>echo no</Run> <run>echo no"),
    # a text without tags is only trimmed
    ("\n  just words \t\n", "just words"),
    # ASCII past 500 units: the first 500
    ("<run>python3 -c \"print('x' * 600)\"</run>",
     "Output (python3 -c \"print('x' * 600)\"):\n" + "x" * 500),
    # 300 emoji = 600 UTF-16 units: the first 500 are exactly 250 emoji
    ("<run>python3 -c \"print('\\U0001F600' * 300)\"</run>",
     "Output (python3 -c \"print('\\U0001F600' * 300)\"):\n" + EMOJI * 250),
    # unit 500 is the first half of a pair: U+FFFD in its place (docs/api.md)
    ("<run>python3 -c \"print('a' + '\\U0001F600' * 300)\"</run>",
     "Output (python3 -c \"print('a' + '\\U0001F600' * 300)\"):\na" + EMOJI * 249 + "\uFFFD"),
    # the same limits on stderr
    ("<run>python3 -c \"import sys; sys.stderr.write('\\U0001F600' * 300)\"</run>",
     "Output (python3 -c \"import sys; sys.stderr.write('\\U0001F600' * 300)\"):\n"
     + EMOJI * 250),
], ids=["nonzero-exit", "stderr-only", "no-output", "blank-stdout", "trimmed-cmd",
        "multiline", "empty-tags", "non-greedy", "not-tags", "no-tags", "ascii-500",
        "astral-500", "astral-split", "stderr-astral"])
def test_output_sections(client, room, content, expected):
    got = assistant(client, room, content)
    assert got == expected
    [m] = listed(client, room)
    assert m["content"] == expected


def test_truncated_summary_is_500_utf16_units(client, room):
    content = assistant(client, room, "<run>python3 -c \"print('\\U0001F600' * 300)\"</run>")
    summary = content.split("\n", 1)[1]
    assert utf16_units(summary) == 500
    assert summary == EMOJI * 250


def test_a_run_tag_in_the_output_is_removed_and_not_run(client, room):
    marker = f"/tmp/evil-{uuid.uuid4().hex[:8]}"
    cmd = f"printf 'before<%s>touch {marker}</%s>after' run run"
    assert assistant(client, room, f"<run>{cmd}</run>") == f"Output ({cmd}):\nbeforeafter"
    # the room exists (the tag ran in it), the marker was never made
    assert client.exec(room, f"test -e {marker}")["exitCode"] == 1
    assert not os.path.exists(marker)
    # and the same command, as a tag of the text, does run (the check above
    # can see a run)
    assistant(client, room, f"<run>touch {marker}</run>")
    assert client.exec(room, f"test -e {marker}")["exitCode"] == 0


def test_output_closing_an_unclosed_tag_of_the_text(client, room):
    # The final removal works on the whole text: the unclosed "<run>" after
    # "tail" closes at the "</run>" the command printed.
    content = "<run>printf 'x</%s>y' run</run> tail <run>"
    assert assistant(client, room, content) == "tail y"


def test_a_tag_that_cannot_reach_the_sandbox_appends_an_error(client, stack):
    holder, room = f"h-{uuid.uuid4().hex[:12]}", f"e-{uuid.uuid4().hex[:12]}"
    uid = client.room_uid(holder)
    out = {}
    t = threading.Thread(target=lambda: out.update(r=client.exec_raw(
        holder, {"cmd": "sleep 60", "timeout": 60000})))
    t.start()
    try:
        wait_until(lambda: [p for p in procs_with_uid(uid) if p[1] == "sleep 60"], 10,
                   "the holding exec's sleep to start")
        # the only exec slot is taken: the tag cannot run
        assert assistant(client, room, "Trying.\n<run>echo hi</run>") == \
            "Trying.\n\n\nError (echo hi):\ntoo many concurrent execs"
    finally:
        client.destroy(holder)      # ends the holding exec
        t.join(30)
    assert not t.is_alive()
    # a NUL byte cannot go into a command (docs/choices.md): also an Error section,
    # and a NUL in the stored content survives the round trip
    assert assistant(client, room, "<run>echo a\u0000b</run>") == \
        "Error (echo a\u0000b):\nCommand cannot contain NUL bytes"
    assert [m["content"] for m in listed(client, room)] == [
        "Trying.\n\n\nError (echo hi):\ntoo many concurrent execs",
        "Error (echo a\u0000b):\nCommand cannot contain NUL bytes"]


# ---------------------------------------------------------------- user messages

RUNTAGS_MAX = 32   # fcgi-app/messages/runtags.h


def test_more_run_tags_than_a_message_may_run_is_400_and_runs_nothing(client, room):
    """Each command adds its output to what is stored and they run one
    after another: a message of 33 commands is refused whole, before any
    runs (here each would leave a file), and nothing is stored.  32 run."""
    over = "".join(f"<run>touch /workspace/t{i}</run>" for i in range(RUNTAGS_MAX + 1))
    r = client.post(f"/api/rooms/{room}/messages", {"role": "assistant", "content": over})
    assert r.status == 400, r
    assert r.json == {"error": f"too many <run> commands in one message: {RUNTAGS_MAX + 1} "
                               f"(at most {RUNTAGS_MAX}); nothing was run or stored"}, r.json
    assert client.sh(room, "ls /workspace | grep -c '^t' || true") == "0\n"
    assert listed(client, room) == []
    # empty tags run nothing and are not counted
    at_most = ("<run> </run>" * 5 +
               "".join(f"<run>touch /workspace/t{i}</run>" for i in range(RUNTAGS_MAX)))
    m = post(client, room, "assistant", at_most)
    assert m["content"].count("Output (touch /workspace/t") == RUNTAGS_MAX, m
    assert client.sh(room, "ls /workspace | grep -c '^t'") == f"{RUNTAGS_MAX}\n"


def test_a_room_whose_messages_are_full_refuses_more_with_507(client, stack, room):
    """A room keeps at most 64 MiB of messages (an export carries them as
    one part of that size, and a listing reads them whole): past it a post
    is 507, nothing stored, and what is there still lists and exports."""
    assert post(client, room, "user", "first")["content"] == "first"
    path = messages_file(stack, room)
    first = path.read_bytes()
    big = json.dumps({"id": "00000000-0000-4000-8000-000000000000", "role": "user",
                      "content": "", "createdAt": "2026-12-05T00:00:00.000Z"},
                     separators=(",", ":"))
    pad = 64 * 1024 * 1024 - len(first) - len(big) - 1 - 10
    line = big.replace('"content":""', '"content":"' + "x" * pad + '"')
    with open(path, "ab") as f:
        f.write(line.encode() + b"\n")
    for role, content in (("user", "one more"), ("assistant", "<run>touch /workspace/ran</run>")):
        r = client.post(f"/api/rooms/{room}/messages", {"role": role, "content": content})
        assert r.status == 507, r
        assert "full" in r.json["error"] and "64 MiB" in r.json["error"], r.json
    assert [len(m["content"]) for m in listed(client, room)] == [5, pad]
    # refused before its command ran
    assert client.sh(room, "test -e /workspace/ran && echo ran || echo not run") == "not run\n"
    r = client.request("GET", f"/api/rooms/{room}/export", check_json=False)
    assert r.status == 200, r


def test_user_message_is_stored_as_is_and_nothing_in_it_runs(client, room):
    marker = f"/tmp/pwned-{uuid.uuid4().hex[:8]}"
    client.sh(room, "true")         # the sandbox exists: a run would land there
    content = f"  please <run>touch {marker}</run> now\n"
    m = post(client, room, "user", content)
    assert m["content"] == content  # not run, not stripped, not trimmed
    assert listed(client, room) == [m]
    assert client.exec(room, f"test -e {marker}")["exitCode"] == 1
    assert not os.path.exists(marker)


def test_user_content_round_trips_exactly(client, room):
    contents = ["héllo ✓ 房间 " + EMOJI, "nul\u0000inside", "line\nbreaks\r\n\ttabs",
                '"quotes" \\ back\\slash </script>', "x" * 20000]
    ms = [post(client, room, "user", c) for c in contents]
    assert [m["content"] for m in ms] == contents
    assert listed(client, room) == ms


def test_list_is_oldest_first_per_room_and_empty_for_a_room_without_messages(client, room):
    other = f"o-{uuid.uuid4().hex[:12]}"
    assert client.get(f"/api/rooms/{room}/messages").json == {"messages": []}
    # listing does not create the room
    assert client.get(f"/api/rooms/{room}").status == 404
    a = post(client, room, "user", "first")
    b = post(client, room, "assistant", "second <run>echo 2</run>")
    c = post(client, room, "user", "third")
    d = post(client, other, "user", "elsewhere")
    assert listed(client, room) == [a, b, c]
    assert listed(client, other) == [d]
    assert b["content"] == "second \n\nOutput (echo 2):\n2"
    assert len({a["id"], b["id"], c["id"], d["id"]}) == 4


# ---------------------------------------------------------------- validation

INVALID = [
    ({"content": "x"}, {"role": [ROLE_MSG]}),
    ({"role": "system", "content": "x"}, {"role": [ROLE_MSG]}),
    ({"role": "User", "content": "x"}, {"role": [ROLE_MSG]}),
    ({"role": "", "content": "x"}, {"role": [ROLE_MSG]}),
    ({"role": 5, "content": "x"}, {"role": [ROLE_MSG]}),
    ({"role": None, "content": "x"}, {"role": [ROLE_MSG]}),
    ({"role": "user", "content": ""}, {"content": ["Content cannot be empty"]}),
    ({"role": "assistant", "content": ""}, {"content": ["Content cannot be empty"]}),
    ({"role": "user"}, {"content": ["Invalid input: expected string, received undefined"]}),
    ({"role": "user", "content": 5}, {"content": ["Invalid input: expected string, received number"]}),
    ({}, {"role": [ROLE_MSG], "content": ["Invalid input: expected string, received undefined"]}),
    ({"content": "", "role": "bot"}, {"role": [ROLE_MSG], "content": ["Content cannot be empty"]}),
]


@pytest.mark.parametrize("body,details", INVALID, ids=[json.dumps(b) for b, _ in INVALID])
def test_invalid_message_is_400_with_details(client, room, body, details):
    r = client.post(f"/api/rooms/{room}/messages", body)
    assert r.status == 400, r
    assert r.json == {"error": "invalid request", "details": details}
    assert list(r.json["details"]) == list(details)
    assert listed(client, room) == []


def test_invalid_assistant_message_runs_nothing(client, room):
    marker = f"/tmp/nope-{uuid.uuid4().hex[:8]}"
    client.sh(room, "true")
    r = client.post(f"/api/rooms/{room}/messages",
                    {"role": "Assistant", "content": f"<run>touch {marker}</run>"})
    assert r.status == 400, r
    assert client.exec(room, f"test -e {marker}")["exitCode"] == 1
    assert listed(client, room) == []


@pytest.mark.parametrize("data", [b"{nope", b'{"role":"user","content":"x"', b"role=user",
                                  b"", b'{"role":"user","content":"x"} trailing'],
                         ids=["garbage", "unterminated", "form", "empty", "trailing"])
def test_body_that_is_not_json_is_400(client, room, data):
    r = client.request("POST", f"/api/rooms/{room}/messages", data=data,
                       headers={"Content-Type": "application/json"})
    assert r.status == 400, r
    assert set(r.json) == {"error"}
    assert r.json["error"].startswith("invalid JSON"), r.json
    assert listed(client, room) == []


@pytest.mark.parametrize("bad", ["-x", "_x", "a.b", "x" * 65, "a%20b", "%41bc", "r%2Fs"])
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_bad_room_id_is_400(client, method, bad):
    body = {"role": "user", "content": "x"} if method == "POST" else None
    r = client.request(method, f"/api/rooms/{bad}/messages",
                       **({"body": body} if body else {}))
    assert r.status == 400, r
    assert r.json == {"error": "invalid room id"}


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH"])
def test_wrong_method_is_405_with_allow_get_post(client, room, method):
    r = client.request(method, f"/api/rooms/{room}/messages")
    assert r.status == 405, r
    assert isinstance(r.json.get("error"), str) and r.json["error"]
    assert r.header("allow") == "GET, POST"


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_messages_need_the_token(client, room, method):
    post(client, room, "user", "secret")
    body = {"role": "user", "content": "x"} if method == "POST" else None
    r = client.request(method, f"/api/rooms/{room}/messages",
                       **({"body": body} if body else {}), auth="Bearer wrong")
    assert r.status == 401, r
    assert r.json == {"error": "unauthorized"}
    assert [m["content"] for m in listed(client, room)] == ["secret"]


# ---------------------------------------------------------------- durability

def test_message_survives_kill_9_of_roombox_fcgi(client, stack, room):
    u = post(client, room, "user", "make a file")
    a = post(client, room, "assistant", "<run>echo kept > k</run><run>cat k</run>")
    assert a["content"] == "Output (echo kept > k):\n[no output]\n\nOutput (cat k):\nkept"
    before = stack.fcgi_pids()
    after = stack.restart_fcgi()            # SIGKILL right after the 201
    assert after not in before
    assert listed(client, room) == [u, a]
    # and the store goes on after them
    c = post(client, room, "assistant", "<run>cat k</run>")
    assert c["content"] == "Output (cat k):\nkept"
    assert listed(client, room) == [u, a, c]


def test_kill_9_during_a_tag_stores_nothing_half_done(client, stack, room):
    u = post(client, room, "user", "go")
    uid = client.room_uid(room)
    out = {}
    t = threading.Thread(target=lambda: out.update(r=client.post(
        f"/api/rooms/{room}/messages",
        {"role": "assistant", "content": "wait <run>sleep 60</run>"})))
    t.start()
    wait_until(lambda: [p for p in procs_with_uid(uid) if p[1] == "sleep 60"], 10,
               "the tag's sleep to start")
    stack.restart_fcgi()
    t.join(30)
    assert not t.is_alive(), "the request in flight did not end when roombox-fcgi was killed"
    assert out["r"].status >= 500, out["r"]
    assert listed(client, room) == [u]


def test_messages_survive_the_rooms_being_stopped(client, stack, room):
    a = post(client, room, "assistant", "<run>echo x > s</run>")
    # SIGTERM: roombox-fcgi stops every room (files and messages stay)
    stack.restart_fcgi(signal.SIGTERM)
    st = client.get(f"/api/rooms/{room}")
    assert st.status == 200 and st.json["state"] == "stopped", st
    assert listed(client, room) == [a]
    b = post(client, room, "assistant", "<run>cat s</run>")
    assert b["content"] == "Output (cat s):\nx"
    assert listed(client, room) == [a, b]


def test_50_concurrent_posts_to_one_room(client, room):
    n = 50
    contents = [f"message {i} {uuid.uuid4().hex}" for i in range(n)]
    start = threading.Barrier(n)

    def one(c):
        start.wait(30)
        r = client.post(f"/api/rooms/{room}/messages", {"role": "user", "content": c})
        return r

    with ThreadPoolExecutor(n) as pool:
        answers = list(pool.map(one, contents))
    assert [r.status for r in answers] == [201] * n, [r for r in answers if r.status != 201]
    by_content = {r.json["message"]["content"]: r.json["message"] for r in answers}
    assert set(by_content) == set(contents)

    msgs = listed(client, room)
    assert len(msgs) == n
    assert sorted(m["content"] for m in msgs) == sorted(contents)   # each exactly once
    assert len({m["id"] for m in msgs}) == n
    for m in msgs:
        assert m == by_content[m["content"]]                        # whole, as answered
    created = [m["createdAt"] for m in msgs]
    assert created == sorted(created), created


# ---------------------------------------------------------------- clean-up

@pytest.mark.parametrize("how", ["DELETE", "cleanup"])
@pytest.mark.parametrize("sandbox", [True, False], ids=["with-sandbox", "messages-only"])
def test_cleanup_resets_the_messages(client, stack, room, how, sandbox):
    post(client, room, "user", "one")
    if sandbox:
        post(client, room, "assistant", "<run>echo two</run>")
    assert len(listed(client, room)) == (2 if sandbox else 1)
    assert messages_file(stack, room).exists()
    if how == "DELETE":
        r = client.delete(f"/api/rooms/{room}")
    else:
        r = client.post(f"/api/rooms/{room}/cleanup")
    assert r.status == 200, r
    assert r.json == {"cleaned": True, "roomId": room}
    assert client.get(f"/api/rooms/{room}/messages").json == {"messages": []}
    assert not messages_file(stack, room).exists()
    assert client.get(f"/api/rooms/{room}").status == 404
    # a new conversation starts from nothing
    m = post(client, room, "user", "again")
    assert listed(client, room) == [m]


def assert_207_with_one_error(r, part, cause, stack=None, room=None):
    """DELETE answered 207: cleaned, one error, from `part`, naming `cause`.
    With stack and room: the error reads "<part>: room <room>: ..." (or
    "cgroup <room>"), names
    the part once and no host path (the state, run or cgroup directories)."""
    assert r.status == 207, r
    assert set(r.json) == {"cleaned", "errors"}, r.json
    assert r.json["cleaned"] is True
    assert len(r.json["errors"]) == 1, r.json
    text = r.json["errors"][0]
    assert text.startswith(f"{part}: "), r.json
    assert cause in text, r.json
    if stack is None:
        return
    assert text.startswith((f"{part}: room {room}: ", f"{part}: cgroup {room}: ")), r.json
    assert text.count(f"{part}:") == 1, r.json
    for host in (str(stack.dir), str(stack.state_dir), str(stack.run_dir), "/sys/fs/cgroup"):
        assert host not in text, r.json
    assert " /" not in text, f"a host path in {text!r}"


@pytest.mark.parametrize("breakage", ["immutable-file", "directory"])
def test_207_when_the_messages_part_fails(client, stack, room, breakage):
    client.sh(room, "echo data > f")
    keeper = stack.keeper_pid(room)
    assert keeper
    path = messages_file(stack, room)
    if breakage == "immutable-file":
        kept = [post(client, room, "user", "keep me")]
        chattr("+i", path)
        cause = "Operation not permitted"
    else:
        kept = None
        path.mkdir()
        (path / "x").write_text("x")
        cause = "Is a directory"
    try:
        assert_207_with_one_error(client.delete(f"/api/rooms/{room}"), "messages", cause, stack, room)
        # the sandbox part was still done
        room_gone(client, stack, room, keeper)
        if kept is not None:
            assert listed(client, room) == kept     # not reset, not lost
    finally:
        if breakage == "immutable-file":
            chattr("-i", path)
        else:
            (path / "x").unlink()
            path.rmdir()
    # once the cause is gone, clean-up succeeds
    r = client.delete(f"/api/rooms/{room}")
    assert r.status == 200 and r.json == {"cleaned": True, "roomId": room}, r
    assert listed(client, room) == []


def test_207_when_the_sandbox_part_fails(client, stack, room):
    post(client, room, "user", "hello")
    post(client, room, "assistant", "<run>echo data > f</run>")
    sd = stack.room_state_dir(room)
    small = sorted(p for p in sd.iterdir() if p.is_file() and p.stat().st_size < 1 << 20)
    assert small, f"no small file in {sd}: {list(sd.iterdir())}"
    blocker = small[0]
    chattr("+i", blocker)
    try:
        assert_207_with_one_error(client.delete(f"/api/rooms/{room}"), "sandbox", "Operation not permitted",
                                  stack, room)
        # the messages part was still done
        assert client.get(f"/api/rooms/{room}/messages").json == {"messages": []}
        assert not messages_file(stack, room).exists()
    finally:
        chattr("-i", blocker)
    r = client.delete(f"/api/rooms/{room}")
    assert r.status == 200 and r.json == {"cleaned": True, "roomId": room}, r
    assert client.get(f"/api/rooms/{room}").status == 404
    assert not sd.exists()


def listed_rooms(client):
    r = client.get("/api/rooms")
    assert r.status == 200, r
    return [x["roomId"] for x in r.json["rooms"]]


@pytest.mark.parametrize("blocker", ["file", "mount", "cgroup"])
def test_a_half_failed_cleanup_leaves_no_room(client, stack, room, blocker):
    """The sandbox part fails half-way (a file of the room's state folder
    cannot be removed, a mount sits in it, or in its cgroup): the 207 says
    so in the room's words, the room is no longer listed nor found, a new
    room of the same id starts empty, and a later DELETE removes the rest.
    (The cgroup step comes before the files: only there does an old order
    that removed meta last fail whatever order the directory lists in.)"""
    client.sh(room, "echo data > /workspace/f")
    keeper = stack.keeper_pid(room)
    assert room in listed_rooms(client)
    sd = stack.room_state_dir(room)
    expected = None
    if blocker == "cgroup":
        cgs = cgroup_dirs_named(room)
        assert cgs, f"no cgroup of {room}"
        stuck = Path(cgs[0]) / "rbx-test-blocker"
        stuck.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "rbx-test", str(stuck)],
                       check=True, capture_output=True)
        cause = "Resource busy"             # rmdir of a mount point (musl's EBUSY text)
        expected = f"sandbox: cgroup {room}: rmdir rbx-test-blocker: {cause}"
    elif blocker == "file":
        stuck = sd / "stuck"
        stuck.write_text("x")
        chattr("+i", stuck)
        cause = "Operation not permitted"
    else:
        stuck = sd / "stuck"
        stuck.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "rbx-test", str(stuck)],
                       check=True, capture_output=True)
        cause = "Directory not empty"       # the walk stays off the mount; its parent stays
    try:
        r = client.delete(f"/api/rooms/{room}")
        assert_207_with_one_error(r, "sandbox", cause, stack, room)
        assert r.json["errors"][0] == (expected or f"sandbox: room {room}: remove files: {cause}"), r.json
        wait_until(lambda: not pid_alive(keeper), GONE_TIMEOUT, f"keeper {keeper} to end")
        assert room not in listed_rooms(client)
        g = client.get(f"/api/rooms/{room}")
        assert g.status == 404 and g.json == {"error": "room not found"}, g
        assert stuck.exists()                       # the leftovers are there...
        assert sd.exists() == (blocker != "cgroup")  # (the files go even when the cgroup stays)
        r = client.delete(f"/api/rooms/{room}")     # ...a retry still reports them
        assert r.json["errors"][0] == (expected or f"sandbox: room {room}: remove files: {cause}"), r.json
        assert room not in listed_rooms(client)
    finally:
        if blocker == "file":
            chattr("-i", stuck)
        else:
            subprocess.run(["umount", str(stuck)], check=True, capture_output=True)
            if blocker == "cgroup":
                stuck.rmdir()
    if blocker == "file":
        # the id used again before any retry: a fresh room, the leftovers gone
        assert client.sh(room, "ls -A /workspace") == ""
        assert not stuck.exists()
    r = client.delete(f"/api/rooms/{room}")
    assert r.status == 200 and r.json == {"cleaned": True, "roomId": room}, r
    assert not sd.exists()
    assert not (stack.run_dir / "rooms" / room).exists()
