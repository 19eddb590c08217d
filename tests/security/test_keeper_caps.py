"""The keeper, PID 1 of every room, keeps only the capabilities it uses:
the lists in sandbox-helper/keeper/caps.h, read here, against what the
kernel says a running keeper holds.  It runs as the root of the room's user
namespace, so every capability it has is one over that namespace only."""

import os
import re

from conftest import REPO, procs_with_uid_in

CAPS_H = REPO / "sandbox-helper" / "keeper" / "caps.h"
LINUX_CAPS_H = "/usr/include/linux/capability.h"


def cap_numbers():
    text = open(LINUX_CAPS_H).read()
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"#define\s+(CAP_[A-Z_]+)\s+(\d+)\b", text)}


def keeper_caps_mask(name="KEEPER_CAPS"):
    """A list of caps.h (KEEPER_CAPS, ROOM_CAPS) as a bit mask (every CAP_
    name in its definition, continuation lines included)."""
    text = open(CAPS_H).read().replace("\\\n", " ")
    define = re.search(r"#define\s+" + name + r"\s+(.*)", text).group(1)
    names = re.findall(r"\bCAP_[A-Z_]+\b", define)
    assert names, define
    numbers = cap_numbers()
    return sum(1 << numbers[n] for n in names), names


def status_fields(pid):
    with open(f"/proc/{pid}/status") as f:
        return dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)


def test_the_keeper_holds_exactly_the_capabilities_named_in_caps_h(client, stack, room):
    assert client.sh(room, "echo up") == "up\n"
    keeper = stack.keeper_pid(room)
    assert keeper
    mask, names = keeper_caps_mask()
    room_mask, room_names = keeper_caps_mask("ROOM_CAPS")
    assert len(room_names) == 14 and mask & room_mask == mask, (names, room_names)
    st = status_fields(keeper)
    eff, prm, bnd = int(st["CapEff"], 16), int(st["CapPrm"], 16), int(st["CapBnd"], 16)
    assert eff == mask, f"CapEff {eff:#x}, caps.h names {names} = {mask:#x}"
    # permitted: Docker's default set, only to hand it to the room's root
    # (no_new_privs lets an exec gain nothing its parent lacks)
    assert prm == room_mask, f"CapPrm {prm:#x}, caps.h ROOM_CAPS {room_names} = {room_mask:#x}"
    assert bnd == room_mask, f"CapBnd {bnd:#x}, caps.h ROOM_CAPS {room_names} = {room_mask:#x}"
    for key in ("CapInh", "CapAmb"):
        assert int(st[key], 16) == 0, (key, st[key])
    assert st["NoNewPrivs"].strip() == "0" and st["Seccomp"].strip() == "2", st
    # over the room's user namespace only: the keeper is the room's root,
    # under the room's first host id, never host root
    host_uid = client.room_uid(room)
    assert st["Uid"].split() == [str(host_uid)] * 4, st["Uid"]
    assert st["Gid"].split() == [str(host_uid)] * 4, st["Gid"]
    assert os.readlink(f"/proc/{keeper}/ns/user") != os.readlink("/proc/self/ns/user")
    with open(f"/proc/{keeper}/uid_map") as f:
        assert f.read().split() == ["0", str(host_uid), "65536"]
    # and with them it still does its work: a deadline kills a tree of
    # the room's user, and an exec's leftovers are found by their audit session
    res = client.exec(room, "sleep 30 & sleep 30", timeout=300, user="user")
    assert res["timedOut"] and res["exitCode"] == 124, res
    res = client.exec(room, "sleep 30 & sleep 30", timeout=300)
    assert res["timedOut"] and res["exitCode"] == 124, res
    assert client.sh(room, "echo ok") == "ok\n"
    assert not [p for p in procs_with_uid_in(host_uid, host_uid + 65536) if p[1] == "sleep 30"]
