"""rootfs = /path: the room's lower tree is a prepared
tree instead of the host's /usr.  The tree here is the smallest that runs a
shell — dash and the libraries it links — so anything the room sees beyond
it would have to come from the host."""

import atexit
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from conftest import unique_room

SERVERS = ("nginx",)


def _make_tree():
    root = Path(tempfile.mkdtemp(prefix="rbx-rootfs-"))
    for d in ("bin", "etc", "proc", "dev", "tmp", "home", "workspace"):
        (root / d).mkdir()
    os.chmod(root / "tmp", 0o1777)
    dash = Path(shutil.which("dash") or "/usr/bin/dash").resolve()
    shutil.copy2(dash, root / "bin" / "sh")
    # the libraries dash links, at the paths its loader looks for them
    out = subprocess.run(["ldd", str(dash)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        parts = line.split()
        path = parts[2] if "=>" in parts and len(parts) > 2 else parts[0]
        if not path.startswith("/"):
            continue
        dest = root / path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.realpath(path), dest)
    (root / "etc" / "marker").write_text("from the prepared tree\n")
    atexit.register(shutil.rmtree, root, True)
    return root


TREE = _make_tree()
ROOMBOX_CONFIG = {"rootfs": str(TREE)}


def test_the_room_runs_on_the_prepared_tree(client):
    room = unique_room()
    assert client.sh(room, "echo hi") == "hi\n"
    assert client.sh(room, "read l < /etc/marker; echo $l") == "from the prepared tree\n"
    # nothing of the host's system: no python3, no coreutils
    assert client.sh(room, "[ -e /usr/bin/python3 ] && echo present || echo absent") == "absent\n"
    assert client.sh(room, "[ -e /bin/ls ] && echo present || echo absent") == "absent\n"
    # the room's root, on the room's own unprivileged host ids, as on the host tree
    uid = client.sh(room, 'while read k v rest; do [ "$k" = Uid: ] && echo $v; done < /proc/self/status; true')
    assert int(uid) == 0
    assert client.room_uid(room) != 0
    # the tree's files (the host's root's) appear owned by the room's root
    assert client.sh(room, 'read a b c < /proc/self/uid_map; echo $a $c') == "0 65536\n"


def test_writes_persist_in_the_room_and_never_reach_the_tree(client):
    room = unique_room()
    client.sh(room, "echo kept > /workspace/f; echo t > /tmp/t; cd /tmp")
    assert client.sh(room, "read l < /workspace/f; echo $l; pwd") == "kept\n/tmp\n"
    assert not (TREE / "workspace" / "f").exists()
    assert not (TREE / "tmp" / "t").exists()
    assert sorted(p.name for p in (TREE / "workspace").iterdir()) == []


def test_dev_on_a_prepared_tree_is_the_same_small_read_only_dev(client):
    """A prepared tree gets its /dev made at the room's start (the host's
    rooms take it from the generated tree): the same entries, read-only."""
    room = unique_room()
    out = client.sh(room, 'for f in /dev/*; do if [ -L "$f" ]; then t=l; elif [ -c "$f" ]; then t=c; '
                          'elif [ -d "$f" ]; then t=d; else t=other; fi; echo "${f#/dev/} $t"; done; '
                          '(echo x > /dev/x) 2>/dev/null && echo writable || echo read-only; '
                          'read -r l < /dev/null; echo "null=$?"')
    lines = out.splitlines()
    assert dict(l.split() for l in lines[:-2]) == {
        "null": "c", "zero": "c", "full": "c", "random": "c", "urandom": "c", "tty": "c",
        "pts": "d", "shm": "d",
        "ptmx": "l", "fd": "l", "stdin": "l", "stdout": "l", "stderr": "l"}, out
    assert lines[-2:] == ["read-only", "null=1"], out
