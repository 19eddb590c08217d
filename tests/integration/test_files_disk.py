"""An upload into a full room: 507, and nothing left under the target name;
a download that would never end ends at the deadline of file
operations (exec_timeout_max); through nginx and lighttpd."""

import os
import subprocess
import time

ROOMBOX_CONFIG = {"disk_limit": "32M", "max_file": "100M",
                  "exec_timeout": "5s", "exec_timeout_max": "8s"}


def test_upload_into_a_full_room_is_507_and_leaves_nothing(client, room, tmp_path):
    data = os.urandom(48 << 20)
    r = client.request("PUT", f"/api/rooms/{room}/sandbox/files/full.bin", data=data, timeout=120)
    assert r.status == 507, r
    assert r.json == {"error": "no space left in the room"}
    assert client.get(f"/api/rooms/{room}/sandbox/files/full.bin").status == 404
    assert client.sh(room, "ls -A /workspace") == ""
    # and the room still takes a file that fits
    r = client.request("PUT", f"/api/rooms/{room}/sandbox/files/small.bin", data=b"ok")
    assert r.status == 201


def test_a_download_that_would_never_end_ends_at_the_deadline(client, room):
    """A sparse file of a terabyte costs the room nothing; its download is
    cut (short of its Content-Length: a failed download) at exec_timeout_max,
    as any file operation is, and the service goes on."""
    client.sh(room, "truncate -s 1T /workspace/huge")
    url = f"http://127.0.0.1:{client.port}/api/rooms/{room}/sandbox/files/huge"
    t0 = time.monotonic()
    r = subprocess.run(["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                        "--max-time", "120", "-H", f"Authorization: Bearer {client.token}", url],
                       capture_output=True, timeout=150)
    took = time.monotonic() - t0
    code, size = r.stdout.decode().split()
    assert code == "200" and r.returncode == 18, (r.returncode, r.stdout, r.stderr)  # partial
    assert 0 < int(size) < 1 << 40
    assert took < 60, f"the download ran {took:.0f} s (exec_timeout_max is 8 s)"
    assert client.sh(room, "echo ok") == "ok\n"
