"""A room's settings: PATCH /api/rooms/{id} with labels (kept by
roombox-fcgi, listed and filtered) and limits (the helper's: the room's
cgroup at once, kept across a restart, never above room_limits_max).
Through nginx."""

import os

from conftest import Client, started_stack, wait_until

SERVERS = ("nginx",)
# memory may go up to 768M (the configuration's is 512M), disk to 2G (1G),
# execTimeoutMax to 20 minutes (10);
# pids and cpu are
# named nowhere here, so their maximum is the configuration's own
ROOMBOX_CONFIG = {"room_limits_max": "memory=768M,disk=2G,exec_timeout_max=20m"}

ALLOC_100M = "python3 -c \"b = b'x' * (100 << 20); print(len(b))\""
SPAWN_30 = ("python3 -c \"import subprocess\n"
            "ps = []\n"
            "try:\n"
            "    for i in range(30): ps.append(subprocess.Popen(['sleep', '30']))\n"
            "except OSError as e: print('refused', len(ps))\n"
            "for p in ps: p.kill()\n"
            "print('done')\"")


def patch(client, room, body):
    return client.request("PATCH", f"/api/rooms/{room}", body)


def listed(client, *filters):
    q = "&".join("label=" + f.replace("=", "%3D") for f in filters)
    r = client.get("/api/rooms" + ("?" + q if q else ""))
    assert r.status == 200, r.json
    return {st["roomId"]: st for st in r.json["rooms"]}


def test_labels_set_merged_removed_listed_filtered(client, room):
    client.sh(room, "true")
    other = room + "-b"
    client.sh(other, "true")
    r = patch(client, room, {"labels": {"team": "blue", "tier": "dev"}})
    assert r.status == 200, r.json
    assert r.json["roomId"] == room and r.json["labels"] == {"team": "blue", "tier": "dev"}
    assert r.json["state"] in ("running", "stopped") and "usage" in r.json and "limits" in r.json
    # the keys given replace, null removes, the rest stay
    r = patch(client, room, {"labels": {"tier": None, "app/name": "web-1"}})
    assert r.status == 200, r.json
    assert r.json["labels"] == {"team": "blue", "app/name": "web-1"}
    assert client.get(f"/api/rooms/{room}").json["labels"] == {"team": "blue", "app/name": "web-1"}
    assert patch(client, other, {"labels": {"team": "blue"}}).status == 200
    rooms = listed(client)
    assert rooms[room]["labels"] == {"team": "blue", "app/name": "web-1"}
    assert rooms[other]["labels"] == {"team": "blue"}
    assert {room, other} <= set(listed(client, "team=blue"))
    assert set(listed(client, "team=blue", "app/name=web-1")) == {room}
    assert room not in listed(client, "team=red")


def test_bad_settings_refused(client, room):
    client.sh(room, "true")
    for body, words in [
        ({"colour": 1}, "unknown field"),
        ({"labels": []}, "labels must be an object"),
        ({"labels": {"bad key": "x"}}, "label name"),
        ({"labels": {"k" * 64: "x"}}, "label name"),
        ({"labels": {"k": "v" * 64}}, "its value"),
        ({"labels": {"k": 5}}, "its value must be a string"),
        ({"labels": {f"k{i}": "v" for i in range(65)}}, "at most 64 labels"),
        ({"limits": {"swap": 1}}, "unknown limit"),
        ({"limits": {"memory": "1G"}}, "limit memory"),
        ({"limits": {"pids": 1.5}}, "limit pids"),
        ({"limits": {"memory": 0}}, "limit memory"),
    ]:
        r = patch(client, room, body)
        assert r.status == 400, (body, r.json)
        assert words in r.json["error"], (body, r.json)
    # nothing of a refused PATCH was kept
    assert client.get(f"/api/rooms/{room}").json["labels"] == {}


def test_limit_above_the_maximum_refused(client, room):
    client.sh(room, "true")
    # above room_limits_max
    r = patch(client, room, {"limits": {"memory": 1 << 30}})
    assert r.status == 400, r.json
    assert "memory" in r.json["error"] and str(768 << 20) in r.json["error"], r.json
    # up to it is fine
    r = patch(client, room, {"limits": {"memory": 768 << 20}})
    assert r.status == 200, r.json
    assert r.json["limits"]["memory"] == 768 << 20
    # not named in room_limits_max: the configuration's (pids_limit 256, cpu_limit 1)
    r = patch(client, room, {"limits": {"pids": 257}})
    assert r.status == 400 and "pids" in r.json["error"] and "256" in r.json["error"], r.json
    r = patch(client, room, {"limits": {"cpu": 2}})
    assert r.status == 400 and "cpu" in r.json["error"], r.json


def test_memory_limit_lowered_takes_effect(client, room):
    res = client.exec(room, ALLOC_100M)
    assert res["exitCode"] == 0 and res["stdout"] == f"{100 << 20}\n", res
    r = patch(client, room, {"limits": {"memory": 48 << 20}})
    assert r.status == 200, r.json
    assert r.json["limits"]["memory"] == 48 << 20 and r.json["state"] == "running"
    res = client.exec(room, ALLOC_100M)
    assert res["exitCode"] != 0, res
    # null: the configuration's again
    r = patch(client, room, {"limits": {"memory": None}})
    assert r.status == 200 and r.json["limits"]["memory"] == 512 << 20, r.json
    assert client.exec(room, ALLOC_100M)["exitCode"] == 0


def test_pids_limit_lowered_takes_effect(client, room):
    assert client.sh(room, SPAWN_30) == "done\n"
    r = patch(client, room, {"limits": {"pids": 12}})
    assert r.status == 200 and r.json["limits"]["pids"] == 12, r.json
    out = client.sh(room, SPAWN_30)
    assert out.startswith("refused ") and out.endswith("done\n"), out
    assert int(out.split()[1]) < 12, out


FILL = (
    "import os, subprocess, time\n"
    "os.setsid()\n"
    "held = []\n"
    "while True:\n"
    "    try:\n"
    "        held.append(subprocess.Popen(['sleep', '3712'], stdin=subprocess.DEVNULL,\n"
    "                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))\n"
    "    except OSError:\n"
    "        open('/tmp/rb-filled', 'w').close()\n"
    "        time.sleep(0.05)\n")


def test_a_room_at_its_own_pids_limit_recovers(client, room):
    """The recovery of a room at its process limit (its processes killed,
    the exec run again) goes by the room's own limit."""
    client.sh(room, "true")
    assert patch(client, room, {"limits": {"pids": 24}}).status == 200
    r = client.exec_raw(room, {"cmd": 'python3 -c "$RB_FILL" >/dev/null 2>&1 &',
                               "env": {"RB_FILL": FILL}})
    assert r.status == 200, r.json
    keeper = client.stack.keeper_pid(room)
    wait_until(lambda: os.path.exists(f"/proc/{keeper}/root/tmp/rb-filled"), 20,
               "the room to fill up to its 24 processes")
    r = client.exec_raw(room, {"cmd": "echo in", "timeout": 5000})
    assert r.status == 200 and r.json["result"]["stdout"] == "in\n", r.json
    assert client.sh(room, "echo works again") == "works again\n"


def test_limits_survive_a_restart_and_settings_go_with_the_room(client, room):
    client.sh(room, "true")
    r = patch(client, room, {"labels": {"keep": "me"},
                             "limits": {"memory": 48 << 20, "pids": 100, "execTimeoutMax": 5000}})
    assert r.status == 200, r.json
    assert r.json["limits"]["execTimeoutMax"] == 5000
    r = client.post(f"/api/rooms/{room}/sandbox/restart")
    assert r.status == 200, r.json
    st = client.get(f"/api/rooms/{room}").json
    assert st["labels"] == {"keep": "me"}
    assert st["limits"]["memory"] == 48 << 20 and st["limits"]["pids"] == 100, st
    # the new jail has them: the allocation is refused again
    assert client.exec(room, ALLOC_100M)["exitCode"] != 0
    # the room's execTimeoutMax bounds its execs
    r = client.exec_raw(room, {"cmd": "true", "timeout": 10000})
    assert r.status == 400 and "execTimeoutMax" in r.json["error"], r.json
    assert client.sh(room, "echo fine", timeout=4000) == "fine\n"
    # (files are not commands: their deadlines are the service's)
    r = client.request("PUT", f"/api/rooms/{room}/sandbox/files/tmp/x", data=b"x")
    assert r.status == 201, r.json
    assert client.delete(f"/api/rooms/{room}").status == 200
    assert client.get(f"/api/rooms/{room}").status == 404
    assert room not in listed(client, "keep=me")
    # made again, it is a new room: no labels, the configuration's limits
    client.sh(room, "true")
    st = client.get(f"/api/rooms/{room}").json
    assert st["labels"] == {} and st["limits"]["memory"] == 512 << 20, st


def test_exec_timeout_max_raised_above_the_configurations(client, room):
    client.sh(room, "true")
    r = client.exec_raw(room, {"cmd": "true", "timeout": 700000})
    assert r.status == 400, r.json                   # above the room's (the configuration's 10m)
    r = patch(client, room, {"limits": {"execTimeoutMax": 900000}})
    assert r.status == 200 and r.json["limits"]["execTimeoutMax"] == 900000, r.json
    assert client.sh(room, "echo long", timeout=700000) == "long\n"
    r = patch(client, room, {"limits": {"execTimeoutMax": 1200001}})
    assert r.status == 400 and "1200000" in r.json["error"], r.json


def test_patch_of_a_room_that_does_not_exist(client, room):
    r = patch(client, room, {"labels": {"a": "b"}})
    assert r.status == 404, r.json
    assert client.get(f"/api/rooms/{room}").status == 404


DISK_SIZE = "python3 -c \"import os; s = os.statvfs('/workspace'); print(s.f_blocks * s.f_frsize)\""


def test_disk_limit_raised_grows_the_disk_at_the_next_start(client, room):
    before = int(client.sh(room, DISK_SIZE))
    assert before <= 1 << 30, before
    r = patch(client, room, {"limits": {"disk": 3 << 29}})
    assert r.status == 200 and r.json["limits"]["disk"] == 3 << 29, r.json
    assert int(client.sh(room, DISK_SIZE)) == before      # not while it runs
    assert client.post(f"/api/rooms/{room}/sandbox/restart").status == 200
    after = int(client.sh(room, DISK_SIZE))
    assert after > before + (400 << 20), (before, after)
    # lower again: the disk does not shrink (its files may need it)
    assert patch(client, room, {"limits": {"disk": 1 << 29}}).status == 200
    assert client.post(f"/api/rooms/{room}/sandbox/restart").status == 200
    assert int(client.sh(room, DISK_SIZE)) == after


def test_a_rooms_idle_timeout_is_its_own():
    """idleTimeout: a room stopped after its own (1 s), while another,
    under the configuration's (20 s), keeps running."""
    s = started_stack({"idle_timeout": "20s"})
    c = Client(s)
    try:
        a, b = "idle-" + s.token[:6], "busy-" + s.token[:6]
        c.sh(a, "true")
        r = patch(c, a, {"limits": {"idleTimeout": 1000}})
        assert r.status == 200 and r.json["limits"]["idleTimeout"] == 1000, r.json
        c.sh(b, "true")
        wait_until(lambda: c.get(f"/api/rooms/{a}").json["state"] == "stopped", 15,
                   f"room {a} to be stopped after its own idle timeout")
        assert c.get(f"/api/rooms/{b}").json["state"] == "running"
        # a stopped room keeps its settings
        assert c.get(f"/api/rooms/{a}").json["limits"]["idleTimeout"] == 1000
    finally:
        for room in c.rooms:
            c.destroy(room)
        problems = s.stop()
        assert not problems, problems


def test_memory_limit_below_what_a_running_room_holds(client, room):
    """A process holding more than the new limit: the kernel either
    reclaims and kills in the room (v2: the limit holds at once), or refuses
    (v1, when nothing can be reclaimed): then the PATCH is a 400 that says
    so, and nothing changes."""
    r = client.exec_raw(room, {"cmd": "python3 -c \"import time; b = b'x' * (100 << 20); "
                                      "open('/tmp/held', 'w').close(); time.sleep(600)\" "
                                      ">/dev/null 2>&1 &"})
    assert r.status == 200, r.json
    wait_until(lambda: client.sh(room, "test -e /tmp/held && echo y || echo n") == "y\n", 20,
               "the memory to be held")
    r = patch(client, room, {"limits": {"memory": 48 << 20}})
    if r.status == 200:                  # reclaimed: what held it was killed
        assert r.json["limits"]["memory"] == 48 << 20
        assert client.exec(room, ALLOC_100M)["exitCode"] != 0
        return
    assert r.status == 400, r.json
    assert "memory" in r.json["error"] and "nothing changed" in r.json["error"], r.json
    st = client.get(f"/api/rooms/{room}").json
    assert st["limits"]["memory"] == 512 << 20 and st["state"] == "running", st
    assert client.exec(room, ALLOC_100M)["exitCode"] == 0   # the old limit still holds
    # freed, the same PATCH holds
    assert client.delete(f"/api/rooms/{room}/sandbox/processes").status == 200
    r = patch(client, room, {"limits": {"memory": 48 << 20}})
    assert r.status == 200, r.json
