"""Files whose path is swapped during the request, through nginx
and lighttpd: no way out of the room.

Inside the room a managed process keeps exchanging /workspace/d -- a real
directory -- with symlinks to other directories (renameat2 RENAME_EXCHANGE,
so /workspace/d always exists and is, at any moment, one of them), while
uploads, downloads, deletes and moves go through /workspace/d.  Each step
of the files API's script then resolves the path through whichever one is
there at that moment.

What "escape" would mean here: rootfs = host, so the room's lower trees are
the host's own /usr (and a generated root in <run_dir>/base-3); the room's
writes go to its upper layer on its own disk, and the host's /root and /tmp
are not in the room at all (the room has its own).  The files API's
resolution is confined when

  - no name written through the API appears on the host (at /, /tmp, /root,
    /usr/lib, or anywhere in the stack's run_dir, base-3 included): what was
    written through a symlink to `/` or to `/usr/lib` lands in the room's
    own / and /usr/lib, i.e. its upper layer;
  - a host file at the very path the swapped symlink names in the room
    (/root/X, /tmp/X: same path string, other bytes in the room) is never
    read, removed, replaced or moved; a file of the lower tree (/usr/lib/X,
    the host's, visible read-only in the room) may vanish from the room's
    view but never from the host;
  - as ?user=user nothing is read that the room's user cannot read itself,
    and nothing lands where it cannot write.

Controls: the swapper's count of exchanges goes up between the first and the
last chunk of every upload (the body is held back until it does), and
from the start of every other request to past its answer; the host check finds
a file planted at each of the places it watches; a static symlink reaches
each target, so the swap really offers those places to the script.
"""

import hashlib
import json
import os
import shutil
import time
import uuid
from pathlib import Path

from conftest import wait_until

# The swapper logs its count every LOG_EVERY exchanges.  A prime: with a
# step that is a multiple of the cycle (1 + the number of alternatives),
# every log line would find the same name at the swapped path, and a
# request made just after a line (as the tests wait for them) would, on a
# loaded machine where the swapper is preempted at its log writes, most
# often see that one.
LOG_EVERY = 61

SWAPPER = r"""
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
d, alts = sys.argv[1].encode(), [a.encode() for a in sys.argv[2:]]
n = 0
print(0, flush=True)
while True:
    # d takes the place of each alternative in turn: real dir, alt 1, alt 2...
    if libc.renameat2(AT_FDCWD, d, AT_FDCWD, alts[n % len(alts)], RENAME_EXCHANGE):
        print("error", os.strerror(ctypes.get_errno()), flush=True)
        sys.exit(1)
    n += 1
    if n % LOG_EVERY == 0:
        print(n, flush=True)
""".replace("LOG_EVERY", str(LOG_EVERY))

MIN_SWAPS = 256          # exchanges that must happen while a request is open
CHUNK = 32 * 1024
CHUNKS = 4
PUTS = 12                # per test (half as the room's root, half as its user)
ROUNDS = 6               # GETs, DELETEs and moves per user


def files(room, path=""):
    return f"/api/rooms/{room}/sandbox/files/{path}"


def procs(room, rest=""):
    return f"/api/rooms/{room}/sandbox/processes{rest}"


class Swapper:
    """A managed process of the room exchanging `d` with each of `alts` in
    turn; count() is how many exchanges it has made (from its log)."""

    def __init__(self, client, room, d, alts):
        self.client, self.room = client, room
        r = client.request("PUT", files(room, "/opt/swapper.py"), data=SWAPPER.encode())
        assert r.status in (200, 201), r
        r = client.post(procs(room), {"cmd": "exec python3 /opt/swapper.py " + " ".join([d] + alts),
                                      "name": "swapper"})
        assert r.status == 201, r
        self.id = r.json["process"]["id"]
        wait_until(lambda: self.count() >= MIN_SWAPS, 20, "the swapper to start exchanging")

    def count(self):
        r = self.client.get(procs(self.room, f"/{self.id}/logs"))
        assert r.status == 200, r
        lines = r.json["stdout"].split()
        assert "error" not in lines, f"the swapper failed: {r.json}"
        return int(lines[-1]) if lines else 0

    def wait_past(self, n):
        """Bounded poll until MIN_SWAPS more exchanges than n were made."""
        return wait_until(lambda: (c := self.count()) >= n + MIN_SWAPS and c, 20,
                          f"{MIN_SWAPS} exchanges past {n}")

    def stop(self):
        r = self.client.delete(procs(self.room, f"/{self.id}?signal=KILL"))
        assert r.status == 200, r
        wait_until(lambda: self.client.get(procs(self.room, f"/{self.id}")).json["process"]["status"]
                   != "running", 10, "the swapper to end")


def bodies_read(got):
    """The first word of each GET's body, or its status when not 200."""
    return [r.body.split()[0].decode() if r.status == 200 else str(r.status) for _, r in got]


def host_dirs(stack):
    """Host directories a name written through the swapped path would reach
    if it were resolved on the host, and the room's generated lower root."""
    base = stack.run_dir / "base-3"
    return [Path("/"), Path("/tmp"), Path("/root"), Path("/usr/lib"), base, base / "tmp", base / "root"]


def host_leaks(stack, prefix, before):
    """Host paths named `prefix`* or .roombox-upload.* (the upload's
    temporary file) that were not there `before`: in the host_dirs, and
    anywhere under the stack's run_dir (the lower root, mount points)."""
    found = set()
    for d in host_dirs(stack):
        for n in os.listdir(d):
            if n.startswith(prefix) or n.startswith(".roombox-upload."):
                found.add(str(d / n))
    for dirpath, dirnames, filenames in os.walk(stack.run_dir):
        for n in dirnames + filenames:
            if n.startswith(prefix) or n.startswith(".roombox-upload."):
                found.add(os.path.join(dirpath, n))
    return sorted(found - before)


def check_host_check(stack, prefix, before):
    """Control: host_leaks finds a file written at each place it watches."""
    for d in host_dirs(stack) + [stack.run_dir / "mnt"]:
        p = d / f"{prefix}-control"
        p.write_bytes(b"control")
        try:
            assert host_leaks(stack, prefix, before) == [str(p)], p
        finally:
            p.unlink()
    assert host_leaks(stack, prefix, before) == []


def still_answers(client, room):
    assert client.get("/api/health").status == 200
    r = client.request("PUT", files(room, "after.txt"), data=b"still here")
    assert r.status in (200, 201), r
    r = client.request("GET", files(room, "after.txt"), check_json=False)
    assert r.status == 200 and r.body == b"still here", r


def json_error(r):
    """A failure a client can read: a JSON {"error"} with a 4xx or 500
    (never the web server's 502/504 of a service that went away)."""
    r.check_json()
    assert r.status in (400, 403, 404, 409, 500), r
    assert isinstance(r.json.get("error"), str) and r.json["error"], r
    return r.json["error"]


def room_listing(client, room, dirs):
    """{dir: {name: "sha256:size"}} of the room's regular files named swap-* in each
    of `dirs`, read by the room's root."""
    out = client.sh(room, "for d in " + " ".join(dirs) + "; do for f in \"$d\"/swap-*; do "
                    "[ -f \"$f\" ] && printf '%s %s %s:%s\\n' \"$d\" \"${f##*/}\" \"$(sha256sum < \"$f\" | cut -c1-64)\" \"$(stat -c %s \"$f\")\"; "
                    "done; done; true")
    seen = {}
    for line in out.splitlines():
        d, name, digest = line.split()
        seen.setdefault(d, {})[name] = digest
    return seen


def test_upload_through_a_path_swapped_during_the_request(client, stack, room):
    """A slow PUT to /workspace/d/<name> while d is exchanged with symlinks
    to the room's / and to /usr/lib (a lower tree: the host's /usr)."""
    tag = uuid.uuid4().hex[:10]
    prefix = f"swap-{tag}"
    client.sh(room, "true")     # the room runs: its lower root exists
    before = set(host_leaks(stack, prefix, set()))
    check_host_check(stack, prefix, before)

    client.sh(room, "mkdir /workspace/d && chown user:user /workspace/d && "
                    "ln -s / /workspace/to-root && ln -s /usr/lib /workspace/to-usrlib")
    # control: each target is reachable by a static symlink, and what the
    # room's root writes there stays in the room
    for link, where in (("to-root", "/"), ("to-usrlib", "/usr/lib")):
        r = client.request("PUT", files(room, f"{link}/{prefix}-static"), data=b"static")
        assert r.status == 201, r
        assert client.sh(room, f"cat {where}/{prefix}-static") == "static"
    assert host_leaks(stack, prefix, before) == []
    client.sh(room, f"rm /{prefix}-static /usr/lib/{prefix}-static")

    sw = Swapper(client, room, "/workspace/d", ["/workspace/to-root", "/workspace/to-usrlib"])
    results = []
    try:
        for i in range(PUTS):
            user = "root" if i % 2 == 0 else "user"
            body = bytes([65 + i]) * (CHUNK * CHUNKS)
            counts = []

            def slow():
                # each chunk waits until the swapper has gone on: the body is
                # still coming, so the request is open while it swaps
                for k in range(CHUNKS):
                    counts.append(sw.wait_past(counts[-1]) if counts else sw.count())
                    yield body[k * CHUNK:(k + 1) * CHUNK]

            r = client.request("PUT", files(room, f"d/{prefix}-{i}") + f"?user={user}", data=slow(),
                               headers={"Content-Length": str(len(body))}, check_json=False)
            counts.append(sw.count())
            results.append((i, user, r, body, counts))
    finally:
        sw.stop()

    # the swapping went on during every request
    for i, user, r, body, counts in results:
        assert counts[-2] - counts[0] >= (CHUNKS - 1) * MIN_SWAPS, counts
        assert counts[-1] >= counts[-2], counts

    # nothing on the host
    assert host_leaks(stack, prefix, before) == []

    # each upload landed in the room, where its user could write, or failed
    # with a JSON error; the real directory is now one of the three names
    real = client.sh(room, "for d in d to-root to-usrlib; do [ -L /workspace/$d ] || echo /workspace/$d; done").split()
    assert len(real) == 1, real
    where = room_listing(client, room, [real[0], "/", "/usr/lib"])
    by_place = {"the real directory": where.get(real[0], {}), "the room's /": where.get("/", {}),
                "the room's /usr/lib": where.get("/usr/lib", {})}
    outcome = {}
    for i, user, r, body, counts in results:
        name = f"{prefix}-{i}"
        digest = hashlib.sha256(body).hexdigest()
        landed = {p: ("whole" if names[name].split(":")[0] == digest else f"other bytes ({names[name].split(':')[1]})")
                  for p, names in by_place.items() if name in names}
        # the room's user can write only into the real directory (its own)
        assert user == "root" or set(landed) <= {"the real directory"}, (name, user, landed)
        if r.status in (200, 201):
            r.check_json()
            assert r.json == {"path": f"/workspace/d/{name}", "size": len(body)}, r
            # whole, in one place: every step of the upload worked in the
            # one directory it opened, however the path was swapped
            assert list(landed.values()) == ["whole"], f"PUT {name} answered {r.status}: {landed}"
            outcome[name] = f"{user}: {r.status}, in {landed}"
        else:
            json_error(r)
            # nothing half written under the target name
            assert not landed, f"PUT {name} answered {r.status} {json_error(r)!r}, yet in {landed}"
            outcome[name] = f"{user}: {r.status} {json_error(r)!r}"
    temps = client.sh(room, f"ls -A {real[0]} / /usr/lib | grep -c '^\\.roombox-upload\\.' || true").strip()
    print(f"\n{stack.server}: " + "\n".join(f"{k}: {v}" for k, v in sorted(outcome.items()))
          + f"\ntemporary files left in the room: {temps}")
    assert temps == "0", f"{temps} temporary upload files left in the room"
    # the race was real: at least one upload did not simply land in the
    # real directory (it went through a symlink, or failed)
    assert any("the real directory" not in v for v in outcome.values()), outcome
    assert host_leaks(stack, prefix, before) == []
    still_answers(client, room)


# ---------------------------------------------------------------- GET, DELETE, move

def plant_host(tag):
    """Host directories /root/X, /tmp/X, /usr/lib/X (X = rbx-swap-<tag>)
    with files f-i, g-i of host-only bytes.  /root/X and /tmp/X are not in
    the room (it has its own /root and /tmp); /usr/lib/X is in its lower
    tree, read-only."""
    x = f"rbx-swap-{tag}"
    dirs = [Path("/root") / x, Path("/tmp") / x, Path("/usr/lib") / x]
    for d in dirs:
        d.mkdir(mode=0o755)
        for i in range(ROUNDS):
            for kind in ("f", "g"):
                (d / f"{kind}-{i}").write_bytes(f"HOST {d} {kind}-{i}\n".encode())
    return x, dirs


def host_state(dirs):
    return {str(d / n): hashlib.sha256((d / n).read_bytes()).hexdigest()
            for d in dirs for n in sorted(os.listdir(d))}


def test_get_delete_move_through_a_path_swapped_during_the_request(client, stack, room):
    tag = uuid.uuid4().hex[:10]
    x, dirs = plant_host(tag)   # before the room starts: its lower tree has /usr/lib/X
    try:
        host_before = host_state(dirs)
        # control: host_state sees a file added on the host
        (dirs[0] / "control").write_bytes(b"control")
        assert host_state(dirs) != host_before
        (dirs[0] / "control").unlink()
        assert host_state(dirs) == host_before
        host_bytes = {(dirs[0] / n).read_bytes() for n in os.listdir(dirs[0])} | \
                     {(dirs[1] / n).read_bytes() for n in os.listdir(dirs[1])}
        # in the room: /root/X and /tmp/X are the room's own (same path as on
        # the host, other bytes); /root/X is root's alone (0700, 0600)
        client.sh(room, f"""set -e
            mkdir -m 700 /root/{x}; mkdir -m 755 /tmp/{x} /workspace/d
            for i in $(seq 0 {ROUNDS - 1}); do for k in f g; do
              printf 'ROOM-ROOT %s-%s\\n' $k $i > /root/{x}/$k-$i; chmod 600 /root/{x}/$k-$i
              printf 'ROOM-TMP %s-%s\\n' $k $i > /tmp/{x}/$k-$i
              printf 'ROOM-WS %s-%s\\n' $k $i > /workspace/d/$k-$i
            done; done
            chown -R user:user /workspace/d
            ln -s /root/{x} /workspace/to-root; ln -s /tmp/{x} /workspace/to-tmp; ln -s /usr/lib/{x} /workspace/to-usrlib
        """)
        # controls: the room sees its own /root/X and /tmp/X, the host's
        # /usr/lib/X; the room's user cannot read /root/X; a static symlink
        # reaches each (as root), so the swap offers all of them
        for link, want in (("to-root", b"ROOM-ROOT f-0\n"), ("to-tmp", b"ROOM-TMP f-0\n"),
                           ("to-usrlib", f"HOST {dirs[2]} f-0\n".encode())):
            r = client.request("GET", files(room, f"{link}/f-0") + "?user=root", check_json=False)
            assert r.status == 200 and r.body == want, (link, r)
        assert client.exec(room, f"cat /root/{x}/f-0", user="user")["exitCode"] != 0
        r = client.request("GET", files(room, "to-root/f-0") + "?user=user")
        assert r.status in (403, 404) and b"ROOM-ROOT" not in r.body, r

        sw = Swapper(client, room, "/workspace/d",
                     ["/workspace/to-root", "/workspace/to-tmp", "/workspace/to-usrlib"])
        got = {"root": [], "user": []}
        try:
            def during(method, path, **kw):
                c0 = sw.count()
                r = client.request(method, files(room, path), check_json=False, **kw)
                # The swapper, exchanging when the request began, goes on
                # past its answer: it swapped throughout.  (Waited for: a
                # request can answer within one line of the swapper's log
                # on a loaded machine.)
                c1 = wait_until(lambda: (c := sw.count()) >= c0 + LOG_EVERY and c, 20,
                                f"the swapper to go on exchanging past {method} {path}")
                return r, c1 - c0

            swaps = []
            for i in range(ROUNDS):
                for user in ("root", "user"):
                    r, n = during("GET", f"d/f-{i}?user={user}")
                    swaps.append(n)
                    got[user].append((i, r))
            # The race must be real: the room's user reads through a swapped
            # name at least once.  Each GET finds one of four names at d, the
            # real directory often enough that ROUNDS of them may all find
            # it: ask again, bounded, until one does not.
            deadline = time.monotonic() + 30
            while set(bodies_read(got["user"])) == {"ROOM-WS"} and time.monotonic() < deadline:
                r, n = during("GET", "d/f-0?user=user")
                swaps.append(n)
                got["user"].append((0, r))
            for i in range(ROUNDS):
                r, n = during("DELETE", f"d/f-{i}")
                swaps.append(n)
                got["root"].append((i, r))
                r, n = during("POST", f"d/g-{i}", data=json.dumps({"to": f"/workspace/moved/g-{i}"}).encode(),
                              headers={"Content-Type": "application/json"})
                swaps.append(n)
                got["root"].append((i, r))
                r, n = during("POST", f"moved/g-{i}", data=json.dumps({"to": f"d/h-{i}"}).encode(),
                              headers={"Content-Type": "application/json"})
                swaps.append(n)
                got["root"].append((i, r))
        finally:
            sw.stop()

        # the host's files: all there, same bytes, nothing added
        assert host_state(dirs) == host_before

        # what came back: bytes the requesting user can read in the room, or
        # a JSON error; never the host's /root/X or /tmp/X
        allowed = {
            "root": lambda i: {f"ROOM-WS f-{i}\n".encode(), f"ROOM-ROOT f-{i}\n".encode(),
                               f"ROOM-TMP f-{i}\n".encode(), f"HOST {dirs[2]} f-{i}\n".encode()},
            "user": lambda i: {f"ROOM-WS f-{i}\n".encode(), f"ROOM-TMP f-{i}\n".encode(),
                               f"HOST {dirs[2]} f-{i}\n".encode()},
        }
        seen = []
        for user, answers in got.items():
            for i, r in answers:
                assert r.body not in host_bytes, (user, i, r)
                ctype = (r.header("content-type") or "").split(";")[0]
                if r.status == 200 and ctype == "application/octet-stream":
                    assert r.body in allowed[user](i), (user, i, r)
                    seen.append(r.body.split()[0].decode())
                elif r.status == 200:
                    r.check_json()
                    assert set(r.json) & {"deleted", "path"}, r
                else:
                    json_error(r)
        # the race was real: the room's user did not only read its own file
        user_got = bodies_read(got["user"])
        assert set(user_got) - {"ROOM-WS"}, user_got
        print(f"\n{stack.server}: GET bodies from {sorted(set(seen))}, as user {user_got}, "
              f"swaps per request {min(swaps)}-{max(swaps)}")
        # the room's user never read root's /root/X, and the room is intact
        assert client.sh(room, f"cat /root/{x}/f-0 2>/dev/null || true") in ("ROOM-ROOT f-0\n", "")
        still_answers(client, room)
    finally:
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)
