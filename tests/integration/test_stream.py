"""Live output: POST …/sandbox/exec with Accept:
text/event-stream, through nginx and lighttpd, with nothing buffering on
the way.  Every wait is bounded; nothing sleeps to synchronise."""

import http.client
import json
import time

import pytest

from conftest import wait_until


class Stream:
    """An exec answered as an event stream, read frame by frame; each frame
    with the wall-clock time it arrived."""

    def __init__(self, client, room, body, timeout=60):
        client.touch(room)
        self.conn = http.client.HTTPConnection("127.0.0.1", client.port, timeout=timeout)
        self.conn.request("POST", f"/api/rooms/{room}/sandbox/exec", body=json.dumps(body).encode(),
                          headers={"Authorization": f"Bearer {client.token}",
                                   "Content-Type": "application/json",
                                   "Accept": "text/event-stream"})
        self.r = self.conn.getresponse()
        self.buf = b""
        self.comments = []

    def frame(self):
        """(event JSON, arrival time), or (None, time) at the end."""
        while True:
            while b"\n\n" not in self.buf:
                data = self.r.read1(65536)      # bounded by the socket timeout
                if not data:
                    assert not self.buf.strip(), f"stream ended mid-event: {self.buf!r}"
                    return None, time.time()
                self.buf += data
            now = time.time()
            raw, self.buf = self.buf.split(b"\n\n", 1)
            lines = raw.decode("utf-8").split("\n")
            if all(l.startswith(":") for l in lines):
                self.comments.append((raw.decode(), now))
                continue
            assert len(lines) == 1 and lines[0].startswith("data: "), raw
            return json.loads(lines[0][6:]), now

    def events(self):
        out = []
        while True:
            ev, _ = self.frame()
            if ev is None:
                return out
            out.append(ev)

    def close(self):
        self.conn.close()


def test_events_in_order_and_the_complete_result(client, room):
    s = Stream(client, room, {"cmd": "echo out; echo err >&2; exit 3"})
    assert s.r.status == 200
    assert s.r.getheader("Content-Type").startswith("text/event-stream")
    evs = s.events()
    s.close()
    assert evs[0]["type"] == "start" and evs[0]["command"] == "echo out; echo err >&2; exit 3"
    assert evs[0]["timestamp"].endswith("Z")
    assert evs[-1]["type"] == "complete", evs
    res = evs[-1]["result"]
    assert res["exitCode"] == 3 and res["success"] is False and res["signal"] is None
    assert res["stdout"] == "out\n" and res["stderr"] == "err\n"
    assert set(res) == {"stdout", "stderr", "exitCode", "success", "signal", "timedOut",
                        "truncated", "command", "duration", "timestamp"}
    middle = evs[1:-1]
    assert "".join(e["data"] for e in middle if e["type"] == "stdout") == "out\n"
    assert "".join(e["data"] for e in middle if e["type"] == "stderr") == "err\n"
    assert all(e["type"] in ("stdout", "stderr") for e in middle), middle


# serial: a 100 ms bound on each line's delay, which the other tests' work on
# the same cores would decide instead of the streaming
@pytest.mark.serial
def test_each_line_reaches_the_client_as_it_is_written(client, room):
    """A line a second; each arrives within 100 ms of the time the command
    printed just before writing it (same kernel clock in and out of the
    room)."""
    client.sh(room, "true")   # the room exists: its start is not measured
    s = Stream(client, room, {"cmd": "for i in 1 2 3 4 5; do date +%s.%N; sleep 1; done"})
    late = []
    lines = []
    while True:
        ev, at = s.frame()
        if ev is None:
            break
        if ev["type"] != "stdout":
            continue
        for line in ev["data"].splitlines():
            lines.append(line)
            late.append(at - float(line))
    s.close()
    assert len(lines) == 5, lines
    assert max(late) < 0.1, f"delays {[round(x * 1000) for x in late]} ms"


def test_a_utf8_character_is_never_split_across_events(client, room):
    # the euro sign's three bytes in two writes, 0.3 s apart
    s = Stream(client, room, {"cmd": r"printf '\342'; sleep 0.3; printf '\202\254\n'; printf '\377\n'"})
    evs = s.events()
    s.close()
    out = [e["data"] for e in evs if e["type"] == "stdout"]
    # split, the first byte alone would have become U+FFFD: one U+FFFD (for
    # the lone \377) and an intact euro sign
    assert "".join(out) == "\u20ac\n\ufffd\n", out


def test_base64_events_carry_the_exact_bytes(client, room):
    import base64
    s = Stream(client, room, {"cmd": r"printf 'a\377b\000c'", "encoding": "base64"})
    evs = s.events()
    s.close()
    raw = b"".join(base64.b64decode(e["data"]) for e in evs if e["type"] == "stdout")
    assert raw == b"a\xffb\x00c"
    assert base64.b64decode(evs[-1]["result"]["stdout"]) == raw


def test_a_bad_request_is_the_usual_json_400(client, room):
    r = client.request("POST", f"/api/rooms/{room}/sandbox/exec", {"cmd": ""},
                       headers={"Accept": "text/event-stream"})
    assert r.status == 400
    assert r.json["details"] == {"cmd": ["Command cannot be empty"]}


def test_a_timeout_completes_the_stream(client, room):
    s = Stream(client, room, {"cmd": "echo started; sleep 30", "timeout": 500})
    evs = s.events()
    s.close()
    assert evs[-1]["type"] == "complete"
    assert evs[-1]["result"]["timedOut"] is True and evs[-1]["result"]["exitCode"] == 124
    assert evs[-1]["result"]["stdout"] == "started\n"


def test_a_quiet_stream_gets_keep_alive_comments(client, room):
    s = Stream(client, room, {"cmd": "sleep 16; echo done"}, timeout=60)
    evs = s.events()
    s.close()
    assert evs[-1]["type"] == "complete" and evs[-1]["result"]["stdout"] == "done\n"
    assert any(c.startswith(": keep-alive") for c, _ in s.comments), s.comments


def test_a_client_going_away_does_not_stop_the_command(client, room):
    client.sh(room, "rm -f /workspace/finished")
    s = Stream(client, room, {"cmd": "echo go; sleep 1; echo x > /workspace/finished"})
    ev, _ = s.frame()
    assert ev["type"] == "start"
    s.close()
    wait_until(lambda: client.exec(room, "cat /workspace/finished 2>/dev/null")["stdout"] == "x\n",
               15, "the command to finish after its client left")


def test_background_output_after_the_answer_does_not_kill_the_writer(client, room):
    """A background process that keeps the stream's pipe keeps running
    (no SIGPIPE) after the stream is complete."""
    s = Stream(client, room, {"cmd": "(for i in $(seq 30); do echo tick; sleep 0.1; done; "
                                     "echo survived > /workspace/bg) & echo fg"})
    evs = s.events()
    s.close()
    assert evs[-1]["type"] == "complete"
    wait_until(lambda: client.exec(room, "cat /workspace/bg 2>/dev/null")["stdout"] == "survived\n",
               15, "the background writer to finish")
