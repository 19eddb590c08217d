"""Export and import of a room (GET /api/rooms/{id}/export, PUT
/api/rooms/{id}/import) through nginx and lighttpd (both stream the
archive both ways): a room's files (owners, modes,
links, file capabilities, sparse files, a deleted file of the lower
layer), its session and messages come back byte for byte under a new id;
every hostile archive is refused with its reason and leaves no room and
nothing under state_dir.  Hostile archives are built here as
docs/export-format.md says (tar + the zstd CLI, manifest, seal)."""

import hashlib
import hmac
import http.client
import io
import os
import signal
import struct
import subprocess
import tarfile
import time

import pytest

from apt_util import APT, install_in_room
from conftest import (HELPER, REPO, Client, loop_devices, proc_cmdline, proc_status, stalled_export,
                      started_stack, unique_room, wait_until)
from preview_util import expose, preview_get, start_in_room, wait_serving

SERVERS = ("nginx", "lighttpd")
KEY = b"export-key-of-the-test"


def export(client, room, query="", **kw):
    r = client.request("GET", f"/api/rooms/{room}/export{query}", check_json=False, timeout=600, **kw)
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
rm -rf /usr/share/doc/bash && mkdir /usr/share/doc/bash && echo new > /usr/share/doc/bash/only
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
ls /usr/share/doc/bash
)"""


def make_room(client, room):
    client.sh(room, SETUP)
    # a file capability: setcap in the room when it has it
    have = client.exec(room, "command -v setcap")["exitCode"] == 0
    if have:
        client.sh(room, "setcap cap_net_bind_service+ep /workspace/d/captrue")
    client.sh(room, "cd /tmp && export ROUNDTRIP=yes-$((6*7))")
    client.sh(room, "cd /workspace && export MINE=user-side", user="user")
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
    # an opaque directory: the lower layer's contents stay hidden
    assert after.endswith("head-there\nonly\n"), after
    assert "c--------- 0/0" in listing or "state/usr/bin/tac" in listing
    if have_setcap:
        assert client.sh(new, "getcap /workspace/d/captrue") == cap_before
    # still sparse: 64M apparent, a few blocks used
    used = int(client.sh(new, "du -k /workspace/d/sparse | cut -f1"))
    assert used < 1024, used
    # the session: cwd and the exported variable
    assert client.sh(new, "pwd; echo $ROUNDTRIP") == "/tmp\nyes-42\n"
    assert client.sh(new, "pwd; echo $MINE", user="user") == "/workspace\nuser-side\n"
    msgs = client.get(f"/api/rooms/{new}/messages").json
    assert msgs == msgs_before
    # and it works
    assert client.sh(new, "echo works > /workspace/w && cat /workspace/w") == "works\n"
    # importing again under the same id: 409
    assert import_(client, new, data).status == 409


def test_an_export_leaves_out_what_a_crash_left_in_the_messages(client, room):
    """A crash in a message's append leaves a torn line at the end of the
    room's messages (the next append trims it) and a damaged disk may leave
    a line that is no message; the room lists neither.  Its export carries
    what it lists, and the import takes it: before, every export of such a
    room was refused by the import (400), and a move of it could not end."""
    client.sh(room, "true")
    for content in ("first", "second"):
        assert client.post(f"/api/rooms/{room}/messages",
                           {"role": "user", "content": content}).status == 201
    path = client.stack.state_dir / "messages" / f"{room}.jsonl"
    lines = path.read_bytes().split(b"\n")
    with open(path, "wb") as f:
        f.write(lines[0] + b"\n" + b'{"id":"x","role":"user","content":NaN}\n' +
                lines[1] + b"\n" + b'{"id":"torn","role":"us')
    listed = client.get(f"/api/rooms/{room}/messages").json
    assert [m["content"] for m in listed["messages"]] == ["first", "second"], listed
    data = export(client, room)
    new = unique_room()
    try:
        r = import_(client, new, data)
        assert r.status == 201, r.json
        assert client.get(f"/api/rooms/{new}/messages").json == listed
    finally:
        client.destroy(new)


def test_a_room_with_a_package_moves_to_another_instance_whole(client, room):
    """Everything a room holds -- a package apt installed in it, files of
    root and of user, a symlink, a hard link, a file capability, a sparse
    file, its sessions, its messages -- exported here and imported into
    another instance whose rooms take other host ids (uid_base): the same
    bytes, owners, modes and session, still sparse, and the package still
    installed and working."""
    other = started_stack({})
    try:
        assert other.uid_base != client.stack.uid_base
        oc = Client(other)
        have_setcap = make_room(client, room)
        name = f"rbx-moved-{unique_room()[-8:]}"
        install_in_room(client, room, name)
        summary = SUMMARY + f"; {name}; dpkg-query -W -f '${{db:Status-Abbrev}} ${{Version}}\\n' {name}"
        before = client.sh(room, summary)
        cap_before = client.sh(room, "getcap /workspace/d/captrue") if have_setcap else ""
        msgs_before = client.get(f"/api/rooms/{room}/messages").json
        data = export(client, room)
        new = unique_room()
        r = import_(oc, new, data)
        assert r.status == 201, r.json
        after = oc.sh(new, summary)
        assert after == before
        assert after.endswith(f"hello from {name}\nii  1.0\n"), after
        if have_setcap:
            assert oc.sh(new, "getcap /workspace/d/captrue") == cap_before
        assert int(oc.sh(new, "du -k /workspace/d/sparse | cut -f1")) < 1024
        assert oc.sh(new, "pwd; echo $ROUNDTRIP") == "/tmp\nyes-42\n"
        assert oc.sh(new, "pwd; echo $MINE", user="user") == "/workspace\nuser-side\n"
        assert oc.get(f"/api/rooms/{new}/messages").json == msgs_before
        # the owners are the new instance's ids for the room's 0 and 1000
        base = oc.room_uid(new)
        img_uid = oc.sh(new, "stat -c '%u' /workspace/d/user.txt")
        assert img_uid == "1000\n", img_uid
        assert base != client.room_uid(room)
        # and apt there still knows it: the package removes cleanly
        oc.sh(new, f"DEBIAN_FRONTEND=noninteractive {APT} remove -y {name}", timeout=300000)
        assert oc.exec(new, f"command -v {name}")["exitCode"] != 0
        oc.destroy(new)
    finally:
        problems = other.stop()
    assert not problems, problems


def members_of(data, pattern):
    """The bytes of the archive's members matching pattern, concatenated."""
    return subprocess.run(["sh", "-c", f"zstd -dc | tar -xOf - --wildcards '{pattern}'"], input=data,
                          capture_output=True, check=True).stdout


def start(client, room, name, cmd):
    r = client.post(f"/api/rooms/{room}/sandbox/processes", {"cmd": cmd, "name": name})
    assert r.status == 201, (r.status, r.json)


def status_of(client, room, name):
    r = client.get(f"/api/rooms/{room}/sandbox/processes/{name}")
    return r.json["process"]["status"] if r.status == 200 else r.status


def test_a_snapshot_exports_its_files_sessions_and_records(client, room):
    client.sh(room, "echo old > /workspace/f; cd /tmp; export V=then")
    start(client, room, "before", "echo from-before")
    wait_until(lambda: status_of(client, room, "before") == "exited", 10, "`before` to end")
    r = client.post(f"/api/rooms/{room}/snapshots", {"name": "s1"})
    assert r.status == 201, r.json
    sid = r.json["snapshot"]["id"]
    client.sh(room, "echo new > /workspace/f; cd /; export V=now")
    start(client, room, "after", "echo from-after")
    r = client.post(f"/api/rooms/{room}/messages", {"role": "user", "content": "said after"})
    assert r.status in (200, 201), r.json
    for ref in ("s1", sid):
        data = export(client, room, f"?snapshot={ref}")
        records = members_of(data, "processes/*.json")
        assert b"from-before" in records and b"from-after" not in records, records[:500]
        new = unique_room("xs")
        assert import_(client, new, data).status == 201
        client.touch(new)
        assert client.sh(new, "cat /workspace/f; pwd; echo $V") == "old\n/tmp\nthen\n"
        said = [m["content"] for m in client.get(f"/api/rooms/{new}/messages").json["messages"]]
        assert said == ["said after"], said    # the room's messages now
    assert client.sh(room, "cat /workspace/f") == "new\n"
    r = client.request("GET", f"/api/rooms/{room}/export?snapshot=nosuch", check_json=False)
    assert r.status == 404 and b"snapshot not found" in r.body, (r.status, r.body[:300])
    for bad in ("a.b", "", "..", "x" * 65):
        r = client.request("GET", f"/api/rooms/{room}/export?snapshot={bad}", check_json=False)
        assert r.status == 400, (bad, r.status, r.body[:300])
    missing = unique_room("none")
    r = client.request("GET", f"/api/rooms/{missing}/export?snapshot=s1", check_json=False)
    assert r.status == 404, (r.status, r.body[:300])


def test_an_import_exposes_the_ports_again_under_new_tokens(client, room):
    r = client.request("PUT", f"/api/rooms/{room}/sandbox/files/site/p.txt", data=b"of-the-import\n")
    assert r.status in (200, 201), r
    old = expose(client, room, 8000)
    new = unique_room("xp")
    assert import_(client, new, export(client, room)).status == 201
    ps = client.get(f"/api/rooms/{new}/sandbox/ports").json["ports"]
    assert [p["port"] for p in ps] == [8000] and ps[0]["token"] != old["token"], (ps, old)
    # processes do not travel: the imported room serves again, at its new URL
    start_in_room(client, new, "python3 -m http.server 8000 --bind 127.0.0.1 "
                  "--directory /workspace/site", "/tmp/http.log")
    r = wait_serving(client, ps[0]["url"], "the imported room's server", path_extra="p.txt")
    assert r.status == 200 and r.body == b"of-the-import\n", r
    # the old token still names the old room only (nothing listens there: 502)
    assert preview_get(client, old["url"], path_extra="p.txt").status == 502
    client.destroy(new)


def test_an_import_brings_the_process_records(client, room):
    start(client, room, "done", "echo out-of-done; echo err-of-done >&2; exit 3")
    wait_until(lambda: status_of(client, room, "done") == "exited", 10, "`done` to end")
    start(client, room, "napper", "exec sleep 1000")
    wait_until(lambda: status_of(client, room, "napper") == "running", 10, "the napper to run")
    before = client.get(f"/api/rooms/{room}/sandbox/processes/done").json["process"]
    # a record a crash left half written is no record: not exported
    (client.stack.state_dir / "processes" / room / "done.json.tmp").write_text('{"id":')
    data = export(client, room)
    new = unique_room("xp")
    assert import_(client, new, data).status == 201
    ps = {p["id"]: p for p in client.get(f"/api/rooms/{new}/sandbox/processes").json["processes"]}
    assert set(ps) == {"done", "napper"}, ps
    assert ps["done"] == before, (ps["done"], before)
    assert ps["done"]["status"] == "exited" and ps["done"]["exitCode"] == 3
    # running at the cut: not carried, its record reads lost
    assert ps["napper"]["status"] == "lost", ps["napper"]
    logs = client.get(f"/api/rooms/{new}/sandbox/processes/done/logs").json
    assert logs["stdout"] == "out-of-done\n" and logs["stderr"] == "err-of-done\n", logs
    # the room's own records are as they were
    assert status_of(client, room, "napper") == "running"
    # and the imported room runs processes of its own beside them
    start(client, new, "fresh", "echo fresh")
    wait_until(lambda: status_of(client, new, "fresh") == "exited", 10, "`fresh` to end")
    client.destroy(new)
    assert not (client.stack.state_dir / "processes" / new).exists()


def test_a_running_room_is_exported_without_stopping_it(client, room):
    start(client, room, "napper", "echo $$ > /tmp/napper.pid; exec sleep 1000")
    alive = "kill -0 $(cat /tmp/napper.pid) && tr '\\0' ' ' < /proc/$(cat /tmp/napper.pid)/cmdline"
    wait_until(lambda: client.exec(room, alive)["exitCode"] == 0, 10, "the napper to start")
    pids = client.sh(room, "cat /tmp/napper.pid")
    r = client.request("PUT", f"/api/rooms/{room}/sandbox/files/acked", data=b"acknowledged\n")
    assert r.status == 201, r
    data = export(client, room)
    assert members_of(data, "state/root/workspace/acked") == b"acknowledged\n"
    assert status_of(client, room, "napper") == "running"
    assert client.sh(room, "cat /tmp/napper.pid") == pids
    assert client.sh(room, alive) == "sleep 1000 "
    # the cut is no snapshot, and left nothing behind
    assert client.get(f"/api/rooms/{room}/snapshots").json == {"snapshots": []}
    assert not list(client.stack.room_state_dir(room).glob(".cut*"))


def test_an_exec_does_not_wait_for_an_export_being_read(client, room):
    """The room's lock goes once the cut is taken: an export that a
    client reads slowly (here: not at all) holds no exec of the room."""
    client.sh(room, "head -c 96M /dev/urandom > /workspace/noise")
    conn = http.client.HTTPConnection(client.host, client.port, timeout=120)
    try:
        conn.request("GET", f"/api/rooms/{room}/export",
                     headers={"Authorization": f"Bearer {client.token}"})
        r = conn.getresponse()
        assert r.status == 200
        head = r.read(65536)   # streaming, and now stalled on us
        t0 = time.monotonic()
        assert client.sh(room, "echo meanwhile > /workspace/m; cat /workspace/m") == "meanwhile\n"
        assert time.monotonic() - t0 < 10
        data = head + r.read()
    finally:
        conn.close()
    # the export is of the cut: what came after is not in it
    listing = subprocess.run(["sh", "-c", "zstd -dc | tar -tf -"], input=data,
                             capture_output=True, check=True).stdout.decode()
    assert "state/root/workspace/noise" in listing and "workspace/m\n" not in listing, listing
    assert not list(client.stack.room_state_dir(room).glob(".cut*"))


def children(pid):
    """The pids of pid's children (every thread's)."""
    found = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return found


def export_walker(stack):
    """The process that reads an export's files: the child of the stack's
    one roombox-helper (itself a child of roombox-fcgi), or None."""
    helpers = [pid for fcgi in stack.fcgi_pids() for pid in children(fcgi)
               if proc_cmdline(pid).startswith(f"{HELPER} ")]
    walkers = [pid for h in helpers for pid in children(h)]
    return walkers[0] if len(helpers) == 1 and len(walkers) == 1 else None


def test_an_export_broken_off_ends_as_a_failed_download(client, room):
    """An export whose archive breaks off on its way (here: the process
    that reads the room's files killed in the middle of them) ends as a
    failed download -- the connection cut before the archive's end --
    never as a complete-looking answer that a backup would keep; what came
    does not import.  The room and the service go on, and the next export
    is whole."""
    size = 96 << 20
    client.sh(room, f"head -c {size} /dev/urandom > /workspace/noise")
    conn = http.client.HTTPConnection(client.host, client.port, timeout=120)
    try:
        conn.request("GET", f"/api/rooms/{room}/export",
                     headers={"Authorization": f"Bearer {client.token}"})
        r = conn.getresponse()   # the head comes with the archive's first bytes
        assert r.status == 200
        # not read on: the walk waits on us, in the middle of the noise
        # (more than every buffer on the way holds)
        walker = wait_until(lambda: export_walker(client.stack), 30, "the export's walker")
        state = (proc_status(walker) or {}).get("State", "gone")
        assert state[0] in "SRD", f"the walker is {state}: the walk ended before it could break"
        os.kill(walker, signal.SIGKILL)
        got, ended = [], "complete"
        try:
            while chunk := r.read(1 << 20):
                got.append(chunk)
        except http.client.IncompleteRead as e:
            got.append(e.partial)
            ended = "cut"
        data = b"".join(got)
        assert ended == "cut", f"{len(data)} bytes, ended as a complete answer"
    finally:
        conn.close()
    # what came is not a room: it does not import
    r = import_(client, unique_room(), data)
    assert r.status == 400, (r.status, r.json)
    assert client.sh(room, "echo on") == "on\n"
    listing = subprocess.run(["sh", "-c", "zstd -dc | tar -tf -"], input=export(client, room),
                             capture_output=True, check=True).stdout.decode()
    assert "state/root/workspace/noise" in listing, listing


def test_exports_at_once_keep_at_most_one_cut_in_memory(client, room):
    """A running room's cut goes into memory only while no other export
    holds one there: each cut checks what the host has to spare before it
    fills, so exports read slowly (here: not at all) would otherwise each
    take a quarter of what the ones before left, and pin nearly all of
    the host's memory between them."""
    other = unique_room()
    for r in (room, other):
        client.sh(r, "head -c 96M /dev/urandom > /workspace/noise")
    held = []
    try:
        for r in (room, other):
            held.append(stalled_export(client, r))
        files = list(loop_devices().values())
        on_disk = [r for r in (room, other)
                   if f"{client.stack.room_state_dir(r)}/.cut.img (deleted)" in files]
        assert on_disk, files
    finally:
        for conn in held:
            conn.close()


# ---- hostile archives ---------------------------------------------------------

SEAL_MAGIC = 0x184D2A5E


def zstd(data):
    return subprocess.run(["zstd", "-q", "-c", "-1"], input=data, capture_output=True,
                          check=True).stdout


def unzstd(data):
    return subprocess.run(["zstd", "-q", "-d", "-c"], input=data, capture_output=True,
                          check=True).stdout


def seal(body):
    """A version 1 archive: body then the closing skippable frame,
    roombox-seal 1, the SHA-256 of body."""
    text = b"roombox-seal 1\n" + hashlib.sha256(body).hexdigest().encode() + b"\n"
    return body + struct.pack("<II", SEAL_MAGIC, len(text)) + text


# A version 2 archive opens with this frame and closes with the XXH64 of
# every byte before its seal.
LEAD = struct.pack("<II", SEAL_MAGIC, 15) + b"roombox-room 2\n"
M64 = (1 << 64) - 1
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                      0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)


def xxh64(data, seed=0):
    """XXH64 as xxHash's spec has it (written here, not the product's)."""
    def rotl(x, r):
        return ((x << r) | (x >> (64 - r))) & M64

    def rnd(acc, lane):
        return rotl((acc + lane * P2) & M64, 31) * P1 & M64

    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64]
        whole = n - n % 32
        for j, lanes in enumerate(struct.iter_unpack("<4Q", data[:whole])):
            v = [rnd(a, b) for a, b in zip(v, lanes)]
        i = whole
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M64
        for a in v:
            h = ((h ^ rnd(0, a)) * P1 + P4) & M64
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h = (rotl(h ^ rnd(0, struct.unpack_from("<Q", data, i)[0]), 27) * P1 + P4) & M64
        i += 8
    if i + 4 <= n:
        h = (rotl(h ^ (struct.unpack_from("<I", data, i)[0] * P1 & M64), 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h = rotl(h ^ (data[i] * P5 & M64), 11) * P1 & M64
        i += 1
    h = ((h ^ (h >> 33)) * P2) & M64
    h = ((h ^ (h >> 29)) * P3) & M64
    return h ^ (h >> 32)


def seal2(zbody):
    """A version 2 archive of a zstd body: the lead, the body, the seal."""
    data = LEAD + zbody
    text = b"roombox-seal 2\n" + b"%016x\n" % xxh64(data)
    return data + struct.pack("<II", SEAL_MAGIC, len(text)) + text


def body_of(data):
    """The zstd frames of an archive of either version, without its lead
    and seal."""
    return data[len(LEAD):-40] if data.startswith(LEAD) else data[:-88]


def test_xxh64_oracle():
    # the reference vectors, and zstd's own frame checksum (its low 32 bits)
    assert xxh64(b"") == 0xEF46DB3751D8E999
    for n in (1, 4, 7, 31, 32, 33, 100, 1000):
        data = os.urandom(n)
        z = subprocess.run(["zstd", "-q", "-c", "--check"], input=data, capture_output=True,
                           check=True).stdout
        assert struct.unpack("<I", z[-4:])[0] == xxh64(data) & 0xFFFFFFFF


def member(name, data=b"", **kw):
    ti = tarfile.TarInfo(name)
    for k, v in kw.items():
        setattr(ti, k, v)
    if ti.type in (tarfile.REGTYPE, tarfile.AREGTYPE) and "size" not in kw:
        ti.size = len(data)
    return ti, data


def tar_of(members, end=True):
    """The members as a pax tar; without its end blocks unless end."""
    buf = io.BytesIO()
    t = tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT)
    for ti, data in members:
        t.addfile(ti, io.BytesIO(data) if ti.size else None)
    if not end:
        return buf.getvalue()
    t.close()
    return buf.getvalue()


HEAD = [member("roombox/version", b"roombox-room 1\n"),
        member("state/", type=tarfile.DIRTYPE, mode=0o755)]


def hostile(*members):
    """An archive that starts right and then holds members: refused at them,
    before any manifest or seal is looked at (none is given)."""
    return zstd(tar_of(HEAD + list(members)))


def state_files(stack):
    """What is under state_dir, but the disk image templates (a creation
    takes the spare one made ahead) and the disk promise's count."""
    out = set()
    for dirpath, dirs, files in os.walk(stack.state_dir):
        for n in dirs + files:
            p = os.path.relpath(os.path.join(dirpath, n), stack.state_dir)
            # (and the top directories a first room makes)
            if n.startswith(".disk-") or n == "disk-commit.json" or p.startswith(".skeleton") or \
                    p in ("slots", "rooms", "lock", "processes", "previews"):
                continue
            out.add(p)
    return out


def refused(client, data, status, reason):
    """data imported under a new id: status with reason, and no room left."""
    before = state_files(client.stack)
    room = unique_room()
    r = import_(client, room, data)
    assert r.status == status, (r.status, r.json)
    assert reason in r.json["error"], r.json
    assert client.get(f"/api/rooms/{room}").status == 404
    assert not (client.stack.state_dir / "rooms" / room).exists()
    assert client.get(f"/api/rooms/{room}/messages").json.get("messages", []) == []
    assert state_files(client.stack) == before
    client.rooms.remove(room)   # nothing to tear down
    return r


@pytest.mark.parametrize("name,members,status,reason", [
    ("dotdot", [member("state/../evil", b"x")], 400, "evil"),
    ("absolute", [member("/etc/evil", b"x")], 400, "etc/evil"),
    ("through a symlink", [member("state/lnk", type=tarfile.SYMTYPE, linkname="/etc"),
                           member("state/lnk/passwd", b"x")], 400, "state/lnk/passwd"),
    ("hard link out", [member("state/h", type=tarfile.LNKTYPE, linkname="/etc/shadow")], 400,
     "outside the room"),
    ("device node", [member("state/null", type=tarfile.CHRTYPE, devmajor=1, devminor=3)], 400,
     "device node"),
    ("block device", [member("state/sda", type=tarfile.BLKTYPE, devmajor=8, devminor=0)], 400,
     "device node"),
    ("larger than disk_limit", [member("state/big", b"", size=2 << 30)], 507, "budget"),
])
def test_hostile_member_refused(client, name, members, status, reason):
    if name == "larger than disk_limit":
        # the header announces 2 GiB; refused before any byte of it
        data = zstd(tar_of(HEAD, end=False) +
                    members[0][0].tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape") +
                    b"\0" * 4096)
    else:
        data = hostile(*members)
    refused(client, data, status, reason)


def test_a_terabyte_sparse_member_refused(client):
    sparse_map = b"1\n1099511627775\n1\n".ljust(512, b"\0")
    ti = tarfile.TarInfo("state/GNUSparseFile.0/big")
    ti.size = 1024
    ti.pax_headers = {"GNU.sparse.major": "1", "GNU.sparse.minor": "0",
                      "GNU.sparse.name": "state/big", "GNU.sparse.realsize": str(1 << 40)}
    data = zstd(tar_of(HEAD + [(ti, sparse_map + b"x".ljust(512, b"\0"))]))
    refused(client, data, 507, "budget")


def test_a_hundred_thousand_entries_refused(client):
    members = HEAD + [member(f"state/f{i}", type=tarfile.REGTYPE, size=0) for i in range(100_000)]
    refused(client, zstd(tar_of(members)), 507, "entries")


def test_broken_exports_refused(client, room):
    client.sh(room, "echo some > /workspace/some")
    data = export(client, room)
    refused(client, data[: len(data) // 2], 400, "")
    refused(client, data[:-1], 400, "runcated")
    flipped = bytearray(data)
    flipped[len(data) // 3] ^= 0x40
    refused(client, bytes(flipped), 400, "")
    refused(client, b"not an archive at all", 400, "archive format")


def test_an_export_is_version_2_and_a_version_1_backup_still_imports(client, room):
    client.sh(room, "echo old > /workspace/old; truncate -s 8M /workspace/holey")
    data = export(client, room)
    # version 2: the lead frame, the version member, the seal's XXH64
    assert data.startswith(LEAD)
    assert members_of(data, "roombox/version") == b"roombox-room 2\n"
    assert data[-40:] == seal2(data[len(LEAD):-40])[-40:]
    # the same room as a version 1 archive (no lead, "roombox-room 1" and
    # its digest in the manifest, the SHA-256 seal), as an older roombox
    # wrote it: a backup made then imports now
    tar = unzstd(body_of(data))
    v2, v1 = b"roombox-room 2\n", b"roombox-room 1\n"
    assert tar.count(v2) == 1
    d2, d1 = (hashlib.sha256(x).hexdigest().encode() for x in (v2, v1))
    tar = tar.replace(v2, v1).replace(d2 + b" roombox/version\n", d1 + b" roombox/version\n")
    old = seal(zstd(tar))
    new = unique_room()
    r = import_(client, new, old)
    assert r.status == 201, r.json
    assert client.sh(new, "cat /workspace/old; stat -c %s /workspace/holey") == "old\n8388608\n"
    client.destroy(new)
    # one version's frames around the other's members: refused
    refused(client, LEAD + old, 400, "roombox/version")
    refused(client, seal(body_of(data)), 400, "roombox/version")


def test_setuid_root_file_lands_harmless(client, room):
    # a setuid-root program of the room's root: carried (a room's sudo stays
    # sudo), owned by the room's root and powerless outside it, and nosuid
    # in the room as everywhere in a room
    client.sh(room, "cp /usr/bin/id /workspace/suid-id && chmod 4755 /workspace/suid-id")
    data = export(client, room)
    new = unique_room()
    assert import_(client, new, data).status == 201
    assert client.sh(new, "stat -c '%u %a' /workspace/suid-id") == "0 4755\n"
    assert client.sh(new, "/workspace/suid-id -u", user="user") == "1000\n"
    assert "nosuid" in client.sh(new, "grep ' /workspace\\| / ' /proc/mounts | head -3; true") or \
        "nosuid" in client.sh(new, "cat /proc/self/mountinfo | awk '$5==\"/\"'")
    # on the host the file belongs to the room's id range, never to host root
    assert client.room_uid(new) > 0


# ---- with export_key_file ------------------------------------------------------

def tar_add_after_manifest(data, name, content):
    """The export with one member added at its end (after the manifest),
    resealed: for a forged or a right HMAC."""
    tar = unzstd(body_of(data)).rstrip(b"\0")
    tar += b"\0" * (-len(tar) % 512)
    ti, _ = member(name, content)
    tar += ti.tobuf(tarfile.PAX_FORMAT, "utf-8", "surrogateescape") + content
    tar += b"\0" * (-len(tar) % 512) + b"\0" * 1024
    return seal2(zstd(tar))


def manifest_of(data):
    with tarfile.open(fileobj=io.BytesIO(unzstd(body_of(data)))) as t:
        return t.extractfile("roombox/manifest").read()


def test_a_record_under_another_name_refused(client, room):
    """A process record is its file's: one that names another process (it
    would take that one's logs) is refused, though the archive is whole."""
    start(client, room, "done", "echo hi")
    wait_until(lambda: status_of(client, room, "done") == "exited", 10, "`done` to end")
    data = export(client, room)
    tar = unzstd(body_of(data))
    record = members_of(data, "processes/done.json")
    forged = record.replace(b'"id":"done"', b'"id":"dxne"')
    assert forged != record and tar.count(record) == 1
    old, new = (hashlib.sha256(x).hexdigest().encode() for x in (record, forged))
    tar = tar.replace(record, forged).replace(old + b" processes/done.json", new + b" processes/done.json")
    refused(client, seal2(zstd(tar)), 400, "processes/done.json: not the record of process done")


@pytest.fixture(scope="module")
def keyed(stack):
    key_file = stack.dir / "export.key"
    key_file.write_bytes(KEY + b"\n")
    os.chmod(key_file, 0o644)
    s = started_stack({"export_key_file": str(key_file)})
    yield s
    problems = s.stop()
    assert not problems, problems


def test_hmac_required_and_checked_with_a_key(client, room, keyed):
    kc = Client(keyed)
    client.sh(room, "echo keyed > /workspace/k; echo u > /workspace/u; chown 1000:1000 /workspace/u")
    plain = export(client, room)            # made without a key: no HMAC
    assert b"manifest.hmac" not in unzstd(body_of(plain))
    try:
        refused(kc, plain, 400, "missing")
        man = manifest_of(plain)
        wrong = hmac.new(b"another key", man, hashlib.sha256).hexdigest().encode() + b"\n"
        refused(kc, tar_add_after_manifest(plain, "roombox/manifest.hmac", wrong), 400, "wrong HMAC")
        right = hmac.new(KEY, man, hashlib.sha256).hexdigest().encode() + b"\n"
        new = unique_room()
        r = import_(kc, new, tar_add_after_manifest(plain, "roombox/manifest.hmac", right))
        assert r.status == 201, r.json
        assert kc.sh(new, "cat /workspace/k") == "keyed\n"
        # another instance, another uid range: owners are room-relative
        assert keyed.uid_base != client.stack.uid_base
        assert kc.sh(new, "stat -c '%u:%g' /workspace/u /workspace/k") == "1000:1000\n0:0\n"
        assert kc.sh(new, "echo more >> /workspace/u && cat /workspace/u", user="user") == "u\nmore\n"
        # the keyed host's own export carries its HMAC, and imports there
        again = export(kc, new)
        assert b"roombox/manifest.hmac" in unzstd(body_of(again))
        kc.destroy(new)
        other = unique_room()
        assert import_(kc, other, again).status == 201
        kc.destroy(other)
    finally:
        for r in kc.rooms:
            kc.delete(f"/api/rooms/{r}")


# ---- roomboxctl ------------------------------------------------------------------

CTL = [str(REPO / "build" / "roomboxctl")]


def ctl(stack, *args, stdin=None):
    sock = []
    if stack.server == "lighttpd":   # lighttpd spawned roombox-fcgi on a socket of its own
        sock = ["-s", str(sorted(stack.dir.glob("lighttpd-fcgi.sock*"))[0])]
    r = subprocess.run(CTL + ["-c", str(stack.conf_path)] + sock + [str(a) for a in args],
                       input=stdin, capture_output=True, timeout=600)
    return r.returncode, r.stdout, r.stderr.decode(errors="replace")


def test_ctl_export_import_and_backup(client, room, tmp_path):
    client.sh(room, "echo by-ctl > /workspace/c; truncate -s 8M /workspace/sp")
    rc, data, err = ctl(client.stack, "export", room)
    assert rc == 0, err
    new = unique_room()
    client.touch(new)
    rc, out, err = ctl(client.stack, "import", new, stdin=data)
    assert rc == 0, err
    assert client.sh(new, "cat /workspace/c") == "by-ctl\n"
    # refused: said, exit 1, no room
    other = unique_room()
    rc, out, err = ctl(client.stack, "import", other, stdin=data[:1000])
    assert rc == 1 and "400" in err, err
    assert client.get(f"/api/rooms/{other}").status == 404
    client.rooms.remove(other)
    # backup: a whole archive per room, nothing else in the directory
    rc, out, err = ctl(client.stack, "backup", tmp_path)
    assert rc == 0, err
    names = sorted(os.listdir(tmp_path))
    assert f"{room}.roombox" in names and f"{new}.roombox" in names, names
    assert all(n.endswith(".roombox") and not n.startswith(".") for n in names), names
    again = unique_room()
    client.touch(again)
    assert import_(client, again, (tmp_path / f"{room}.roombox").read_bytes()).status == 201
    assert client.sh(again, "cat /workspace/c") == "by-ctl\n"


def metric(client, name):
    r = client.request("GET", "/metrics", check_json=False)
    for line in r.body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def test_metrics_count_exports_imports_and_refusals(client, room):
    client.sh(room, "true")
    keys = ['roombox_exports_total{result="done"}', 'roombox_imports_total{result="done"}',
            'roombox_imports_total{result="refused"}', 'roombox_exports_total{result="refused"}']
    before = {k: metric(client, k) for k in keys}
    data = export(client, room)
    new = unique_room()
    assert import_(client, new, data).status == 201
    refused(client, data[:50], 400, "")
    assert client.request("GET", f"/api/rooms/{unique_room()}/export").status == 404
    after = {k: metric(client, k) for k in keys}
    assert {k: after[k] - before[k] for k in keys} == {k: 1 for k in keys}
