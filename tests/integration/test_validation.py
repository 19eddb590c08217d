"""Request validation, row by row as docs/api.md lists it, and the other
errors a client can provoke: bodies that are not JSON or too large, NUL
bytes, bad room ids.  Through both web servers."""

import json

import pytest

T = "Invalid input: expected string, received "

ROWS = [
    ({}, {"cmd": [T + "undefined"]}),
    ({"cmd": ""}, {"cmd": ["Command cannot be empty"]}),
    ({"cmd": 5}, {"cmd": [T + "number"]}),
    ({"cmd": 1.5}, {"cmd": [T + "number"]}),
    ({"cmd": None}, {"cmd": [T + "null"]}),
    ({"cmd": True}, {"cmd": [T + "boolean"]}),
    ({"cmd": ["echo"]}, {"cmd": [T + "array"]}),
    ({"cmd": {"a": 1}}, {"cmd": [T + "object"]}),
    (None, {}),
    ([], {}),
    ([{"cmd": "echo hi"}], {}),
    ("echo hi", {}),
    (5, {}),
    ({"cmd": "x", "timeout": -1}, {"timeout": ["Too small: expected number to be >0"]}),
    ({"cmd": "x", "timeout": 0}, {"timeout": ["Too small: expected number to be >0"]}),
    ({"cmd": "x", "timeout": 1.5}, {"timeout": ["Invalid input: expected int, received number"]}),
    ({"cmd": "x", "timeout": "5"}, {"timeout": ["Invalid input: expected number, received string"]}),
    ({"cmd": "x", "timeout": 700000}, {"timeout": ["Too big: expected number to be <=600000"]}),
    ({"cmd": "x", "env": {"A": 1}}, {"env": ["Invalid input: expected string, received number"]}),
    ({"cmd": "x", "env": "x"}, {"env": ["Invalid input: expected record, received string"]}),
    ({"cmd": "x", "cwd": "tmp"}, {"cwd": ['Invalid string: must start with "/"']}),
    ({"cmd": "x", "encoding": "hex"}, {"encoding": ['Invalid option: expected one of "utf8"|"base64"']}),
    ({"cmd": "x", "stdin": 5}, {"stdin": ["Invalid input: expected string, received number"]}),
    ({"cmd": "x", "user": "admin"}, {"user": ['Invalid option: expected one of "root"|"user"']}),
    # several bad fields: several keys, in the table's order
    ({"user": "admin", "stdin": 5, "encoding": "hex", "cwd": "tmp", "env": "x", "timeout": -1, "cmd": ""},
     {"cmd": ["Command cannot be empty"],
      "timeout": ["Too small: expected number to be >0"],
      "env": ["Invalid input: expected record, received string"],
      "cwd": ['Invalid string: must start with "/"'],
      "encoding": ['Invalid option: expected one of "utf8"|"base64"'],
      "stdin": ["Invalid input: expected string, received number"],
      "user": ['Invalid option: expected one of "root"|"user"']}),
    ({"cmd": "x\u0000y"}, {"cmd": ["Command cannot contain NUL bytes"]}),
]


@pytest.mark.parametrize("body,details", ROWS, ids=[json.dumps(r[0])[:60] for r in ROWS])
def test_validation_table_row(client, room, body, details):
    r = client.exec_raw(room, body)
    assert r.status == 400, r.json
    assert r.json["error"] == "invalid request", r.json
    assert r.json["details"] == details
    # the order of the keys is the table's order
    assert list(r.json["details"]) == list(details)
    # a rejected request does not create the room
    assert client.get(f"/api/rooms/{room}").status == 404


def test_a_timeout_at_the_maximum_is_accepted(client, room):
    r = client.exec_raw(room, {"cmd": "echo ok", "timeout": 600000})
    assert r.status == 200, r.json
    assert r.json["result"]["stdout"] == "ok\n"


def test_unknown_fields_are_ignored(client, room):
    r = client.exec_raw(room, {"cmd": "echo ok", "foo": 1, "bar": {"x": [1]}})
    assert r.status == 200, r.json
    assert r.json["result"]["stdout"] == "ok\n"


@pytest.mark.parametrize("body,field", [
    ({"cmd": "x", "cwd": "/tmp\u0000x"}, "cwd"),
    ({"cmd": "x", "env": {"A\u0000B": "1"}}, "env"),
    ({"cmd": "x", "env": {"A": "1\u00002"}}, "env"),
])
def test_nul_in_cwd_or_env_is_refused(client, room, body, field):
    r = client.exec_raw(room, body)
    assert r.status == 400, r.json
    assert r.json["error"] == "invalid request"
    assert list(r.json["details"]) == [field]
    assert len(r.json["details"][field]) == 1
    assert "NUL" in r.json["details"][field][0]


@pytest.mark.parametrize("raw", [
    b"not json",
    b'{"cmd":',
    b'{"cmd":"echo hi"} trailing',
    b"{'cmd':'echo hi'}",
    b"",
], ids=["text", "truncated", "trailing", "single-quotes", "empty"])
def test_body_that_is_not_json(client, room, raw):
    r = client.request("POST", f"/api/rooms/{room}/sandbox/exec", data=raw,
                       headers={"Content-Type": "application/json"})
    assert r.status == 400, r.json
    err = r.json["error"]
    assert err.startswith("invalid JSON: ") and len(err) > len("invalid JSON: "), err


def test_body_over_max_body_is_413_from_roombox(client, stack, room):
    # max_body is 64K in the test configuration; the web servers allow 2M
    big = {"cmd": "true", "stdin": "x" * (80 * 1024)}
    r = client.exec_raw(room, big)
    assert r.status == 413, r.json
    assert isinstance(r.json.get("error"), str) and r.json["error"]
    # just under the limit is fine
    ok = client.exec_raw(room, {"cmd": "wc -c", "stdin": "y" * (60 * 1024)})
    assert ok.status == 200, ok.json
    assert ok.json["result"]["stdout"].strip() == str(60 * 1024)


def test_body_over_the_web_servers_limit_is_413_json(client, room):
    big = b'{"cmd":"true","stdin":"' + b"x" * (3 << 20) + b'"}'
    r = client.request("POST", f"/api/rooms/{room}/sandbox/exec", data=big,
                       headers={"Content-Type": "application/json"})
    assert r.status == 413, r.json
    assert isinstance(r.json.get("error"), str) and r.json["error"]


BAD_IDS = [
    "a" * 65,
    "-x",
    "_x",
    "a.b",
    "..",
    "%2e%2e",
    "a%2Fb",
    "a%20b",
    "r%C3%A9",          # ré
    "%E6%88%BF%E9%97%B4",  # 房间
    "a:b",
    "a~b",
]


@pytest.mark.parametrize("rid", BAD_IDS)
def test_bad_room_id_is_400(client, rid):
    r = client.exec_raw(rid, {"cmd": "echo hi"})
    assert r.status == 400, r.json
    assert r.json == {"error": "invalid room id"}
    for method, path in (("GET", f"/api/rooms/{rid}"), ("DELETE", f"/api/rooms/{rid}")):
        r = client.request(method, path)
        assert r.status == 400, (method, r.json)
        assert r.json == {"error": "invalid room id"}


def test_nul_in_the_path_is_a_json_400(client):
    # the web servers refuse %00 in a path before roombox sees it; the
    # answer is still JSON
    r = client.exec_raw("a%00b", {"cmd": "echo hi"})
    assert r.status == 400, r.json
    assert isinstance(r.json.get("error"), str) and r.json["error"]


def test_longest_room_id_is_valid(client):
    rid = "Z" + "0123456789abcdef" * 4
    rid = rid[:64]
    assert len(rid) == 64
    r = client.get(f"/api/rooms/{rid}")
    assert r.status == 404, r.json
    assert r.json == {"error": "room not found"}
