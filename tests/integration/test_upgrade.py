"""A room made by the previous version (one host uid per room, no user
namespace) keeps working after the upgrade: at its next start its files
change owner once -- those of the old uid become the room's user's (1000),
stored room-relative on its disk -- its /etc/passwd and /etc/group name the
new ids, and its meta records it ("ids":"room").  Through nginx.

The test makes such a room the way the previous version left one: meta
without "ids", the files its user wrote owned by uid_base + slot on the
disk image, and the old /etc/passwd naming that uid."""

import json
import os
import subprocess
import tempfile
from contextlib import contextmanager

from conftest import unique_room

SERVERS = ("nginx",)


@contextmanager
def disk_mounted(state):
    """The room's disk image, mounted on the host for the test alone."""
    d = tempfile.mkdtemp(prefix="rbx-upgrade-")
    subprocess.run(["mount", "-o", "loop,nosuid,nodev", str(state / "disk.img"), d], check=True)
    try:
        yield d
    finally:
        subprocess.run(["umount", d], check=True)
        os.rmdir(d)


def owners(top):
    """{relative path: (uid, gid)} of every file under top."""
    out = {}
    for dirpath, dirs, files in os.walk(top):
        for n in dirs + files:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            out[os.path.relpath(p, top)] = (st.st_uid, st.st_gid)
    return out


def make_it_old(stack, room):
    """Turn the (stopped) room into what the previous version left."""
    state = stack.room_state_dir(room)
    meta = json.loads((state / "meta").read_text())
    assert meta.pop("ids") == "room"
    old = stack.uid_base + meta["slot"]
    (state / "meta").write_text(json.dumps(meta) + "\n")
    with disk_mounted(state) as disk:
        for rel, (uid, gid) in owners(f"{disk}/upper").items():
            p = f"{disk}/upper/{rel}"
            if uid == 1000 or gid == 1000:
                mode = os.lstat(p).st_mode
                os.lchown(p, old if uid == 1000 else uid, old if gid == 1000 else gid)
                if not os.path.islink(p):   # chown cleared a setuid bit
                    os.chmod(p, mode & 0o7777)
        etc = f"{disk}/upper/root/etc"
        with open(f"{etc}/passwd", "w") as f:
            f.write("root:x:0:0:root:/root:/usr/sbin/nologin\n"
                    f"user:x:{old}:{old}:sandbox user:/home/user:/bin/sh\n"
                    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        with open(f"{etc}/group", "w") as f:
            f.write(f"root:x:0:\nuser:x:{old}:\nnogroup:x:65534:\n")
        mine = [rel for rel, (uid, _) in owners(f"{disk}/upper").items() if uid == old]
        assert "root/workspace/f" in mine and "root/home/user/d/g" in mine, mine
    return old


def test_a_room_of_the_previous_version_keeps_its_files(client, stack):
    room = unique_room("old")
    client.sh(room, "echo old > /workspace/f; mkdir /home/user/d; echo x > /home/user/d/g; "
                    "chmod 4755 /home/user/d/g", user="user")
    rc, out = stack.helper({"op": "stop", "room": room})
    assert rc == 0, out
    old = make_it_old(stack, room)

    # the user's files are the room's user's again, and writable by it
    out = client.sh(room, "cat /workspace/f; stat -c '%u:%g %a' /workspace/f /home/user/d/g "
                          "/home/user /workspace; echo more >> /workspace/f && cat /workspace/f; "
                          "id -un; grep '^user:' /etc/passwd", user="user")
    assert out.splitlines() == ["old", "1000:1000 644", "1000:1000 4755", "1000:1000 755",
                                "1000:1000 755", "old", "more", "user",
                                "user:x:1000:1000:sandbox user:/home/user:/bin/sh"], out
    meta = json.loads((stack.room_state_dir(room) / "meta").read_text())
    assert meta.get("ids") == "room", meta
    # on its disk: room-relative ids, nothing of the old host uid
    rc, out = stack.helper({"op": "stop", "room": room})
    assert rc == 0, out
    with disk_mounted(stack.room_state_dir(room)) as disk:
        found = owners(f"{disk}/upper")
        assert not [r for r, ids in found.items() if old in ids], found
        assert found["root/workspace/f"] == (1000, 1000)
    # and once only: a second start changes nothing
    assert client.sh(room, "stat -c %u /workspace/f; cat /workspace/f", user="user") == "1000\nold\nmore\n"
