"""The OpenAPI document (docs/openapi.json, served at GET /api/openapi.json)
against the running service, both ways:

  - every operation it lists is called with good input and with bad input,
    and each answer's status, content type, documented headers and body
    (validated with python3-jsonschema against the document's own schemas;
    each frame of an event stream against the schema its media type names
    in x-roombox-event) are what the document says;
  - no route answers that it does not list: the route table of
    fcgi-app/http/router.c is read and compared with it, and the running service
    is probed, method by path shape, without a token and with a room id that
    is not valid, so nothing is created or changed: 404 = no such path,
    405 + Allow = the path's methods, anything else = the route answers;
  - the document itself passes Redocly's linter (tools/openapi-lint/, the
    version pinned in its package-lock.json, installed with `npm ci` into
    build/openapi-lint/ as a CI would).

The only stand-in is the agent's model (StubModel below), as in
test_agent.py; everything else is the real stack.
"""

import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from jsonschema import Draft202012Validator, FormatChecker, RefResolver

from conftest import LIGHTTPD_ERROR_PAGES, NGINX_EXAMPLE, REPO, Response, offline, wait_until

class StubModel(ThreadingHTTPServer):
    """The one stand-in: an OpenAI-compatible /v1/chat/completions on
    loopback for the agent's answers, whole or as events.  A user message
    holding FAIL gets a 500, which roombox answers as its 502."""
    daemon_threads = True
    REPLY = "Sure.\n<run>echo from-the-agent</run>"

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            if "FAIL" in body["messages"][-1]["content"]:
                self.send_response(500)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")
                return
            if body.get("stream"):
                data = "".join(f"data: {json.dumps(e)}\n\n" for e in (
                    {"choices": [{"index": 0, "delta": {"content": StubModel.REPLY}}]},
                    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})) + "data: [DONE]\n\n"
                ctype = "text/event-stream"
            else:
                data = json.dumps({"choices": [{"index": 0, "finish_reason": "stop", "message": {
                    "role": "assistant", "content": StubModel.REPLY}}]})
                ctype = "application/json"
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data.encode())))
            self.end_headers()
            self.wfile.write(data.encode())


MODEL = StubModel(("127.0.0.1", 0), StubModel.Handler)
threading.Thread(target=MODEL.serve_forever, daemon=True).start()
ROOMBOX_CONFIG = {"llm_url": f"http://127.0.0.1:{MODEL.server_address[1]}/v1",
                  "llm_model": "stub-model", "llm_timeout": "30s", "llm_rounds": "1"}

DOC_PATH = REPO / "docs" / "openapi.json"
DOC = json.loads(DOC_PATH.read_text())
ROUTER_C = REPO / "fcgi-app" / "http" / "router.c"
LINT_DIR = REPO / "tools" / "openapi-lint"
LINT_INSTALL = REPO / "build" / "openapi-lint"   # git-ignored (build/)
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")
BAD_ROOM = "bad.room"   # fails the room-id rule: 400 once routed, nothing made


# ---------------------------------------------------------------- the document

def resolve(obj):
    """Follow a local $ref ("#/components/...") to what it names."""
    while isinstance(obj, dict) and "$ref" in obj:
        node = DOC
        for part in obj["$ref"].lstrip("#/").split("/"):
            node = node[part]
        obj = node
    return obj


def validate(schema, instance, what):
    """Validate instance against a schema of the document (its $refs
    resolved in the document); fail naming what was checked."""
    v = Draft202012Validator(schema, resolver=RefResolver.from_schema(DOC),
                             format_checker=FormatChecker())
    errors = sorted(v.iter_errors(instance), key=lambda e: list(e.path))
    assert not errors, f"{what}: {instance!r:.600}\n" + "\n".join(
        f"  at {list(e.path)}: {e.message:.300}" for e in errors)


def template_regex(template):
    """A document path template as a regex over request paths.  A last
    {path} is the rest of the path, slashes and all, and may be empty (the
    files route: `.../files` and `.../files/` are /workspace)."""
    out, pos = "", 0
    for m in re.finditer(r"/\{(\w+)\}", template):
        out += re.escape(template[pos:m.start()])
        last = m.end() == len(template)
        if last and m.group(1) == "path":
            out += "(?:/.*)?"
        else:   # empty as a last one: the same route, its own 400 or 404
            out += "/[^/]*" if last else "/[^/]+"
        pos = m.end()
    return re.compile(out + re.escape(template[pos:]) + "$")


TEMPLATES = [(t, template_regex(t)) for t in DOC["paths"]]


def doc_template(path):
    """The document's template for a request path (without its query), or
    None.  Templates without a wildcard rest win over those with one."""
    hits = [t for t, rx in TEMPLATES if rx.match(path)]
    hits.sort(key=lambda t: t.endswith("{path}"))
    return hits[0] if hits else None


def doc_methods(template):
    return {m.upper() for m in DOC["paths"][template] if m in METHODS}


def operations():
    for t, item in DOC["paths"].items():
        for m in METHODS:
            if m in item:
                yield m.upper(), t, item[m]


# ---------------------------------------------------------------- answers

def sse_frames(body):
    """The JSON of each `data:` frame of an event stream."""
    frames = []
    for block in body.decode("utf-8").split("\n\n"):
        data = [l[5:].lstrip() for l in block.split("\n") if l.startswith("data:")]
        if data:
            frames.append(json.loads("\n".join(data)))
    return frames


class Checker:
    """Checks answers against the document and keeps which (method,
    template, status) were seen."""

    def __init__(self, client):
        self.client = client
        self.seen = set()

    def call(self, method, path, status, body=None, *, raw=None, headers=None,
             auth=True, template=None):
        kw = {"headers": headers, "auth": auth, "check_json": False}
        if body is not None:
            kw["body"] = body
        elif raw is not None:
            kw["data"] = raw
        r = self.client.request(method, path, **kw)
        assert r.status == status, f"{method} {path}: expected {status}, got {r.status} {r.body[:300]!r}"
        self.check(method, path, r, template)
        return r

    def check(self, method, path, r, template=None):
        """r (a conftest Response) is an answer the document gives for
        method and path."""
        bare = path.split("?")[0]
        template = template or doc_template(bare)
        what = f"{method} {path} -> {r.status}"
        assert template, f"{what}: the document lists no path for {bare}"
        op = DOC["paths"][template].get(method.lower())
        if not op and r.status == 405:
            # a method the path does not serve: the document's methods
            # are the Allow header's, the body MethodNotAllowed's
            allow = {a.strip() for a in (r.header("allow") or "").split(",") if a.strip()}
            assert doc_methods(template) <= allow, \
                f"{what}: Allow {sorted(allow)}, documented {sorted(doc_methods(template))}"
            if method != "HEAD":
                answer = resolve({"$ref": "#/components/responses/MethodNotAllowed"})
                validate(answer["content"]["application/json"]["schema"], json.loads(r.body), what)
            self.seen.add((method, template, 405, False))
            return
        assert op, f"{what}: the document lists no {method} for {template}"
        answer = op["responses"].get(str(r.status)) or op["responses"].get("default")
        assert answer, f"{what}: the document gives {template} no {r.status} answer " \
                       f"(it lists {sorted(op['responses'])})"
        answer = resolve(answer)
        for name in answer.get("headers", {}):
            assert r.header(name), f"{what}: documented header {name} missing"
        self.seen.add((method, template, r.status, str(r.status) not in op["responses"]))
        if method == "HEAD":
            return
        content = answer.get("content", {})
        ctype = (r.header("content-type") or "").split(";")[0].strip()
        if "*/*" in content:
            return      # the room's own answer, whatever it is
        if not content:
            assert not r.body, f"{what}: a body where the document gives none: {r.body[:200]!r}"
            return      # 101: what follows is the WebSocket
        assert ctype in content, f"{what}: content type {ctype!r}, documented {sorted(content)}"
        media = content[ctype]
        if ctype == "application/json":
            try:
                doc = json.loads(r.body.decode("utf-8"))
            except ValueError as e:
                raise AssertionError(f"{what}: not JSON ({e}): {r.body[:300]!r}")
            validate(media["schema"], doc, what)
        elif ctype == "text/event-stream":
            event = media["x-roombox-event"]
            frames = sse_frames(r.body)
            assert frames, f"{what}: an event stream without events: {r.body[:300]!r}"
            for i, f in enumerate(frames):
                validate(event, f, f"{what}, event {i}")


@pytest.fixture
def check(client):
    return Checker(client)


# ---------------------------------------------------------------- the document itself

def test_document_is_served_as_it_is_kept(client, check):
    r = check.call("GET", "/api/openapi.json", 200, auth=False)
    assert r.header("content-type").split(";")[0] == "application/json", r.headers
    assert json.loads(r.body) == DOC, "the served document differs from docs/openapi.json (rebuild?)"
    assert DOC["openapi"].startswith("3.1."), DOC["openapi"]
    # with a token as without: public
    assert client.get("/api/openapi.json").body == r.body
    check.call("POST", "/api/openapi.json", 405, auth=False)


def npm_registry_reachable():
    """Control for the one skip: can npm reach its registry at all?"""
    try:
        r = subprocess.run(["npm", "ping", "--fetch-retries=0", "--fetch-timeout=30000"],
                           cwd=LINT_DIR, capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return False, "no answer in 60 s"
    return r.returncode == 0, (r.stdout + r.stderr).strip()


def test_document_passes_redocly_lint():
    assert shutil.which("npm"), "npm is not installed (node 20 and npm are a test dependency)"
    lint = LINT_INSTALL / "node_modules" / ".bin" / "redocly"
    LINT_INSTALL.mkdir(parents=True, exist_ok=True)
    lock = (LINT_DIR / "package-lock.json").read_bytes()
    if not lint.exists() or (LINT_INSTALL / "package-lock.json").read_bytes() != lock:
        for name in ("package.json", "package-lock.json"):
            shutil.copy(LINT_DIR / name, LINT_INSTALL / name)
        ci = subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--fetch-retries=1"], cwd=LINT_INSTALL,
                            capture_output=True, text=True, timeout=600)
        if ci.returncode != 0:
            ok, why = npm_registry_reachable()
            if not ok:
                why = " / ".join(why.splitlines()[:2])[:200]
                pytest.skip(offline(f"npm's registry (npm ping: {why}): @redocly/cli "
                                    "cannot be installed, docs/openapi.json was NOT linted"))
            raise AssertionError(f"npm ci failed with the registry reachable:\n{ci.stderr[-2000:]}")
    r = subprocess.run([str(lint), "lint", "--config", str(LINT_DIR / "redocly.yaml"),
                        "--format", "json", str(DOC_PATH)],
                       capture_output=True, text=True, timeout=300)
    report = json.loads(r.stdout[r.stdout.index("{"):])
    problems = [f"{p['severity']} {p['ruleId']}: {p['message']} at "
                f"{[l.get('pointer') for l in p.get('location', [])]}"
                for p in report.get("problems", [])]
    assert r.returncode == 0 and not problems, "redocly lint:\n" + "\n".join(problems) + r.stderr[-1000:]
    assert report["totals"]["errors"] == 0 and report["totals"]["warnings"] == 0, report["totals"]


# ---------------------------------------------------------------- the web servers' answers

def raw_answer(port, data):
    """Send data as is, read one answer: (status, headers, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
        try:
            s.sendall(data)
        except OSError:
            pass        # answered and closed before taking it all
        got = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (l.partition(":") for l in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def test_web_server_answers_are_documented(stack, client, check):
    """The errors nginx or lighttpd answer themselves, on the API's routes,
    are JSON as the document says: a body past the web server's own limit
    (413), roombox-fcgi not running (502, behind nginx, whose roombox-fcgi
    the test starts and stops)."""
    exec_path = "/api/rooms/oa-web/sandbox/exec"
    status, headers, body = raw_answer(stack.port, (
        f"POST {exec_path} HTTP/1.1\r\nHost: localhost\r\n"
        f"Authorization: Bearer {stack.token}\r\nContent-Length: 5000000\r\n"
        "Connection: close\r\n\r\n").encode())
    assert status == 413, (status, body)
    check.check("POST", exec_path, Answer(status, headers, body))
    if stack.server != "nginx":
        return
    got = []
    stack.restart_fcgi(while_down=lambda: got.append(
        client.request("GET", "/api/rooms", check_json=False)))
    assert got[0].status == 502, got[0]
    check.check("GET", "/api/rooms", got[0])


class Answer:
    """A raw answer in the shape Checker.check takes."""
    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    def header(self, name):
        return self.headers.get(name.lower())


def web_server_pages():
    """{status: [(where, JSON body)]}: nginx.conf.example's error
    locations and the lighttpd error pages the package ships."""
    pages = {}
    for m in re.finditer(r"location = /_roombox_errors/(\d+) \{\s*return \d+ '([^']*)\\n';",
                         NGINX_EXAMPLE.read_text()):
        pages.setdefault(int(m.group(1)), []).append(("nginx.conf.example", m.group(2)))
    for f in sorted(LIGHTTPD_ERROR_PAGES.glob("status-*.html")):
        pages.setdefault(int(f.stem.split("-")[1]), []).append((f.name, f.read_text()))
    assert {413, 502, 504} <= set(pages) and len(pages[502]) == 2, pages
    return pages


def test_web_server_error_pages_fit_the_document():
    """What the web servers answer for the statuses the document gives
    them (it names each such answer WebServer...) fits the document: checked
    on the pages themselves, for the ones no test can cause in reasonable
    time (504 after nginx's 11 minutes) or at a moment it chooses (lighttpd
    starts roombox-fcgi again by itself)."""
    pages = web_server_pages()
    documented = {}
    for _, template, op in operations():
        for code, answer in op["responses"].items():
            ref = answer.get("$ref", "")
            if ref.startswith("#/components/responses/WebServer"):
                documented[int(code)] = resolve(answer)
    assert {502, 504, 431} <= set(documented), sorted(documented)
    for code, answer in documented.items():
        assert code in pages, f"the document gives the web servers {code}, they have no page for it"
        for where, text in pages[code]:
            validate(answer["content"]["application/json"]["schema"], json.loads(text),
                     f"{where} ({code})")


# ---------------------------------------------------------------- both ways

def router_table():
    """{pattern: [methods]} from the route table in fcgi-app/http/router.c."""
    text = ROUTER_C.read_text()
    body = text[text.index("routes[] = {"):]
    body = body[:body.index("\n};")]
    table = {}
    for m in re.finditer(r'\{\s*"(/[^"]*)",\s*\{(.*?)\}\s*\},', body, re.S):
        table[m.group(1)] = re.findall(r'\{\s*"([A-Z]+)",', m.group(2))
    assert len(table) >= 15 and "/api/rooms/{id}/sandbox/exec" in table, \
        f"could not read the route table of {ROUTER_C}: {table}"
    return table


def router_pattern_regex(pattern):
    """A route-table pattern as a regex over document templates."""
    rx = re.escape(pattern).replace(re.escape("{id}"), re.escape("{roomId}"))
    return re.compile(rx.replace("/" + re.escape("{path*}"), "(?:/.*)?") + "$")


def test_document_and_route_table_list_the_same_routes():
    table = router_table()
    patterns = [(p, router_pattern_regex(p)) for p in table]
    from_doc = set()
    for method, template, _ in operations():
        if template.startswith("/preview/"):
            continue    # the preview socket's, not the route table's (probed below)
        # the first pattern that matches, as the router picks
        owner = next((p for p, rx in patterns if rx.match(template)), None)
        assert owner, f"{method} {template}: in the document, not in {ROUTER_C.name}'s route table"
        assert method in table[owner], \
            f"{method} {template}: in the document; {ROUTER_C.name} serves {table[owner]} on {owner}"
        from_doc.add((method, owner))
    from_table = {(m, p) for p, ms in table.items() for m in ms}
    assert from_table - from_doc == set(), \
        f"served ({ROUTER_C.name}) but not in the document: {sorted(from_table - from_doc)}"


# path shapes to probe: every route-table pattern with its {id} an invalid
# room id and its {path*} a few rests, and paths next to the routes
REST_SHAPES = ("", "/", "/x", "/x/", "/x/logs", "/x/stdin", "/x/y", "/x/y/z", "/8000")
NEAR_PATHS = ("/", "/api", "/api/", "/api/rooms/", "/api/health/x", "/api/openapi.json/x",
              "/api/openapi", "/metrics/x", f"/api/rooms/{BAD_ROOM}/x",
              f"/api/rooms/{BAD_ROOM}/sandbox", f"/api/rooms/{BAD_ROOM}/sandbox/",
              f"/api/rooms/{BAD_ROOM}/sandbox/other", f"/api/rooms/{BAD_ROOM}/messages/x",
              f"/api/rooms/{BAD_ROOM}/sandbox/exec/x", "/preview", "/previews/x")
PROBE_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS")


def probe_paths():
    paths = set(NEAR_PATHS)
    for template in DOC["paths"]:   # what the document lists, filled in
        if not template.startswith("/preview/"):
            paths.add(re.sub(r"\{\w+\}", "x", template.replace("{roomId}", BAD_ROOM)))
    for pattern in router_table():
        base = pattern.replace("{id}", BAD_ROOM)
        if base.endswith("/{path*}"):
            paths.update(base[:-len("/{path*}")] + rest for rest in REST_SHAPES)
        else:
            paths.add(base)
    return sorted(paths)


def test_no_route_answers_that_the_document_does_not_list(client, check):
    """Without a token and with an invalid room id, nothing reaches a
    handler: 404 is no such path, 405 gives the path's methods, anything
    else (401, or a public route's answer) is a route that answers.  A shape
    the document does not list that reaches a wide route of the table
    (`{path*}`) is asked again with a token and a room that does not exist:
    the handler must refuse it (404 or 400), never serve it."""
    other = f"oa-{os.urandom(6).hex()}"
    wide = [p[:-len("{path*}")].replace("{id}", BAD_ROOM)
            for p in router_table() if p.endswith("/{path*}")]
    problems = []
    for path in probe_paths():
        template = doc_template(path)
        for method in PROBE_METHODS:
            r = client.request(method, path, auth=False, check_json=False)
            listed = template is not None and method in doc_methods(template)
            if r.status == 404 and not listed:
                continue    # no such path, and the document agrees
            if r.status == 405:
                # Allow names the methods of the table's pattern; on a wide
                # one ({path*}) some of them are refused by the handler for
                # this shape, which this loop checks when it tries them
                allow = {a.strip() for a in (r.header("allow") or "").split(",") if a.strip()}
                if template and not doc_methods(template) <= allow:
                    problems.append(f"{path} ({template}): the service allows {sorted(allow)}, "
                                    f"the document lists {sorted(doc_methods(template))}")
                if listed:
                    problems.append(f"{method} {path}: documented, the service answers 405")
                continue
            if listed:
                public = DOC["paths"][template][method.lower()].get("security") == []
                if not public and r.status != 401:
                    problems.append(f"{method} {path}: documented, the service answers "
                                    f"{r.status} without a token (not 401: no such route?)")
                    continue
                try:
                    check.check(method, path, r, template)
                except AssertionError as e:
                    problems.append(str(e))
                continue
            if not any(path.startswith(w) for w in wide):
                problems.append(f"{method} {path}: answers {r.status} {r.body[:120]!r}, "
                                "not in the document")
                continue
            again = client.request(method, path.replace(BAD_ROOM, other), check_json=False)
            if again.status in (400, 404) and method == "HEAD":
                continue
            if again.status in (400, 404):
                try:
                    validate(resolve({"$ref": "#/components/schemas/Error"}),
                             json.loads(again.body), f"{method} {path} -> {again.status}")
                    continue
                except (AssertionError, ValueError) as e:
                    problems.append(f"{method} {path}: {e}")
                    continue
            problems.append(f"{method} {path}: answers {r.status}, with a token "
                            f"{again.status} {again.body[:120]!r}: not in the document")
    assert not problems, "\n".join(problems)


def test_every_listed_route_is_reached_and_documented_answers_are_checked(client, check):
    """The first way: every operation of the document is called with good
    input and with bad input (run_every_route), each answer checked against
    the document, and none is left out (a 2xx -- for a preview, the room's
    own answer -- and a 4xx of each)."""
    seen = run_every_route(client, check)
    missing = []
    for method, template, op in operations():
        codes = {(s, d) for m, t, s, d in seen if (m, t) == (method, template)}
        if not any(200 <= c < 300 or c == 101 or default for c, default in codes):
            missing.append(f"{method} {template}: no good answer checked")
        if not any(400 <= c < 500 and not default for c, default in codes):
            missing.append(f"{method} {template}: no bad answer checked")
    assert not missing, "\n".join(missing)


# ---------------------------------------------------------------- every route, good and bad

ROOM_SERVER = "python3 -m http.server 8000 --bind 127.0.0.1 --directory /workspace/site"


def first_events(client, path, count, trigger):
    """GET path as an event stream, trigger() once it answers 200, and its
    first count events: a conftest Response of what was read."""
    conn = http.client.HTTPConnection("127.0.0.1", client.port, timeout=60)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {client.token}"})
        r = conn.getresponse()
        headers = {k.lower(): v for k, v in r.getheaders()}
        assert r.status == 200, f"GET {path}: {r.status} {r.read()[:300]!r}"
        trigger()
        body = b""
        while len(sse_frames(body.rsplit(b"\n\n", 1)[0] + b"\n\n")) < count:
            data = r.read1(65536)
            assert data, f"GET {path}: the stream ended after {body!r}"
            body += data
        return Response(r.status, headers, body.rsplit(b"\n\n", 1)[0] + b"\n\n", 0)
    finally:
        conn.close()


def upgrade(client, path, key=True, headers=None):
    """A WebSocket handshake on path: a conftest Response of its answer
    (a 101's connection closed at once; another's JSON body read)."""
    import base64
    import socket
    s = socket.create_connection(("127.0.0.1", client.port), timeout=60)
    try:
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        if key:
            extra += ("Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                      f"Sec-WebSocket-Key: {base64.b64encode(os.urandom(16)).decode()}\r\n")
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{extra}\r\n".encode())
        buf = b""
        while b"\r\n\r\n" not in buf:
            data = s.recv(65536)
            assert data, f"GET {path}: closed before an answer: {buf!r}"
            buf += data
        head, body = buf.split(b"\r\n\r\n", 1)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        hdrs = {k.strip().lower(): v.strip() for k, v in (l.split(":", 1) for l in lines[1:])}
        if status != 101:
            n = int(hdrs.get("content-length", "0"))
            while len(body) < n:
                data = s.recv(65536)
                if not data:
                    break
                body += data
        return Response(status, hdrs, body if status != 101 else b"", 0)
    finally:
        s.close()


def run_every_route(client, check):
    """Call every operation of the document with good and bad input; every
    answer is checked by check.  Returns what was seen."""
    c = check
    room = f"oa-{os.urandom(6).hex()}"
    other = f"oa-{os.urandom(6).hex()}"     # never made
    R = f"/api/rooms/{room}"
    O = f"/api/rooms/{other}"

    # the service
    # (no input but its headers: too large ones are the web server's 431)
    big = {"X-Big": "a" * 70000}
    c.call("GET", "/api/health", 200, auth=False)
    c.call("GET", "/api/health", 431, auth=False, headers=big)
    c.call("PUT", "/api/health", 405)
    c.call("GET", "/api/openapi.json", 200, auth=False)
    c.call("GET", "/api/openapi.json", 431, auth=False, headers=big)
    c.call("DELETE", "/api/openapi.json", 405)
    c.call("GET", "/metrics", 200)
    c.call("GET", "/metrics", 401, auth=False)

    # rooms
    c.call("GET", R, 404)
    c.call("GET", f"/api/rooms/{BAD_ROOM}", 400)
    c.call("GET", "/api/rooms", 200)
    c.call("GET", "/api/rooms", 401, auth="Bearer wrong")
    r = client.post("/api/rooms")
    assert r.status == 201, r
    c.check("POST", "/api/rooms", r)
    client.touch(r.json["roomId"])
    c.call("POST", "/api/rooms", 401, auth=False)

    # exec, JSON and event stream
    c.call("POST", f"{R}/sandbox/exec", 200, {"cmd": "echo hi; echo err >&2"})
    c.call("POST", f"{R}/sandbox/exec", 200, {"cmd": "printf 'a\\nb\\n'"},
           headers={"Accept": "text/event-stream"})
    c.call("POST", f"{R}/sandbox/exec", 200, {"cmd": "exit 3", "encoding": "base64"},
           headers={"Accept": "text/event-stream"})
    c.call("POST", f"{R}/sandbox/exec", 400, {"cmd": ""})
    c.call("POST", f"{R}/sandbox/exec", 400, {"cmd": "x", "timeout": -1, "user": "admin"})
    c.call("POST", f"{R}/sandbox/exec", 400, raw=b"{not json",
           headers={"Content-Type": "application/json"})
    c.call("POST", f"{R}/sandbox/exec", 400, {"cmd": ""}, headers={"Accept": "text/event-stream"})
    c.call("POST", f"{R}/sandbox/exec", 413, {"cmd": "x" * 70000})   # max_body 64K
    c.call("POST", f"/api/rooms/{BAD_ROOM}/sandbox/exec", 400, {"cmd": "true"})
    c.call("GET", f"{R}/sandbox/exec", 405)
    c.call("GET", R, 200)
    c.call("PATCH", R, 200, {"labels": {"team": "blue"}, "limits": {"pids": 100}})
    c.call("PATCH", R, 400, {"labels": {"bad key": "x"}})
    c.call("PATCH", O, 404, {"labels": {"team": "blue"}})
    c.call("GET", "/api/rooms?label=team=blue", 200)
    c.call("GET", "/api/rooms?label=team", 400)

    # messages: a user message the (stub) model answers, whole and as
    # events, or fails; an assistant's run tags
    c.call("GET", f"{R}/messages", 200)
    r = c.call("POST", f"{R}/messages", 201, {"role": "user", "content": "list the files"})
    assert "from-the-agent" in json.loads(r.body)["reply"]["content"], r
    r = c.call("POST", f"{R}/messages", 200, {"role": "user", "content": "and again"},
               headers={"Accept": "text/event-stream"})
    assert [f["type"] for f in sse_frames(r.body)][-1] == "complete", r
    c.call("POST", f"{R}/messages", 502, {"role": "user", "content": "FAIL now"})
    r = c.call("POST", f"{R}/messages", 201,
               {"role": "assistant", "content": "Here: <run>echo tagged</run>"})
    assert "Output (echo tagged):\ntagged" in json.loads(r.body)["message"]["content"], r
    c.call("POST", f"{R}/messages", 400, {"role": "bot", "content": ""})
    c.call("GET", f"/api/rooms/{BAD_ROOM}/messages", 400)

    # files
    F = f"{R}/sandbox/files"
    c.call("PUT", f"{F}/site/index.html", 201, raw=b"<p>hello</p>\n")
    c.call("PUT", f"{F}/site/index.html", 200, raw=b"<p>hello again</p>\n")
    c.call("PUT", f"{F}/bin/run.sh?mode=0755", 201, raw=b"#!/bin/sh\necho run\n")
    c.call("PUT", f"{F}/empty/dir/", 201, raw=b"")
    c.call("PUT", f"{F}/bad%00name", 400, raw=b"x")
    r = c.call("GET", f"{F}/site/index.html", 200)
    assert r.body == b"<p>hello again</p>\n" and \
        r.header("content-type") == "application/octet-stream", r
    c.call("GET", f"{F}/", 200)
    c.call("GET", f"{F}", 200)
    c.call("GET", f"{F}/?recursive=1", 200)
    c.call("GET", f"{F}/no/such/file", 404)
    c.call("GET", f"{O}/sandbox/files/x", 404)
    c.call("POST", f"{F}/bin/run.sh", 200, {"to": "bin/go.sh"})
    c.call("POST", f"{F}/bin/run.sh", 404, {"to": "bin/again.sh"})
    c.call("POST", f"{F}/bin/go.sh", 400, {"to": 5})
    c.call("DELETE", f"{F}/empty", 409)
    c.call("DELETE", f"{F}/empty?recursive=1", 200)
    c.call("DELETE", f"{F}/bin/go.sh", 200)
    c.call("DELETE", f"{F}/", 400)
    c.call("PATCH", f"{F}/x", 405)

    # processes, and a server for the preview port
    P = f"{R}/sandbox/processes"
    c.call("GET", f"{O}/sandbox/processes", 404)
    c.call("POST", P, 201, {"cmd": ROOM_SERVER, "name": "web"})
    c.call("POST", P, 201, {"cmd": "cat", "name": "reader"})
    c.call("POST", P, 201, {"cmd": "echo out; echo err >&2", "name": "once"})
    c.call("POST", P, 409, {"cmd": "cat", "name": "reader"})
    c.call("POST", P, 400, {"cmd": "x", "name": "no spaces"})
    c.call("GET", P, 200)
    c.call("GET", f"{P}/reader", 200)
    c.call("GET", f"{P}/nosuch", 404)
    wait_until(lambda: json.loads(client.get(f"{P}/once").body)["process"]["status"] == "exited",
               20, "process `once` to end")
    c.call("GET", f"{P}/once/logs", 200)
    c.call("GET", f"{P}/once/logs?encoding=base64", 200)
    c.call("GET", f"{P}/once/logs", 200, headers={"Accept": "text/event-stream"})
    c.call("GET", f"{P}/nosuch/logs", 404)
    r = c.call("POST", f"{P}/reader/stdin", 200, raw=b"hello\n")
    c.call("POST", f"{P}/reader/stdin?close=1", 200, raw=b"")
    c.call("POST", f"{P}/reader/stdin", 409, raw=b"more\n")
    c.call("POST", f"{P}/nosuch/stdin", 404, raw=b"x")
    c.call("DELETE", f"{P}/once?signal=BOGUS", 400)
    c.call("DELETE", f"{P}/nosuch", 404)

    # preview ports
    PT = f"{R}/sandbox/ports"
    c.call("GET", f"{O}/sandbox/ports", 404)
    e = json.loads(c.call("POST", PT, 201, {"port": 8000}).body)
    c.call("POST", PT, 200, {"port": 8000})
    c.call("POST", PT, 201, {"port": 8001})
    c.call("POST", PT, 400, {"port": 70000})
    c.call("GET", PT, 200)
    prefix = f"/preview/{e['token']}"

    def served():
        r = client.request("GET", prefix + "/index.html", auth=False, check_json=False)
        return r if r.status != 502 else None
    r = wait_until(served, 20, "the room's http.server through its preview URL", interval=0.1)
    assert r.status == 200 and b"hello again" in r.body, r
    c.check("GET", prefix + "/index.html", r)
    # every method reaches the room's server (http.server: 501 but for
    # GET and HEAD) with the URL's token, and none without a known one
    for method in ("HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"):
        r = client.request(method, prefix + "/", auth=False, check_json=False,
                           data=b"x" if method in ("POST", "PUT", "PATCH") else None)
        assert r.status in (200, 501), f"{method} {prefix}/: {r.status} {r.body[:200]!r}"
        c.check(method, prefix + "/", r)
    for method in PROBE_METHODS:
        c.call(method, "/preview/" + "0" * 16 + "/x", 404, auth=False)
    token8001 = json.loads(client.get(PT).body)["ports"]
    t8001 = next(p["token"] for p in token8001 if p["port"] == 8001)
    c.call("GET", f"/preview/{t8001}/", 502, auth=False)
    c.call("DELETE", f"{PT}/8001", 200)
    c.call("DELETE", f"{PT}/8001", 404)
    c.call("DELETE", f"{PT}/http", 400)
    c.call("GET", f"/preview/{t8001}/", 404, auth=False)

    # file watch: a stream that lasts, so its first events are read and it
    # is closed (first_events); the refusals are whole answers
    W = f"{R}/sandbox/watch"
    c.call("GET", f"{O}/sandbox/watch", 404)
    c.call("GET", f"{W}?path=/workspace/nosuch", 404)
    c.call("GET", f"{W}?path=/work%00space", 400)
    c.call("GET", f"{W}?path=/workspace/site/index.html", 400)
    r = first_events(client, f"{W}?path=/workspace&recursive=1", 2,
                     lambda: client.sh(room, "echo w > /workspace/watched"))
    c.check("GET", f"{W}?path=/workspace&recursive=1", r)

    # terminals, and their WebSocket (an upgrade: read with a socket)
    TM = f"{R}/sandbox/terminals"
    c.call("GET", f"{O}/sandbox/terminals", 404)
    c.call("POST", TM, 400, {"cols": 0})
    tid = json.loads(c.call("POST", TM, 201, {"cols": 100, "rows": 30}).body)["terminal"]["id"]
    c.call("GET", TM, 200)
    c.call("GET", f"{TM}/{tid}", 200)
    c.call("GET", f"{TM}/nope", 400)
    c.call("GET", f"{TM}/t00000000000", 404)
    ticket = json.loads(c.call("POST", f"{TM}/{tid}/ticket", 201).body)["ticket"]
    c.call("POST", f"{TM}/t00000000000/ticket", 404)
    c.check("GET", f"{TM}/{tid}/ws", upgrade(client, f"{TM}/{tid}/ws?ticket={ticket}"))
    c.check("GET", f"{TM}/{tid}/ws", upgrade(client, f"{TM}/{tid}/ws?ticket={ticket}"))   # used: 401
    c.check("GET", f"{TM}/{tid}/ws", upgrade(client, f"{TM}/{tid}/ws", key=False,
                                             headers={"Authorization": f"Bearer {client.token}"}))
    c.call("DELETE", f"{TM}/{tid}", 200)
    c.call("DELETE", f"{TM}/nope", 400)

    # signals, kill-all, stop, restart
    c.call("DELETE", f"{P}/web?signal=KILL", 200)
    c.call("DELETE", P, 200)
    c.call("DELETE", f"{O}/sandbox/processes", 404)
    c.call("POST", f"{R}/sandbox/restart", 200)
    c.call("POST", f"{O}/sandbox/restart", 404)
    c.call("POST", f"{R}/sandbox/stop", 200)
    c.call("POST", f"{O}/sandbox/stop", 404)
    c.call("GET", f"{R}/sandbox/stop", 405)

    # snapshots, restore, fork
    S = f"{R}/snapshots"
    c.call("POST", S, 201, {"name": "first"})
    c.call("POST", S, 409, {"name": "first"})
    c.call("POST", S, 400, {"name": "no spaces"})
    c.call("POST", f"{O}/snapshots", 404, {})
    c.call("GET", S, 200)
    c.call("GET", f"{O}/snapshots", 404)
    c.call("POST", f"{R}/restore", 200, {"snapshot": "first"})
    c.call("POST", f"{R}/restore", 404, {"snapshot": "nosuch"})
    c.call("POST", f"{R}/restore", 400, {})
    forked = f"oa-{os.urandom(6).hex()}"
    client.touch(forked)
    c.call("POST", f"{R}/fork", 201, {"to": forked, "snapshot": "first"})
    c.call("POST", f"{R}/fork", 409, {"to": forked})
    c.call("POST", f"{R}/fork", 400, {"to": "no spaces"})
    c.call("POST", f"{O}/fork", 404, {"to": f"oa-{os.urandom(6).hex()}"})
    c.call("DELETE", f"{S}/first", 200)
    c.call("DELETE", f"{S}/first", 404)
    c.call("DELETE", f"{S}/a.b", 400)

    # export and import
    archive = c.call("GET", f"{R}/export", 200).body
    c.call("GET", f"{O}/export", 404)
    c.call("GET", f"/api/rooms/{BAD_ROOM}/export", 400)
    c.call("POST", f"{R}/export", 405)
    N = f"/api/rooms/oa-{os.urandom(6).hex()}"
    c.call("PUT", f"{N}/import", 201, raw=archive,
           headers={"Content-Type": "application/x-roombox-room"})
    c.call("PUT", f"{N}/import", 409, raw=archive,
           headers={"Content-Type": "application/x-roombox-room"})
    c.call("PUT", f"{O}/import", 400, raw=archive[:100],
           headers={"Content-Type": "application/x-roombox-room"})
    c.call("GET", f"{N}/import", 405)
    c.call("DELETE", N, 200)

    # clean up, both ways of asking
    c.call("POST", f"{R}/cleanup", 200)
    c.call("POST", f"/api/rooms/{BAD_ROOM}/cleanup", 400)
    c.call("DELETE", R, 200)
    c.call("DELETE", f"/api/rooms/{BAD_ROOM}", 400)
    return c.seen
