"""GET /metrics and the request log, through nginx and lighttpd.

Known traffic moves the counters by exactly its size (read before and
after); the exposition passes `promtool check metrics`; who may read it
follows the `metrics` key; every request leaves one line in roombox-fcgi's
stderr with the X-Request-Id the client got, as key=value text or, with
`log_format = json`, as a JSON object."""

import json
import re
import subprocess

import pytest

from conftest import Stack, unique_room, wait_until

# an exec whose environment cannot be passed to a process fails in the
# sandbox (500): the "error" outcome, with a body over the tests' 64K
ROOMBOX_CONFIG = {"max_body": "1M"}

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$')


def scrape(client, **kw):
    r = client.get("/metrics", check_json=False, **kw)
    assert r.status == 200, r
    ctype = r.header("content-type") or ""
    assert ctype.startswith("text/plain"), ctype
    assert "version=0.0.4" in ctype, ctype
    return r.body.decode()


def samples(text):
    """{'name{labels}': value} of every sample line."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a sample line: {line!r}"
        out[(m.group(1) + (m.group(2) or ""))] = float(m.group(3))
    return out


def delta(before, after, series):
    return after.get(series, 0) - before.get(series, 0)


EXEC_ROUTE = 'route="/api/rooms/{id}/sandbox/exec",method="POST"'


def fcgi_log(stack):
    """Where this stack's roombox-fcgi writes its stderr: conftest's
    fcgi.log behind nginx; behind lighttpd, the stderr lighttpd hands the
    backend it spawns, its own (conftest's lighttpd.out)."""
    return stack.dir / ("fcgi.log" if stack.server == "nginx" else "lighttpd.out")


def log_line_with(stack, request_id):
    def find():
        try:
            text = fcgi_log(stack).read_text(errors="replace")
        except OSError:
            return None
        hits = [l for l in text.splitlines() if request_id in l]
        return hits or None
    hits = wait_until(find, 10, f"a log line with request id {request_id}")
    assert len(hits) == 1, hits
    return hits[0]


# ---------------------------------------------------------------- counters

def test_exec_counters_move_by_exactly_the_traffic(client, room):
    client.sh(room, "true")          # the room exists before the count starts
    before = samples(scrape(client))

    outcomes = {"ok": 0, "nonzero": 0, "timeout": 0, "error": 0}
    for _ in range(3):
        assert client.exec(room, "echo ok")["exitCode"] == 0
        outcomes["ok"] += 1
    for code in (1, 7):
        assert client.exec(room, f"exit {code}")["exitCode"] == code
        outcomes["nonzero"] += 1
    res = client.exec(room, "sleep 30", timeout=300)
    assert res["timedOut"] is True
    outcomes["timeout"] += 1
    r = client.exec_raw(room, {"cmd": "true", "env": {"BIG": "x" * 140000}})
    assert r.status == 500, r
    assert r.json["error"].startswith("sandbox execution failed: "), r.json
    outcomes["error"] += 1

    after = samples(scrape(client))
    for outcome, n in outcomes.items():
        assert delta(before, after, f'roombox_exec_total{{outcome="{outcome}"}}') == n, outcome
    n = sum(outcomes.values())
    assert delta(before, after, "roombox_exec_duration_seconds_count") == n
    assert delta(before, after, 'roombox_exec_duration_seconds_bucket{le="+Inf"}') == n
    # the timed-out exec took at least its 300 ms, the others far less
    assert delta(before, after, 'roombox_exec_duration_seconds_bucket{le="0.25"}') <= n - 1
    assert delta(before, after, "roombox_exec_duration_seconds_sum") >= 0.3
    assert delta(before, after, f'roombox_http_requests_total{{{EXEC_ROUTE},code="200"}}') == n - 1
    assert delta(before, after, f'roombox_http_requests_total{{{EXEC_ROUTE},code="500"}}') == 1
    assert delta(before, after,
                 f'roombox_http_request_duration_seconds_count{{{EXEC_ROUTE}}}') == n
    assert delta(before, after, 'roombox_helper_errors_total{op="exec"}') == 1
    # the first scrape counted itself once
    assert delta(before, after,
                 'roombox_http_requests_total{route="/metrics",method="GET",code="200"}') == 1


def test_every_family_of_the_spec_is_there(client, room):
    client.sh(room, "true")
    s = samples(scrape(client))
    names = {k.split("{")[0] for k in s}
    for family in ("roombox_http_requests_total", "roombox_exec_total",
                   "roombox_rooms", "roombox_room_starts_total", "roombox_idle_stops_total",
                   "roombox_processes_running", "roombox_llm_requests_total",
                   "roombox_build_info", "roombox_http_request_duration_seconds_bucket",
                   "roombox_exec_duration_seconds_bucket"):
        assert family in names, family
    health = client.get("/api/health").json
    assert s[f'roombox_build_info{{version="{health["version"]}"}}'] == 1
    rooms = client.get("/api/rooms").json["rooms"]
    running = sum(1 for r in rooms if r["state"] == "running")
    assert s['roombox_rooms{state="running"}'] == running >= 1
    assert s['roombox_rooms{state="stopped"}'] == len(rooms) - running


def test_labels_are_route_patterns_never_paths(client, room):
    marker = unique_room("path")
    client.get(f"/api/rooms/{room}")                               # 404: no such room
    client.get(f"/api/{marker}/nothing")                           # no such route
    client.request("PATCH", f"/api/rooms/{marker}/sandbox/exec")   # 405
    text = scrape(client)
    assert marker not in text and room not in text
    s = samples(text)
    assert s['roombox_http_requests_total{route="unmatched",method="other",code="404"}'] >= 1
    assert s['roombox_http_requests_total{route="/api/rooms/{id}/sandbox/exec",'
             'method="other",code="405"}'] >= 1
    assert s['roombox_http_requests_total{route="/api/rooms/{id}",method="GET",code="404"}'] >= 1


def test_promtool_accepts_the_exposition(client, room):
    client.exec(room, "exit 3")
    client.get("/api/nothing-here")
    text = scrape(client)
    r = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                       capture_output=True, timeout=60)
    assert r.returncode == 0 and not r.stdout.strip() and not r.stderr.strip(), \
        f"promtool: rc {r.returncode}\n{r.stdout.decode()}\n{r.stderr.decode()}"


def test_room_starts_new_counts_created_rooms(client):
    before = samples(scrape(client))
    r = client.post("/api/rooms")
    assert r.status == 201, r
    client.touch(r.json["roomId"])
    after = samples(scrape(client))
    assert delta(before, after, 'roombox_room_starts_total{kind="new"}') == 1
    assert delta(before, after, 'roombox_rooms{state="running"}') == 1


def test_idle_stops_are_counted(stack, own_stack, room):
    from conftest import Client
    idle = own_stack(stack.server, {"idle_timeout": "1s"})
    c = Client(idle)
    try:
        assert samples(scrape(c))["roombox_idle_stops_total"] == 0
        c.sh(room, "true")
        wait_until(lambda: c.get(f"/api/rooms/{room}").json["state"] == "stopped", 20,
                   f"room {room} to be stopped for being idle")
        # the count follows the stop in the same helper answer
        wait_until(lambda: samples(scrape(c))["roombox_idle_stops_total"] == 1, 10,
                   "roombox_idle_stops_total to be 1")
    finally:
        c.destroy(room)


# ---------------------------------------------------------------- who may read it

def test_metrics_token_by_default(client):
    for auth in (False, "Bearer wrong-token", f"Basic {client.token}"):
        r = client.get("/metrics", auth=auth)
        assert r.status == 401, r
        assert r.header("www-authenticate") == "Bearer"
        assert r.json == {"error": "unauthorized"}
    r = client.get("/metrics", auth=f"Bearer {client.stack.second_token}", check_json=False)
    assert r.status == 200


@pytest.fixture
def own_stack(request):
    """Stacks with other settings, started and stopped by the test."""
    made = []

    def make(server, config):
        s = Stack(server, config)
        made.append(s)
        s.start()
        return s
    yield make
    problems = []
    for s in made:
        problems += s.stop()
    assert not problems, problems


def test_metrics_open_and_none(stack, own_stack):
    from conftest import Client
    open_stack = own_stack(stack.server, {"metrics": "open"})
    c = Client(open_stack)
    r = c.get("/metrics", auth=False, check_json=False)
    assert r.status == 200 and b"roombox_exec_total" in r.body
    # the rest of the API still needs its token
    assert c.get("/api/rooms", auth=False).status == 401
    log = fcgi_log(open_stack).read_text(errors="replace")
    assert "metrics = open" in log and "warning" in log

    off = own_stack(stack.server, {"metrics": "none"})
    c = Client(off)
    for auth in (True, False):
        r = c.get("/metrics", auth=auth)
        assert r.status == 404 and r.json == {"error": "not found"}, r
    assert c.get("/api/rooms").status == 200


# ---------------------------------------------------------------- the request log

def test_one_log_line_per_request_with_its_id(client, room):
    r = client.exec_raw(room, {"cmd": "echo hi"})
    assert r.status == 200
    rid = r.header("x-request-id")
    assert rid and re.fullmatch(r"[0-9a-f]{16}", rid), rid
    line = log_line_with(client.stack, rid)
    m = re.search(r"request id=(\S+) method=(\S+) route=(\S+) room=(\S+) status=(\d+) "
                  r"duration_ms=([0-9.]+) helper_ms=([0-9.]+) path=(\S+)$", line)
    assert m, line
    assert m.group(1) == rid and m.group(2) == "POST"
    assert m.group(3) == "/api/rooms/{id}/sandbox/exec" and m.group(4) == room
    assert m.group(5) == "200" and m.group(8) == f"/api/rooms/{room}/sandbox/exec"
    duration, helper = float(m.group(6)), float(m.group(7))
    assert 0 < helper <= duration

    # errors get their line and their id too; no room where the route has none
    r = client.get("/api/rooms", auth="Bearer nope")
    rid2 = r.header("x-request-id")
    assert r.status == 401 and rid2 and rid2 != rid
    line = log_line_with(client.stack, rid2)
    assert " route=/api/rooms room=- status=401 " in line and " helper_ms=0.000 " in line


def test_json_log_lines(stack, own_stack, room):
    from conftest import Client
    js = own_stack(stack.server, {"log_format": "json"})
    c = Client(js)
    try:
        r = c.exec_raw(room, {"cmd": "exit 4"})
        assert r.status == 200 and r.json["result"]["exitCode"] == 4
        rid = r.header("x-request-id")
        line = log_line_with(js, rid)
        rec = json.loads(line)
        assert rec["id"] == rid and rec["msg"] == "request"
        assert rec["route"] == "/api/rooms/{id}/sandbox/exec" and rec["room"] == room
        assert rec["status"] == 200 and rec["method"] == "POST"
        assert 0 < rec["helper_ms"] <= rec["duration_ms"]
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", rec["time"])
        r = c.get("/api/health")
        rec = json.loads(log_line_with(js, r.header("x-request-id")))
        assert rec["room"] is None and rec["route"] == "/api/health"
        # every request line of the log is JSON
        text = fcgi_log(js).read_text(errors="replace")
        lines = [l for l in text.splitlines() if '"msg":"request"' in l or "request id=" in l]
        assert len(lines) >= 3
        for l in lines:
            json.loads(l)
    finally:
        c.destroy(room)
