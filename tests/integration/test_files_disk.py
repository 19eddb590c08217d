"""An upload into a full room: 507, and nothing left under the target name
(SPEC §8.2), through nginx and lighttpd."""

import os

ROOMBOX_CONFIG = {"disk_limit": "32M", "max_file": "100M"}


def test_upload_into_a_full_room_is_507_and_leaves_nothing(client, room, tmp_path):
    data = os.urandom(48 << 20)
    r = client.request("PUT", f"/api/rooms/{room}/sandbox/files/full.bin", data=data, timeout=120)
    assert r.status == 507, r
    assert r.json == {"error": "no space left in the room"}
    assert client.get(f"/api/rooms/{room}/sandbox/files/full.bin").status == 404
    assert client.sh(room, "ls -A /workspace") == ""
    # and the room still takes a file that fits
    r = client.request("PUT", f"/api/rooms/{room}/sandbox/files/small.bin", data=b"ok")
    assert r.status == 201
