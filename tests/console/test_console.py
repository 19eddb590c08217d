"""The browser console (/console/) in headless Chromium, through nginx, on
the real stack: what a person does with it and sees.  Every wait is a
bounded WebDriverWait; screenshots go to build/console-shots/ to be looked
at (not compared).

The terminal test needs the terminal route (…/sandbox/terminals): a control
request tells whether the service has it, and the test is skipped, saying
so, where it answers 404.
"""

import time

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from conftest import SHOTS, not_served, unique_room

SERVERS = ("nginx",)
WAIT = 20           # seconds: the bound of a wait for the room to do something


def wait(browser, cond, timeout=WAIT, what=""):
    return WebDriverWait(browser, timeout, poll_frequency=0.05,
                         ignored_exceptions=[StaleElementReferenceException]).until(cond, what)


def css(browser, sel):
    return browser.find_element(By.CSS_SELECTOR, sel)


def shot(browser, name):
    SHOTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(SHOTS / f"{name}.png"))


def sign_in(browser, stack, tok=None):
    """The sign-in form, filled in and sent (from a tab that holds no token)."""
    # forget the tab's token on a page of the origin that runs no script of
    # the console's (the console itself may be signing in with it meanwhile)
    browser.get(stack.base_url + "/console/icon.svg")
    browser.get_log("browser")      # what the last test's page logged is not this test's
    browser.execute_script("sessionStorage.clear()")
    browser.get(stack.base_url + "/console/")
    try:
        wait(browser, EC.visibility_of_element_located((By.ID, "token")))
    except Exception:
        shot(browser, "failed-sign-in")
        raise
    css(browser, "#token").send_keys(tok or stack.token)
    css(browser, "#signin-button").click()


def signed_in(browser, stack):
    sign_in(browser, stack)
    wait(browser, EC.visibility_of_element_located((By.ID, "app")), what="the console after sign-in")


def open_room(browser, client, room):
    """Create `room` through the console's New room form and open it."""
    client.touch(room)
    box = css(browser, "#new-room-name")
    box.clear()
    box.send_keys(room)
    css(browser, "#new-room").click()
    wait(browser, lambda b: css(b, "#room-title").text == room and css(b, "#room").is_displayed(),
         what=f"room {room} to open")
    wait(browser, EC.presence_of_element_located((By.CSS_SELECTOR, f'#rooms [data-room="{room}"]')))


def click(browser, sel):
    """Click what sel finds, found again if the page redrew it meanwhile."""
    def done(b):
        css(b, sel).click()
        return True
    wait(browser, done, what=f"to click {sel}")


def tab(browser, name):
    css(browser, f"#tab-{name}").click()
    wait(browser, lambda b: css(b, f"#pane-{name}").is_displayed())


def tree_row(path):
    return (By.CSS_SELECTOR, f'#file-tree .row[data-path="{path}"]')


def browser_errors(browser):
    return [e for e in browser.get_log("browser")
            if e["level"] == "SEVERE" and "favicon" not in e["message"]]


# ---------------------------------------------------------------- tests

def test_sign_in_refuses_a_wrong_token_and_keeps_the_right_one_in_the_tab(browser, stack):
    sign_in(browser, stack, "not-" + stack.token)
    wait(browser, lambda b: "refused" in css(b, "#signin-error").text, what="the refusal")
    assert not css(browser, "#app").is_displayed()
    assert browser.execute_script("return sessionStorage.length") == 0
    shot(browser, "signin")

    css(browser, "#token").clear()
    css(browser, "#token").send_keys(stack.token)
    css(browser, "#signin-button").click()
    wait(browser, EC.visibility_of_element_located((By.ID, "app")))
    assert browser.execute_script("return sessionStorage.getItem('roombox.token')") == stack.token
    assert browser.execute_script("return localStorage.length") == 0
    assert browser.execute_script("return document.cookie") == ""
    # a reload in the same tab stays signed in
    browser.refresh()
    wait(browser, EC.visibility_of_element_located((By.ID, "app")))
    css(browser, "#signout").click()
    wait(browser, EC.visibility_of_element_located((By.ID, "token")))
    assert browser.execute_script("return sessionStorage.length") == 0
    errors = browser_errors(browser)
    assert all("401 (Unauthorized)" in e["message"] for e in errors), errors   # the wrong token's answer


def test_a_command_shows_its_output_while_it_runs(browser, stack, client):
    signed_in(browser, stack)
    room = unique_room("con")
    open_room(browser, client, room)
    tab(browser, "commands")
    css(browser, "#cmd-input").send_keys("echo first-line;"
                                          " while [ ! -e /workspace/go-on ]; do sleep 0.05; done; echo second-line")
    css(browser, "#cmd-run").click()
    card = lambda b: css(b, "#runs .run")   # noqa: E731
    out = lambda b: css(b, "#runs .run .output").text   # noqa: E731
    wait(browser, lambda b: "first-line" in out(b) and card(b).get_attribute("data-state") == "running",
         what="the first line while the command still runs")
    assert "second-line" not in out(browser)
    client.sh(room, "touch /workspace/go-on")
    wait(browser, lambda b: card(b).get_attribute("data-state") == "done", what="the command's end")
    assert "second-line" in out(browser)
    assert card(browser).get_attribute("data-exit") == "0"
    tab(browser, "commands")
    css(browser, "#cmd-input").send_keys("ls -la /workspace; uname -a; echo oops >&2; exit 3")
    css(browser, "#cmd-run").click()
    wait(browser, lambda b: card(b).get_attribute("data-exit") == "3")
    shot(browser, "commands")


def test_a_file_made_by_an_exec_appears_in_the_tree_within_a_second(browser, stack, client):
    signed_in(browser, stack)
    room = unique_room("con")
    open_room(browser, client, room)
    wait(browser, lambda b: css(b, "#explorer").get_attribute("data-watch") == "live",
         what="the watch stream to be open")
    client.sh(room, "mkdir -p /workspace/src && echo 'print(1)' > /workspace/src/made-by-exec.py"
                    " && echo hi > /workspace/made-by-exec.txt")
    t0 = time.monotonic()
    wait(browser, EC.presence_of_element_located(tree_row("/workspace/made-by-exec.txt")), timeout=1.0,
         what="the exec's file in the tree within 1 s")
    assert time.monotonic() - t0 < 1.0
    wait(browser, EC.presence_of_element_located(tree_row("/workspace/src")), timeout=1.0)
    # deleted by another exec: gone from the tree
    client.sh(room, "rm /workspace/made-by-exec.txt")
    wait(browser, EC.invisibility_of_element_located(tree_row("/workspace/made-by-exec.txt")), timeout=1.0)


def test_upload_shows_the_file_in_the_tree_and_download_gets_it_back(browser, stack, client, tmp_path):
    signed_in(browser, stack)
    room = unique_room("con")
    open_room(browser, client, room)
    data = bytes(range(256)) * 64 + b"the end\n"
    local = tmp_path / "upload-me.bin"
    local.write_bytes(data)
    css(browser, "#upload-input").send_keys(str(local))
    wait(browser, EC.presence_of_element_located(tree_row("/workspace/upload-me.bin")), what="the upload in the tree")
    got = client.get(f"/api/rooms/{room}/sandbox/files/upload-me.bin", check_json=False)
    assert got.status == 200 and got.body == data

    click(browser, '#file-tree .row[data-path="/workspace/upload-me.bin"]')
    click(browser, '#file-tree .row[data-path="/workspace/upload-me.bin"] .dl')
    target = browser.download_dir / "upload-me.bin"
    wait(browser, lambda b: target.exists() and target.read_bytes() == data, what="the download")
    shot(browser, "files")


def test_a_process_and_its_logs(browser, stack, client):
    signed_in(browser, stack)
    room = unique_room("con")
    open_room(browser, client, room)
    tab(browser, "processes")
    css(browser, "#proc-name").send_keys("ticker")
    css(browser, "#proc-cmd").send_keys("echo started-ok; while [ ! -e /workspace/stop ]; do sleep 0.05; done;"
                                        " echo stopping-now")
    css(browser, "#proc-start").click()
    row = (By.CSS_SELECTOR, '#proc-rows tr[data-id="ticker"]')
    wait(browser, EC.presence_of_element_located(row), what="the process in the list")
    wait(browser, lambda b: "started-ok" in css(b, "#proc-log").text, what="its log")
    client.sh(room, "touch /workspace/stop")
    wait(browser, lambda b: "stopping-now" in css(b, "#proc-log").text and "exited" in css(b, "#proc-log").text,
         what="its live output and end")
    shot(browser, "processes")


def test_an_exposed_port_opens_through_its_preview_link(browser, stack, client):
    signed_in(browser, stack)
    room = unique_room("con")
    open_room(browser, client, room)
    marker = "preview-of-" + room
    r = client.request("PUT", f"/api/rooms/{room}/sandbox/files/site/index.html",
                       data=f"<!doctype html><title>{marker}</title><h1>{marker}</h1>".encode(), check_json=False)
    assert r.status in (200, 201), r
    tab(browser, "processes")
    css(browser, "#proc-name").send_keys("web")
    css(browser, "#proc-cmd").send_keys("python3 -m http.server 8000 --bind 127.0.0.1 --directory /workspace/site")
    css(browser, "#proc-start").click()
    wait(browser, EC.presence_of_element_located((By.CSS_SELECTOR, '#proc-rows tr[data-id="web"]')))
    tab(browser, "ports")
    css(browser, "#port-input").send_keys("8000")
    css(browser, "#port-expose").click()
    link = wait(browser, EC.element_to_be_clickable((By.CSS_SELECTOR, '#port-rows tr[data-port="8000"] a.preview-link')),
                what="the preview link")
    assert "/preview/" in link.get_attribute("href")
    shot(browser, "ports")
    main = browser.current_window_handle
    link.click()
    wait(browser, lambda b: len(b.window_handles) == 2, what="the preview's tab")
    browser.switch_to.window([w for w in browser.window_handles if w != main][0])
    try:
        # the server may still be starting (the relay answers 502 until it listens)
        def served(b):
            if marker in b.find_element(By.TAG_NAME, "body").text:
                return True
            b.refresh()
            return False
        wait(browser, served, what="the room's page through the preview link")
        assert browser.title == marker
    finally:
        browser.close()
        browser.switch_to.window(main)


def test_post_a_message(browser, stack, client):
    signed_in(browser, stack)
    room = unique_room("con")
    open_room(browser, client, room)
    tab(browser, "messages")
    css(browser, "#msg-input").send_keys("hello from the console")
    css(browser, "#msg-send").click()
    wait(browser, lambda b: b.execute_script(
        "return [...document.querySelectorAll('#messages .msg.user')]"
        ".some(m => m.dataset.id && m.textContent.includes('hello from the console'))"),
         what="the stored message")
    # an assistant message's <run> tag runs in the room; its output is stored with it
    from selenium.webdriver.support.ui import Select
    Select(css(browser, "#msg-role")).select_by_value("assistant")
    css(browser, "#msg-input").send_keys("Listing: <run>echo ran-by-$((40+2))</run>")
    css(browser, "#msg-send").click()
    wait(browser, lambda b: b.execute_script(
        "return [...document.querySelectorAll('#messages .msg.assistant')]"
        ".some(m => m.dataset.id && m.textContent.includes('ran-by-42'))"),
         what="the assistant message with its output")
    msgs = client.get(f"/api/rooms/{room}/messages").json["messages"]
    assert [m["role"] for m in msgs] == ["user", "assistant"]
    assert msgs[0]["content"] == "hello from the console"
    shot(browser, "messages")


def terminal_text(browser):
    return browser.execute_script(
        "return [...document.querySelectorAll('#terminal .xterm-rows > div')].map(d => d.textContent).join('\\n')")


def type_in_terminal(browser, text):
    css(browser, "#terminal .xterm").click()
    css(browser, "#terminal .xterm-helper-textarea").send_keys(text)


def test_the_terminal_echoes_what_is_typed(browser, stack, client):
    room = unique_room("con")
    client.sh(room, "true")
    control = client.get(f"/api/rooms/{room}/sandbox/terminals")
    if control.status == 404 and "room" not in control.json.get("error", ""):
        pytest.skip(not_served(f"…/sandbox/terminals (GET answered 404 {control.json}): "
                               "the console's terminal over its WebSocket was NOT tested"))
    signed_in(browser, stack)
    open_room(browser, client, room)
    wait(browser, lambda b: css(b, "#terminal").get_attribute("data-mode") == "pty", what="the terminal to attach")
    type_in_terminal(browser, "echo typed-$((6*7))\n")
    wait(browser, lambda b: "typed-42" in terminal_text(b), what="the echo in the terminal")
    shot(browser, "terminal")
    # a reload attaches to the same terminal: its scrollback comes back
    tid = client.get(f"/api/rooms/{room}/sandbox/terminals").json["terminals"][0]["id"]
    browser.refresh()
    wait(browser, lambda b: css(b, "#terminal").get_attribute("data-mode") == "pty"
         and "typed-42" in terminal_text(b), what="the scrollback after a reload")
    assert [t["id"] for t in client.get(f"/api/rooms/{room}/sandbox/terminals").json["terminals"]] == [tid]
    # the shell ends; Enter starts a new one
    type_in_terminal(browser, "exit\n")
    wait(browser, lambda b: "press Enter for a new one" in terminal_text(b), what="the shell's end")
    type_in_terminal(browser, "\n")
    type_in_terminal(browser, "echo again-$((1+1))\n")
    wait(browser, lambda b: "again-2" in terminal_text(b), what="a new shell")


def test_no_script_errors_or_policy_violations(browser, stack, client):
    """A room made with a generated id (POST /api/rooms), every tab opened:
    nothing in the browser's log (a Content-Security-Policy violation is
    logged there as an error)."""
    signed_in(browser, stack)
    css(browser, "#new-room").click()
    wait(browser, lambda b: css(b, "#room").is_displayed() and css(b, "#room-title").text, what="the new room")
    room = css(browser, "#room-title").text
    client.touch(room)
    assert client.get(f"/api/rooms/{room}").status == 200
    wait(browser, lambda b: css(b, "#explorer").get_attribute("data-watch") == "live",
         what="the new room's watch stream")
    for t in ("commands", "processes", "ports", "messages", "terminal"):
        tab(browser, t)
    errors = browser_errors(browser)
    assert errors == [], errors
    shot(browser, "room")
