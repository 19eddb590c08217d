"""Snapshots, restores and forks of rooms, through nginx: a snapshot is a
consistent cut (everything acknowledged before its 201 is in it, nothing
torn), a restore brings back files and sessions, forks never share a
write, and the limits and errors a client sees."""

import ctypes
import fcntl
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from conftest import Client, loop_devices_backed_by, pid_alive, started_stack, unique_room, wait_until

SERVERS = ("nginx",)
ROOMBOX_CONFIG = {"snapshots_max": "3"}


def snap(client, room, name=None):
    r = client.post(f"/api/rooms/{room}/snapshots", {} if name is None else {"name": name})
    assert r.status == 201, (r.status, r.json)
    s = r.json["snapshot"]
    assert set(s) == {"id", "name", "room", "createdAt", "size"}, s
    assert s["room"] == room and s["name"] == name and s["size"] > 0, s
    assert re.fullmatch(r"[0-9a-f]{16}", s["id"]), s
    return s


def restore(client, room, ref):
    r = client.post(f"/api/rooms/{room}/restore", {"snapshot": ref})
    assert r.status == 200, (r.status, r.json)
    return r.json


def fork(client, room, to, ref=None):
    body = {"to": to} if ref is None else {"to": to, "snapshot": ref}
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}", to):
        client.touch(to)       # destroyed after the test
    return client.post(f"/api/rooms/{room}/fork", body)


def test_health_says_how_snapshots_copy(client):
    r = client.get("/api/health")
    assert r.json["snapshotCopy"] in ("reflink", "sparse-copy"), r.json


WRITER = ("i=0; while [ $i -lt 100000 ]; do i=$((i+1)); "
          "printf '%d\\n' $i | dd of=/workspace/log oflag=append conv=notrunc,fsync status=none; done")


def lines_of(client, room):
    text = client.sh(room, "cat /workspace/log")
    assert text == "" or text.endswith("\n"), f"torn last line: {text[-40:]!r}"
    return [int(x) for x in text.splitlines()]


def test_a_snapshot_holds_every_line_acknowledged_before_its_201(client, room):
    check_cuts(client, room)


def check_cuts(client, room):
    """Several snapshots taken while a process appends fsync'd numbered
    lines; each restored is a clean prefix holding every line an exec saw
    before that snapshot was asked for."""
    client.sh(room, f"cat > /workspace/w.sh <<'EOF'\n{WRITER}\nEOF\n"
                    "nohup sh /workspace/w.sh >/dev/null 2>&1 &")
    cuts = []
    for _ in range(3):
        # a line read back by an exec that answered is acknowledged
        seen = client.sh(room, "sync /workspace/log; until [ -s /workspace/log ]; do :; done; "
                               "tail -n 1 /workspace/log")
        acked = int(seen.split()[-1])
        cuts.append((snap(client, room)["id"], acked))
    for sid, acked in cuts:
        assert restore(client, room, sid) == {"restored": sid}
        got = lines_of(client, room)
        assert got == list(range(1, len(got) + 1)), "not a clean prefix"
        assert len(got) >= acked, f"{sid}: line {acked} was acknowledged before the snapshot"


def test_restore_brings_back_files_and_sessions(client, room):
    client.sh(room, "echo kept > /workspace/f; mkdir -p /tmp/here; cd /tmp/here; export V=one")
    s = snap(client, room, "before")
    client.sh(room, "rm /workspace/f; cd /; export V=two; echo new > /workspace/g")
    assert restore(client, room, "before") == {"restored": s["id"]}
    assert client.sh(room, "cat /workspace/f; pwd; echo $V; ls /workspace") == \
        "kept\n/tmp/here\none\nf\n"


def say(client, room, text):
    r = client.post(f"/api/rooms/{room}/messages", {"role": "assistant", "content": text})
    assert r.status == 201, (r.status, r.json)


def start(client, room, name, cmd):
    r = client.post(f"/api/rooms/{room}/sandbox/processes", {"cmd": cmd, "name": name})
    assert r.status == 201, (r.status, r.json)


def status_of(client, room, name):
    r = client.get(f"/api/rooms/{room}/sandbox/processes/{name}")
    return r.json["process"]["status"] if r.status == 200 else r.status


def test_a_restore_brings_back_process_records_and_leaves_messages(client, stack, room):
    start(client, room, "napper", "sleep 1000")
    start(client, room, "done", "echo from-done")
    wait_until(lambda: status_of(client, room, "done") == "exited", 10, "`done` to end")
    say(client, room, "before the snapshot")
    s = snap(client, room)
    say(client, room, "after the snapshot")
    start(client, room, "later", "echo later")
    restore(client, room, s["id"])
    said = [m["content"] for m in client.get(f"/api/rooms/{room}/messages").json["messages"]]
    assert said == ["before the snapshot", "after the snapshot"], said
    assert status_of(client, room, "napper") == "lost"       # running at the cut
    assert status_of(client, room, "done") == "exited"
    logs = client.get(f"/api/rooms/{room}/sandbox/processes/done/logs")
    assert "from-done" in logs.json["stdout"], logs.json
    assert status_of(client, room, "later") == 404            # after the cut
    to = unique_room("fork")
    assert fork(client, room, to, s["id"]).status == 201
    assert status_of(client, to, "done") == "exited" and status_of(client, to, "napper") == "lost"
    parts = stack.state_dir / "processes" / ".snapshots" / room
    assert (parts / s["id"]).is_dir()
    client.destroy(room)
    assert not parts.exists()


def test_twenty_forks_never_share_a_write(client, room):
    client.sh(room, "echo base > /workspace/base")
    forks = [unique_room("fork") for _ in range(20)]
    for to in forks:
        r = fork(client, room, to)
        assert r.status == 201 and r.json == {"roomId": to}, (r.status, r.json)
    for to in forks:
        assert client.sh(to, f"cat /workspace/base; echo {to} > /workspace/mine") == "base\n"
    for to in forks:
        assert client.sh(to, "cat /workspace/mine") == f"{to}\n"
    assert client.exec(room, "cat /workspace/mine")["exitCode"] != 0
    r = client.get(f"/api/rooms/{forks[0]}")
    assert r.status == 200 and r.json["roomId"] == forks[0]


def test_a_fork_of_a_snapshot_starts_from_it(client, room):
    client.sh(room, "echo old > /workspace/v")
    s = snap(client, room)
    client.sh(room, "echo new > /workspace/v")
    to = unique_room("fork")
    assert fork(client, room, to, s["id"]).status == 201
    assert client.sh(to, "cat /workspace/v") == "old\n"
    assert client.sh(room, "cat /workspace/v") == "new\n"


def test_limits_and_errors(client, room):
    client.sh(room, "true")
    for i in range(3):
        snap(client, room, f"n{i}")
    r = client.post(f"/api/rooms/{room}/snapshots", {})
    assert r.status == 409, (r.status, r.json)
    r = client.get(f"/api/rooms/{room}/snapshots")
    assert [s["name"] for s in r.json["snapshots"]] == ["n0", "n1", "n2"]
    sid = r.json["snapshots"][0]["id"]
    r = client.delete(f"/api/rooms/{room}/snapshots/{sid}")
    assert r.status == 200 and r.json == {"deleted": sid}
    r = client.post(f"/api/rooms/{room}/snapshots", {"name": "n1"})
    assert r.status == 409, (r.status, r.json)            # a name is one snapshot's
    for bad in ("bad name", "../x", "", "x" * 65, 7):
        r = client.post(f"/api/rooms/{room}/snapshots", {"name": bad})
        assert r.status == 400, (bad, r.status, r.json)
        r = client.post(f"/api/rooms/{room}/restore", {"snapshot": bad})
        assert r.status == 400, (bad, r.status, r.json)
    assert client.post(f"/api/rooms/{room}/restore", {}).status == 400
    assert client.delete(f"/api/rooms/{room}/snapshots/a.b").status == 400
    for path in (f"/api/rooms/{room}/restore",):
        r = client.post(path, {"snapshot": "nosuchsnapshot"})
        assert r.status == 404 and r.json["error"] == "snapshot not found", r.json
    assert client.delete(f"/api/rooms/{room}/snapshots/{sid}").status == 404
    r = fork(client, room, unique_room("fork"), "nosuchsnapshot")
    assert r.status == 404, (r.status, r.json)
    other = unique_room("other")
    client.sh(other, "true")
    r = fork(client, room, other)
    assert r.status == 409, (r.status, r.json)
    assert fork(client, room, room).status == 400
    assert fork(client, room, "bad id").status == 400
    missing = unique_room("none")
    assert client.post(f"/api/rooms/{missing}/snapshots", {}).status == 404
    assert client.get(f"/api/rooms/{missing}/snapshots").status == 404
    assert fork(client, missing, unique_room("fork")).status == 404
    assert not client.stack.room_state_dir(missing).exists()


def test_a_snapshot_outlives_a_restart_and_goes_with_its_room(client, stack, room):
    client.sh(room, "echo one > /workspace/f")
    s = snap(client, room)
    assert client.post(f"/api/rooms/{room}/sandbox/restart").status == 200
    client.sh(room, "echo two > /workspace/f")
    assert [x["id"] for x in client.get(f"/api/rooms/{room}/snapshots").json["snapshots"]] == [s["id"]]
    restore(client, room, s["id"])
    assert client.sh(room, "cat /workspace/f") == "one\n"
    snaps = stack.room_state_dir(room) / "snapshots"
    assert (snaps / s["id"]).is_dir()
    client.destroy(room)
    assert not snaps.exists()
    assert client.get(f"/api/rooms/{room}/snapshots").status == 404


def test_a_stop_removes_what_a_killed_snapshot_or_fork_left(client, stack, room):
    """A helper killed in a snapshot, its removal or a fork (SIGKILL, or
    its alarm while it waited for the state lock) leaves a whole image's
    copy: .cut.img beside the room's disk, a .part-/.del- snapshot.  They
    are made and removed under the room's lock only, so the room's next
    stop removes them; its real snapshots stay."""
    client.sh(room, "echo one > /workspace/f")
    s = snap(client, room)
    state = stack.room_state_dir(room)
    left = [state / ".cut.img", state / "snapshots" / ".part-0123456789abcdef",
            state / "snapshots" / ".del-fedcba9876543210"]
    with open(left[0], "wb") as f:
        f.truncate(64 << 20)
    for d in left[1:]:
        d.mkdir(mode=0o700)
        (d / "disk.img").write_bytes(b"x" * 4096)
    assert client.post(f"/api/rooms/{room}/sandbox/stop").status == 200
    assert [p.name for p in left if p.exists()] == []
    assert [x["id"] for x in client.get(f"/api/rooms/{room}/snapshots").json["snapshots"]] == [s["id"]]
    restore(client, room, s["id"])
    assert client.sh(room, "cat /workspace/f") == "one\n"


def test_a_stopped_room_is_snapshotted_as_it_lies(client, room):
    client.sh(room, "echo still > /workspace/f")
    assert client.post(f"/api/rooms/{room}/sandbox/stop").status == 200
    s = snap(client, room)
    client.sh(room, "rm /workspace/f")
    restore(client, room, s["id"])
    assert client.sh(room, "cat /workspace/f") == "still\n"


def test_metrics_count_snapshots(client, room):
    client.sh(room, "true")
    snap(client, room)
    text = client.get("/metrics", check_json=False).body.decode()
    m = re.search(r'^roombox_snapshot_ops_total\{op="snapshot",outcome="ok"\} (\d+)$', text, re.M)
    assert m and int(m.group(1)) >= 1, text[-2000:]


# ---------------------------------------------------------------- a cut killed in its middle

FIFREEZE, FITHAW = 0xC0045877, 0xC0045878   # _IOWR('X', 119 / 120, int)
SYS_FSOPEN, SYS_FSCONFIG, SYS_FSMOUNT = 430, 431, 432   # the same number on every arch
FSCONFIG_SET_STRING, FSCONFIG_CMD_CREATE = 1, 6
MOUNT_ATTR_NOSUID, MOUNT_ATTR_NODEV = 0x2, 0x4


def ext4_root(dev):
    """A descriptor on the root of the ext4 mounted from dev (the same
    superblock as whoever has it mounted, attached nowhere), as the
    helper's cut takes it."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long

    def ok(rc, what):
        if rc < 0:
            e = ctypes.get_errno()
            raise OSError(e, f"{what} {dev}: {os.strerror(e)}")
        return rc

    fs = ok(libc.syscall(SYS_FSOPEN, b"ext4", 1), "fsopen")
    try:
        ok(libc.syscall(SYS_FSCONFIG, fs, FSCONFIG_SET_STRING, b"source", dev.encode(), 0), "source")
        ok(libc.syscall(SYS_FSCONFIG, fs, FSCONFIG_CMD_CREATE, None, None, 0), "create")
        mnt = ok(libc.syscall(SYS_FSMOUNT, fs, 1, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV), "fsmount")
    finally:
        os.close(fs)
    try:
        return os.open(".", os.O_RDONLY | os.O_DIRECTORY, dir_fd=mnt)
    finally:
        os.close(mnt)


def fs_ioctl(dev, op):
    """FIFREEZE or FITHAW on the ext4 of loop device dev; False when the
    kernel says there was nothing to do (EINVAL, EBUSY)."""
    root = ext4_root(dev)
    try:
        fcntl.ioctl(root, op, 0)
        return True
    except OSError:
        return False
    finally:
        os.close(root)


@pytest.mark.parametrize("keeper", ["running", "killed", "restarted"])
def test_a_freeze_a_killed_cut_left_goes_with_its_room(client, keeper):
    """Where the state directory cannot share blocks, a running room's cut
    freezes its file system for the copy, and a helper killed in that
    moment (the OOM killer, a root roombox-fcgi's timeout: SIGKILL) cannot
    thaw it.  The kernel keeps a frozen file system -- its loop device, the
    image -- past its last mount.  Here the helper's freeze is made as it
    makes it (its mark in the room's run directory, then FIFREEZE) and
    left; the room's end thaws it, also when its keeper died meanwhile,
    and no loop device outlives the room.  A room whose keeper died so
    starts again on its image alone (the frozen one is thawed and gone
    first: never the image mounted twice)."""
    room = unique_room()
    image = client.stack.room_state_dir(room) / "disk.img"
    try:
        client.sh(room, "echo before > /workspace/f")
        loops = loop_devices_backed_by(str(image))
        assert len(loops) == 1, loops
        dev = f"/dev/{loops[0][0]}"
        (client.stack.run_dir / "rooms" / room / "frozen").touch(mode=0o600)
        assert fs_ioctl(dev, FIFREEZE)
        if keeper in ("killed", "restarted"):
            pid = client.stack.keeper_pid(room)
            os.kill(pid, 9)
            wait_until(lambda: not pid_alive(pid), 30, "the keeper to die")
        if keeper == "restarted":
            assert client.sh(room, "cat /workspace/f; echo after >> /workspace/f; cat /workspace/f") == \
                "before\nbefore\nafter\n"
            again = loop_devices_backed_by(str(image))
            assert len(again) == 1, again   # the frozen one went before the new mount
        client.destroy(room)
        wait_until(lambda: not loop_devices_backed_by(str(image)), 30, f"{dev} to go with its room")
    finally:
        # never leave the host a frozen file system (the old helper's leak)
        for name, _ in loop_devices_backed_by(str(image)):
            fs_ioctl(f"/dev/{name}", FITHAW)
        if client.get(f"/api/rooms/{room}").status == 200:
            client.delete(f"/api/rooms/{room}")


def test_a_running_room_a_killed_cut_left_frozen_thaws_at_the_next_idle_sweep():
    """A room that keeps running after a cut was killed in its freeze
    would keep its writers waiting until it stops.  The idle sweep (every
    quarter of idle_timeout, here 0.5 s) thaws it, under the room's lock:
    a write begun in the frozen room ends."""
    s = started_stack(extra={"idle_timeout": "2s"})
    c = Client(s)
    room = unique_room()
    image = s.room_state_dir(room) / "disk.img"
    mark = s.run_dir / "rooms" / room / "frozen"
    try:
        c.sh(room, "echo before > /workspace/f")
        loops = loop_devices_backed_by(str(image))
        assert len(loops) == 1, loops
        mark.touch(mode=0o600)
        assert fs_ioctl(f"/dev/{loops[0][0]}", FIFREEZE)
        # waits in the frozen file system until the sweep thaws it (busy:
        # the sweep does not stop the room meanwhile)
        assert c.sh(room, "echo after >> /workspace/f; cat /workspace/f", http_timeout=60) == \
            "before\nafter\n"
        assert not mark.exists()
    finally:
        for name, _ in loop_devices_backed_by(str(image)):
            fs_ioctl(f"/dev/{name}", FITHAW)
        c.delete(f"/api/rooms/{room}")
        problems = s.stop()
        assert not problems, problems


def room_freezer(room):
    """The room's own freeze switch and the value that freezes it: cgroup
    v1's freezer.state, or v2's cgroup.freeze; None without either."""
    top = Path("/sys/fs/cgroup")
    for path in [*top.glob(f"freezer/*/{room}/freezer.state"), *top.glob(f"*/{room}/cgroup.freeze"),
                 *top.glob(f"*/*/{room}/cgroup.freeze")]:
        return path, ("FROZEN" if path.name == "freezer.state" else "1")
    return None


def test_a_room_a_killed_cut_left_with_its_processes_frozen_thaws_at_the_next_idle_sweep():
    """A cut stops the room's processes (its cgroup frozen) before it
    freezes the file system; a helper killed in that moment leaves every
    process of the room, its keeper too, standing still.  The cut marks
    the freeze first, so the idle sweep (here every 0.5 s) thaws the
    cgroup under the room's lock: an exec sent to the stood-still room
    answers."""
    s = started_stack(extra={"idle_timeout": "2s"})
    c = Client(s)
    room = unique_room()
    mark = s.run_dir / "rooms" / room / "frozen"
    try:
        c.sh(room, "echo before > /workspace/f")
        switch = room_freezer(room)
        if switch is None:
            pytest.skip("no freezer for the room's cgroup on this host (cgroup mode none)")
        path, frozen = switch
        mark.touch(mode=0o600)
        path.write_text(frozen)
        # waits on the frozen room until the sweep thaws it (busy: the
        # sweep does not stop the room meanwhile)
        assert c.sh(room, "echo after >> /workspace/f; cat /workspace/f", http_timeout=60) == \
            "before\nafter\n"
        assert not mark.exists()
    finally:
        switch = room_freezer(room)
        if switch:
            switch[0].write_text("THAWED" if switch[0].name == "freezer.state" else "0")
        c.delete(f"/api/rooms/{room}")
        problems = s.stop()
        assert not problems, problems


# ---------------------------------------------------------------- on XFS, with reflinks

@pytest.fixture
def xfs_state_dir():
    """A 2 GiB XFS made with reflinks (mkfs.xfs -m reflink=1), mounted at a
    directory of its own; unmounted and removed afterwards."""
    if not shutil.which("mkfs.xfs"):
        pytest.skip("mkfs.xfs is not installed (xfsprogs)")
    top = Path(tempfile.mkdtemp(prefix="rbx-xfs-", dir="/tmp"))
    image, mnt = top / "fs.img", top / "state"
    mnt.mkdir()
    with open(image, "wb") as f:
        f.truncate(2 << 30)
    for argv in (["mkfs.xfs", "-q", "-m", "reflink=1", image], ["mount", "-o", "loop", image, mnt]):
        r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, f"{argv}: {r.stderr}"
    os.chmod(mnt, 0o711)
    try:
        yield mnt
    finally:
        subprocess.run(["umount", mnt], capture_output=True)
        wait_until(lambda: not loop_devices_backed_by(str(image)), 10, "the loop device to go")
        image.unlink()
        mnt.rmdir()
        top.rmdir()


def test_on_a_reflink_file_system_cuts_share_blocks_and_stay_consistent(xfs_state_dir):
    s = started_stack(state_dir=xfs_state_dir, extra={"disk_overcommit": "1000"})
    c = Client(s)
    room = unique_room("x")
    try:
        assert c.get("/api/health", auth=False).json["snapshotCopy"] == "reflink"
        c.sh(room, "head -c 64M /dev/urandom > /workspace/big; sync")
        free = os.statvfs(xfs_state_dir)
        before = free.f_bavail * free.f_frsize
        promised = c.get("/api/health", auth=False).json["disk"]["promisedBytes"]
        r = c.post(f"/api/rooms/{room}/snapshots", {})
        assert r.status == 201 and r.json["frozenMs"] < 1000, r.json
        free = os.statvfs(xfs_state_dir)
        assert before - free.f_bavail * free.f_frsize < 16 << 20, "the snapshot copied its blocks"
        # its shared blocks are promised: the room's overwrites may leave them to it alone
        now = c.get("/api/health", auth=False).json["disk"]["promisedBytes"]
        assert now - promised >= 64 << 20, (promised, now)
        sid = r.json["snapshot"]["id"]
        assert c.delete(f"/api/rooms/{room}/snapshots/{sid}").status == 200
        assert c.get("/api/health", auth=False).json["disk"]["promisedBytes"] == promised
        check_cuts(c, room)
        to = unique_room("xf")
        c.touch(to)
        assert fork(c, room, to).status == 201
        c.sh(to, "echo mine > /workspace/mine")
        assert c.exec(room, "cat /workspace/mine")["exitCode"] != 0
    finally:
        for r in c.rooms:
            c.delete(f"/api/rooms/{r}")
        problems = s.stop()
        assert not problems, problems


def test_a_room_without_a_disk_image_says_so():
    """disk_limit = 0: the room's layer is a plain directory, which is not
    snapshotted nor forked: 409 with the reason, and nothing made."""
    s = started_stack(extra={"disk_limit": "0"})
    c = Client(s)
    room = unique_room("p")
    try:
        assert c.get("/api/health", auth=False).json["snapshotCopy"] == "none"
        c.sh(room, "true")
        r = c.post(f"/api/rooms/{room}/snapshots", {})
        assert r.status == 409 and "no disk image" in r.json["error"], r.json
        to = unique_room("pf")
        r = c.post(f"/api/rooms/{room}/fork", {"to": to})
        assert r.status == 409 and "no disk image" in r.json["error"], r.json
        assert c.get(f"/api/rooms/{to}").status == 404
        assert c.get(f"/api/rooms/{room}/snapshots").json == {"snapshots": []}
    finally:
        c.delete(f"/api/rooms/{room}")
        problems = s.stop()
        assert not problems, problems
