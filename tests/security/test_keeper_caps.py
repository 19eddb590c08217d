"""The keeper, PID 1 of every room, keeps only the capabilities it uses:
the list in sandbox-helper/keeper/caps.h, read here, against what the
kernel says a running keeper holds."""

import re

from conftest import REPO

CAPS_H = REPO / "sandbox-helper" / "keeper" / "caps.h"
LINUX_CAPS_H = "/usr/include/linux/capability.h"


def cap_numbers():
    text = open(LINUX_CAPS_H).read()
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"#define\s+(CAP_[A-Z_]+)\s+(\d+)\b", text)}


def keeper_caps_mask():
    """KEEPER_CAPS of caps.h as a bit mask (every CAP_ name in its
    definition, continuation lines included)."""
    text = open(CAPS_H).read().replace("\\\n", " ")
    define = re.search(r"#define\s+KEEPER_CAPS\s+(.*)", text).group(1)
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
    st = status_fields(keeper)
    eff, prm = int(st["CapEff"], 16), int(st["CapPrm"], 16)
    assert eff == mask, f"CapEff {eff:#x}, caps.h names {names} = {mask:#x}"
    assert prm == mask, f"CapPrm {prm:#x}, caps.h names {names} = {mask:#x}"
    for key in ("CapInh", "CapAmb", "CapBnd"):
        assert int(st[key], 16) == 0, (key, st[key])
    # and with them it still does its work: a deadline kills a tree of
    # another uid, and an exec's leftovers are found by their audit session
    res = client.exec(room, "sleep 30 & sleep 30", timeout=300)
    assert res["timedOut"] and res["exitCode"] == 124, res
    assert client.sh(room, "echo ok") == "ok\n"
