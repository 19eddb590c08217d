"""Files at their edges: an upload without Content-Length (chunked) is
streamed whole and held to max_file; an upload cut off by the death of
roombox-fcgi leaves nothing in the room; and a request that only reads a
room that does not exist answers 404 and creates nothing."""

import http.client
import json
import os

from conftest import procs_with_uid_in, unique_room, wait_until

ROOMBOX_CONFIG = {"max_file": "2M"}


def files(room, path=""):
    return f"/api/rooms/{room}/sandbox/files/{path}"


def pieces(data, size=65536):
    for i in range(0, len(data), size):
        yield data[i:i + size]


def put_chunked(client, room, path, data):
    return client.request("PUT", files(room, path), data=pieces(data),
                          headers={"Transfer-Encoding": "chunked"})


def refused_by_lighttpd(client, stack, room, r, path):
    """lighttpd streams a body to FastCGI only with its length known: a
    chunked body that has not all come by then gets lighttpd's 411, as
    JSON, and nothing is made (one that has is passed on whole)."""
    if stack.server != "lighttpd" or r.status != 411:
        return False
    assert isinstance(r.json.get("error"), str), r
    assert client.get(files(room, path)).status == 404
    return True


def test_chunked_upload_is_streamed_whole(client, stack, room):
    data = os.urandom(1536 * 1024)
    r = put_chunked(client, room, "chunked.bin", data)
    if refused_by_lighttpd(client, stack, room, r, "chunked.bin"):
        return
    assert r.status == 201, r
    assert r.json == {"path": "/workspace/chunked.bin", "size": len(data)}, r.json
    got = client.request("GET", files(room, "chunked.bin"), check_json=False)
    assert got.status == 200 and got.body == data
    # replacing it: 200, the new size
    r = put_chunked(client, room, "chunked.bin", b"short")
    assert r.status in (200, 411), r
    if r.status == 200:
        assert r.json["size"] == 5, r
    r = put_chunked(client, room, "empty.bin", b"")
    assert r.status in (201, 411), r
    if r.status == 201:
        assert r.json["size"] == 0, r


def test_chunked_upload_past_max_file_is_413_and_leaves_nothing(client, stack, room):
    client.sh(room, "mkdir -p /workspace/big && echo old > /workspace/big/keep.bin")
    for name in ("keep.bin", "new.bin"):
        r = put_chunked(client, room, f"big/{name}", os.urandom(3 * 1024 * 1024))
        assert r.status in ((411, 413) if stack.server == "lighttpd" else (413,)), r
        assert "error" in r.json, r.json
        # the old file is untouched, and nothing else is left beside it
        assert client.sh(room, "cat /workspace/big/keep.bin; ls -A /workspace/big") == "old\nkeep.bin\n"


def upload_fds(uids, mark):
    """(pid, link) of the room's processes with a descriptor under `mark`."""
    found = []
    for pid, _, _ in procs_with_uid_in(uids.start, uids.stop):
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:
                continue
            if mark in link:
                found.append((pid, link))
    return found


def test_upload_cut_by_fcgi_death_leaves_nothing(client, stack, room):
    client.sh(room, "mkdir -p /workspace/cutdir")
    uids = client.room_ids(room)
    conn = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=60)
    conn.putrequest("PUT", files(room, "cutdir/part.bin"))
    conn.putheader("Authorization", f"Bearer {stack.token}")
    conn.putheader("Content-Length", str(1024 * 1024))
    conn.endheaders()
    conn.send(b"x" * 65536)
    # the upload is under way in the room: its file is open there
    wait_until(lambda: upload_fds(uids, "/cutdir/"), 60, "the upload to open its file in the room")
    stack.restart_fcgi()
    conn.close()
    wait_until(lambda: not upload_fds(uids, "/cutdir/"), 60, "the cut upload to end in the room")
    assert client.sh(room, "ls -A /workspace/cutdir") == ""



def test_a_cut_upload_ending_like_an_end_mark_is_not_named(client, stack, room):
    """The mark that ends an upload holds a secret of the request's: a
    client that cuts its body after bytes that look like a mark (the
    fixed text and the length before it) gets nothing named."""
    client.sh(room, "mkdir -p /workspace/forged")
    uids = client.room_ids(room)
    data = b"y" * 65536
    body = data + b"#rbput:%016x\n" % len(data)
    conn = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=60)
    conn.putrequest("PUT", files(room, "forged/f.bin"))
    conn.putheader("Authorization", f"Bearer {stack.token}")
    conn.putheader("Content-Length", str(len(body) + 4096))
    conn.endheaders()
    conn.send(body)
    wait_until(lambda: upload_fds(uids, "/forged/"), 60, "the upload to open its file in the room")
    conn.close()
    wait_until(lambda: not upload_fds(uids, "/forged/"), 60, "the cut upload to end in the room")
    assert client.sh(room, "ls -A /workspace/forged") == ""

def test_reading_a_room_that_does_not_exist_creates_nothing(client, stack):
    room = unique_room()
    reads = [files(room, ""), files(room, "x.txt"), files(room, "sub/") + "?recursive=1",
             f"/api/rooms/{room}", f"/api/rooms/{room}/sandbox/processes",
             f"/api/rooms/{room}/sandbox/processes/p1",
             f"/api/rooms/{room}/sandbox/processes/p1/logs",
             f"/api/rooms/{room}/sandbox/ports"]
    for path in reads:
        r = client.get(path)
        assert r.status == 404, (path, r)
        assert isinstance(r.json.get("error"), str) and r.json["error"], (path, r.json)
    # a log stream too
    r = client.request("GET", f"/api/rooms/{room}/sandbox/processes/p1/logs",
                       headers={"Accept": "text/event-stream"}, check_json=False)
    assert r.status == 404 and "error" in json.loads(r.body), r
    assert not stack.room_state_dir(room).exists()
    assert room not in {x["roomId"] for x in client.get("/api/rooms").json["rooms"]}
    # a request that changes the room still creates it
    r = client.request("PUT", files(room, "x.txt"), data=b"now")
    assert r.status == 201, r
    assert stack.room_state_dir(room).exists()
    assert client.request("GET", files(room, "x.txt"), check_json=False).body == b"now"


def test_listing_and_delete_never_follow_a_symlink_below_the_path(client, room):
    client.sh(room, "mkdir -p /workspace/keep/deep /workspace/tree/sub && echo k > /workspace/keep/deep/k.txt && "
                    "ln -s /workspace/keep /workspace/tree/sub/to-keep && echo t > /workspace/tree/t.txt")
    r = client.get(files(room, "tree") + "?recursive=1")
    assert r.status == 200, r
    by_rel = {e["relativePath"]: e["type"] for e in r.json["entries"]}
    assert by_rel == {"sub": "directory", "sub/to-keep": "symlink", "t.txt": "file"}, by_rel
    r = client.delete(files(room, "tree") + "?recursive=1")
    assert r.status == 200 and r.json == {"deleted": "/workspace/tree"}, r
    assert client.sh(room, "cat /workspace/keep/deep/k.txt; ls -A /workspace") == "k\nkeep\n"


def test_delete_never_takes_the_workspace_or_the_root(client, room):
    """`.` and `..` in a DELETE's path, or /workspace and / spelt with
    extra slashes, are refused as 400 before anything is removed, for
    root and user alike."""
    client.sh(room, "mkdir -p /workspace/keep /home/user/keep && echo 1 > /workspace/keep/f && "
                    "echo 2 > /home/user/keep/f && chown -R 1000:1000 /home/user/keep")
    spellings = ["%2e", "%2e/", "./", ".", "keep/..", "keep/%2e%2e", "%2e%2e/home",
                 "%2e%2e/home/user", "%2e%2e", "..", "/workspace//", "//workspace//",
                 "/workspace/.", "//", "/./", "/workspace/keep/../..", "/home/user/..",
                 # no dot, but /workspace all the same (the delete tool's own check)
                 "/proc/self/root/workspace", "/proc/self/root/workspace/"]
    for user in ("user", "root"):
        for p in spellings:
            r = client.delete(files(room, p) + f"?recursive=1&user={user}")
            assert r.status == 400 and "invalid path" in r.json["error"], (p, user, r)
    assert client.sh(room, "cat /workspace/keep/f /home/user/keep/f") == "1\n2\n"
    # a name that merely starts with dots is an ordinary name
    client.sh(room, "mkdir /workspace/..x && echo 3 > /workspace/..x/f")
    assert client.delete(files(room, "..x") + "?recursive=1").status == 200


def test_a_tree_too_deep_is_said_so(client, room):
    """Past 256 levels a listing is marked truncated, and a recursive
    delete says why it stopped (and removed what it could reach)."""
    client.sh(room, "d=/workspace/deep; for i in $(seq 260); do d=$d/a; done; mkdir -p $d && "
                    "touch $d/f /workspace/deep/top")
    r = client.get(files(room, "deep") + "?recursive=1")
    assert r.status == 200 and r.json.get("truncated") is True, r
    assert len(r.json["entries"]) == 258, len(r.json["entries"])
    r = client.delete(files(room, "deep") + "?recursive=1")
    assert r.status == 409 and "too deep" in r.json["error"] and "256" in r.json["error"], r
    assert client.sh(room, "ls /workspace/deep") == "a\n"
