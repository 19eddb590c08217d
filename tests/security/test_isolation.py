"""What a room can see and reach of the host and of other rooms
(namespaces and file system): destructive commands, shared-memory channels,
host files, /dev, /proc, /sys, mount flags, sockets.  Through nginx."""

import json
import os
import socket
import subprocess
import uuid

import pytest
from conftest import kernel_lacks, unique_room
from security_helpers import file_fingerprint, room_python_json, tree_fingerprint

SERVERS = ("nginx",)

# Host files a room's rm -rf could reach if it were not jailed.
# (Files only: the host's directories change under other programs.)
HOST_FILES = ["/usr/bin/ls", "/usr/bin/cat", "/usr/bin/su", "/bin", "/etc/passwd", "/etc/shadow",
              "/etc/hostname", "/etc/os-release", "/usr/lib/os-release", "/usr/bin/python3",
              "/lib/x86_64-linux-gnu/libc.so.6"]

RM_TARGETS = ("/usr/bin /bin /sbin /etc /lib/x86_64-linux-gnu/libc.so.6 /home /workspace /tmp "
              "/var /root /dev /run /opt /srv /usr/share/doc /usr/lib/python3")


@pytest.mark.parametrize("who", ["user", "root"])
def test_rm_rf_of_the_system_changes_nothing_outside_the_room(client, stack, who):
    """As the room's user, what it may delete is its own; as the room's root,
    its whole system goes -- in that room alone."""
    a, b = unique_room("a"), unique_room("b")
    uid_a = client.room_uid(a)
    client.sh(b, "echo b-ws > /workspace/f; echo b-tmp > /tmp/f; echo b-home > /home/user/f")
    client.sh(a, "echo mine > /workspace/f; echo mine > /tmp/f; echo mine > /home/user/f; "
                 "mkdir -p /workspace/d/e && touch /workspace/d/e/g", user=who)
    # a host file the room's (root's) host uid owns, where the room would look for it
    owned = f"/tmp/rbx-sec-owned-{a}"
    with open(owned, "w") as f:
        f.write("host file owned by the room's uid\n")
    os.chown(owned, uid_a, uid_a)
    before = {p: file_fingerprint(p) for p in HOST_FILES + [owned]}
    base_before = tree_fingerprint(stack.run_dir / "base-3")
    try:
        res = client.exec(a, f"rm -rf {RM_TARGETS} {owned}; "
                             "mv /etc /etc.old; chmod 777 /etc/passwd; ln -sf /dev/null /usr/bin/ls; "
                             "cp /bin/sh /usr/bin/cat; echo x >> /etc/passwd; "
                             "ls -A /workspace /tmp /home/user", timeout=60000, user=who)
        if who == "user":
            # what the room user could delete is its own: gone in A
            assert res["stdout"].split() == ["/home/user:", "/tmp:", "/workspace:"], res
            assert "Permission denied" in res["stderr"], res
        else:
            # the room's root took its room's system apart, ls included
            # (the device nodes are bind mounts of the host's, read-only)
            assert res["exitCode"] == 127 and res["stdout"] == "", res
            assert "cannot remove '/usr/bin" not in res["stderr"], res
            assert "cannot remove '/etc" not in res["stderr"], res
        after = {p: file_fingerprint(p) for p in HOST_FILES + [owned]}
        assert after == before
        assert tree_fingerprint(stack.run_dir / "base-3") == base_before
        # room B kept everything
        assert client.sh(b, "cat /workspace/f /tmp/f /home/user/f") == "b-ws\nb-tmp\nb-home\n"
        assert client.sh(b, "ls /usr/bin/ls /etc/passwd && cat --version | head -1").startswith("/etc/passwd\n/usr/bin/ls\n")
        if who == "user":
            # and room A still has its system
            out = client.sh(a, "ls -l /usr/bin/ls | cut -c1; cat /etc/passwd | grep -c '^user:'; id -un",
                            user="user")
            assert out == "-\n1\nuser\n", out
        else:
            # room A has no shell left: its own affair, and cleanup still works
            r = client.exec_raw(a, {"cmd": "true"})
            assert r.status == 500 and "exec the shell" in r.json["error"], r.json
            client.destroy(a)
            assert client.get(f"/api/rooms/{a}").status == 404
    finally:
        os.unlink(owned)


SHM_OPEN = r'''
import _posixshmem, json, os, sys
name, create = sys.argv[1], sys.argv[2] == "create"
try:
    fd = _posixshmem.shm_open("/" + name, os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0), 0o600)
    if create:
        os.write(fd, b"AAAA")
    print(json.dumps("opened"))
except OSError as e:
    print(json.dumps(e.errno))
'''


def test_dev_shm_is_per_room(client):
    a, b = unique_room("a"), unique_room("b")
    name = f"rbx-{uuid.uuid4().hex[:8]}"
    client.sh(a, f"echo from-a > /dev/shm/{name}")
    assert room_python_json(client, a, SHM_OPEN, f"{name}-seg", "create") == "opened"
    assert client.sh(a, "ls /dev/shm").split() == sorted([name, f"{name}-seg"])
    assert room_python_json(client, a, SHM_OPEN, f"{name}-seg", "open") == "opened"   # control
    res = client.exec(b, f"ls -A /dev/shm; cat /dev/shm/{name}")
    assert res["stdout"] == "" and res["exitCode"] != 0, res
    assert room_python_json(client, b, SHM_OPEN, f"{name}-seg", "open") == 2     # ENOENT
    assert not os.path.exists(f"/dev/shm/{name}") and not os.path.exists(f"/dev/shm/{name}-seg")


ABSTRACT_SERVER = r'''
import os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(b"\0" + sys.argv[1].encode())
s.listen(8)
os.close(1); os.close(2)
while True:
    c, _ = s.accept()
    c.sendall(b"hello from a\n")
    c.close()
'''

ABSTRACT_CLIENT = r'''
import json, socket, sys
out = {}
for name in sys.argv[1:]:
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    c.settimeout(2)
    try:
        c.connect(b"\0" + name.encode())
        out[name] = c.recv(100).decode()
    except OSError as e:
        out[name] = e.errno
    finally:
        c.close()
print(json.dumps(out))
'''


def test_abstract_unix_sockets_are_per_room(client):
    a, b = unique_room("a"), unique_room("b")
    name = f"rbxtest-{uuid.uuid4().hex[:8]}"
    # (a background job's stdin is /dev/null: the script goes to a file first)
    res = client.exec(a, f"cat > /tmp/server.py; python3 /tmp/server.py {name} & "
                         f"for i in $(seq 200); do grep -q '@{name}$' /proc/net/unix && break; "
                         f"sleep 0.05; done; grep -c '@{name}$' /proc/net/unix", stdin=ABSTRACT_SERVER)
    assert res["stdout"] == "1\n", res
    # host side: an abstract socket of the host too
    host_name = f"rbxhost-{uuid.uuid4().hex[:8]}"
    host = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    host.bind(b"\0" + host_name.encode())
    host.listen(8)
    try:
        # control: inside A the server answers
        assert room_python_json(client, a, ABSTRACT_CLIENT, name) == {name: "hello from a\n"}
        got = room_python_json(client, b, ABSTRACT_CLIENT, name, host_name)
        assert got == {name: 111, host_name: 111}, got        # ECONNREFUSED: no such name here
        got = room_python_json(client, a, ABSTRACT_CLIENT, host_name)
        assert got == {host_name: 111}, got
    finally:
        host.close()
    # the room's abstract socket is not the host's either
    c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        c.connect(b"\0" + name.encode())
        connected = True
    except OSError:
        connected = False
    finally:
        c.close()
    assert not connected


def test_sysv_ipc_is_per_room(client):
    a, b = unique_room("a"), unique_room("b")
    out = client.sh(a, "ipcmk -M 4096 && ipcmk -Q && ipcmk -S 1 && ipcs -m -q -s | grep -c '^0x'")
    assert out.splitlines()[-1] == "3", out
    out = client.sh(b, "ipcs -m -q -s | grep -c '^0x' || true")
    assert out == "0\n", out
    # nor on the host: list the host's objects owned by A's uid
    uid = client.room_uid(a)
    host = subprocess.run(["ipcs", "-m", "-q", "-s", "-c"], capture_output=True, text=True, check=True).stdout
    assert str(uid) not in host, host


def test_host_files_are_invisible(client, stack):
    a, b = unique_room("a"), unique_room("b")
    tag = f"rbx-sec-{uuid.uuid4().hex[:8]}"
    client.sh(b, f"echo b > /workspace/{tag}-b; echo b > /tmp/{tag}-b; echo b > /home/user/{tag}-b")
    made_dirs, made_files = [], []

    def plant_dir(d):
        if not os.path.exists(d):
            os.makedirs(d)
            made_dirs.append(d)
        p = os.path.join(d, tag)
        with open(p, "w") as f:
            f.write("host secret\n")
        made_files.append(p)
        return p

    try:
        planted = [plant_dir(d) for d in ("/etc/roombox", "/var/lib/roombox", "/root",
                                          "/run", f"/home/{tag}")]
        paths = planted + ["/etc/shadow", "/etc/gshadow", "/etc/sudoers", "/etc/ssh",
                           str(stack.dir), str(stack.state_dir), str(stack.run_dir),
                           str(stack.conf_path), str(stack.tokens_file),
                           str(stack.state_dir / "rooms" / b), str(stack.run_dir / "rooms" / b)]
        script = "for p in " + " ".join(paths) + "; do [ -e \"$p\" ] && echo \"$p\"; done; " \
                 "ls -A /home; ls -A /run; ls -A /etc | grep -ci roombox; " \
                 f"find / -path /proc -prune -o -path /usr -prune -o -name '{tag}*' -print 2>/dev/null"
        res = client.exec(a, script, timeout=60000)
        assert res["stdout"] == "user\n0\n", res
        # the room's own /etc holds no host account
        names = {l.split(":")[0] for l in client.sh(a, "cat /etc/passwd").splitlines()}
        # root, user, nobody, and the host's system accounts (ids 1-999,
        # which packages name): never a host user's account
        host = {}
        for line in open("/etc/passwd").read().splitlines():
            f = line.split(":")
            host[f[0]] = int(f[2])
        assert {"root", "user", "nobody"} <= names, names
        assert all(n in ("root", "user", "nobody") or 1 <= host.get(n, 0) <= 999 for n in names), names
        groups = set(client.sh(a, "cat /etc/group | cut -d: -f1").split())
        host_groups = {}
        for line in open("/etc/group").read().splitlines():
            f = line.split(":")
            host_groups[f[0]] = int(f[2])
        assert {"nogroup", "root", "user"} <= groups, groups
        assert all(g in ("nogroup", "root", "user") or 1 <= host_groups.get(g, 0) <= 999 for g in groups), groups
        # control: the same loop finds files that exist in the room
        assert client.sh(a, "for p in /etc/passwd /workspace; do [ -e \"$p\" ] && echo \"$p\"; done") \
            == "/etc/passwd\n/workspace\n"
    finally:
        for p in made_files:
            os.unlink(p)
        for d in made_dirs:
            os.rmdir(d)          # only if nothing else appeared in it meanwhile


DEV_ENTRIES = {
    "null": "c", "zero": "c", "full": "c", "random": "c", "urandom": "c", "tty": "c",
    "pts": "d", "shm": "d",
    "ptmx": "l", "fd": "l", "stdin": "l", "stdout": "l", "stderr": "l",
}


def test_dev_holds_exactly_the_allowed_entries(client, room):
    out = client.sh(room, "for f in /dev/* /dev/.[!.]*; do [ -e \"$f\" ] || [ -L \"$f\" ] || continue; "
                          "if [ -L \"$f\" ]; then t=l; elif [ -c \"$f\" ]; then t=c; elif [ -d \"$f\" ]; "
                          "then t=d; else t=other; fi; echo \"${f#/dev/} $t\"; done")
    found = dict(line.split() for line in out.splitlines())
    assert found == DEV_ENTRIES, found
    assert client.sh(room, "ls -A /dev/pts") == "ptmx\n"
    res = client.exec(room, "touch /dev/x; echo \"touch=$?\"; mknod /dev/y c 1 3; echo \"mknod=$?\"; "
                            "ls -A /dev | wc -l")
    assert res["stdout"].split() == ["touch=1", "mknod=1", str(len(DEV_ENTRIES))], res
    # the nodes work
    assert client.sh(room, "head -c 4 /dev/zero | od -An -tx1; head -c 8 /dev/urandom | wc -c; echo ok > /dev/null") \
        == " 00 00 00 00\n8\n"


def test_proc_sys_and_sys_are_read_only(client, room):
    res = client.exec(room, "echo pwned > /proc/sys/kernel/hostname; echo \"hostname=$?\"; "
                            "echo 1 > /proc/sys/vm/drop_caches; echo \"drop_caches=$?\"; "
                            "echo '|/tmp/x' > /proc/sys/kernel/core_pattern; echo \"core_pattern=$?\"; "
                            "touch /sys/x; echo \"sys_touch=$?\"; mkdir /sys/fs; echo \"sys_mkdir=$?\"; "
                            "chmod 0777 /sys; echo \"sys_chmod=$?\"; chmod 0777 /dev; echo \"dev_chmod=$?\"; "
                            "ls -A /sys | wc -l; uname -n")
    lines = res["stdout"].splitlines()
    for l in lines[:7]:
        assert not l.endswith("=0"), res
    assert "Read-only file system" in res["stderr"], res
    assert lines[7] == "0", f"/sys is not empty in the room: {res}"
    assert lines[8] == f"sandbox-{room}"
    assert client.sh(room, "stat -c %a /sys /dev") == "755\n755\n"
    with open("/proc/sys/kernel/core_pattern") as f:
        assert "/tmp/x" not in f.read()


# Mounts whose job is device access: they cannot be nodev.
DEVICE_MOUNTS = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom",
                 "/dev/tty", "/dev/pts"}


def test_every_mount_is_nosuid_and_nodev(client, room):
    mounts = []
    for line in client.sh(room, "cat /proc/self/mountinfo").splitlines():
        fields = line.split()
        sep = fields.index("-")
        mounts.append({"point": fields[4], "opts": set(fields[5].split(",")),
                       "type": fields[sep + 1], "super": set(fields[sep + 3].split(","))})
    points = [m["point"] for m in mounts]
    assert "/" in points and "/proc" in points and "/dev" in points, points
    problems = []
    for m in mounts:
        if "nosuid" not in m["opts"]:
            problems.append(f"{m['point']} ({m['type']}) is not nosuid")
        if m["point"] not in DEVICE_MOUNTS and "nodev" not in m["opts"]:
            problems.append(f"{m['point']} ({m['type']}) is not nodev")
        if m["type"] not in ("overlay", "proc", "tmpfs", "devtmpfs", "devpts"):
            problems.append(f"{m['point']} is a {m['type']} mount")
    assert not problems, "\n".join(problems)
    # and a setuid binary of the host is no use: su runs as the room's user
    res = client.exec(room, "ls -l /usr/bin/su | cut -c4; su -c 'id -u' root </dev/null; echo \"su=$?\"")
    assert res["stdout"].splitlines()[0] == "s" and "su=0" not in res["stdout"], res


CONNECT = r'''
import json, socket, sys
targets = json.loads(sys.argv[1])
out = []
for kind, addr in targets:
    if kind == "unix":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    elif kind == "tcp6":
        s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
        addr = tuple(addr)
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        addr = tuple(addr)
    s.settimeout(2)
    try:
        s.connect(addr)
        out.append([kind, addr, "CONNECTED"])
    except OSError as e:
        out.append([kind, addr, e.errno])
    finally:
        s.close()
print(json.dumps(out))
'''


def test_room_cannot_reach_the_service_sockets(client, stack, room):
    client.sh(room, "true")
    keeper_sock = str(stack.run_dir / "rooms" / room / "sock")
    targets = [["unix", str(stack.socket)], ["unix", keeper_sock],
               ["tcp", ["127.0.0.1", stack.port]], ["tcp6", ["::1", stack.port]]]
    # control, from the host: each of them is there
    assert os.path.exists(stack.socket) and os.path.exists(keeper_sock)
    with socket.create_connection(("127.0.0.1", stack.port), timeout=2):
        pass
    out = room_python_json(client, room, CONNECT, json.dumps(targets))
    assert len(out) == len(targets), out
    assert not [o for o in out if o[2] == "CONNECTED"], out


SOCKET_FAMILIES = r'''
import errno, json, socket, sys
out = {}
for name in sys.argv[1:]:
    try:
        kind = {"AF_NETLINK": socket.SOCK_DGRAM, "AF_PACKET": socket.SOCK_RAW}
        s = socket.socket(getattr(socket, name), kind.get(name, socket.SOCK_STREAM))
        s.close()
        out[name] = "OK"
    except OSError as e:
        out[name] = errno.errorcode.get(e.errno, str(e.errno))
try:
    a, b = socket.socketpair(socket.AF_UNIX)
    a.close(); b.close()
    out["socketpair AF_UNIX"] = "OK"
except OSError as e:
    out["socketpair AF_UNIX"] = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps(out))
'''


def test_only_the_socket_families_a_room_needs(client, room):
    """AF_VSOCK (a path to the hypervisor), AF_PACKET (which no room needs:
    ping uses AF_INET) and the other families Docker's default profile
    refuses or no room needs answer EAFNOSUPPORT, as on a kernel without
    them, even to the room's root, who has CAP_NET_RAW in its network
    namespace; AF_UNIX, AF_INET, AF_INET6 and AF_NETLINK work."""
    try:
        socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM).close()
    except OSError as e:
        pytest.skip(kernel_lacks(f"AF_VSOCK (a host socket fails: {e})"))
    out = room_python_json(client, room, SOCKET_FAMILIES, "AF_VSOCK", "AF_PACKET", "AF_INET",
                           "AF_INET6", "AF_UNIX", "AF_NETLINK", user="root")
    assert out == {"AF_VSOCK": "EAFNOSUPPORT", "AF_PACKET": "EAFNOSUPPORT", "AF_INET": "OK", "AF_INET6": "OK",
                   "AF_UNIX": "OK", "AF_NETLINK": "OK", "socketpair AF_UNIX": "OK"}, out


def test_mountinfo_names_no_host_path(client, stack, room):
    """The room's mount table shows nothing of the host's layout: not the
    state or run directory, nor any of the test stacks' /tmp/rbx- folders."""
    lines = client.sh(room, "cat /proc/self/mountinfo").splitlines()
    assert any(" / / " in l for l in lines), lines
    leaks = [l for l in lines
             if str(stack.state_dir) in l or str(stack.run_dir) in l or "/tmp/rbx-" in l]
    assert not leaks, "\n".join(leaks)
