"""Host files that only their owner or group may read stay unreadable in a
room, though the room's root owns the trees it shares with the host (an
idmapped lower layer makes host root its root).

Each test plants, in the host's /usr/share, a 0600 root file, a 0700 root
directory holding a world-readable file, and (the control) a 0644 file
beside them; the room's root must fail to read the first two (ENOENT or
EACCES) and read the third.  One set is planted before the stack starts,
one after a room has already run (the hidden list is cached: its refresh
is what that second test checks), and one deep in an existing directory,
where only the idle sweep's full walk of the trees sees it.  Through
nginx."""

import os
import shutil
import time
import uuid

import pytest
from conftest import unique_room
from security_helpers import room_python_json

SERVERS = ("nginx",)

SHARE = "/usr/share"

READ = r'''
import json, os, sys
out = {}
for p in sys.argv[1:]:
    try:
        if os.path.isdir(p):
            out[p] = "LISTED " + " ".join(sorted(os.listdir(p)))
        else:
            with open(p) as f:
                out[p] = "READ " + f.read()
    except OSError as e:
        out[p] = "ERR " + str(e.errno)
out["share"] = sorted(os.listdir("/usr/share"))
print(json.dumps(out))
'''


class Planted:
    """Files of one test under /usr/share, removed by .remove()."""

    def __init__(self, tag):
        self.secret = f"{SHARE}/roombox-test-secret-{tag}"
        self.secret_dir = f"{SHARE}/roombox-test-secretdir-{tag}"
        self.inner = f"{self.secret_dir}/inner"
        self.public = f"{SHARE}/roombox-test-public-{tag}"

    def plant(self):
        with open(self.secret, "w") as f:
            f.write("host secret\n")
        os.chmod(self.secret, 0o600)
        os.mkdir(self.secret_dir, 0o700)
        os.chmod(self.secret_dir, 0o700)
        with open(self.inner, "w") as f:
            f.write("inner secret\n")
        os.chmod(self.inner, 0o644)
        with open(self.public, "w") as f:
            f.write("public\n")
        os.chmod(self.public, 0o644)
        return self

    def remove(self):
        for p in (self.secret, self.public):
            if os.path.lexists(p):
                os.unlink(p)
        shutil.rmtree(self.secret_dir, ignore_errors=True)


def assert_hidden_in(client, room, planted):
    out = room_python_json(client, room, READ, planted.secret, planted.secret_dir,
                           planted.inner, planted.public)
    # the control: the room reads a world-readable file beside them
    assert out[planted.public] == "READ public\n", out
    # errno 2 (ENOENT) or 13 (EACCES), as the room's root
    for p in (planted.secret, planted.secret_dir, planted.inner):
        assert out[p] in ("ERR 2", "ERR 13"), f"{p} in room {room}: {out[p]}"
    names = set(out["share"])
    assert os.path.basename(planted.public) in names, out["share"]


@pytest.fixture(scope="module", autouse=True)
def planted_before_start():
    """Planted before the module's stack starts (autouse: set up before the
    stack fixture of the same scope)."""
    p = Planted(uuid.uuid4().hex[:12]).plant()
    yield p
    p.remove()


def test_files_planted_before_the_service_started_are_unreadable(client, stack, planted_before_start):
    room = unique_room("before")
    # control, on the host: only root may read them there, and they were
    # there before the stack's configuration was written
    st = os.stat(planted_before_start.secret)
    assert st.st_uid == 0 and st.st_mode & 0o777 == 0o600
    assert st.st_mtime_ns <= os.stat(stack.conf_path).st_mtime_ns
    assert client.sh(room, "id -u") == "0\n"
    assert_hidden_in(client, room, planted_before_start)


def test_files_planted_while_the_service_runs_are_unreadable_in_new_rooms(client):
    first = unique_room("first")
    # a room has run: whatever the service caches of the host is there now
    assert client.sh(first, "echo ok") == "ok\n"
    planted = Planted(uuid.uuid4().hex[:12])
    try:
        planted.plant()
        assert_hidden_in(client, unique_room("after"), planted)
    finally:
        planted.remove()


def existing_doc_dir():
    """A directory two levels below /usr/share that a package installed."""
    for name in sorted(os.listdir(f"{SHARE}/doc")):
        p = f"{SHARE}/doc/{name}"
        st = os.lstat(p)
        if os.path.isdir(p) and not os.path.islink(p) and st.st_mode & 0o005 == 0o005:
            return p
    raise AssertionError(f"no world-readable directory in {SHARE}/doc")


def test_a_file_made_owner_only_deep_in_the_trees_is_unreadable_after_the_idle_sweep(client, stack):
    first = unique_room("deepfirst")
    # a room has run: the mask of the trees as they are now exists
    assert client.sh(first, "echo ok") == "ok\n"
    where = existing_doc_dir()
    tag = uuid.uuid4().hex[:12]
    secret, public = f"{where}/rbx-deep-{tag}", f"{where}/rbx-deep-public-{tag}"
    try:
        for p, mode in ((secret, 0o600), (public, 0o644)):
            with open(p, "w") as f:
                f.write("deep\n")
            os.chmod(p, mode)
        # the sweep's full walk is rate-limited by the time of the last one
        # (the mtime of <run_dir>/mask.current): make it due, as
        # if the interval had passed
        stamp = stack.run_dir / "mask.current"
        if stamp.exists():
            old = time.time() - 24 * 3600
            os.utime(stamp, (old, old))
        rc, out = stack.helper({"op": "stop-idle"})
        assert rc == 0, out
        room = unique_room("deep")
        res = room_python_json(client, room, READ, secret, public)
        assert res[public] == "READ deep\n", res
        assert res[secret] in ("ERR 2", "ERR 13"), f"{secret} in room {room}: {res[secret]}"
    finally:
        for p in (secret, public):
            if os.path.lexists(p):
                os.unlink(p)


def test_the_room_still_owns_and_changes_world_readable_host_files(client, room):
    """What hiding must not break: the host's files appear owned by the
    room's root, who may change them (in the room only)."""
    out = client.sh(room, "stat -c '%U %a' /usr/bin/ls /usr/share; "
                          "echo x >> /usr/share/roombox-probe && cat /usr/share/roombox-probe; "
                          "chmod 700 /usr/bin/ls && stat -c %a /usr/bin/ls")
    assert out == "root 755\nroot 755\nx\n700\n", out
    assert not os.path.exists("/usr/share/roombox-probe")
    assert os.stat("/usr/bin/ls").st_mode & 0o777 == 0o755
