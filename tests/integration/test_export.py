"""Export and import of a room (GET /api/rooms/{id}/export, PUT
/api/rooms/{id}/import) through nginx: a room's files (owners, modes,
links, file capabilities, sparse files, a deleted file of the lower
layer), its session and messages come back byte for byte under a new id;
every hostile archive is refused with its reason and leaves no room and
nothing under state_dir.  Hostile archives are built here as
docs/export-format.md says (tar + the zstd CLI, manifest, seal)."""

import hashlib
import hmac
import io
import os
import struct
import subprocess
import tarfile

import pytest

from conftest import Client, started_stack, unique_room

SERVERS = ("nginx",)
KEY = b"export-key-of-the-test"


def export(client, room, **kw):
    r = client.request("GET", f"/api/rooms/{room}/export", check_json=False, timeout=600, **kw)
    assert r.status == 200, (r.status, r.body[:300])
    assert r.header("content-type") == "application/x-roombox-room"
    return r.body


def import_(client, room, data):
    return client.request("PUT", f"/api/rooms/{room}/import", data=data, timeout=600,
                          headers={"Content-Type": "application/x-roombox-room"})


# ---- a fixture room ---------------------------------------------------------

SETUP = r"""
set -e
mkdir -p /workspace/d/sub
printf 'hello\n' > /workspace/d/root.txt
chmod 0640 /workspace/d/root.txt
printf 'of user\n' > /workspace/d/user.txt
chown 1000:1000 /workspace/d/user.txt /workspace/d/sub
ln -s ../d/root.txt /workspace/d/link
ln /workspace/d/root.txt /workspace/d/hard
truncate -s 64M /workspace/d/sparse
printf 'middle' | dd of=/workspace/d/sparse bs=1 seek=33554432 conv=notrunc 2>/dev/null
cp /bin/true /workspace/d/captrue
mkfifo /workspace/d/fifo
rm /usr/bin/tac
setfattr -n user.color -v blue /workspace/d/root.txt 2>/dev/null || true
"""

SUMMARY = r"""(
cd /workspace/d
for f in root.txt user.txt hard captrue; do
  printf '%s ' "$f"; stat -c '%u:%g %a %h %s' "$f"; sha256sum < "$f"
done
stat -c 'link %N %u:%g' link
stat -c 'sub %u:%g %a %F' sub
stat -c 'fifo %F %a' fifo
stat -c 'sparse %s' sparse; sha256sum < sparse
[ -e /usr/bin/tac ] && echo tac-back || echo tac-gone
[ -e /usr/bin/head ] && echo head-there || echo head-gone
)"""


def make_room(client, room):
    client.sh(room, SETUP)
    # a file capability: setcap in the room when it has it
    have = client.exec(room, "command -v setcap")["exitCode"] == 0
    if have:
        client.sh(room, "setcap cap_net_bind_service+ep /workspace/d/captrue")
    client.sh(room, "cd /tmp && export ROUNDTRIP=yes-$((6*7))")
    r = client.post(f"/api/rooms/{room}/messages", {"role": "user", "content": "remember me"})
    assert r.status in (200, 201), r.json
    return have


def test_round_trip_under_a_new_id(client, room):
    have_setcap = make_room(client, room)
    before = client.sh(room, SUMMARY)
    cap_before = client.sh(room, "getcap /workspace/d/captrue") if have_setcap else ""
    msgs_before = client.get(f"/api/rooms/{room}/messages").json
    data = export(client, room)
    # a standard archive: zstd + tar read it
    listing = subprocess.run(["sh", "-c", "zstd -dc | tar -tvf -"], input=data,
                             capture_output=True, check=True).stdout.decode()
    assert "state/root/workspace/d/root.txt" in listing, listing[:2000]
    assert "roombox/manifest" in listing
    client.destroy(room)
    new = unique_room()
    r = import_(client, new, data)
    assert r.status == 201, r.json
    assert r.json == {"roomId": new}
    after = client.sh(new, SUMMARY)
    assert after == before
    assert "tac-gone" in after and "head-there" in after
    assert "c--------- 0/0" in listing or "state/usr/bin/tac" in listing
    if have_setcap:
        assert client.sh(new, "getcap /workspace/d/captrue") == cap_before
    # still sparse: 64M apparent, a few blocks used
    used = int(client.sh(new, "du -k /workspace/d/sparse | cut -f1"))
    assert used < 1024, used
    # the session: cwd and the exported variable
    assert client.sh(new, "pwd; echo $ROUNDTRIP") == "/tmp\nyes-42\n"
    msgs = client.get(f"/api/rooms/{new}/messages").json
    assert msgs == msgs_before
    # and it works
    assert client.sh(new, "echo works > /workspace/w && cat /workspace/w") == "works\n"
    # importing again under the same id: 409
    assert import_(client, new, data).status == 409
