"""The console's Messages tab with the agent configured: a user message is
answered by the model (the console reads the answer as an event stream),
the reply's <run> tag runs in the room and the stored reply shows its
output.  The model is the one stand-in: an
OpenAI-compatible server on loopback (as in tests/integration/test_agent.py);
the rest is the real stack, through nginx, in headless Chromium."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from selenium.webdriver.common.by import By

from conftest import unique_room
from test_console import css, open_room, shot, signed_in, tab, wait

SERVERS = ("nginx",)
PIECES = ["Let me ", "look.\n", "<run>echo agent-", "was-here</run>"]


class StubModel(ThreadingHTTPServer):
    daemon_threads = True

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            events = [{"choices": [{"index": 0, "delta": {"content": p}}]} for p in PIECES]
            events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            data = ("".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)


MODEL = StubModel(("127.0.0.1", 0), StubModel.Handler)
threading.Thread(target=MODEL.serve_forever, daemon=True).start()
ROOMBOX_CONFIG = {"llm_url": f"http://127.0.0.1:{MODEL.server_address[1]}/v1",
                  "llm_model": "stub-model", "llm_timeout": "30s", "llm_rounds": "1"}


def test_the_agent_answers_in_the_messages_tab(browser, stack, client):
    signed_in(browser, stack)
    room = unique_room("con")
    open_room(browser, client, room)
    tab(browser, "messages")
    css(browser, "#msg-input").send_keys("what is in here?")
    css(browser, "#msg-send").click()
    wait(browser, lambda b: b.execute_script(
        "return [...document.querySelectorAll('#messages .msg.assistant')]"
        ".some(m => m.dataset.id && m.textContent.includes('agent-was-here'))"),
         what="the agent's stored reply with its command's output")
    msgs = client.get(f"/api/rooms/{room}/messages").json["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    assert "agent-was-here" in msgs[1]["content"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#messages .msg")) == 2
    shot(browser, "agent")
