"""What a room's processes are allowed to be and do: the room's root has Docker's default capabilities over the
room's own user namespace only, its user none; no_new_privs, the seccomp
filter, and no way to the keeper.  Through nginx.

The probes are python3 ctypes calls made inside the room (the room's /usr is
the host's, so python3 is there; gcc may not be).  Each probe runs in a
child process of its own, so that a call that unexpectedly succeeds
(unshare, clone) cannot change what the next one sees; the arguments are
chosen so that, without the filter, the call would succeed or fail with
another errno than EPERM for an unprivileged user on this host (checked by
test_probes_are_not_denied_without_the_filter).
"""

import json
import subprocess

import pytest
from conftest import kernel_lacks, wait_until
from security_helpers import Background
from test_keeper_caps import keeper_caps_mask

SERVERS = ("nginx",)

PROBE = r'''
import ctypes, errno, json, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
keep = []
def ptr(x):
    """Address of a zeroed buffer of x bytes, or of a copy of the bytes x."""
    b = ctypes.create_string_buffer(x)
    keep.append(b)
    return ctypes.addressof(b)
CALLS = {
    # name: (syscall number on x86-64, arguments)
    "unshare(CLONE_NEWUSER)": (272, lambda: [0x10000000]),
    "unshare(CLONE_NEWUSER|CLONE_NEWNS)": (272, lambda: [0x10000000 | 0x00020000]),
    "clone(CLONE_NEWUSER)": (56, lambda: [0x10000000 | 17, 0, 0, 0, 0]),
    "userfaultfd(UFFD_USER_MODE_ONLY)": (323, lambda: [1]),
    "io_uring_setup": (425, lambda: [8, ptr(256)]),
    "io_uring_enter": (426, lambda: [-1, 0, 0, 0, 0, 0]),
    "keyctl(GET_KEYRING_ID)": (250, lambda: [0, -3, 0]),
    "add_key": (248, lambda: [ptr(b"user"), ptr(b"rbx"), ptr(b"v"), 1, -3]),
    "request_key": (249, lambda: [ptr(b"user"), ptr(b"rbx"), 0, 0]),
    "bpf(BPF_MAP_CREATE)": (321, lambda: [0, ptr(128), 128]),
    "perf_event_open": (298, lambda: [ptr(128), 0, -1, -1, 0]),
    "mount(tmpfs)": (165, lambda: [ptr(b"none"), ptr(b"/tmp"), ptr(b"tmpfs"), 0, 0]),
    "umount2(/proc)": (166, lambda: [ptr(b"/proc"), 2]),
    "setns(own net ns)": (308, lambda: [os.open("/proc/self/ns/net", os.O_RDONLY), 0]),
    "fsopen(tmpfs)": (430, lambda: [ptr(b"tmpfs"), 0]),
    "fsmount": (432, lambda: [-1, 0, 0]),
    "fspick": (433, lambda: [-100, ptr(b"/tmp"), 0]),
    "move_mount": (429, lambda: [-100, ptr(b"/tmp"), -100, ptr(b"/workspace"), 0]),
    "open_tree(/tmp, 0)": (428, lambda: [-100, ptr(b"/tmp"), 0]),
    "mount_setattr": (442, lambda: [-100, ptr(b"/tmp"), 0, ptr(32), 32]),
    "chroot(/tmp)": (161, lambda: [ptr(b"/tmp")]),
    "pivot_root": (155, lambda: [ptr(b"/tmp"), ptr(b"/tmp")]),
    "ptrace(PTRACE_ATTACH, 1)": (101, lambda: [16, 1, 0, 0]),
    "open_by_handle_at": (304, lambda: [-100, ptr(64), 0]),
    "name_to_handle_at": (303, lambda: [-100, ptr(b"/tmp"), ptr(128), ptr(8), 0]),
    "personality(PER_LINUX32)": (135, lambda: [0x0008]),
    "syslog(SYSLOG_ACTION_SIZE_BUFFER)": (103, lambda: [10, 0, 0]),
    "acct": (163, lambda: [0]),
    "swapoff": (168, lambda: [ptr(b"/tmp")]),
    "settimeofday": (164, lambda: [0, 0]),
    "clock_settime": (227, lambda: [99, ptr(16)]),       # no such clock: EINVAL unfiltered
    "adjtimex": (159, lambda: [ptr(512)]),               # modes 0: a read unfiltered
    "kexec_load": (246, lambda: [0, 0, 0, 0]),
    "init_module": (175, lambda: [0, 0, ptr(b"")]),
    "delete_module": (176, lambda: [ptr(b"rbxnone"), 0]),
    "reboot(query)": (169, lambda: [0, 0, 0, 0]),
    "quotactl": (179, lambda: [0, 0, 0, 0]),
    "iopl(3)": (172, lambda: [3]),
    "ioperm": (173, lambda: [0x80, 1, 1]),
}
out = {}
for name in json.loads(sys.argv[1]):
    nr, args = CALLS[name]
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        ctypes.set_errno(0)
        ret = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args()])
        if ret == 0 and name.startswith("clone"):
            os._exit(0)          # the child of a clone that went through
        e = ctypes.get_errno()
        os.write(w, json.dumps([ret, errno.errorcode.get(e, str(e)) if ret < 0 else None]).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        data += chunk
    os.close(r)
    _, status = os.waitpid(pid, 0)
    out[name] = json.loads(data) if data else ["no answer", status]
print(json.dumps(out))
'''

DENIED = [
    "unshare(CLONE_NEWUSER)", "unshare(CLONE_NEWUSER|CLONE_NEWNS)", "clone(CLONE_NEWUSER)",
    "userfaultfd(UFFD_USER_MODE_ONLY)", "io_uring_setup", "io_uring_enter",
    "keyctl(GET_KEYRING_ID)", "add_key", "request_key", "bpf(BPF_MAP_CREATE)",
    "perf_event_open", "mount(tmpfs)", "umount2(/proc)", "setns(own net ns)",
    "fsopen(tmpfs)", "fsmount", "fspick", "move_mount", "open_tree(/tmp, 0)",
    "mount_setattr", "chroot(/tmp)", "pivot_root", "ptrace(PTRACE_ATTACH, 1)",
    "open_by_handle_at", "name_to_handle_at", "personality(PER_LINUX32)",
    "syslog(SYSLOG_ACTION_SIZE_BUFFER)", "acct", "swapoff", "settimeofday",
    "clock_settime", "adjtimex", "kexec_load", "init_module", "delete_module",
    "reboot(query)", "quotactl", "iopl(3)", "ioperm",
]

# Probes that an unprivileged process outside any filter gets through (or
# fails with another errno than EPERM): for these an EPERM in the room can
# only come from the filter.  Checked on the host by the control test.
FILTER_ONLY = ["unshare(CLONE_NEWUSER)", "unshare(CLONE_NEWUSER|CLONE_NEWNS)",
               "clone(CLONE_NEWUSER)", "userfaultfd(UFFD_USER_MODE_ONLY)", "io_uring_setup",
               "keyctl(GET_KEYRING_ID)", "add_key", "open_tree(/tmp, 0)", "clock_settime", "adjtimex", "perf_event_open",
               "name_to_handle_at"]


def probe_in_room(client, room, names):
    res = client.exec(room, "python3 - " + "'" + json.dumps(names) + "'", stdin=PROBE)
    assert res["exitCode"] == 0, res
    return json.loads(res["stdout"])


def test_capabilities_no_new_privs_and_a_seccomp_filter(client, room):
    """The room's root: Docker's default set (caps.h ROOM_CAPS), and no more
    in its bounding set; the room's user: none."""
    room_mask, names = keeper_caps_mask("ROOM_CAPS")
    caps = f"{room_mask:016x}"
    want = {
        "root": {"CapEff": caps, "CapPrm": caps, "CapBnd": caps},
        "user": {"CapEff": "0" * 16, "CapPrm": "0" * 16, "CapBnd": caps},
    }
    for who, expect in want.items():
        out = client.sh(room, "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp):' /proc/self/status",
                        user=who)
        fields = dict(line.split(":\t") for line in out.splitlines())
        for key, value in expect.items():
            assert fields[key] == value, (who, key, fields, names)
        assert fields["CapInh"] == "0000000000000000", (who, fields)
        assert fields["CapAmb"] == "0000000000000000", (who, fields)
        assert fields["NoNewPrivs"] == "1", (who, fields)
        assert fields["Seccomp"] == "2", (who, fields)
    # none of what Docker leaves out: CAP_SYS_ADMIN (21), CAP_SYS_PTRACE (19),
    # CAP_NET_ADMIN (12), CAP_SYS_MODULE (16), CAP_DAC_READ_SEARCH (2)
    for cap in (21, 19, 12, 16, 2):
        assert not room_mask & (1 << cap), cap
    # and so is every process the room starts, background ones too
    client.sh(room, "sleep 3600 >/dev/null 2>&1 &")
    client.sh(room, "sleep 3601 >/dev/null 2>&1 &", user="user")
    out = client.sh(room, "for p in $(pgrep -x sleep); do grep -E '^(CapEff|CapBnd|NoNewPrivs|Seccomp):' "
                          "/proc/$p/status; done | sort | uniq -c")
    assert sorted(out.split()) == sorted(["1", "CapEff:", caps, "1", "CapEff:", "0" * 16,
                                          "2", "CapBnd:", caps, "2", "NoNewPrivs:", "1",
                                          "2", "Seccomp:", "2"]), out


def test_root_capabilities_reach_only_the_rooms_own_namespace(client, room):
    """The room's mount, network and uts namespaces belong to the host's user
    namespace: the room's root cannot change its hostname, its addresses or
    links, nor bind a privileged port through a capability (the room's
    network namespace lets every port be bound, as Docker's does)."""
    res = client.exec(room, "hostname other; echo \"hostname=$?\"; "
                            "ip link set lo down; echo \"link=$?\"; "
                            "ip addr add 10.9.9.9/32 dev lo; echo \"addr=$?\"; "
                            "cat /proc/sys/net/ipv4/ip_unprivileged_port_start; uname -n")
    lines = res["stdout"].splitlines()
    assert lines[0] != "hostname=0" and lines[1] != "link=0" and lines[2] != "addr=0", res
    assert lines[3] == "0" and lines[4] == f"sandbox-{room}", res
    assert "10.9.9.9" not in client.sh(room, "cat /proc/net/fib_trie 2>/dev/null; ip -o addr 2>/dev/null; true")
    # the room's files are its root's: it owns and may change them all
    assert client.sh(room, "stat -c '%u:%g' / /usr /usr/bin/ls /etc /root /workspace") == \
        "0:0\n0:0\n0:0\n0:0\n0:0\n1000:1000\n"


@pytest.mark.parametrize("name", DENIED)
def test_syscall_is_denied_in_the_room(client, room, name):
    ret, err = probe_in_room(client, room, [name])[name]
    assert ret == -1 and err == "EPERM", f"{name} in the room: returned {ret}, errno {err}"


def test_probes_are_not_denied_without_the_filter():
    """Control for FILTER_ONLY: the same probes as an unprivileged host user
    (nobody, no filter) are not refused with EPERM, so the room's EPERM is
    the filter's doing and the probes themselves work."""
    r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                        "/usr/bin/python3", "-c", PROBE, json.dumps(FILTER_ONLY)],
                       capture_output=True, timeout=60, cwd="/")
    assert r.returncode == 0, r
    out = json.loads(r.stdout)
    refused = {k: v for k, v in out.items() if v[1] == "EPERM"}
    assert not refused, f"these probes are refused even without the room's filter: {refused}"


INT80 = r'''
import ctypes, mmap, os, sys
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(bytes.fromhex("b814000000" "cd80" "c3"))   # mov eax,20 (getpid); int 0x80; ret
call = ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(page)))
print("calling", flush=True)
print("i386 getpid returned", call(), "pid", os.getpid(), flush=True)
'''

SIGSEGV, SIGSYS = 11, 31


def int80_verdict(returncode, stdout):
    """What the unfiltered int 0x80 control says about this kernel:
    ("present", None) when the call returned the caller's pid; ("absent",
    reason) when the instruction itself died of SIGSEGV (a kernel without an
    i386 entry: no IA32 emulation, or ia32_emulation=0), where no filter
    ever sees the call.  Anything else is a broken control: an
    AssertionError, never a skip."""
    if returncode == 0:
        words = stdout.split()
        ok = "returned" in words and words[-3:-2] == words[-1:] and words[-2] == "pid"
        assert ok, f"int 0x80 getpid did not return the caller's pid: {stdout!r}"
        return "present", None
    if returncode == -SIGSEGV:
        return "absent", ("an i386 syscall entry (int 0x80 without any filter dies of "
                          "SIGSEGV), so the filter's i386 rule cannot be seen")
    raise AssertionError(f"int 0x80 control: exit {returncode}, output {stdout!r}")


def int80_control():
    """The control, outside any filter: the same machine code as an
    unprivileged host user."""
    r = subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                        "/usr/bin/python3", "-c", INT80], capture_output=True, text=True,
                       timeout=60, cwd="/")
    return int80_verdict(r.returncode, r.stdout)


def test_int80_verdict_on_both_kinds_of_kernel():
    """The decision itself, for both outcomes (one machine shows only one)."""
    assert int80_verdict(0, "calling\ni386 getpid returned 4242 pid 4242\n") == ("present", None)
    kind, why = int80_verdict(-SIGSEGV, "calling\n")
    assert kind == "absent" and "i386 syscall entry" in why
    for rc, out in ((0, "calling\ni386 getpid returned -38 pid 4242\n"), (-SIGSYS, "calling\n"),
                    (1, ""), (-9, "calling\n")):
        with pytest.raises(AssertionError):
            int80_verdict(rc, out)


def test_int_0x80_never_returns_in_the_room(client, room):
    """On every kernel: the i386 call does not return in a room (SIGSYS from
    the filter, or SIGSEGV where the kernel has no entry), and the room is
    fine afterwards."""
    res = client.exec(room, "exec python3 -", stdin=INT80)
    assert res["stdout"] == "calling\n", res
    assert res["signal"] in ("SIGSYS", "SIGSEGV"), res
    assert res["timedOut"] is False
    assert client.sh(room, "echo ok") == "ok\n"


def test_i386_syscall_through_int_0x80_kills_the_process(client, room):
    kind, why = int80_control()
    if kind == "absent":
        pytest.skip(kernel_lacks(why))
    res = client.exec(room, "exec python3 -", stdin=INT80)
    assert res["stdout"] == "calling\n", res
    assert res["exitCode"] == 159, res
    assert res["signal"] == "SIGSYS", res


def test_int_0x80_probe_works_without_the_filter():
    """Control: outside the room the same machine code returns the pid."""
    kind, why = int80_control()
    if kind == "absent":
        pytest.skip(kernel_lacks(why))
    assert kind == "present"


def test_x32_syscall_kills_the_process(client, room):
    res = client.exec(room, "exec python3 -c 'import ctypes; print(ctypes.CDLL(None).syscall(0x40000000 + 39), flush=True)'")
    assert res["stdout"] == "", res
    assert res["exitCode"] == 159 and res["signal"] == "SIGSYS", res


def test_su_and_mount_fail(client, room):
    """The room's user cannot become root; nobody in the room can mount."""
    res = client.exec(room, "su -c id root </dev/null; echo \"su=$?\"; "
                            "mount -t tmpfs none /tmp; echo \"mount=$?\"; "
                            "umount /proc; echo \"umount=$?\"; id -u", user="user")
    lines = res["stdout"].splitlines()
    assert lines[0] != "su=0" and lines[0].startswith("su="), res
    assert lines[1] != "mount=0" and lines[1].startswith("mount="), res
    assert lines[2] != "umount=0" and lines[2].startswith("umount="), res
    assert lines[3] == "1000", res
    assert "uid=0" not in res["stdout"]
    res = client.exec(room, "mount -t tmpfs none /tmp; echo \"mount=$?\"; "
                            "mount --bind /usr /mnt; echo \"bind=$?\"; "
                            "umount /proc; echo \"umount=$?\"; id -u")
    lines = res["stdout"].splitlines()
    assert [l.split("=")[0] for l in lines[:3]] == ["mount", "bind", "umount"], res
    assert all(not l.endswith("=0") for l in lines[:3]), res
    assert lines[3] == "0", res
    # nothing was mounted or unmounted: /tmp is still the root overlay's
    points = client.sh(room, "awk '{print $5}' /proc/self/mountinfo").split()
    assert "/tmp" not in points and "/mnt" not in points and "/proc" in points, points


@pytest.mark.parametrize("who", ["root", "user"])
def test_keeper_cannot_be_read_signalled_or_traced(client, stack, room, who):
    """The room's root has the keeper's uid: the keeper is non-dumpable (so
    reading it needs CAP_SYS_PTRACE, which no one in the room has), the
    kernel drops SIGKILL and SIGSTOP sent to a pid namespace's init from
    inside, and the keeper ignores the signals that would end it from
    there.  The room's user may not even send them."""
    res = client.exec(room, "cat /proc/1/environ; echo \"environ=$?\"; "
                            "head -c 16 /proc/1/mem; echo \"mem=$?\"; "
                            "ls /proc/1/root/ >/dev/null; echo \"root=$?\"; "
                            "ls -l /proc/1/fd/ >/dev/null; echo \"fd=$?\"; "
                            "readlink /proc/1/fd/0; echo \"fdlink=$?\"; "
                            "cat /proc/1/fd/4 </dev/null; echo \"fdopen=$?\"; "
                            "cat /proc/1/maps >/dev/null; echo \"maps=$?\"; "
                            "kill -9 1; echo \"kill1=$?\"; "
                            "kill -TERM 1; echo \"term1=$?\"; "
                            "kill -HUP 1; echo \"hup1=$?\"; "
                            "kill -9 $PPID; echo \"killsup=$?\"; "
                            "kill -STOP 1; echo \"stop1=$?\"", user=who)
    keeper = stack.keeper_pid(room)
    values = dict(l.split("=") for l in res["stdout"].splitlines() if "=" in l)
    assert set(values) == {"environ", "mem", "root", "fd", "fdlink", "fdopen", "maps", "kill1",
                           "term1", "hup1", "killsup", "stop1"}, res
    for k, v in values.items():
        # the room's root may send signals to its own PID 1 (same uid), and
        # list its descriptors' numbers (a non-dumpable process's /proc
        # directory belongs to the root of its user namespace): the signals
        # must have no effect (checked below), the descriptors stay closed
        if who == "user" or k not in ("fd", "kill1", "term1", "hup1", "killsup", "stop1"):
            assert v != "0", f"{k} succeeded from inside the room as {who}: {res}"
    if who == "root":
        assert "->" not in res["stdout"], res
    assert "PATH=" not in res["stdout"]
    assert keeper, "the keeper is not running any more"
    st = open(f"/proc/{keeper}/status").read()
    assert "\nState:\tS" in st or "\nState:\tR" in st, st
    # same keeper, still serving
    assert client.sh(room, "echo alive") == "alive\n"
    assert stack.keeper_pid(room) == keeper


# A room process that opens /proc/<pid>/mem of each new process of the room
# the moment it may be opened -- for a starting shell that is between the
# keeper's child dropping to the room's uid and its execve -- and, when the
# memory it got is still the keeper's image (its maps name roombox-keeper),
# overwrites every writable mapping of it.  Prints its counts as JSON.
MEM_RACE = r'''
import json, os, sys, time
end = time.monotonic() + float(sys.argv[1])
opened = caught = 0
def last_pid():
    with open("/proc/sys/kernel/ns_last_pid") as f:
        return int(f.read())
while time.monotonic() < end:
    base = last_pid()
    paths = [(p, "/proc/%d/mem" % p) for p in range(base + 1, base + 4)]
    hit = None
    for _ in range(20000):
        for p, path in paths:
            try:
                hit = (p, os.open(path, os.O_RDWR))
                break
            except OSError:
                pass
        if hit:
            break
    if not hit:
        continue
    p, fd = hit
    opened += 1
    try:
        mfd = os.open("/proc/%d/maps" % p, os.O_RDONLY)
        maps = os.read(mfd, 1 << 16).decode(errors="replace")
        os.close(mfd)
    except OSError:
        maps = ""
    if "roombox-keeper" in maps:
        caught += 1
        for line in maps.splitlines():
            f = line.split()
            if len(f) >= 2 and f[1].startswith("rw"):
                lo, hi = (int(x, 16) for x in f[0].split("-"))
                try:
                    os.pwrite(fd, b"\x41" * (hi - lo), lo)
                except OSError:
                    pass
    os.close(fd)
print(json.dumps({"opened": opened, "caught": caught}))
'''


# serial: fs.suid_dumpable is the whole host's, every other room's too
@pytest.mark.serial
@pytest.mark.parametrize("who", ["user", "root"])
@pytest.mark.parametrize("suid_dumpable", ["0", "1"])
def test_a_starting_shell_never_exposes_the_keepers_memory(client, stack, room, suid_dumpable, who):
    """Until its execve an exec's child runs in the keeper's memory (spawn.c
    shares it instead of copying it), and for a moment as the room's uid.
    A room process racing to open that child's /proc/<pid>/mem must not
    reach the keeper.  With fs.suid_dumpable 0 (the default) it never gets
    a starting shell's memory; with 1 (debug: a process that changed uid may
    be traced by that uid) the keeper forks the room's user's execs
    instead, so the attacker gets -- and overwrites -- only copies: the
    keeper and the attacker's own exec carry on, and an exec whose copy was
    overwritten before its execve at worst dies (SIGSEGV, or a 500 "start
    the shell" error).  That is the room's user's execs (the child changes
    uid, then sets itself non-dumpable again at once); the room's root's
    child changes no uid and is as non-dumpable as the keeper, so it shares
    the keeper's memory under either setting: caught by no one."""
    path = "/proc/sys/fs/suid_dumpable"
    old = open(path).read().strip()
    client.sh(room, "true")
    keeper = stack.keeper_pid(room)
    try:
        with open(path, "w") as f:
            f.write(suid_dumpable)
        attacker = Background(client, room, {"cmd": 'python3 -c "$RB_RACE" 6', "user": who,
                                             "env": {"RB_RACE": MEM_RACE}, "timeout": 30000})
        wait_until(lambda: "python3 -c" in client.sh(room, "ps -e -o args="), 20,
                   "the attacker to run")
        results = [client.exec_raw(room, {"cmd": "echo ok", "user": who}) for _ in range(150)]
        r = attacker.join(60)
    finally:
        with open(path, "w") as f:
            f.write(old)
    assert r.status == 200, r.json
    counts = json.loads(r.json["result"]["stdout"])
    assert stack.keeper_pid(room) == keeper, "the keeper was replaced: it died"
    assert client.sh(room, "echo alive") == "alive\n"
    bad = [(a.status, a.json) for a in results
           if a.status != 200 or a.json["result"]["stdout"] != "ok\n"]
    if suid_dumpable == "0" or who == "root":
        assert counts["caught"] == 0, counts
        assert not bad, bad[:3]
    else:
        # the race was really run: the attacker opened the memory of these
        # execs' processes.  The child sets itself non-dumpable again right
        # after it takes the user's ids, which leaves only the moment
        # between the two calls: a copy of the keeper is caught seldom now,
        # and overwriting one spoils that exec alone -- its child dies
        # before or in its execve (SIGSEGV, a 500 "start the shell"), or
        # execs what its overwritten arguments now say (a shell that exits
        # 2) -- the room's user's own exec, which that user could spoil
        # anyway.  So each exec that went wrong is one whose copy was
        # caught, and no other
        assert counts["opened"] > 0, counts
        assert len(bad) <= counts["caught"], (len(bad), counts, bad[:3])
        for status, body in bad:
            assert status in (200, 500), (status, body)
            if status == 500:
                assert f"room {room}: start the shell: " in body["error"], body


@pytest.mark.parametrize("stdin", [None, "x\n"])
def test_a_shell_holds_only_its_own_descriptors(client, room, stdin):
    """The keeper's child places the exec's pipes on 0, 1, 2 and 9 (the
    session) and closes everything else of the keeper's -- its listening
    socket above all, from which a room process could take other execs'
    requests -- and its error pipe closes on exec."""
    body = {"cmd": "ls /proc/$$/fd"}
    if stdin is not None:
        body["stdin"] = stdin
    r = client.exec_raw(room, body)
    assert r.status == 200, r.json
    assert sorted(r.json["result"]["stdout"].split(), key=int) == ["0", "1", "2", "9"], r.json
