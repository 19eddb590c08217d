"""Files through nginx and lighttpd: streamed both ways, done
inside the room, errors as written, no way out of the room."""

import hashlib
import os
import subprocess
import threading
import time
import urllib.parse

ROOMBOX_CONFIG = {"max_file": "300M"}


def files(room, path=""):
    return f"/api/rooms/{room}/sandbox/files/{path}"


def put(client, room, path, data, **kw):
    return client.request("PUT", files(room, path), data=data, **kw)


def get_raw(client, room, path):
    return client.request("GET", files(room, path), check_json=False)


def test_upload_then_download_small(client, room):
    r = put(client, room, "hello.txt", b"Hello World\n")
    assert r.status == 201, r
    assert r.json == {"path": "/workspace/hello.txt", "size": 12}
    r = get_raw(client, room, "hello.txt")
    assert r.status == 200 and r.body == b"Hello World\n"
    assert r.header("content-type") == "application/octet-stream"
    assert r.header("content-length") == "12"
    assert client.sh(room, "cat /workspace/hello.txt") == "Hello World\n"
    r = put(client, room, "/workspace/hello.txt", b"again")
    assert r.status == 200 and r.json["size"] == 5
    assert get_raw(client, room, "%2Fworkspace%2Fhello.txt").body == b"again"


def test_parents_mode_and_percent_decoding(client, room):
    r = client.request("PUT", files(room, "a/b/my%20file.sh") + "?mode=0755", data=b"#!/bin/sh\necho run\n")
    assert r.status == 201 and r.json["path"] == "/workspace/a/b/my file.sh", r
    assert client.sh(room, "stat -c %a '/workspace/a/b/my file.sh'; '/workspace/a/b/my file.sh'") == "755\nrun\n"
    # a new file without ?mode gets 0644 (the room's umask), not mktemp's 0600
    put(client, room, "plain.txt", b"x")
    assert client.sh(room, "stat -c %a /workspace/plain.txt") == "644\n"
    r = client.request("PUT", files(room, "bad") + "?mode=99x", data=b"x")
    assert r.status == 400
    assert client.request("GET", files(room, "%zz")).status == 400
    assert client.request("GET", files(room, "a%00b")).status == 400


def test_directories_listing_mkdir_delete_and_move(client, room):
    assert put(client, room, "d/sub/", b"").status == 201
    put(client, room, "d/f.txt", b"12345")
    client.sh(room, "ln -s f.txt /workspace/d/link")
    r = client.get(files(room, "d"))
    assert r.status == 200 and r.json["path"] == "/workspace/d"
    by_name = {e["name"]: e for e in r.json["entries"]}
    assert set(by_name) == {"sub", "f.txt", "link"}
    assert by_name["sub"]["type"] == "directory"
    assert by_name["f.txt"]["type"] == "file" and by_name["f.txt"]["size"] == 5
    assert by_name["f.txt"]["mode"] == "0644"
    assert by_name["link"]["type"] == "symlink"
    assert by_name["f.txt"]["modifiedAt"].endswith("Z")
    put(client, room, "d/sub/deep.txt", b"deep")
    r = client.get(files(room, "d") + "?recursive=1")
    rel = {e["relativePath"] for e in r.json["entries"]}
    assert "sub/deep.txt" in rel and "f.txt" in rel
    # delete: a non-empty directory needs ?recursive=1
    r = client.delete(files(room, "d"))
    assert r.status == 409, r
    r = client.request("POST", files(room, "d/f.txt"), {"to": "moved/g.txt"})
    assert r.status == 200 and r.json == {"path": "/workspace/moved/g.txt"}
    assert get_raw(client, room, "moved/g.txt").body == b"12345"
    assert client.get(files(room, "d/f.txt")).status == 404
    r = client.delete(files(room, "d") + "?recursive=1")
    assert r.status == 200 and r.json == {"deleted": "/workspace/d"}
    assert client.delete(files(room, "moved/g.txt")).json == {"deleted": "/workspace/moved/g.txt"}
    r = client.get(files(room, "d"))
    assert r.status == 404 and r.json == {"error": "not found: /workspace/d"}
    assert client.delete(files(room, "nothing")).status == 404
    r = client.request("POST", files(room, "x"), {"too": 1})
    assert r.status == 400 and "to" in r.json["details"]


def test_permission_denied_is_403_and_user_is_the_requests(client, room):
    """Files are handled as the request's user (?user=, default exec_user):
    the room's user may not write into root's read-only directory; root
    may."""
    client.sh(room, "mkdir -p /workspace/ro && chmod 555 /workspace/ro && chown 0:0 /workspace/ro")
    r = client.request("PUT", files(room, "ro/x") + "?user=user", data=b"x")
    assert r.status == 403, r
    assert r.json == {"error": "permission denied: /workspace/ro/x"}
    assert client.sh(room, "ls -A /workspace/ro") == ""
    r = client.request("PUT", files(room, "ro/y") + "?user=root", data=b"y")
    assert r.status == 201, r
    assert client.sh(room, "stat -c %u /workspace/ro/y") == "0\n"
    r = client.request("PUT", files(room, "mine") + "?user=user", data=b"z")
    assert r.status == 201 and client.sh(room, "stat -c %u /workspace/mine") == "1000\n"
    assert client.request("GET", files(room, "mine") + "?user=admin").status == 400


def test_over_max_file_is_413_and_nothing_is_written(client, room):
    # Content-Length says more than max_file: refused before anything runs
    r = client.request("PUT", files(room, "big"), data=b"x",
                       headers={"Content-Length": str(301 << 20)}, timeout=30)
    assert r.status == 413, r
    assert client.get(files(room, "big")).status == 404


def test_no_way_out_of_the_room(client, stack, room):
    secret = stack.dir / "host-secret.txt"
    secret.write_bytes(b"host only\n")
    host_file = "/usr/share/common-licenses/GPL-3"
    before = hashlib.sha256(open(host_file, "rb").read()).hexdigest()
    client.sh(room, f"ln -s {secret} /workspace/to-host; ln -s / /workspace/rootlink; "
                    f"ln {host_file} /workspace/hard 2>/dev/null || cp {host_file} /workspace/hard")
    # a symlink to a host path resolves in the room, where it is absent
    assert get_raw(client, room, "to-host").status == 404
    r = put(client, room, "to-host", b"overwritten")
    assert secret.read_bytes() == b"host only\n"
    # the room's own root through a symlink, and .. (also encoded): the
    # room's /etc/passwd, never the host's
    room_passwd = client.sh(room, "cat /etc/passwd").encode()
    assert room_passwd != open("/etc/passwd", "rb").read()
    for p in ("rootlink/etc/passwd", "../../etc/passwd", "%2e%2e/%2e%2e/etc/passwd"):
        r = get_raw(client, room, p)
        assert r.status == 200 and r.body == room_passwd, (p, r)
    # a hard link to a file of the lower (host) tree: replacing it never
    # changes the host's file
    assert put(client, room, "hard", b"replaced").status == 200
    assert hashlib.sha256(open(host_file, "rb").read()).hexdigest() == before
    assert not (stack.dir / "host-secret.txt.tmp").exists()


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_256_mib_up_and_down_byte_exact_in_flat_memory(client, stack, room, tmp_path):
    size = 256 << 20
    src = tmp_path / "big.bin"
    with open(src, "wb") as f:
        block = os.urandom(1 << 20)
        for i in range(size >> 20):
            f.write(block[i:] + block[:i])
    want = hashlib.sha256(src.read_bytes()).hexdigest()
    pids = stack.fcgi_pids()
    assert pids
    client.sh(room, "true")
    base = {p: rss_kib(p) for p in pids}
    peak = dict(base)
    done = threading.Event()

    def sample():
        while not done.is_set():
            for p in pids:
                peak[p] = max(peak[p], rss_kib(p))
            done.wait(0.05)

    t = threading.Thread(target=sample)
    t.start()
    url = f"http://127.0.0.1:{client.port}{files(room, 'big.bin')}"
    auth = f"Authorization: Bearer {client.token}"
    try:
        up = subprocess.run(["curl", "-sS", "-T", str(src), "-H", auth, "-w", "%{http_code}", url],
                            capture_output=True, timeout=300)
        out = tmp_path / "back.bin"
        down = subprocess.run(["curl", "-sS", "-o", str(out), "-H", auth, "-w", "%{http_code}", url],
                              capture_output=True, timeout=300)
    finally:
        done.set()
        t.join()
    assert up.stdout.endswith(b"201"), up
    assert down.stdout == b"200", down
    assert out.stat().st_size == size
    assert hashlib.sha256(out.read_bytes()).hexdigest() == want
    growth = max(peak[p] - base[p] for p in pids)
    assert growth < 32 * 1024, f"roombox-fcgi grew by {growth} KiB"


def test_a_file_cut_short_during_its_download_fails_the_download(client, room):
    """Content-Length is the file's size when the download began; a file the
    room truncates meanwhile ends the download as failed (the connection is
    cut short), never as a complete-looking answer."""
    import http.client
    size = 200 << 20
    client.sh(room, f"head -c {size} /dev/zero | tr '\\0' x > /workspace/shrinks")
    conn = http.client.HTTPConnection("127.0.0.1", client.port, timeout=60)
    try:
        conn.request("GET", files(room, "shrinks"),
                     headers={"Authorization": f"Bearer {client.token}"})
        resp = conn.getresponse()
        assert resp.status == 200, resp.status
        assert int(resp.getheader("Content-Length")) == size
        first = resp.read(1 << 20)
        assert first == b"x" * (1 << 20)
        # the rest is still on its way (the client stopped reading): cut it
        client.sh(room, "truncate -s 1M /workspace/shrinks")
        got = len(first)
        try:
            while True:
                chunk = resp.read(1 << 20)
                if not chunk:
                    break
                assert chunk == b"x" * len(chunk)
                got += len(chunk)
            ended = "closed"
        except http.client.IncompleteRead as e:
            got += len(e.partial)
            ended = "incomplete"
        assert got < size, f"all {got} bytes came, from a file cut to 1 MiB ({ended})"
    finally:
        conn.close()
    # the room and the service go on: the file is there, as cut
    r = get_raw(client, room, "shrinks")
    assert r.status == 200 and r.body == b"x" * (1 << 20), r


def test_a_fifo_or_a_device_is_409_at_once(client, room):
    """Nothing to download in a FIFO (its read would wait for a writer until
    the files deadline) or a device (/dev/zero never ends): 409 at once."""
    client.sh(room, "mkfifo /workspace/pipe")
    for path, shown in (("pipe", "/workspace/pipe"), ("/dev/zero", "/dev/zero"),
                        ("/dev/null", "/dev/null")):
        r = client.request("GET", files(room, urllib.parse.quote(path, safe="")), timeout=30)
        assert r.status == 409, (path, r)
        assert r.json == {"error": f"not a regular file: {shown}"}, (path, r)
    # the room is none the worse: a file next to them downloads
    assert put(client, room, "plain", b"plain").status == 201
    assert get_raw(client, room, "plain").body == b"plain"


def test_mkdir_with_a_mode_sets_it_on_the_directory_made(client, room):
    r = client.request("PUT", files(room, "mk/sub/") + "?mode=0700", data=b"")
    assert r.status == 201, r
    by_name = {e["name"]: e for e in client.get(files(room, "mk")).json["entries"]}
    assert by_name["sub"]["type"] == "directory" and by_name["sub"]["mode"] == "0700", by_name
    # made again: it is there already, and keeps its mode
    assert client.request("PUT", files(room, "mk/sub/") + "?mode=0755", data=b"").status == 200
    assert client.get(files(room, "mk")).json["entries"][0]["mode"] == "0700"
    # a file in the way
    client.sh(room, "touch /workspace/mk/file")
    r = client.request("PUT", files(room, "mk/file/") + "?mode=0700", data=b"")
    assert r.status == 409, r
