"""apt and dpkg in a room with rootfs = host: the
room's dpkg knows the host's installed packages and its apt the host's
sources, and `apt-get install X` adds only X to the room -- for good (across
a killed keeper), and to that room alone.

No test touches the real Debian archive: the package is a tiny .deb built
here with dpkg-deb, in a local repository (Packages made by
dpkg-scanpackages) that the test copies into the room and names with a
file: source; apt is limited to that source.  Through nginx and lighttpd."""

import os
import signal
import subprocess
import uuid
from pathlib import Path

from apt_util import APT, install_in_room
from conftest import GONE_TIMEOUT, pid_alive, unique_room, wait_until


def host_packages():
    out = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Abbrev} ${Package}\\n"],
                         capture_output=True, text=True, check=True).stdout
    return {l.split()[1] for l in out.splitlines() if l.startswith("ii")}


def room_packages(client, room):
    out = client.sh(room, "dpkg-query -W -f '${db:Status-Abbrev} ${Package}\\n'")
    return {l.split()[1] for l in out.splitlines() if l.startswith("ii")}


def test_the_rooms_dpkg_and_apt_know_the_hosts_packages_and_sources(client, room):
    host = host_packages()
    assert "coreutils" in host and "dpkg" in host
    assert room_packages(client, room) == host
    # apt's sources: those of the host that everyone may read
    for src in list(Path("/etc/apt/sources.list.d").glob("*")) + [Path("/etc/apt/sources.list")]:
        if src.is_file() and os.stat(src).st_mode & 0o004:
            assert client.sh(room, f"cat {src}") == src.read_text(), src
    # secrets of apt's are not copied
    assert client.sh(room, "ls /etc/apt/auth.conf.d 2>/dev/null | wc -l") in ("0\n",)


def test_apt_get_install_adds_only_that_package_to_that_room(client, stack):
    a, b = unique_room("apt"), unique_room("other")
    name = f"rbx-hello-{uuid.uuid4().hex[:8]}"
    before = room_packages(client, a)
    install_in_room(client, a, name)
    assert client.sh(a, f"dpkg-query -W -f '${{db:Status-Abbrev}}' {name}").strip() == "ii"
    # only that package was added
    assert room_packages(client, a) - before == {name}
    assert before - room_packages(client, a) == set()
    # across a killed keeper
    keeper = stack.keeper_pid(a)
    assert keeper
    os.kill(keeper, signal.SIGKILL)
    wait_until(lambda: not pid_alive(keeper), GONE_TIMEOUT, "the killed keeper to end")
    assert client.sh(a, name) == f"hello from {name}\n"
    assert name in room_packages(client, a)
    # not on the host, not in another room
    assert not os.path.exists(f"/usr/bin/{name}")
    assert name not in host_packages()
    res = client.exec(b, f"command -v {name}; dpkg-query -W {name}")
    assert res["exitCode"] != 0 and res["stdout"] == "", res
    assert name not in room_packages(client, b)
    # removing it works too, and leaves the host's packages as they were
    client.sh(a, f"DEBIAN_FRONTEND=noninteractive {APT} remove -y {name}", timeout=300000)
    assert room_packages(client, a) == before
