"""The snapshot operations' records (snapshot, snapshots, snapshot-delete,
restore, fork, export: struct helper_snap_args, common/protocol.h): every field
is a room-id-rule id or "", NUL-padded, and only the fields its op takes;
anything else is refused before a room is touched, and nothing is made --
no snapshot, no new room, nothing outside the room's own directory.

The helper runs directly as root, as roombox-fcgi would run it.
"""

import os
import subprocess

import pytest

from conftest import HELPER, decode_answer, encode_request, record, unique_room
from helper_records import OPS, SNAP_ARGS

SERVERS = ("nginx",)
BAD_IDS = [b"..", b"../x", b"a/b", b".hidden", b"-x", b"a\nb", b"a b"]


def run(stack, data):
    return subprocess.run([str(HELPER), "-c", str(stack.conf_path)], input=data,
                          capture_output=True, timeout=120, cwd="/")


def refused(stack, data, code="invalid"):
    r = run(stack, data)
    out = decode_answer(r.stdout)
    assert r.returncode != 0 and out.get("code") == code, out
    return out


def state_names(stack):
    return sorted(os.listdir(stack.state_dir / "rooms"))


@pytest.fixture
def made(stack, client):
    room = unique_room("snp")
    client.sh(room, "echo x > /workspace/f")
    return room


@pytest.mark.parametrize("bad", BAD_IDS)
def test_bad_ids_are_refused_and_nothing_is_made(stack, made, bad):
    before = state_names(stack)
    snaps = stack.state_dir / "rooms" / made / "snapshots"
    for op in ("snapshot", "snapshot-delete", "restore", "export"):
        refused(stack, record(OPS[op], made, SNAP_ARGS.pack(bad, b"")))
    refused(stack, record(OPS["fork"], made, SNAP_ARGS.pack(b"", bad)))
    refused(stack, record(OPS["fork"], made, SNAP_ARGS.pack(bad, b"new-room")))
    assert state_names(stack) == before
    assert not snaps.exists() or not os.listdir(snaps)


def test_fields_an_op_does_not_take_are_refused(stack, made):
    refused(stack, record(OPS["snapshot"], made, SNAP_ARGS.pack(b"", b"other")))
    refused(stack, record(OPS["snapshots"], made, SNAP_ARGS.pack(b"x", b"")))
    refused(stack, record(OPS["restore"], made, SNAP_ARGS.pack(b"", b"")))
    refused(stack, record(OPS["fork"], made, SNAP_ARGS.pack(b"", b"")))
    refused(stack, record(OPS["fork"], made, SNAP_ARGS.pack(b"", made.encode())))   # itself
    refused(stack, record(OPS["snapshot"], made, SNAP_ARGS.pack(b"", b"")[:-1]))     # short
    refused(stack, record(OPS["export"], made, SNAP_ARGS.pack(b"", b"other")))
    refused(stack, record(OPS["export"], made))                                     # no args


def test_garbage_after_a_field_is_refused(stack, made):
    args = bytearray(SNAP_ARGS.pack(b"name", b""))
    args[71] = ord("x")    # the snapshot field's last byte: not NUL-padded
    refused(stack, record(OPS["snapshot"], made, bytes(args)))
    args = bytearray(SNAP_ARGS.pack(b"name", b""))
    args[10] = ord("x")    # after its NUL, before the field's end
    refused(stack, record(OPS["snapshot"], made, bytes(args)))


def test_a_room_that_does_not_exist_is_not_made(stack):
    room = unique_room("snp")
    for op in ("snapshot", "snapshots", "restore", "snapshot-delete", "export"):
        ref = b"" if op in ("snapshot", "snapshots") else b"x"
        refused(stack, record(OPS[op], room, SNAP_ARGS.pack(ref, b"")), "not_found")
    refused(stack, record(OPS["fork"], room, SNAP_ARGS.pack(b"", b"fork-of-nothing")), "not_found")
    for name in (room, "fork-of-nothing"):
        assert not (stack.state_dir / "rooms" / name).exists()


def test_well_formed_records_do_what_they_say(stack, client, made):
    """Control: the same records, whole, snapshot, list, fork and delete."""
    r = run(stack, encode_request({"op": "snapshot", "room": made, "snapshot": "first"}))
    s = decode_answer(r.stdout)
    assert r.returncode == 0 and s["name"] == "first" and s["frozen_us"] > 0, s
    out = decode_answer(run(stack, encode_request({"op": "snapshots", "room": made})).stdout)
    assert [x["id"] for x in out["snapshots"]] == [s["id"]], out
    to = unique_room("snp")
    client.touch(to)
    r = run(stack, encode_request({"op": "fork", "room": made, "snapshot": "first", "to": to}))
    assert r.returncode == 0, decode_answer(r.stdout)
    assert client.sh(to, "cat /workspace/f") == "x\n"
    r = run(stack, encode_request({"op": "snapshot-delete", "room": made, "snapshot": s["id"]}))
    assert r.returncode == 0 and decode_answer(r.stdout)["id"] == s["id"]
