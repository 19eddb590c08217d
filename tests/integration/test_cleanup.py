"""DELETE /api/rooms/{id}: the room's processes, mounts, loop devices,
cgroups and files all go.  Through nginx."""

import os

import pytest

from conftest import (GONE_TIMEOUT, cgroup_dirs_named, cgroup_group, host_mountinfo_lines,
                      loop_devices, loop_devices_backed_by, ns_inode, paths_naming, pid_alive,
                      procs_in_ns, procs_of_room, procs_with_uid, stalled_export, unique_room,
                      wait_until)

SERVERS = ("nginx",)


def room_mounts_seen_by(pid):
    try:
        with open(f"/proc/{pid}/mountinfo") as f:
            return f.read().splitlines()
    except OSError:
        return []


def test_delete_leaves_nothing_of_the_room(client, stack, room):
    client.sh(room, "echo data > /workspace/f; cd /tmp; export A=1; "
                    "sleep 300 >/dev/null 2>&1 & setsid sleep 301 >/dev/null 2>&1 & "
                    "python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 &")
    uid = client.room_uid(room)
    keeper = stack.keeper_pid(room)
    state = str(stack.room_state_dir(room))

    # what exists before: so that the checks below can fail
    assert keeper and pid_alive(keeper)
    pid_ns = ns_inode(keeper, "pid")
    mnt_ns = ns_inode(keeper, "mnt")
    assert pid_ns != ns_inode(os.getpid(), "pid")
    # the keeper (the room's root) and at least two processes of the room
    assert len(procs_with_uid(uid)) >= 3, procs_with_uid(uid)
    assert len([p for p in procs_with_uid(uid) if p[1] != "roombox-keeper"]) >= 2, procs_with_uid(uid)
    assert os.path.isdir(state)
    assert paths_naming(stack.run_dir, room)

    r = client.delete(f"/api/rooms/{room}")
    assert r.status == 200, r.json
    assert r.json == {"cleaned": True, "roomId": room}

    wait_until(lambda: not procs_of_room(uid), GONE_TIMEOUT,
               f"the room's processes to end: {procs_of_room(uid)}")
    wait_until(lambda: not pid_alive(keeper), GONE_TIMEOUT, "the keeper to end")
    wait_until(lambda: not procs_in_ns("pid", pid_ns), GONE_TIMEOUT,
               "every process in the room's pid namespace to end")
    assert not procs_in_ns("mnt", mnt_ns)
    assert not host_mountinfo_lines(state, f"/{room}/", f"sandbox-{room}")
    wait_until(lambda: not loop_devices_backed_by(state), GONE_TIMEOUT,
               f"loop devices on {state} to be released: {loop_devices_backed_by(state)}")
    assert not os.path.exists(state)
    assert not paths_naming(stack.state_dir, room)
    assert not paths_naming(stack.run_dir, room)
    assert not cgroup_dirs_named(room)

    # the room is gone for the API too; a new exec starts from scratch
    assert client.get(f"/api/rooms/{room}").status == 404
    res = client.exec(room, 'cat /workspace/f; pwd; echo "[$A]"')
    assert res["stdout"] == "/workspace\n[]\n"
    assert "No such file" in res["stderr"]
    assert "sleep 30" not in client.sh(room, "ps -e -o args=")


def loop_device_state(name):
    """None when /dev/<name> exists no more, else its backing file ("" when
    the device is there but unbound)."""
    return loop_devices().get(name)


@pytest.mark.serial
@pytest.mark.parametrize("order", ["started_first", "started_last"])
def test_stopped_rooms_give_back_their_loop_devices(client, stack, room, order):
    """An unbound loop device is not free: it keeps its queue, its request
    tags and its sysfs and debugfs entries (150-220 KiB each), and the
    kernel never removes it by itself.  Stopped rooms leave at most one
    behind (the lowest free one, the next start's), in whichever order
    they stop (the later started first: its device is the lowest free one
    while the other's is still bound); a start takes or makes one.  Serial:
    which device is the lowest free one is the host's, and another test's
    room, export or import taking the spare between the two stops (and
    keeping it as the spare when it ends) makes both look left behind."""
    other = unique_room()
    devs = []
    for r in (room, other):
        client.sh(r, "echo kept > /workspace/f")
        found = loop_devices_backed_by(str(stack.room_state_dir(r)))
        assert len(found) == 1, found
        devs += found
    try:
        for r in ((room, other) if order == "started_first" else (other, room)):
            res = client.post(f"/api/rooms/{r}/sandbox/stop")
            assert res.status == 200, res.json
        # each gone, or already another room's (bound to another image), or
        # left as the one spare
        unbound = [name for name, _ in devs if loop_device_state(name) == ""]
        assert len(unbound) <= 1, f"stopped rooms left {unbound} unbound"
        for r in (room, other):
            assert client.sh(r, "cat /workspace/f") == "kept\n"
    finally:
        client.destroy(other)


def unbound_loop_devices():
    """The host's loop devices that are there but bound to nothing."""
    return {name for name, backing in loop_devices().items() if backing == ""}


def cut_devices(state):
    """The loop devices bound to a cut of the room at state: its copy on
    disk (unlinked once mounted) or in memory."""
    return [name for name, backing in loop_devices().items()
            if backing in (f"{state}/.cut.img (deleted)", "/memfd:roombox-cut (deleted)")]


def held_exports_ended(client, state, room, highest_first):
    """Three exports of room held at once (read slowly: not at all), each
    needing a loop device of its own, then ended one by one, lowest device
    first or highest first; asserts that at most one of their devices is
    left unbound."""
    held, used = [], []
    try:
        for _ in range(3):
            conn = stalled_export(client, room)
            held.append(conn)
            new = [d for d in cut_devices(state) if d not in [u for u, _ in used]]
            assert len(new) == 1, (new, used)
            used.append((new[0], conn))
        # lowest device first: each one's end then finds the one before it
        # free, the spare; highest first: each one's end finds itself the
        # lowest free device, the one before it still bound
        for dev, conn in sorted(used, key=lambda u: int(u[0][4:]), reverse=highest_first):
            conn.close()
            held.remove(conn)
            wait_until(lambda: dev not in cut_devices(state), GONE_TIMEOUT,
                       f"the export on {dev} to end")
    finally:
        for conn in held:
            conn.close()
    # a removal takes the kernel tens of ms (RCU grace periods), after
    # the export's end
    def left():
        return [d for d, _ in used if loop_device_state(d) == ""]
    wait_until(lambda: len(left()) <= 1, GONE_TIMEOUT,
               f"the exports on {[d for d, _ in used]} to leave one device unbound at most: {left()}")


@pytest.mark.serial
def test_exports_and_imports_give_back_their_loop_devices(client, stack, room):
    """An export or import mounts the room's image (or a cut of it) on a
    loop device of its own, which its mount's end unbinds but does not
    remove: the device goes then as a stopped room's does, but for the one
    spare.  Here three exports held at once, ended one by one, and imports.
    Serial: it counts the host's loop devices."""
    state = str(stack.room_state_dir(room))
    client.sh(room, "head -c 96M /dev/urandom > /workspace/noise")
    before = unbound_loop_devices()
    held_exports_ended(client, state, room, highest_first=False)

    for _ in range(3):
        new = unique_room()
        r = client.request("GET", f"/api/rooms/{room}/export", check_json=False, timeout=600)
        assert r.status == 200, r.status
        r = client.request("PUT", f"/api/rooms/{new}/import", data=r.body, timeout=600,
                           headers={"Content-Type": "application/x-roombox-room"})
        assert r.status == 201, (r.status, r.json)
        # and the stopped room it made, exported from its own image
        r = client.request("GET", f"/api/rooms/{new}/export", check_json=False, timeout=600)
        assert r.status == 200, r.status
        client.destroy(new)
    wait_until(lambda: len(unbound_loop_devices()) <= len(before) + 1, GONE_TIMEOUT,
               f"unbound loop devices: {sorted(before)} before, {sorted(unbound_loop_devices())} now")


@pytest.mark.serial
def test_exports_ended_highest_device_first_leave_one_spare(client, stack, room):
    """Devices freed out of order: three held exports ended highest device
    first, each finding itself the lowest free device when it ends (the
    ones before it still bound), leave one device unbound, not three.
    Serial: it counts the host's loop devices."""
    state = str(stack.room_state_dir(room))
    client.sh(room, "head -c 96M /dev/urandom > /workspace/noise")
    held_exports_ended(client, state, room, highest_first=True)


def test_a_stopped_room_keeps_no_cgroup(client, stack, room):
    """Every memory cgroup costs the kernel a shrinker map as long as the
    host's most superblocks at once (16 bytes each: over 1 MiB after a
    10,000-room run), so a stopped room gives its cgroups back; the next
    start makes them again, limits and all."""
    group = cgroup_group(stack.state_dir)
    client.sh(room, "echo kept > /workspace/f")
    before = cgroup_dirs_named(room, group)
    assert before

    r = client.post(f"/api/rooms/{room}/sandbox/stop")
    assert r.status == 200, r.json
    assert cgroup_dirs_named(room, group) == []

    assert client.sh(room, "cat /workspace/f") == "kept\n"
    assert sorted(cgroup_dirs_named(room, group)) == sorted(before)
    memory = [d for d in before if "/memory/" in d or os.path.exists(f"{d}/memory.max")]
    assert memory, before
    for d in memory:
        f = "memory.limit_in_bytes" if os.path.exists(f"{d}/memory.limit_in_bytes") else "memory.max"
        with open(f"{d}/{f}") as fh:
            assert fh.read().strip() == str(512 * 1024 * 1024), d


def test_delete_while_an_exec_runs(client, stack, room):
    import threading
    uid = client.room_uid(room)
    out = {}
    t = threading.Thread(target=lambda: out.update(
        r=client.exec_raw(room, {"cmd": "sleep 30", "timeout": 60000})))
    t.start()
    wait_until(lambda: [p for p in procs_with_uid(uid) if p[1] == "sleep 30"], 10,
               "the exec's sleep to start")
    r = client.delete(f"/api/rooms/{room}")
    assert r.status == 200, r.json
    assert r.json["cleaned"] is True
    t.join(20)
    assert not t.is_alive(), "the running exec did not end when its room was deleted"
    wait_until(lambda: not procs_of_room(uid), GONE_TIMEOUT,
               f"the room's processes to end: {procs_of_room(uid)}")
    # the interrupted exec answered, with JSON (checked by the client)
    assert out["r"].status in (200, 500), out["r"]
