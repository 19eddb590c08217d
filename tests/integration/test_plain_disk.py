"""disk_limit = 0: a room's writable layer is a plain directory in its
state directory, mounted through the same idmapped clone as a disk image:
it stores room-relative ids too (a file of the room's root as owner 0, of
its user as 1000).  Through nginx."""

import os

SERVERS = ("nginx",)
ROOMBOX_CONFIG = {"disk_limit": "0"}


def test_a_plain_directory_layer_keeps_room_relative_ids(client, stack, room):
    client.sh(room, "touch /usr/local/bin/r /workspace/r")
    client.sh(room, "touch /workspace/u; mkdir /home/user/d", user="user")
    assert client.sh(room, "stat -c %u:%g /usr/local/bin/r /workspace/r /workspace/u /home/user/d") == \
        "0:0\n0:0\n1000:1000\n1000:1000\n"
    upper = stack.room_state_dir(room) / "disk" / "upper"
    assert not (stack.room_state_dir(room) / "disk.img").exists()
    found = {str(p.relative_to(upper)): (os.lstat(p).st_uid, os.lstat(p).st_gid)
             for p in (upper / "usr/local/bin/r", upper / "root/workspace/r",
                       upper / "root/workspace/u", upper / "root/home/user/d")}
    assert found == {"usr/local/bin/r": (0, 0), "root/workspace/r": (0, 0),
                     "root/workspace/u": (1000, 1000), "root/home/user/d": (1000, 1000)}, found
    # the room's processes still run under its host ids, never 0
    host = client.room_uid(room)
    assert host != 0 and client.sh(room, "read a b c < /proc/self/uid_map; echo $b") == f"{host}\n"
