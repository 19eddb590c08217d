"""What the tests that install a package in a room share: a tiny .deb built
here with dpkg-deb, in a local repository (Packages made by
dpkg-scanpackages) that a test copies into the room and names with a
file: source; apt limited to that source.  No test touches the real
Debian archive."""

import base64
import io
import subprocess
import tarfile
import tempfile
from pathlib import Path

# apt limited to the test's source (sources.list.d/rbx.list only)
APT = ("apt-get -q -o Dir::Etc::sourcelist=sources.list.d/rbx.list -o Dir::Etc::sourceparts=- "
       "-o APT::Get::List-Cleanup=0")


def build_repo(name):
    """A directory with <name>_1.0_all.deb (one script, /usr/bin/<name>)
    and its Packages index; returns it as a base64 tar.gz."""
    with tempfile.TemporaryDirectory(prefix="rbx-apt-") as d:
        pkg = Path(d) / "pkg"
        (pkg / "DEBIAN").mkdir(parents=True)
        (pkg / "usr" / "bin").mkdir(parents=True)
        (pkg / "DEBIAN" / "control").write_text(
            f"Package: {name}\nVersion: 1.0\nArchitecture: all\nMaintainer: roombox tests <t@example.invalid>\n"
            f"Description: roombox apt test package\n")
        script = pkg / "usr" / "bin" / name
        script.write_text(f"#!/bin/sh\necho hello from {name}\n")
        script.chmod(0o755)
        repo = Path(d) / "repo"
        repo.mkdir()
        subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(pkg), str(repo / f"{name}_1.0_all.deb")],
                       check=True, capture_output=True)
        packages = subprocess.run(["dpkg-scanpackages", "--multiversion", "."], cwd=repo,
                                  check=True, capture_output=True).stdout
        assert f"Package: {name}".encode() in packages, packages
        (repo / "Packages").write_bytes(packages)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as t:
            t.add(repo, arcname="repo")
        return base64.b64encode(buf.getvalue()).decode()


def install_in_room(client, room, name):
    """name's package built, its repository copied into room's
    /workspace/repo, and apt-get install run there: the package works."""
    client.sh(room, "base64 -d | tar xz -C /workspace", stdin=build_repo(name))
    client.sh(room, "echo 'deb [trusted=yes] file:/workspace/repo ./' > /etc/apt/sources.list.d/rbx.list")
    res = client.exec(room, f"{APT} update && DEBIAN_FRONTEND=noninteractive {APT} install -y {name}",
                      timeout=300000)
    if res["exitCode"] != 0:
        print(res["stdout"], res["stderr"])
    assert res["exitCode"] == 0, res
    assert client.sh(room, name) == f"hello from {name}\n"
