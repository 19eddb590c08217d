"""A room whose disk image cannot be used does not start, says why, leaves
nothing behind, and loses nothing: once the image is whole again, the room
starts with its files.  The helper attaches the image to a loop device and
mounts it while its jail thread makes the room's namespaces and the keeper;
the keeper moves the mount in.  Either side failing must end the whole
start.  Through nginx."""

import grp
import os
import subprocess
from pathlib import Path

import pytest

from conftest import cgroup_dirs_named, loop_devices_backed_by, procs_of_room, unique_room, wait_until

SERVERS = ("nginx",)


def stop(stack, room):
    keeper = stack.keeper_pid(room)
    rc, out = stack.helper({"op": "stop", "room": room})
    assert rc == 0, out
    wait_until(lambda: not keeper or not os.path.exists(f"/proc/{keeper}"), 5, "the keeper to end")


def room_cgroup_procs(room):
    """Processes in any of the room's cgroups (the keeper runs as host root
    until its last step, so the room's ids would not find it)."""
    pids = []
    for d in cgroup_dirs_named(room):
        for f in Path(d).rglob("cgroup.procs"):
            pids += f.read_text().split()
    return pids


def assert_nothing_started(client, stack, room, image):
    assert stack.keeper_pid(room) is None
    assert room_cgroup_procs(room) == []
    assert procs_of_room(client.room_uid(room)) == []
    if image:
        assert loop_devices_backed_by(str(image)) == []


def test_a_damaged_image_is_a_clear_error_and_keeps_the_files(client, stack, room):
    client.sh(room, "echo kept > /workspace/f")
    stop(stack, room)
    image = stack.room_state_dir(room) / "disk.img"
    with open(image, "r+b") as f:
        f.seek(1024)                 # the ext4 superblock
        whole = f.read(1024)
        f.seek(1024)
        f.write(b"\0" * 1024)
    r = client.exec_raw(room, {"cmd": "true"})
    assert r.status == 500, r
    assert r.json["error"].startswith(f"sandbox execution failed: room {room}: mount its disk image: "), r.json
    assert_nothing_started(client, stack, room, image)
    with open(image, "r+b") as f:
        f.seek(1024)
        f.write(whole)
    assert client.sh(room, "cat /workspace/f") == "kept\n"


def test_an_image_that_cannot_be_attached_is_a_clear_error(client, stack, room):
    client.sh(room, "echo kept > /workspace/f")
    stop(stack, room)
    image = stack.room_state_dir(room) / "disk.img"
    aside = image.with_name("disk.img.aside")
    os.rename(image, aside)
    os.mkdir(image)                  # lstat finds it, no loop device takes it
    try:
        r = client.exec_raw(room, {"cmd": "true"})
        assert r.status == 500, r
        assert r.json["error"].startswith(f"sandbox execution failed: room {room}: attach its disk image: "), \
            r.json
        assert_nothing_started(client, stack, room, None)
    finally:
        os.rmdir(image)
        os.rename(aside, image)
    assert client.sh(room, "cat /workspace/f") == "kept\n"


# serial: a host group added is every stack's (new rooms' /etc/group, disk
# templates and the images made ahead from them)
@pytest.mark.serial
def test_a_new_room_sees_the_host_system_accounts_of_its_creation(client, stack):
    """New rooms' disks come from a template that already holds the room's
    /etc/passwd and /etc/group (made from the host's system accounts): a
    system group the host gains must reach the rooms made after it."""
    name = "rbt" + os.urandom(4).hex()
    before, after = unique_room(), unique_room()
    assert client.sh(before, f"grep -c '^{name}:' /etc/group || true") == "0\n"
    subprocess.run(["groupadd", "-r", name], check=True)
    try:
        gid = grp.getgrnam(name).gr_gid
        assert client.sh(after, f"grep '^{name}:' /etc/group") == f"{name}:x:{gid}:\n"
        # the room made before keeps its own copy
        assert client.sh(before, f"grep -c '^{name}:' /etc/group || true") == "0\n"
    finally:
        subprocess.run(["groupdel", name], check=True)


def test_a_new_room_takes_the_disk_image_made_ahead(client, stack):
    """Each new room's start leaves the next new room's image made ahead
    (written to disk, so that configuring its loop device writes nothing
    back); the next new room takes that very file, with the skeleton, and
    leaves another one."""
    first, second = unique_room(), unique_room()
    client.sh(first, "true")
    spares = list(stack.state_dir.glob(".disk-*.spare.img"))
    assert len(spares) == 1, spares
    spare = spares[0]
    assert spare.name.removesuffix(".spare.img") + ".img" in os.listdir(stack.state_dir)
    made_ahead = spare.stat().st_ino
    assert client.sh(second, "stat -c '%U %a' /workspace /tmp; df -P / | tail -1 | awk '{print $1}'") == \
        "user 755\nroot 1777\noverlay\n"
    assert (stack.room_state_dir(second) / "disk.img").stat().st_ino == made_ahead
    again = list(stack.state_dir.glob(".disk-*.spare.img"))
    assert len(again) == 1 and again[0].stat().st_ino != made_ahead, again


def test_a_rooms_writes_are_not_cached_twice_on_the_host(client, stack):
    """The room's ext4 caches its own blocks; the loop device under it uses
    direct I/O, so 50 MB written in the room do not also sit in the host's
    page cache of the image file."""
    room = unique_room("dio")
    client.sh(room, "true")
    try:
        image = stack.room_state_dir(room) / "disk.img"
        devs = [name for name, backing in loop_devices_backed_by(str(image))]
        assert len(devs) == 1, devs
        try:   # control: whether the image's file system takes direct I/O at all
            os.close(os.open(image, os.O_RDONLY | os.O_DIRECT))
        except OSError as e:
            pytest.skip(f"the file system holding {image} takes no direct I/O ({e})")
        r = client.sh(room, "head -c 52428800 /dev/zero > /workspace/big && sync && echo ok")
        assert r == "ok\n", r
        cached = subprocess.run(["fincore", "--bytes", "--noheadings", "--output", "RES", str(image)],
                                capture_output=True, text=True, check=True).stdout.strip()
        assert int(cached) < 8 << 20, f"{cached} bytes of {image} in the host's page cache"
        assert Path(f"/sys/block/{devs[0]}/loop/dio").read_text().strip() == "1"
    finally:
        client.destroy(room)
