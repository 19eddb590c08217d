"""Root in the room's own user namespace:
the room's root changes system files of its room, and only of its room; the
changes persist across an idle stop and a killed keeper; what only the host
may do stays refused.  Through nginx and lighttpd."""

import os
import signal
import uuid

from conftest import (GONE_TIMEOUT, IDLE_STOP_WAIT, pid_alive, procs_with_uid_in, room_state,
                      unique_room, wait_until)

ROOMBOX_CONFIG = {"idle_timeout": "2s"}


def changes_seen(client, room, tag):
    return client.sh(room, f"ls /usr/local/bin/x-{tag} 2>&1; grep -c '{tag}' /etc/hosts; true")


def test_root_changes_system_files_of_its_room_only_and_they_persist(client, stack):
    a, b = unique_room("root"), unique_room("other")
    tag = f"rbx{uuid.uuid4().hex[:10]}"
    assert client.sh(a, "id -u; echo $HOME; id -un") == "0\n/root\nroot\n"
    client.sh(a, f"touch /usr/local/bin/x-{tag} && echo '10.1.2.3 {tag}' >> /etc/hosts")
    seen = f"/usr/local/bin/x-{tag}\n1\n"
    assert changes_seen(client, a, tag) == seen
    # the room's user may not: those are its root's files
    res = client.exec(a, f"touch /usr/local/bin/y-{tag}; echo x >> /etc/hosts", user="user")
    assert res["exitCode"] != 0 and res["stderr"].count("Permission denied") == 2, res
    # not on the host, not in another room
    assert not os.path.exists(f"/usr/local/bin/x-{tag}")
    assert tag not in open("/etc/hosts").read()
    assert client.sh(b, f"ls /usr/local/bin/x-{tag} 2>/dev/null; grep -c '{tag}' /etc/hosts; true") == "0\n"
    # across an idle stop
    keeper = stack.keeper_pid(a)
    assert keeper
    wait_until(lambda: room_state(client, a) == "stopped", IDLE_STOP_WAIT,
               f"room {a} to be stopped as idle", interval=0.1)
    wait_until(lambda: not pid_alive(keeper), GONE_TIMEOUT, "the keeper to end")
    assert changes_seen(client, a, tag) == seen
    # across a killed keeper
    keeper = stack.keeper_pid(a)
    assert keeper
    os.kill(keeper, signal.SIGKILL)
    wait_until(lambda: not pid_alive(keeper), GONE_TIMEOUT, "the killed keeper to end")
    assert changes_seen(client, a, tag) == seen
    assert stack.keeper_pid(a) not in (None, keeper)
    assert not os.path.exists(f"/usr/local/bin/x-{tag}")


def test_root_serves_on_a_privileged_port_of_its_room(client, room):
    """Docker's default set has CAP_NET_BIND_SERVICE; the room's network
    namespace is the host's user namespace's, so the room lets every port
    be bound instead (as Docker does): a server on port 80 of its lo."""
    client.sh(room, "cd /tmp && python3 -m http.server 80 --bind 127.0.0.1 >/dev/null 2>&1 &")
    out = client.sh(room, "for i in $(seq 100); do python3 -c \"import urllib.request as u; "
                          "print(u.urlopen('http://127.0.0.1:80/').status)\" 2>/dev/null && break; "
                          "sleep 0.1; done")
    assert out == "200\n", out


def test_the_room_user_is_1000_with_its_own_home(client, room):
    assert client.sh(room, "id -u; id -g; id -un; echo $HOME $USER; pwd", user="user") == \
        "1000\n1000\nuser\n/home/user user\n/workspace\n"
    # its files are its own: in the room, and on disk (room-relative ids)
    assert client.sh(room, "echo u > /workspace/u; stat -c %u:%g /workspace/u /home/user",
                     user="user") == "1000:1000\n1000:1000\n"
    assert client.sh(room, "echo r > /workspace/r; stat -c %u:%g /workspace/r") == "0:0\n"


def test_processes_run_under_the_rooms_host_ids_never_0(client):
    a, b = unique_room("a"), unique_room("b")
    ranges = {}
    for room in (a, b):
        client.sh(room, "sleep 3101 >/dev/null 2>&1 &")
        client.sh(room, "sleep 3102 >/dev/null 2>&1 &", user="user")
        ranges[room] = client.room_ids(room)
    ra, rb = ranges[a], ranges[b]
    assert ra.stop <= rb.start or rb.stop <= ra.start, (ra, rb)
    for room, r in ranges.items():
        assert 0 not in r
        uids = sorted(u for (_, u, cmd) in procs_with_uid_in(r.start, r.stop) if cmd.startswith("sleep 310"))
        assert uids == [r.start, r.start + 1000], (room, uids)


# Each line: <what>=<exit status>; every one must be refused.
REFUSED = r'''
mount -t tmpfs none /mnt 2>/dev/null; echo "mount=$?"
mount --bind /tmp /mnt 2>/dev/null; echo "bind=$?"
unshare -U true 2>/dev/null; echo "unshare_user=$?"
unshare -U -r true 2>/dev/null; echo "unshare_user_root=$?"
nsenter --net=/proc/self/ns/net true 2>/dev/null; echo "setns=$?"
nsenter -t 1 -m true 2>/dev/null; echo "setns_keeper=$?"
(echo 3 > /proc/sys/vm/drop_caches) 2>/dev/null; echo "proc_sys_vm=$?"
(echo other > /proc/sys/kernel/hostname) 2>/dev/null; echo "proc_sys_hostname=$?"
(echo 1 > /proc/sys/net/ipv4/ip_forward) 2>/dev/null; echo "proc_sys_net=$?"
python3 -c '
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
fd = os.open("/dev/null", os.O_RDONLY)
# finit_module(fd, "", 0) and init_module(buf, 0, ""): x86-64 numbers
rc1 = libc.syscall(313, fd, b"", 0); e1 = ctypes.get_errno()
rc2 = libc.syscall(175, b"", 0, b""); e2 = ctypes.get_errno()
print("finit_module_errno=%d" % (e1 if rc1 < 0 else 0))
print("init_module_errno=%d" % (e2 if rc2 < 0 else 0))
'
modprobe -q dummy 2>/dev/null; echo "modprobe=$?"
(echo 10 > /proc/sys/user/max_user_namespaces) 2>/dev/null; echo "proc_sys_user=$?"
echo "max_user_namespaces=$(cat /proc/sys/user/max_user_namespaces)"
'''


def test_what_only_the_host_may_do_is_refused_to_the_rooms_root(client, room):
    assert client.sh(room, "id -u") == "0\n"
    forward = client.sh(room, "cat /proc/sys/net/ipv4/ip_forward")
    res = client.exec(room, REFUSED)
    values = dict(l.split("=", 1) for l in res["stdout"].splitlines() if "=" in l)
    assert set(values) == {"mount", "bind", "unshare_user", "unshare_user_root", "setns",
                           "setns_keeper", "proc_sys_vm", "proc_sys_hostname", "proc_sys_net",
                           "finit_module_errno", "init_module_errno", "modprobe", "proc_sys_user",
                           "max_user_namespaces"}, res
    for k, v in values.items():
        if k != "max_user_namespaces":
            assert v != "0", f"{k} succeeded as the room's root: {res}"
    # and past the filter, the room's user namespace may have no child
    assert values["max_user_namespaces"] == "0", values
    # the module calls fail in the filter (EPERM), not on a bad argument
    assert values["finit_module_errno"] == "1" and values["init_module_errno"] == "1", values
    # nothing changed: no new mount, the same namespaces, the same hostname
    points = client.sh(room, "awk '{print $5}' /proc/self/mountinfo").split()
    assert "/mnt" not in points, points
    assert client.sh(room, "uname -n") == f"sandbox-{room}\n"
    assert client.sh(room, "cat /proc/sys/net/ipv4/ip_forward") == forward
