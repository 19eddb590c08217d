"""A room that replaces its own tools (find, cat, stat, mktemp, mv, chmod,
mkdir, rm, setsid, ...) with something that never ends can only slow
itself: the files and processes APIs work on a room with the product's own
code, never with what the room's PATH or files hold, so that room still
gets correct answers at once, and requests for other rooms and
/api/health keep answering while many requests hit it."""

import threading

import pytest

from conftest import unique_room, wait_until

ROOMBOX_CONFIG = {"max_file": "8M"}

# every tool the files and processes APIs ever ran in a room, and a few more
TOOLS = ["find", "cat", "stat", "mktemp", "mv", "chmod", "mkdir", "rm", "rmdir",
         "setsid", "ls", "kill", "sleep", "printf", "head", "tail", "ln", "cp", "dd"]

# a hostile tool: waits forever, costing nothing (opening a FIFO nobody
# writes); the room's own /bin/sh stays: the user's commands run with it
HANG = "#!/bin/sh\\nread -r _ < /hang\\n"


def files(room, path=""):
    return f"/api/rooms/{room}/sandbox/files/{path}"


def poison(client, room):
    """Replace the room's tools, in /usr/bin and first on PATH."""
    client.sh(room, "mkdir -p /workspace/d/sub /usr/local/bin && echo hello > /workspace/d/a.txt && "
                    "echo deep > /workspace/d/sub/b.txt && mkfifo -m 666 /hang")
    loop = " ".join(TOOLS)
    # first on PATH (while chmod still works), then over the real ones in
    # place (shell builtins only: printf and redirection)
    client.sh(room, f"for t in {loop}; do printf '{HANG}' > /usr/local/bin/$t; done; "
                    f"chmod 755 /usr/local/bin/*; "
                    f"for t in {loop}; do [ -e /usr/bin/$t ] && printf '{HANG}' > /usr/bin/$t; done; true")
    res = client.exec(room, "/usr/bin/find /workspace -maxdepth 0", timeout=2000)
    assert res["exitCode"] == 124, f"the room's find should hang now: {res}"


def test_files_do_not_use_the_rooms_tools(client, room):
    poison(client, room)
    t = 60   # far below the files' old deadline (exec_timeout_max, 10 min)
    r = client.get(files(room, "d"), timeout=t)
    assert r.status == 200, r
    assert {e["name"] for e in r.json["entries"]} == {"a.txt", "sub"}
    r = client.get(files(room, "d") + "?recursive=1", timeout=t)
    assert {e["relativePath"] for e in r.json["entries"]} == {"a.txt", "sub", "sub/b.txt"}
    r = client.request("GET", files(room, "d/a.txt"), check_json=False, timeout=t)
    assert r.status == 200 and r.body == b"hello\n", r
    r = client.request("PUT", files(room, "up/new.bin") + "?mode=0640", data=b"\x00\x01data" * 1000,
                       timeout=t)
    assert r.status == 201 and r.json == {"path": "/workspace/up/new.bin", "size": 6000}, r
    r = client.request("GET", files(room, "up/new.bin"), check_json=False, timeout=t)
    assert r.body == b"\x00\x01data" * 1000
    by_name = {e["name"]: e for e in client.get(files(room, "up"), timeout=t).json["entries"]}
    assert set(by_name) == {"new.bin"} and by_name["new.bin"]["mode"] == "0640", by_name
    assert client.request("PUT", files(room, "made/dir/"), data=b"", timeout=t).status == 201
    r = client.post(files(room, "up/new.bin"), {"to": "made/dir/moved.bin"}, timeout=t)
    assert r.status == 200 and r.json == {"path": "/workspace/made/dir/moved.bin"}, r
    r = client.delete(files(room, "made") + "?recursive=1", timeout=t)
    assert r.status == 200 and r.json == {"deleted": "/workspace/made"}, r
    assert client.get(files(room, "made"), timeout=t).status == 404


def test_processes_do_not_use_the_rooms_tools(client, room):
    poison(client, room)
    t = 60
    r = client.post(f"/api/rooms/{room}/sandbox/processes",
                    {"cmd": "read -r _ < /hang", "name": "spin"}, timeout=t)
    assert r.status == 201 and r.json["process"]["status"] == "running", r
    r = client.delete(f"/api/rooms/{room}/sandbox/processes/spin?signal=KILL", timeout=t)
    assert r.status == 200, r
    p = wait_until(lambda: (q := client.get(f"/api/rooms/{room}/sandbox/processes/spin", timeout=t)
                            .json["process"])["status"] != "running" and q, 30,
                   "the process to end after KILL")
    assert p["status"] == "killed" or p["signal"] == "SIGKILL", p


def test_many_listings_of_a_hostile_room_leave_others_answering(client, room):
    poison(client, room)
    other = unique_room()
    client.sh(other, "true")
    answers, errors = [], []

    def listing():
        try:
            answers.append(client.get(files(room, "d"), timeout=120).status)
        except Exception as e:   # noqa: BLE001 -- reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=listing) for _ in range(40)]
    for th in threads:
        th.start()
    try:
        assert client.sh(other, "echo still here", http_timeout=60) == "still here\n"
        assert client.get("/api/health", timeout=60).status == 200
    finally:
        for th in threads:
            th.join(180)
    assert not errors and answers == [200] * 40, (errors, answers)


# the room's root stops processes named roombox-keeper but its PID 1 (a
# tool is a fork of the keeper, running as the request's user in the
# room's pid namespace), five of them, then marks /workspace/stopped and
# ends; shell builtins only. Bounded: a loop that stopped every tool
# forever would also stop whatever the test sent to end it (a command
# too: the loop catches its process before its execve).
STOPPER = ("n=0; while [ $n -lt 5 ]; do for d in /proc/[0-9]*; do p=${d#/proc/}; "
           "[ \"$p\" = 1 ] && continue; read -r c < $d/comm 2>/dev/null || continue; "
           "[ \"$c\" = roombox-keeper ] && kill -STOP $p 2>/dev/null && n=$((n + 1)); done; done; "
           "touch /workspace/stopped")


# serial: a race between the room's /proc scan and a listing, which the other
# tests' work on the same two cores decides instead (once in CI under
# pytest-xdist the scan never caught one of 60 listings)
@pytest.mark.serial
def test_a_room_that_stops_the_file_tools_gets_a_prompt_error(client, room):
    client.sh(room, "mkdir -p /workspace/t && cd /workspace/t && for i in $(seq 60); do "
                    "mkdir d$i && for j in $(seq 30); do : > d$i/f$j; done; done")
    other = unique_room()
    client.sh(other, "mkdir -p /workspace/t && touch /workspace/t/x")
    client.sh(room, f"({STOPPER}) >/dev/null 2>&1 &", user="root")
    stopped = []
    for _ in range(60):
        # far below the quick operations' deadline (30 s)
        r = client.get(files(room, "t") + "?recursive=1", timeout=20)
        assert r.status in (200, 503), r
        if r.status == 503:
            assert "stopped" in r.json["error"] and room in r.json["error"], r
            stopped.append(r)
            break
    assert stopped, "the room's loop never caught a listing"
    r = client.get(files(other, "t"), timeout=20)
    assert r.status == 200 and [e["name"] for e in r.json["entries"]] == ["x"], r
    wait_until(lambda: client.get(files(room, "stopped"), check_json=False, timeout=20).status == 200,
               60, "the room's loop to end")
    r = client.get(files(room, "t") + "?recursive=1", timeout=20)
    assert r.status == 200 and len(r.json["entries"]) == 60 * 31, r
