"""pip in a room ("pip install ... works, and none of it reaches the
host's files or any other room"), as the room's root, from a small index the
test builds: one pure-Python wheel, made here by hand, put into the room
through the files API, installed with --no-index --find-links (no packet
leaves the machine).  Through nginx and lighttpd."""

import base64
import hashlib
import io
import os
import signal
import subprocess
import uuid
import zipfile

from conftest import GONE_TIMEOUT, pid_alive, unique_room, wait_until


def wheel(name, value):
    """(file name, bytes) of a py3-none-any wheel with one module."""
    files = {
        f"{name}/__init__.py": f"VALUE = {value!r}\n".encode(),
        f"{name}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
        f"{name}-1.0.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: roombox-tests\n"
                                     b"Root-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{name}-1.0.dist-info/RECORD,,")
    files[f"{name}-1.0.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in files.items():
            z.writestr(path, data)
    return f"{name}-1.0-py3-none-any.whl", buf.getvalue()


PIP = "python3 -m pip install -q --no-index --no-cache-dir --break-system-packages --find-links /workspace/wheels"


def test_pip_install_from_a_test_index_persists_in_that_room_alone(client, stack):
    a, b = unique_room("pip"), unique_room("pip")
    name = f"rbxpip_{uuid.uuid4().hex[:8]}"
    fname, data = wheel(name, "hello from pip")
    r = client.request("PUT", f"/api/rooms/{a}/sandbox/files/wheels/{fname}", data=data)
    assert r.status == 201, r
    assert client.sh(a, "id -u") == "0\n"
    res = client.exec(a, f"{PIP} {name}", timeout=120000)
    assert res["exitCode"] == 0, res
    check = f"python3 -c 'import {name}; print({name}.VALUE)'"
    assert client.sh(a, check) == "hello from pip\n"
    where = client.sh(a, f"python3 -c 'import {name}; print({name}.__file__)'").strip()
    assert where.startswith("/usr/local/lib/python3"), where
    # for good: across a killed keeper (the room starts again from its disk)
    keeper = stack.keeper_pid(a)
    os.kill(keeper, signal.SIGKILL)
    wait_until(lambda: not pid_alive(keeper), GONE_TIMEOUT, "the keeper to die")
    assert client.sh(a, check) == "hello from pip\n"
    # not on the host, not in another room
    assert not os.path.exists(where)
    host = subprocess.run(["/usr/bin/python3", "-c", f"import {name}"], capture_output=True)
    assert host.returncode != 0
    res = client.exec(b, check)
    assert res["exitCode"] != 0 and "ModuleNotFoundError" in res["stderr"], res
