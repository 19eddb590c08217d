"""Rooms' disk images never promise more than the host can give: each image
is sparse and may grow to disk_limit, so a new room is refused (507, a
clear error, nothing of it left) when the free space of the state_dir's
file system cannot hold what the existing images may still grow by plus
the new room's disk_limit; /api/health says how far the host is committed.

The stack's state_dir is a small ext4 file system of the test's own (a
300 MiB image, loop-mounted), its rooms' disk_limit 100M.  Through nginx."""

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import Client, loop_devices_backed_by, started_stack, unique_room, wait_until

SERVERS = ("nginx",)
LIMIT = 100 * 1024 * 1024


def run(*argv):
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"{argv}: exit {r.returncode}: {r.stderr.strip()}"
    return r


@pytest.fixture
def small_state_dir():
    """A 300 MiB ext4 mounted at a directory of its own; unmounted and
    removed afterwards."""
    top = Path(tempfile.mkdtemp(prefix="rbx-dfs-", dir="/tmp"))
    image, mnt = top / "fs.img", top / "state"
    mnt.mkdir()
    with open(image, "wb") as f:
        f.truncate(300 * 1024 * 1024)
    run("mkfs.ext4", "-q", "-F", "-m", "0", image)
    run("mount", "-o", "loop", image, mnt)
    os.chmod(mnt, 0o711)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", mnt], capture_output=True)
        # the loop device goes with the mount, but not at once
        wait_until(lambda: not loop_devices_backed_by(str(image)), 10, "the loop device to go")
        image.unlink()
        mnt.rmdir()
        top.rmdir()


def free_bytes(path):
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def test_rooms_never_promise_more_disk_than_the_host_has(small_state_dir):
    s = started_stack(state_dir=small_state_dir, extra={"disk_limit": "100M", "disk_overcommit": "1.0"})
    c = Client(s)
    made, refused = [], None
    try:
        free_at_start = free_bytes(small_state_dir)
        for i in range(6):
            room = unique_room("d")
            r = c.exec_raw(room, {"cmd": "echo made"})
            if r.status != 200:
                refused = (room, r)
                break
            made.append(room)
        # never more promised than there was: at most 2 rooms of 100M in
        # ~290 MiB (the template and a spare image take a little), at least 2
        assert refused, f"{len(made)} rooms of 100M made on a {free_at_start} byte file system"
        assert 2 <= len(made) <= free_at_start // LIMIT, (len(made), free_at_start)
        room, r = refused
        assert r.status == 507, (r.status, r.json)
        assert list(r.json) == ["error"], r.json
        msg = r.json["error"]
        assert room in msg and "disk" in msg and "free" in msg, msg
        # nothing of the refused room is left
        assert not (small_state_dir / "rooms" / room).exists()
        rc, listing = s.helper({"op": "list"})
        assert rc == 0 and room not in [x["room"] for x in listing["rooms"]], listing
        assert c.get(f"/api/rooms/{room}").status == 404
        slots = small_state_dir / "slots"
        assert room not in [os.readlink(p) for p in slots.iterdir()]
        # a room made through POST /api/rooms is refused the same way
        r = c.post("/api/rooms")
        assert r.status == 507 and list(r.json) == ["error"] and "disk" in r.json["error"], r.json
        # the earlier rooms keep working, writing included
        for m in made:
            assert c.sh(m, "head -c 1000000 /dev/urandom > /workspace/f && wc -c < /workspace/f") == "1000000\n"
        # the health answer says how far the host is committed
        h = c.get("/api/health", auth=False).json
        d = h["disk"]
        assert d["limitBytes"] == LIMIT and d["overcommit"] == 1.0, d
        assert d["rooms"] == len(made) and d["promisedBytes"] == len(made) * LIMIT, d
        assert 0 < d["usedBytes"] < d["promisedBytes"] and d["freeBytes"] > 0 and d["countedAt"], d
        assert 0.5 < d["committed"] <= 1.0, d
        # a destroyed room's promise is given back: a new room fits again
        c.destroy(made.pop())
        room = unique_room("d")
        assert c.sh(room, "echo made") == "made\n"
        made.append(room)
        assert c.get("/api/health", auth=False).json["disk"]["rooms"] == len(made)
        # the record is swapped whole for the new one: nothing left beside
        # it, and health (not root) can read it
        assert not list(small_state_dir.glob(".disk-commit.json.*"))
        assert (small_state_dir / "disk-commit.json").stat().st_mode & 0o777 == 0o644
        # one a crash left empty is counted afresh at the next creation
        c.destroy(made.pop())
        (small_state_dir / "disk-commit.json").write_text("")
        room = unique_room("d")
        assert c.sh(room, "echo made") == "made\n"
        made.append(room)
        d = c.get("/api/health", auth=False).json["disk"]
        assert d["rooms"] == len(made) and d["promisedBytes"] == len(made) * LIMIT, d
    finally:
        for m in made:
            c.destroy(m)
        problems = s.stop()
        assert not problems, problems


def test_overcommit_lets_the_operator_promise_more(small_state_dir):
    s = started_stack(state_dir=small_state_dir, extra={"disk_limit": "100M", "disk_overcommit": "3"})
    c = Client(s)
    made = []
    try:
        for i in range(4):
            room = unique_room("o")
            assert c.sh(room, "echo made") == "made\n"
            made.append(room)
        d = c.get("/api/health", auth=False).json["disk"]
        assert d["overcommit"] == 3.0 and d["rooms"] == 4 and d["committed"] > 1.0, d
    finally:
        for m in made:
            c.destroy(m)
        problems = s.stop()
        assert not problems, problems


def destroy_and_stop(c, s, *rooms):
    """The rooms destroyed and the stack stopped, with nothing of it left."""
    for m in rooms:
        c.destroy(m)
    problems = s.stop()
    assert not problems, problems


def assert_promise_as(c, before):
    """The disk promise /api/health reports has the rooms and bytes of before."""
    after = c.get("/api/health", auth=False).json["disk"]
    assert (after["rooms"], after["promisedBytes"]) == (before["rooms"], before["promisedBytes"]), \
        (before, after)


def dead_pid():
    """A pid no process has (checked against /proc)."""
    pid = 4_000_000
    while os.path.exists(f"/proc/{pid}"):
        pid -= 1
    return pid


def test_the_service_start_sweeps_what_killed_helpers_left(small_state_dir):
    """A helper killed in the middle of a write leaves its temporary file: an
    old record under ".disk-commit.json.<pid>", a spare image half made
    (".disk-<size>-<hash>.spare-<pid>.img").  The service's start removes
    those of writers that are gone, and keeps a living writer's."""
    s = started_stack(state_dir=small_state_dir, extra={"disk_limit": "100M"})
    try:
        dead, alive = dead_pid(), os.getpid()
        left = [small_state_dir / f".disk-commit.json.{dead}",
                small_state_dir / f".disk-104857600-0123456789abcdef.spare-{dead}.img"]
        kept = [small_state_dir / f".disk-104857600-0123456789abcdef.spare-{alive}.img",
                small_state_dir / f".disk-commit.json.{dead}x"]
        for p in left + kept:
            p.write_bytes(b"x")
        rc, ans = s.helper({"op": "info"})
        assert rc == 0, ans
        assert [p.name for p in left if p.exists()] == []
        assert [p.name for p in kept if not p.exists()] == []
    finally:
        for p in small_state_dir.glob(".disk-*"):
            if p.name.endswith(f".spare-{os.getpid()}.img") or p.name.endswith("x"):
                p.unlink()
        problems = s.stop()
        assert not problems, problems


def test_the_service_start_removes_rooms_a_killed_creation_left(small_state_dir):
    """A helper killed while it made a room (after its directory and disk
    image, before its meta: a first exec past its deadline on a loaded
    host) leaves what no room lists or destroys, and what every count of
    the disk promise counted again: later creations were refused for it.
    The service's start removes such a room, unless its lock is held (a
    creation or a removal under way), and counts without it."""
    s = started_stack(state_dir=small_state_dir, extra={"disk_limit": "100M", "disk_overcommit": "1.0"})
    c = Client(s)
    room, killed, held = unique_room("d"), unique_room("killed"), unique_room("held")
    try:
        assert c.sh(room, "echo made") == "made\n"
        before = c.get("/api/health", auth=False).json["disk"]
        for m in (killed, held):
            d = small_state_dir / "rooms" / m
            (d / "disk").mkdir(parents=True)
            with open(d / "disk.img", "wb") as f:
                f.truncate(LIMIT)
        run_dir = s.run_dir / "rooms" / held
        run_dir.mkdir(parents=True, exist_ok=True)
        lock = os.open(run_dir / "lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX)
            rc, ans = s.helper({"op": "info"})
            assert rc == 0, ans
            assert not (small_state_dir / "rooms" / killed).exists(), \
                sorted(p.name for p in (small_state_dir / "rooms" / killed).iterdir())
            assert (small_state_dir / "rooms" / held / "disk.img").exists()
        finally:
            os.close(lock)
        shutil.rmtree(small_state_dir / "rooms" / held)
        shutil.rmtree(run_dir)
        rc, ans = s.helper({"op": "info"})
        assert rc == 0, ans
        assert_promise_as(c, before)
        assert c.sh(room, "echo still") == "still\n"
        assert c.sh(killed, "echo made") == "made\n"
    finally:
        destroy_and_stop(c, s, room, killed)


def test_a_creation_that_fails_leaves_no_image_and_no_promise(small_state_dir):
    """A room whose first start fails before it exists (here its disk: the
    spare image made ahead for the next room is overwritten with zeros,
    so it does not mount) is a 500, and nothing of it stays: no
    directory, no disk image, no disk promise (later creations would be
    refused for it), no cgroup.  The same id is made afterwards as any
    new room."""
    s = started_stack(state_dir=small_state_dir, extra={"disk_limit": "100M", "disk_overcommit": "1.0"})
    c = Client(s)
    first, room = unique_room("d"), unique_room("fail")
    try:
        assert c.sh(first, "echo made") == "made\n"
        before = c.get("/api/health", auth=False).json["disk"]
        (spare,) = small_state_dir.glob(".disk-*.spare.img")
        with open(spare, "r+b") as f:
            f.write(bytes(1 << 20))
        r = c.exec_raw(room, {"cmd": "echo made"})
        assert r.status == 500 and "mount its disk image" in r.json["error"], (r.status, r.json)
        assert not (small_state_dir / "rooms" / room).exists(), \
            sorted(p.name for p in (small_state_dir / "rooms" / room).iterdir())
        assert c.get(f"/api/rooms/{room}").status == 404
        assert not [p for p in Path("/sys/fs/cgroup").glob(f"**/{room}")], "its cgroup stayed"
        # the record as the next creation counts it: as before the failure
        assert_promise_as(c, before)
        assert c.sh(room, "echo made") == "made\n"
    finally:
        destroy_and_stop(c, s, first, room)
