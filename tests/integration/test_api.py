"""The HTTP API through both web servers: shape of the exec answer, the room
endpoints, authentication, unknown paths and wrong methods."""

import json
import re
from datetime import datetime, timezone

import pytest


RESULT_KEYS = {"stdout", "stderr", "exitCode", "success", "signal", "timedOut",
               "truncated", "command", "duration", "timestamp"}
ISO_MS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def parse_iso(s):
    return datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=timezone.utc)


def test_health_needs_no_token(client):
    r = client.get("/api/health", auth=False)
    assert r.status == 200
    assert r.json["ok"] is True
    assert isinstance(r.json["version"], str) and r.json["version"]


def test_exec_echo_hi_answers_every_field(client, room):
    before = datetime.now(timezone.utc)
    r = client.exec_raw(room, {"cmd": "echo hi"})
    after = datetime.now(timezone.utc)
    assert r.status == 200, r.json
    assert set(r.json) == {"result", "sandboxName"}
    assert r.json["sandboxName"] == f"sandbox-{room}"
    res = r.json["result"]
    assert set(res) == RESULT_KEYS
    assert res["stdout"] == "hi\n"
    assert res["stderr"] == ""
    assert res["exitCode"] == 0
    assert res["success"] is True
    assert res["signal"] is None
    assert res["timedOut"] is False
    assert res["truncated"] == {"stdout": False, "stderr": False}
    assert res["command"] == "echo hi"
    assert isinstance(res["duration"], (int, float)) and not isinstance(res["duration"], bool)
    assert 0 <= res["duration"] <= r.elapsed * 1000 + 1
    assert ISO_MS.match(res["timestamp"]), res["timestamp"]
    started = parse_iso(res["timestamp"])
    # the start of the exec lies within the request (1 s slack for clocks
    # that tick in whole milliseconds)
    assert before.timestamp() - 1 <= started.timestamp() <= after.timestamp() + 1


def test_query_string_is_not_part_of_the_path(client, room):
    r = client.post(f"/api/rooms/{room}/sandbox/exec?x=1&y=/z", {"cmd": "echo q"})
    assert r.status == 200, r.json
    assert r.json["result"]["stdout"] == "q\n"
    assert r.json["sandboxName"] == f"sandbox-{room}"


def test_raw_utf8_body_and_output(client, room):
    body = json.dumps({"cmd": "echo 'héllo ✓ 房间'; printf %s \"$X\"",
                       "env": {"X": "ünï"}}, ensure_ascii=False).encode()
    r = client.request("POST", f"/api/rooms/{room}/sandbox/exec", data=body,
                       headers={"Content-Type": "application/json; charset=utf-8"})
    assert r.status == 200, r.json
    assert r.json["result"]["stdout"] == "héllo ✓ 房间\nünï"
    assert r.json["result"]["command"] == "echo 'héllo ✓ 房间'; printf %s \"$X\""


def chunked(data, size=1000):
    for i in range(0, len(data), size):
        yield data[i:i + size]


def test_chunked_request_body(client, room):
    body = json.dumps({"cmd": "wc -c", "stdin": "z" * 5000}).encode()
    r = client.request("POST", f"/api/rooms/{room}/sandbox/exec", data=chunked(body),
                       headers={"Content-Type": "application/json",
                                "Transfer-Encoding": "chunked"})
    assert r.status == 200, r.json
    assert r.json["result"]["stdout"].strip() == "5000"


def test_chunked_request_body_over_max_body_is_413(client, room):
    body = json.dumps({"cmd": "wc -c", "stdin": "z" * (100 * 1024)}).encode()
    r = client.request("POST", f"/api/rooms/{room}/sandbox/exec", data=chunked(body, 8192),
                       headers={"Content-Type": "application/json",
                                "Transfer-Encoding": "chunked"})
    assert r.status == 413, r.json
    assert r.json["error"]


def test_exec_creates_the_room_lazily(client, room):
    assert client.get(f"/api/rooms/{room}").status == 404
    client.sh(room, "true")
    r = client.get(f"/api/rooms/{room}")
    assert r.status == 200, r.json
    assert r.json["roomId"] == room
    assert r.json["state"] == "running"


def test_create_room_then_status_and_list(client):
    r = client.post("/api/rooms")
    assert r.status == 201, r.json
    rid = r.json["roomId"]
    client.touch(rid)
    assert UUID4.match(rid), rid
    assert r.json == {"roomId": rid, "sandboxName": f"sandbox-{rid}"}

    st = client.get(f"/api/rooms/{rid}")
    assert st.status == 200, st.json
    j = st.json
    assert set(j) == {"roomId", "sandboxName", "state", "createdAt", "lastActiveAt", "usage",
                      "labels", "limits"}
    assert j["labels"] == {}
    assert set(j["limits"]) == {"memory", "pids", "cpu", "disk", "idleTimeout", "execTimeoutMax"}
    assert j["roomId"] == rid and j["sandboxName"] == f"sandbox-{rid}"
    assert j["state"] == "running"
    assert ISO_MS.match(j["createdAt"]) and ISO_MS.match(j["lastActiveAt"])
    assert set(j["usage"]) == {"diskBytes", "memoryBytes", "processes"}
    for v in j["usage"].values():
        assert isinstance(v, int) and not isinstance(v, bool) and v >= 0

    lst = client.get("/api/rooms")
    assert lst.status == 200
    assert rid in [x["roomId"] for x in lst.json["rooms"]]

    # the sandbox exists already: exec uses it
    assert client.sh(rid, "echo ok") == "ok\n"


def test_two_created_rooms_get_different_ids(client):
    ids = []
    for _ in range(2):
        r = client.post("/api/rooms")
        assert r.status == 201, r.json
        client.touch(r.json["roomId"])
        ids.append(r.json["roomId"])
    assert ids[0] != ids[1]


def test_status_of_unknown_room_is_404(client, room):
    r = client.get(f"/api/rooms/{room}")
    assert r.status == 404
    assert r.json == {"error": "room not found"}


def test_delete_of_a_room_that_never_existed(client, room):
    r = client.delete(f"/api/rooms/{room}")
    assert r.status == 200
    assert r.json == {"cleaned": True, "roomId": room}


def test_cleanup_alias(client, room):
    client.sh(room, "echo x > f")
    r = client.post(f"/api/rooms/{room}/cleanup")
    assert r.status == 200, r.json
    assert r.json == {"cleaned": True, "roomId": room}
    assert client.get(f"/api/rooms/{room}").status == 404
    res = client.exec(room, "cat f")
    assert res["exitCode"] != 0 and res["stdout"] == ""


# ---- authentication

AUTHED = [
    ("GET", "/api/rooms"),
    ("POST", "/api/rooms"),
    ("GET", "/api/rooms/{room}"),
    ("DELETE", "/api/rooms/{room}"),
    ("POST", "/api/rooms/{room}/cleanup"),
    ("POST", "/api/rooms/{room}/sandbox/exec"),
]


@pytest.mark.parametrize("method,path", AUTHED)
@pytest.mark.parametrize("auth", [False, "Bearer wrong-token", "Basic dXNlcjpwYXNz", "Bearer"],
                         ids=["missing", "wrong", "basic", "empty"])
def test_missing_or_wrong_token_is_401(client, room, method, path, auth):
    body = {"cmd": "echo hi"} if method == "POST" else None
    r = client.request(method, path.format(room=room),
                       **({"body": body} if body else {}), auth=auth)
    assert r.status == 401, r.json
    assert r.json == {"error": "unauthorized"}
    assert (r.header("www-authenticate") or "").startswith("Bearer"), r.headers
    # nothing was done: the room was not created
    assert client.get(f"/api/rooms/{room}").status == 404


def test_every_token_of_the_tokens_file_is_accepted(client, stack, room):
    r = client.exec_raw(room, {"cmd": "echo two"}, auth=f"Bearer {stack.second_token}")
    assert r.status == 200, r.json
    assert r.json["result"]["stdout"] == "two\n"


def test_token_prefix_or_extension_is_401(client, room):
    for tok in (client.token[:-1], client.token + "x", client.token.upper()):
        r = client.exec_raw(room, {"cmd": "true"}, auth=f"Bearer {tok}")
        assert r.status == 401, (tok, r.json)
        assert r.json == {"error": "unauthorized"}


# ---- unknown paths and wrong methods

@pytest.mark.parametrize("path", [
    "/api/nope",
    "/api/healthz",
    "/api/rooms/r1/sandbox",
    "/api/rooms/r1/sandbox/exec/more",
    "/api/rooms/r1/nope",
    "/api",
    "/nope",
    "/",
])
def test_unknown_path_is_404_json(client, path):
    r = client.get(path)
    assert r.status == 404, r.json
    assert isinstance(r.json.get("error"), str) and r.json["error"]


@pytest.mark.parametrize("method,path,allowed", [
    ("GET", "/api/rooms/{room}/sandbox/exec", {"POST"}),
    ("PUT", "/api/rooms/{room}/sandbox/exec", {"POST"}),
    ("DELETE", "/api/health", {"GET"}),
    ("POST", "/api/health", {"GET"}),
    ("PUT", "/api/rooms", {"GET", "POST"}),
    ("DELETE", "/api/rooms", {"GET", "POST"}),
    ("POST", "/api/rooms/{room}", {"GET", "PATCH", "DELETE"}),
    ("PUT", "/api/rooms/{room}", {"GET", "PATCH", "DELETE"}),
    ("GET", "/api/rooms/{room}/cleanup", {"POST"}),
])
def test_wrong_method_is_405_with_allow(client, room, method, path, allowed):
    r = client.request(method, path.format(room=room))
    assert r.status == 405, r.json
    assert isinstance(r.json.get("error"), str) and r.json["error"]
    allow = {m.strip() for m in (r.header("allow") or "").split(",") if m.strip()}
    assert allowed <= allow, f"Allow: {r.header('allow')!r}"
    assert method not in allow
