"""The agent: a user message answered by a configured model whose
<run> tags run in the room, end to end through nginx and lighttpd: real
roombox-fcgi, helper, jails and libcurl.

The model is the only stand-in: a small OpenAI-compatible server on
loopback, written here (StubModel), that answers /v1/chat/completions as
each test scripts it, whole or as server-sent events, and records what it
was sent.  Every wait is a bounded poll or a bounded read: the stub holds a
later chunk until the test has seen an earlier event, never a sleep.
"""

import atexit
import contextlib
import http.client
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import FCGI, wait_until

SEED_USER = "Create a hello.txt file with 'Hello World'"
SEED_AI = "I'll create the file for you.\n<run>echo 'Hello World' > hello.txt</run>"
# What executeCommands makes of SEED_AI: three newlines before "Output (",
# where the original service's printed "Final Response" shows two.
SEED_FINAL = ("I'll create the file for you.\n"
              "\n\nOutput (echo 'Hello World' > hello.txt):\n[no output]")

HANG_CALLS = 40
WORKERS = 4             # fewer than HANG_CALLS: model calls must not hold workers
EXEC_BOUND = 10.0       # seconds an exec may take while the model calls hang
STUB_HOLD = 60.0        # seconds at most the stub holds an answer for a test


# ---------------------------------------------------------------- the model

class StubModel:
    """An OpenAI-compatible /v1/chat/completions on 127.0.0.1.

    `script(call)` decides each answer; `call` has .body (the JSON request),
    .headers, and helpers to answer whole (json), as events (events), or
    with an error status (status).  Calls are recorded in self.calls."""

    def __init__(self):
        stub = self
        self.calls = []
        self.lock = threading.Lock()
        self.in_flight = 0
        self.script = None

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                call = Call(self, json.loads(self.rfile.read(n)))
                with stub.lock:
                    stub.calls.append(call)
                    stub.in_flight += 1
                try:
                    if self.path != "/v1/chat/completions":
                        call.status(404, {"error": {"message": f"no route {self.path}"}})
                    else:
                        stub.script(call)
                except (BrokenPipeError, ConnectionResetError):
                    pass                    # roombox gave up on us: fine
                finally:
                    with stub.lock:
                        stub.in_flight -= 1

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 1024       # 257 calls may connect at once (a SYN past the backlog waits seconds to be sent again)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def reset(self, script):
        with self.lock:
            self.calls = []
        self.script = script

    def call_count(self):
        with self.lock:
            return len(self.calls)


class Call:
    def __init__(self, handler, body):
        self.h = handler
        self.body = body
        self.headers = {k.lower(): v for k, v in handler.headers.items()}

    @property
    def messages(self):
        return self.body["messages"]

    def _send(self, status, ctype, data=b""):
        self.h.send_response(status)
        self.h.send_header("Content-Type", ctype)
        if data:
            self.h.send_header("Content-Length", str(len(data)))
        self.h.end_headers()
        if data:
            self.h.wfile.write(data)

    def status(self, code, body):
        self._send(code, "application/json", json.dumps(body).encode())

    def raw(self, ctype, data):
        self._send(200, ctype, data)

    def json(self, content):
        self.status(200, {"id": "c1", "object": "chat.completion", "model": self.body["model"],
                          "choices": [{"index": 0, "finish_reason": "stop",
                                       "message": {"role": "assistant", "content": content}}]})

    def start_events(self):
        self._send(200, "text/event-stream")

    def event(self, obj):
        data = obj if isinstance(obj, str) else json.dumps(obj)
        self.h.wfile.write(f"data: {data}\n\n".encode())
        self.h.wfile.flush()

    def chunk(self, content):
        self.event({"choices": [{"index": 0, "delta": {"content": content}}]})

    def events(self, contents):
        self.start_events()
        self.event({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        for c in contents:
            self.chunk(c)
        self.event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        self.event("[DONE]")

    def reply(self, content):
        """Answer in the form asked for: events when stream is true."""
        if self.body.get("stream"):
            self.events([content])
        else:
            self.json(content)


STUB = StubModel()
KEY_DIR = tempfile.mkdtemp(prefix="rbx-llm-")
# every process that imports this file makes one (each xdist worker
# collects it; only one runs its tests), so each removes its own at exit
atexit.register(shutil.rmtree, KEY_DIR, True)
KEY = "sk-test-" + secrets.token_hex(20)
KEY_FILE = os.path.join(KEY_DIR, "llm-key")
with open(KEY_FILE, "w") as f:
    f.write(KEY + "\n")
os.chmod(KEY_FILE, 0o640)

ROOMBOX_CONFIG = {
    "workers": str(WORKERS),
    "llm_url": STUB.url,
    "llm_model": "stub-model",
    "llm_key_file": KEY_FILE,
    "llm_timeout": "30s",
    "llm_rounds": "1",
    "llm_history": "3",
}


@pytest.fixture
def stub():
    gate = threading.Event()
    STUB.reset(None)
    STUB.gate = gate
    yield STUB
    gate.set()                  # whatever a test holds is let go


@contextlib.contextmanager
def reconfigured(stack, **keys):
    """Run roombox-fcgi with some keys changed, then as before."""
    original = stack.conf_path.read_text()
    text = original
    for k, v in keys.items():
        text, n = re.subn(rf"^{k} = .*$", f"{k} = {v}", text, flags=re.M)
        if n == 0:
            text += f"{k} = {v}\n"
    stack.conf_path.write_text(text)
    stack.restart_fcgi()
    try:
        yield
    finally:
        stack.conf_path.write_text(original)
        stack.restart_fcgi()


# ---------------------------------------------------------------- helpers

def post_user(client, room, content, **kw):
    return client.post(f"/api/rooms/{room}/messages", {"role": "user", "content": content}, **kw)


def listed(client, room):
    r = client.get(f"/api/rooms/{room}/messages")
    assert r.status == 200, r
    return r.json["messages"]


class EventStream:
    """A POST answered with text/event-stream, read event by event with a
    bounded wait for each."""

    def __init__(self, client, room, content, timeout=30):
        client.touch(room)
        self.conn = http.client.HTTPConnection("127.0.0.1", client.port, timeout=timeout)
        self.conn.request("POST", f"/api/rooms/{room}/messages",
                          body=json.dumps({"role": "user", "content": content}).encode(),
                          headers={"Authorization": f"Bearer {client.token}",
                                   "Content-Type": "application/json",
                                   "Accept": "text/event-stream"})
        self.r = self.conn.getresponse()
        self.buf = b""

    def next(self):
        """The next event's JSON, or None at the end of the stream."""
        while b"\n\n" not in self.buf:
            data = self.r.read1(65536)      # raises socket.timeout: bounded
            if not data:
                assert not self.buf.strip(), f"stream ended mid-event: {self.buf!r}"
                return None
            self.buf += data
        frame, self.buf = self.buf.split(b"\n\n", 1)
        lines = [l for l in frame.decode().split("\n") if not l.startswith(":")]
        if not lines:
            return self.next()
        assert all(l.startswith("data: ") for l in lines), frame
        return json.loads("\n".join(l[6:] for l in lines))

    def rest(self):
        out = []
        while (ev := self.next()) is not None:
            out.append(ev)
        return out

    def close(self):
        self.conn.close()


def log_texts(stack):
    texts = {}
    for p in list(stack.logs) + sorted(stack.dir.glob("*.log")) + sorted(stack.dir.glob("*.out")):
        try:
            texts[str(p)] = p.read_text(errors="replace")
        except OSError:
            pass
    return texts


# ---------------------------------------------------------------- the original service's example

def test_the_seeds_hello_txt_example(client, stub, room):
    stub.reset(lambda call: call.reply(SEED_AI))
    r = post_user(client, room, SEED_USER)
    assert r.status == 201, r
    assert set(r.json) == {"message", "reply"}, r.json
    message, reply = r.json["message"], r.json["reply"]
    assert message["role"] == "user" and message["content"] == SEED_USER
    assert reply["role"] == "assistant"
    assert reply["content"] == SEED_FINAL
    assert set(reply) == {"id", "role", "content", "createdAt"}
    assert listed(client, room) == [message, reply]
    assert client.sh(room, "cat /workspace/hello.txt") == "Hello World\n"

    # what the model was sent: one call, the system prompt and the message
    assert stub.call_count() == 1
    call = stub.calls[0]
    assert call.body["model"] == "stub-model"
    assert call.body["stream"] is False
    assert call.headers["authorization"] == f"Bearer {KEY}"
    assert call.headers["content-type"] == "application/json"
    assert [m["role"] for m in call.messages] == ["system", "user"]
    assert "<run>" in call.messages[0]["content"] and "</run>" in call.messages[0]["content"]
    assert call.messages[1]["content"] == SEED_USER


def test_the_last_llm_history_messages_go_with_the_new_one(client, stub, room):
    replies = iter(["a1", "b1", "c1"])
    stub.reset(lambda call: call.reply(next(replies)))
    for content in ("A", "B", "C"):
        assert post_user(client, room, content).status == 201
    sent = [(m["role"], m["content"]) for m in stub.calls[2].messages]
    # llm_history = 3: the three messages before "C", then "C"
    assert sent[1:] == [("assistant", "a1"), ("user", "B"), ("assistant", "b1"), ("user", "C")]
    assert sent[0][0] == "system"
    assert [m["content"] for m in listed(client, room)] == ["A", "a1", "B", "b1", "C", "c1"]


def test_an_assistant_message_still_runs_its_tags_without_the_model(client, stub, room):
    stub.reset(lambda call: pytest.fail("the model was asked"))
    r = client.post(f"/api/rooms/{room}/messages",
                    {"role": "assistant", "content": "<run>echo direct</run>"})
    assert r.status == 201, r
    assert r.json["message"]["content"] == "Output (echo direct):\ndirect"
    assert stub.call_count() == 0


# ---------------------------------------------------------------- streaming

def test_streamed_reply_events_arrive_while_the_model_is_still_sending(client, stub, room):
    seen_first = threading.Event()

    def script(call):
        assert call.body["stream"] is True
        call.start_events()
        call.event({"choices": [{"index": 0, "delta": {"role": "assistant"}}]})
        call.chunk("Hello ")
        # the rest only once the test has seen the first token event
        assert seen_first.wait(STUB_HOLD), "the test never saw the first token"
        call.chunk("<run>echo hi</run>")
        call.event({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        call.event("[DONE]")

    stub.reset(script)
    s = EventStream(client, room, "say hi")
    try:
        assert s.r.status == 200
        assert s.r.getheader("Content-Type").startswith("text/event-stream")
        first = s.next()
        assert first == {"type": "token", "data": "Hello "}
        # the stub is still holding the rest of its answer
        assert stub.in_flight == 1
        seen_first.set()
        rest = s.rest()
    finally:
        seen_first.set()
        s.close()
    assert rest[0] == {"type": "token", "data": "<run>echo hi</run>"}
    assert rest[1] == {"type": "run", "cmd": "echo hi"}
    assert rest[2] == {"type": "output", "cmd": "echo hi", "summary": "hi\n"}
    complete = rest[3]
    assert len(rest) == 4, rest
    assert complete["type"] == "complete"
    assert complete["message"]["content"] == "say hi"
    assert complete["reply"]["content"] == "Hello \n\nOutput (echo hi):\nhi"
    assert listed(client, room) == [complete["message"], complete["reply"]]


def test_streamed_model_failure_before_any_token_is_a_502(client, stub, room):
    def script(call):
        call.start_events()
        call.event("this is not json")
    stub.reset(script)
    s = EventStream(client, room, "hi")
    try:
        assert s.r.status == 502
        body = json.loads(s.r.read())
    finally:
        s.close()
    assert body["error"].startswith("model request failed: answer is not JSON"), body
    assert [m["content"] for m in listed(client, room)] == ["hi"]


def test_streamed_model_failure_after_tokens_is_the_last_event(client, stub, room):
    def script(call):
        call.start_events()
        call.chunk("partial ")
        call.event({"choices": [{"delta": {"content": 5}}]})
    stub.reset(script)
    s = EventStream(client, room, "hi")
    try:
        assert s.r.status == 200
        events = s.rest()
    finally:
        s.close()
    assert events == [{"type": "token", "data": "partial "},
                      {"type": "error", "error": "model request failed: answer is malformed: "
                                                 "choices[0].delta.content is not a string"}]
    assert [m["content"] for m in listed(client, room)] == ["hi"]


# ---------------------------------------------------------------- failure modes

def expect_model_failure(client, room, content, starts):
    r = post_user(client, room, content)
    assert r.status == 502, r
    assert set(r.json) == {"error"}, r.json
    assert r.json["error"].startswith("model request failed: " + starts), r.json
    # the user message is kept, and nothing else was stored
    msgs = listed(client, room)
    assert [(m["role"], m["content"]) for m in msgs] == [("user", content)]
    return r.json["error"]


@pytest.mark.parametrize("mode,starts", [
    ("http-500", "HTTP 500: the model is overloaded"),
    ("http-404-html", "HTTP 404: <html>"),
    ("not-json", "answer is not JSON"),
    ("no-choices", "answer is malformed: no \"choices\" array"),
    ("content-not-string", "answer is malformed: choices[0].message.content is not a string"),
    ("stream-cut-short", "the stream ended before [DONE]"),
    ("closed-without-answer", ""),
])
def test_model_failure_is_502_and_the_user_message_is_kept(client, stub, room, mode, starts):
    def script(call):
        if mode == "http-500":
            call.status(500, {"error": {"message": "the model is overloaded"}})
        elif mode == "http-404-html":
            call.h.send_response(404)
            call.h.send_header("Content-Type", "text/html")
            call.h.end_headers()
            call.h.wfile.write(b"<html>not here</html>")
        elif mode == "not-json":
            call.raw("application/json", b"<html>oops</html>")
        elif mode == "no-choices":
            call.raw("application/json", b'{"id":"x"}')
        elif mode == "content-not-string":
            call.raw("application/json", b'{"choices":[{"message":{"content":[1,2]}}]}')
        elif mode == "stream-cut-short":
            call.start_events()
            call.event({"choices": [{"delta": {"role": "assistant"}}]})
        elif mode == "closed-without-answer":
            call.h.close_connection = True
            call.h.connection.shutdown(socket.SHUT_RDWR)
    stub.reset(script)
    expect_model_failure(client, room, f"mode {mode}", starts)


def test_model_unreachable_is_502(client, stack, stub, room):
    with socket.socket() as s:             # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    with reconfigured(stack, llm_url=f"http://127.0.0.1:{dead}/v1"):
        err = expect_model_failure(client, room, "anyone there?", "")
    assert "connect" in err.lower(), err
    assert stub.call_count() == 0


def test_model_slower_than_llm_timeout_is_502(client, stack, stub, room):
    def script(call):
        stub.gate.wait(STUB_HOLD)          # let go by the fixture at the end
        call.reply("too late")
    stub.reset(script)
    with reconfigured(stack, llm_timeout="2s"):
        expect_model_failure(client, room, "take your time",
                             "no complete answer within llm_timeout (2000 ms)")


# ---------------------------------------------------------------- rounds

def test_two_rounds_the_model_sees_the_outputs_of_the_first(client, stack, stub, room):
    def script(call):
        if len(call.messages) == 2:
            call.reply("Let me look.\n<run>echo round-one</run>")
        else:
            call.reply("It printed round-one. Done.")
    stub.reset(script)
    with reconfigured(stack, llm_rounds="2"):
        r = post_user(client, room, "what does echo say?")
    assert r.status == 201, r
    assert stub.call_count() == 2
    second = [(m["role"], m["content"]) for m in stub.calls[1].messages]
    assert second[1:] == [("user", "what does echo say?"),
                          ("assistant", "Let me look.\n<run>echo round-one</run>"),
                          ("user", "Output (echo round-one):\nround-one\n")]
    assert r.json["reply"]["content"] == ("Let me look.\n\n\nOutput (echo round-one):\nround-one"
                                          "\n\nIt printed round-one. Done.")
    assert listed(client, room) == [r.json["message"], r.json["reply"]]


def test_rounds_stop_when_a_reply_runs_nothing(client, stack, stub, room):
    stub.reset(lambda call: call.reply("Nothing to run."))
    with reconfigured(stack, llm_rounds="3"):
        r = post_user(client, room, "hello")
    assert r.status == 201, r
    assert r.json["reply"]["content"] == "Nothing to run."
    assert stub.call_count() == 1


RUNTAGS_MAX = 32   # fcgi-app/messages/runtags.h


def test_a_reply_runs_at_most_32_commands_and_says_so_for_the_rest(client, stub, room):
    """A model's reply is what it is (its commands are not refused as a
    client's are): its first 32 commands run, and each one past them gets
    an "Error (...)" section saying it was not run."""
    reply = "".join(f"<run>touch /workspace/m{i}</run>" for i in range(RUNTAGS_MAX + 3))
    stub.reset(lambda call: call.reply(reply))
    r = post_user(client, room, "make files")
    assert r.status == 201, r
    content = r.json["reply"]["content"]
    assert content.count("Output (touch /workspace/m") == RUNTAGS_MAX, content
    for i in range(RUNTAGS_MAX, RUNTAGS_MAX + 3):
        assert (f"Error (touch /workspace/m{i}):\nnot run: at most {RUNTAGS_MAX} commands "
                f"in one message") in content, content
    assert client.sh(room, "ls /workspace | grep -c '^m'") == f"{RUNTAGS_MAX}\n"


# ---------------------------------------------------------------- a room cleaned up under a model call

@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_to_a_room_cleaned_up_meanwhile_runs_nothing_and_is_not_kept(client, stub, room, stream):
    """DELETE of the room while the model answers: its reply's commands
    would make the room again and its message would be kept in a room that
    was cleaned up.  The reply is given up: 409 (or the stream's error
    event), no command run, no room, no message."""
    asked = threading.Event()

    def script(call):
        asked.set()
        stub.gate.wait(STUB_HOLD)
        call.reply("on it <run>touch /workspace/made-again</run>")
    stub.reset(script)
    client.sh(room, "true")
    result = {}

    def post():
        if stream:
            es = EventStream(client, room, "make a file", timeout=STUB_HOLD + 30)
            try:
                result["status"], result["events"] = es.r.status, es.rest()
            finally:
                es.close()
        else:
            r = post_user(client, room, "make a file", timeout=STUB_HOLD + 30)
            result["status"], result["json"] = r.status, r.json
    t = threading.Thread(target=post)
    t.start()
    try:
        assert asked.wait(30), "the model was never asked"
        r = client.delete(f"/api/rooms/{room}")
        assert r.status == 200, r
    finally:
        stub.gate.set()
        t.join(STUB_HOLD + 60)
    why = f"room {room} was cleaned up while the model answered: its reply is not kept"
    if stream:
        assert result["status"] == 200, result
        assert result["events"][-1] == {"type": "error", "error": why}, result["events"]
        assert [e["type"] for e in result["events"] if e["type"] in ("run", "output")] in ([], ["run", "output"])
    else:
        assert (result["status"], result["json"]) == (409, {"error": why}), result
    assert client.get(f"/api/rooms/{room}").status == 404, "the room was made again"
    assert listed(client, room) == []


# ---------------------------------------------------------------- model calls never hold up execs

def test_hanging_model_calls_do_not_hold_up_an_exec_in_another_room(client, stub):
    hang_room, other = f"hang-{secrets.token_hex(6)}", f"free-{secrets.token_hex(6)}"
    client.sh(other, "true")                # its jail exists before the calls hang

    def script(call):
        stub.gate.wait(STUB_HOLD)
        call.reply("released")
    stub.reset(script)

    results = [None] * HANG_CALLS

    def one(i):
        try:
            results[i] = post_user(client, hang_room, f"call {i}", timeout=STUB_HOLD + 30).status
        except Exception as e:             # reported below
            results[i] = repr(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(HANG_CALLS)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: stub.in_flight == HANG_CALLS, 60,
                   f"{HANG_CALLS} model calls in flight at the stub (have {stub.in_flight})")
        # more calls hang than there are workers; an exec still answers
        res = client.exec(other, "echo still here", http_timeout=EXEC_BOUND)
        assert res["stdout"] == "still here\n"
        assert stub.in_flight == HANG_CALLS, "the model calls ended before the exec"
    finally:
        stub.gate.set()
        for t in threads:
            t.join(STUB_HOLD + 60)
    assert results == [201] * HANG_CALLS, results
    assert len(listed(client, hang_room)) == 2 * HANG_CALLS


# ---------------------------------------------------------------- the key

def test_the_key_is_a_bearer_token_and_appears_in_no_log(client, stack, stub, room):
    # a server that quotes the key back in its error
    stub.reset(lambda call: call.status(401, {"error": {
        "message": f"Incorrect API key provided: {call.headers['authorization'][7:]}"}}))
    err = expect_model_failure(client, room, "who am I?", "HTTP 401: Incorrect API key provided: ")
    assert stub.calls[0].headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in err and "[key]" in err, err
    texts = log_texts(stack)
    assert texts, "no log files found"
    assert any("model request failed" in t for t in texts.values()), list(texts)
    for path, text in texts.items():
        assert KEY not in text, f"the key is in {path}"


AGENT_CALLS_MAX = 256   # fcgi-app/messages/agent.h


def test_past_the_bound_of_model_calls_in_flight_is_503_and_not_stored(client, stub):
    room = f"full-{secrets.token_hex(6)}"

    def script(call):
        stub.gate.wait(STUB_HOLD)
        call.reply("released")
    stub.reset(script)
    results = [None] * AGENT_CALLS_MAX

    def one(i):
        try:
            results[i] = post_user(client, room, f"call {i}", timeout=STUB_HOLD + 60).status
        except Exception as e:             # reported below
            results[i] = repr(e)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(AGENT_CALLS_MAX)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: stub.in_flight == AGENT_CALLS_MAX, 120,
                   f"{AGENT_CALLS_MAX} model calls in flight (have {stub.in_flight})")
        r = post_user(client, room, "one too many")
        assert r.status == 503, r
        assert r.header("retry-after") == "1"
        assert r.json == {"error": f"too many model calls in flight ({AGENT_CALLS_MAX}); try again"}
        # an exec still answers, and the refused message was not stored
        assert client.exec(f"free-{secrets.token_hex(6)}", "echo ok",
                           http_timeout=60)["stdout"] == "ok\n"
    finally:
        stub.gate.set()
        for t in threads:
            t.join(STUB_HOLD + 120)
    assert results == [201] * AGENT_CALLS_MAX, [r for r in results if r != 201][:5]
    contents = [m["content"] for m in listed(client, room)]
    assert len(contents) == 2 * AGENT_CALLS_MAX and "one too many" not in contents


# ---------------------------------------------------------------- start-up

def test_own_system_prompt_file(client, stack, stub, room, tmp_path):
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("You are the test's own prompt, caf\u00e9.\nUse <run>.\n")
    os.chmod(tmp_path, 0o755)
    stub.reset(lambda call: call.reply("ok"))
    with reconfigured(stack, llm_system_prompt_file=str(prompt)):
        assert post_user(client, room, "hi").status == 201
    assert stub.calls[0].messages[0] == {
        "role": "system", "content": "You are the test's own prompt, caf\u00e9.\nUse <run>.\n"}


@pytest.mark.parametrize("key_text,why", [
    (None, "No such file or directory"),
    ("", "empty"),
    ("two words\n", "the key must be one line of printable characters without blanks"),
])
def test_a_bad_key_file_stops_the_start_with_its_reason(stack, tmp_path, key_text, why):
    key = tmp_path / "key"
    if key_text is not None:
        key.write_text(key_text)
    conf = tmp_path / "roombox.conf"
    text = stack.conf_path.read_text().replace(KEY_FILE, str(key))
    text = re.sub(r"^(state_dir|socket) = .*$", "", text, flags=re.M)
    conf.write_text(text + f"state_dir = {tmp_path}/state\nsocket = {tmp_path}/s.sock\n")
    r = subprocess.run([str(FCGI), "-c", str(conf)], capture_output=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    err = r.stderr.decode()
    assert r.returncode == 2, (r.returncode, err)
    assert f"llm_key_file {key}: {why}" in err, err
    assert "two" not in err and "words" not in err     # no piece of the key
    assert not (tmp_path / "s.sock").exists()
