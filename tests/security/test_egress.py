"""network = egress: what a room reaches and what it
does not, and what is left on the host afterwards.  Through nginx.

Every packet stays on this machine.  The module makes its own test hosts:
network namespaces joined to the host by veth pairs, reached through routes
of the host's own (never the default route):

  "the internet"   203.0.113.10 (HTTP on 80, a connection holder on 9000),
                   link 198.51.100.200/30
  forbidden hosts  10.211.0.80 (HTTP on 80 and 8080), 10.211.0.53 (DNS,
                   dnsmasq: internet.test -> 203.0.113.10), 169.254.169.254
                   and 192.168.211.80 (HTTP), link 10.211.255.0/30

The test hosts have no default route: they answer what the rooms send them
(masqueraded from the host end of their link) and can send nothing else
anywhere.  A room is only ever pointed at those, at its own loopback, or at
the host's own addresses (which stay on this machine by definition).  The rooms' `dns`
is the test DNS host, so no query ever reaches a real name server.
"""

import fcntl
import ipaddress
import json
import os
import re
import secrets
import socket
import subprocess
import time
from pathlib import Path

import pytest

from conftest import Client, started_stack, unique_room, wait_until

SERVERS = ("nginx",)

INET = "203.0.113.10"
INET_LINK_HOST, INET_LINK_NS = "198.51.100.201", "198.51.100.202"
PRIV_LINK_HOST, PRIV_LINK_NS = "10.211.255.1", "10.211.255.2"
PRIV_HTTP = "10.211.0.80"
PRIV_DNS = "10.211.0.53"
METADATA = "169.254.169.254"
LAN = "192.168.211.80"
ALLOWED_PORT = 8080
CONNS = 6

ROOMBOX_CONFIG = {
    "network": "egress",
    "dns": PRIV_DNS,
    "egress_allow": f"{PRIV_HTTP}:{ALLOWED_PORT}",
    "egress_conns": str(CONNS),
}

PAYLOAD = b"hello from the test internet\n" * 100


def run(*argv, check=True):
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=30)
    if check and r.returncode != 0:
        raise AssertionError(f"{argv}: exit {r.returncode}: {r.stderr.strip()}")
    return r


def listening(ns, addr, port, udp=False):
    out = run("ip", "netns", "exec", ns, "ss", "-Hlnu" if udp else "-Hlnt").stdout
    return any(line.split()[3] == f"{addr}:{port}" for line in out.splitlines() if line.split())


class Hosts:
    """The test hosts; stop() removes every one of them."""

    def __init__(self, tmp):
        sfx = secrets.token_hex(2)
        self.ns_inet, self.ns_priv = f"egt-{sfx}-inet", f"egt-{sfx}-priv"
        self.if_inet, self.if_priv = f"egt{sfx}i", f"egt{sfx}p"
        self.tmp = tmp
        self.procs = []
        self.made_ns = []
        with open("/proc/sys/net/ipv4/ip_forward") as f:
            self.forward_before = f.read().strip()

    def host(self, ns, ifname, host_addr, ns_addr, extra):
        run("ip", "netns", "add", ns)
        self.made_ns.append(ns)
        run("ip", "link", "add", ifname, "type", "veth", "peer", "name", "eth0", "netns", ns)
        run("ip", "addr", "add", f"{host_addr}/30", "dev", ifname)
        run("ip", "link", "set", ifname, "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")
        run("ip", "-n", ns, "addr", "add", f"{ns_addr}/30", "dev", "eth0")
        for a in extra:
            run("ip", "-n", ns, "addr", "add", f"{a}/32", "dev", "eth0")
        run("ip", "-n", ns, "link", "set", "eth0", "up")
        # no default route: a test host answers the rooms, whose packets
        # come masqueraded from host_addr on the link, and can send nothing
        # anywhere else (python's http.server looks its own name up at
        # start; with a route that query would go to the host's resolver)
        for a in extra:   # a route of the host's own, not the default one
            run("ip", "route", "add", f"{a}/32", "via", ns_addr, "dev", ifname)

    def spawn(self, ns, *argv):
        log = open(self.tmp / f"{ns}-{len(self.procs)}.log", "wb")
        p = subprocess.Popen(["ip", "netns", "exec", ns] + [str(a) for a in argv],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True)
        log.close()
        self.procs.append(p)
        return p

    def http(self, ns, addr, port, www):
        self.spawn(ns, "/usr/bin/python3", "-m", "http.server", port, "--bind", addr,
                   "--directory", www)
        wait_until(lambda: listening(ns, addr, port), 15, f"HTTP on {addr}:{port}")

    def start(self):
        www = self.tmp / "www"
        www.mkdir()
        (www / "file.txt").write_bytes(PAYLOAD)
        (www / "secret.txt").write_text("forbidden host\n")
        self.host(self.ns_inet, self.if_inet, INET_LINK_HOST, INET_LINK_NS, [INET])
        self.host(self.ns_priv, self.if_priv, PRIV_LINK_HOST, PRIV_LINK_NS,
                  [PRIV_HTTP, PRIV_DNS, METADATA, LAN])
        self.http(self.ns_inet, INET, 80, www)
        # holds each connection until its client closes it
        holder = ("import socket, threading\n"
                  "s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
                  f"s.bind(('{INET}', 9000)); s.listen(512)\n"
                  "def hold(c):\n    c.recv(1); c.close()\n"
                  "while True:\n"
                  "    threading.Thread(target=hold, args=(s.accept()[0],), daemon=True).start()\n")
        self.spawn(self.ns_inet, "/usr/bin/python3", "-c", holder)
        wait_until(lambda: listening(self.ns_inet, INET, 9000), 15, "the connection holder")
        # writes the payload of every UDP datagram it gets on 9999, a line each
        self.udp_log = self.tmp / "udp.log"
        self.spawn(self.ns_inet, "/usr/bin/python3", "-c",
                   "import socket, sys\n"
                   "s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
                   f"s.bind(('{INET}', 9999))\n"
                   f"f = open('{self.udp_log}', 'ab', buffering=0)\n"
                   "while True:\n"
                   "    d, a = s.recvfrom(2048); f.write(d + b'\\n')\n")
        wait_until(lambda: listening(self.ns_inet, INET, 9999, udp=True), 15, "the UDP logger")
        for addr in (PRIV_HTTP, METADATA, LAN):
            self.http(self.ns_priv, addr, 80, www)
        self.http(self.ns_priv, PRIV_HTTP, ALLOWED_PORT, www)
        self.spawn(self.ns_priv, "/usr/sbin/dnsmasq", "-k", "--conf-file=/dev/null",
                   "--no-resolv", "--no-hosts", "--bind-interfaces", "--user=root",
                   f"--listen-address={PRIV_DNS}", f"--address=/internet.test/{INET}",
                   "--pid-file=", "--log-facility=-")
        wait_until(lambda: listening(self.ns_priv, PRIV_DNS, 53, udp=True), 15, "dnsmasq")

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, 9)
                except ProcessLookupError:
                    pass
            p.wait(timeout=10)
        for ns in self.made_ns:       # takes the veth pairs and their routes
            run("ip", "netns", "del", ns, check=False)
        for ifname in (self.if_inet, self.if_priv):
            run("ip", "link", "del", ifname, check=False)
        left = [n for n in (self.if_inet, self.if_priv)
                if run("ip", "link", "show", n, check=False).returncode == 0]
        with open("/proc/sys/net/ipv4/ip_forward", "w") as f:
            f.write(self.forward_before)
        return left


# The test hosts' addresses and routes are fixed and host-wide: two test runs
# at once (several engineers on one machine) take turns for this module.
TESTNET_LOCK = "/tmp/rbx-egress.lock"
TESTNET_LOCK_WAIT = 1200     # seconds: another run's whole egress module


@pytest.fixture(scope="module", autouse=True)
def one_egress_run_at_a_time():
    with open(TESTNET_LOCK, "w") as lock:
        def taken():
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                return False
        wait_until(taken, TESTNET_LOCK_WAIT, "another test run's egress tests to end",
                   interval=0.5)
        yield


@pytest.fixture(scope="module")
def testnet(tmp_path_factory):
    run("nft", "--version")   # nftables is a dependency of egress (tools/deps.sh)
    net = Hosts(tmp_path_factory.mktemp("egress"))
    try:
        net.start()
        yield net
    finally:
        left = net.stop()
        assert not left, f"test interfaces left: {left}"


# ---------------------------------------------------------------- views

def room_addr(client, room):
    out = client.sh(room, "ip -4 -o addr show dev eth0")
    m = re.search(r"inet (\d+\.\d+\.\d+\.\d+)/31", out)
    assert m, f"no /31 on the room's eth0: {out!r}"
    return m.group(1)


def counted_conns(addr, port):
    """The room's tracked connections to port that a `ct count` counts."""
    with open("/proc/net/nf_conntrack") as f:
        return [l for l in f if f"src={addr} " in l and f"dport={port} " in l
                and " TIME_WAIT " not in l and " CLOSE " not in l]


def host_end(addr):
    """The host interface holding the other address of a room's /31."""
    peer = str(ipaddress.ip_address(addr) - 1)
    out = run("ip", "-4", "-o", "addr", "show", "to", f"{peer}/32").stdout.split()
    assert out, f"no host interface holds {peer}"
    return out[1], peer


def host_links():
    return run("ip", "-o", "link", "show").stdout


def ruleset():
    return run("nft", "list", "ruleset").stdout


def host_ipv4_addrs():
    out = run("ip", "-4", "-o", "addr", "show").stdout
    return sorted({m.group(1) for m in re.finditer(r"inet (\d+\.\d+\.\d+\.\d+)/", out)})


def fetch(client, room, url, timeout=20):
    """curl in the room: (exit code, body)."""
    res = client.exec(room, f"curl -sS --max-time {timeout} {url}")
    return res["exitCode"], res["stdout"], res["stderr"]


def assert_unreachable(client, room, url):
    code, out, err = fetch(client, room, url, timeout=3)
    assert code != 0 and "forbidden host" not in out, f"{url} answered the room: {out!r} {err!r}"


def assert_gone(ifname, addr):
    assert not re.search(rf"\b{re.escape(ifname)}\b", host_links()), f"{ifname} left on the host"
    rules = ruleset()
    assert f'"{ifname}"' not in rules, f"nft element of {ifname} left:\n{rules}"
    assert addr not in rules, f"nft element with {addr} left:\n{rules}"
    with open("/proc/net/nf_conntrack") as f:
        left = [l for l in f if f"src={addr} " in l]
    assert not left, f"conntrack entries of {addr} left: {left}"


# ---------------------------------------------------------------- tests

def test_room_fetches_from_the_internet_and_resolves_names(client, testnet, room):
    code, out, err = fetch(client, room, f"http://{INET}/file.txt")
    assert code == 0 and out.encode() == PAYLOAD, (code, err)
    assert client.sh(room, "cat /etc/resolv.conf").count("nameserver") == 1
    assert f"nameserver {PRIV_DNS}" in client.sh(room, "cat /etc/resolv.conf")
    assert client.sh(room, "getent hosts internet.test").split()[0] == INET
    code, out, err = fetch(client, room, "http://internet.test/file.txt")
    assert code == 0 and out.encode() == PAYLOAD, (code, err)
    # the health answer names the name servers a room can use
    h = client.get("/api/health", auth=False).json
    assert h["network"] == "egress" and h["dns"] == [PRIV_DNS], h


def test_forbidden_hosts_are_unreachable_but_allow_opens_one(client, testnet, room):
    for url in (f"http://{PRIV_HTTP}/secret.txt", f"http://{METADATA}/secret.txt",
                f"http://{LAN}/secret.txt", f"http://{PRIV_DNS}:53/",
                f"http://{PRIV_LINK_NS}/secret.txt"):
        assert_unreachable(client, room, url)
    # the name server is reachable on 53 only, and 10.211.0.80 on 8080 only
    code, out, _ = fetch(client, room, f"http://{PRIV_HTTP}:{ALLOWED_PORT}/secret.txt")
    assert code == 0 and out == "forbidden host\n"
    # control: the forbidden hosts do serve (from the host)
    with socket.create_connection((METADATA, 80), timeout=3):
        pass


def test_the_host_is_unreachable_on_every_address(client, testnet, room):
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", 0))
    srv.listen(16)
    port = srv.getsockname()[1]
    try:
        addr = room_addr(client, room)
        _, gateway = host_end(addr)
        targets = set(host_ipv4_addrs()) | {gateway, INET_LINK_HOST, PRIV_LINK_HOST, "127.0.0.1"}
        script = ("import socket, sys, json\nres = {}\n"
                  "for a in sys.argv[2:]:\n"
                  "    try:\n"
                  "        socket.create_connection((a, int(sys.argv[1])), timeout=3).close()\n"
                  "        res[a] = 'connected'\n"
                  "    except OSError as e:\n"
                  "        res[a] = e.strerror or str(e)\n"
                  "print(json.dumps(res))\n")
        res = client.exec(room, "python3 - " + " ".join([str(port)] + sorted(targets)), stdin=script)
        seen = json.loads(res["stdout"])
        assert set(seen) == targets
        assert not [a for a, v in seen.items() if v == "connected"], seen
        # control: the server answers from the host itself
        socket.create_connection((INET_LINK_HOST, port), timeout=20).close()
    finally:
        srv.close()


def test_another_room_is_unreachable(client, testnet):
    a, b = unique_room("a"), unique_room("b")
    client.sh(a, "cd /tmp && echo room-a > index.html && "
                 "(setsid python3 -m http.server 8000 > /dev/null 2>&1 &) && "
                 "for i in $(seq 100); do curl -s localhost:8000 >/dev/null && break; sleep 0.05; done")
    addr_a = room_addr(client, a)
    assert client.sh(a, f"curl -sS --max-time 20 http://{addr_a}:8000/") == "room-a\n"
    code, out, _ = fetch(client, b, f"http://{addr_a}:8000/", timeout=3)
    assert code != 0 and "room-a" not in out
    # nor from the host (any local user could connect)
    with pytest.raises(OSError):
        socket.create_connection((addr_a, 8000), timeout=3).close()


def test_connection_cap_holds(client, testnet, room):
    script = ("import socket, json\nheld, err = [], None\n"
              f"for i in range({CONNS + 4}):\n"
              "    try:\n"
              f"        held.append(socket.create_connection(('{INET}', 9000), timeout=20))\n"
              "    except OSError as e:\n"
              "        err = e.strerror or str(e); break\n"
              "print(json.dumps([len(held), err]))\n")
    res = client.exec(room, "python3 -", stdin=script)
    n, err = json.loads(res["stdout"])
    assert n == CONNS and err, (n, err, res)
    # the connections just closed leave the count once the tracker has seen
    # them end (TIME_WAIT or CLOSE: nf_conncount counts every other state);
    # until then the holder below would be refused its last ones
    addr = room_addr(client, room)
    wait_until(lambda: not counted_conns(addr, 9000), 20, "the closed connections to leave the count")
    # the cap is the room's own: while one room holds all of its
    # connections, another connects
    other = unique_room("c")
    holder = ("import socket, time\n"
              f"held = [socket.create_connection(('{INET}', 9000), timeout=20) for i in range({CONNS})]\n"
              "import os; open('/tmp/holding', 'w').write(str(os.getpid())); time.sleep(60)\n")
    client.sh(room, "(setsid python3 -c \"$HOLDER\" > /dev/null 2>&1 &)", env={"HOLDER": holder})
    wait_until(lambda: client.exec(room, "test -s /tmp/holding")["exitCode"] == 0, 20,
               "the room to hold its connections")
    assert fetch(client, room, f"http://{INET}/file.txt", timeout=3)[0] != 0
    assert fetch(client, other, f"http://{INET}/file.txt")[0] == 0
    client.sh(room, "kill $(cat /tmp/holding) && rm /tmp/holding")
    # once they are closed, the room connects again (bounded poll: the
    # count follows the connection tracker)
    wait_until(lambda: fetch(client, room, f"http://{INET}/file.txt")[0] == 0, 20,
               "a connection after the held ones closed")


def test_room_cannot_change_its_network_nor_forge_packets(client, testnet, room):
    addr = room_addr(client, room)
    out = client.exec(room, "ip addr add 100.64.0.9/32 dev eth0; echo rc=$?; "
                            "ip route add 1.2.3.4/32 dev eth0; echo rc=$?; "
                            "ip link set eth0 down; echo rc=$?; "
                            "nft add table ip evil; echo rc=$?")
    assert out["stdout"].split() == ["rc=2", "rc=2", "rc=2", "rc=1"], out
    assert "Operation not permitted" in out["stderr"], out
    # a datagram with another room's source address never arrives (the room
    # may lack the capability to build one: either way), a genuine one does
    forged_src = str(ipaddress.ip_address(addr) + 2)
    tag = secrets.token_hex(4)
    script = ("import socket, struct, sys\n"
              "src, dst, tag = sys.argv[1], sys.argv[2], sys.argv[3].encode()\n"
              "try:\n"
              "    r = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)\n"
              "    data = b'forged-' + tag\n"
              "    udp = struct.pack('!HHHH', 40000, 9999, 8 + len(data), 0) + data\n"
              "    ip = struct.pack('!BBHHHBBH4s4s', 0x45, 0, 20 + len(udp), 0, 0, 64, 17, 0,\n"
              "                     socket.inet_aton(src), socket.inet_aton(dst))\n"
              "    r.sendto(ip + udp, (dst, 0)); print('sent')\n"
              "except PermissionError:\n"
              "    print('no raw socket')\n"
              "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
              "u.sendto(b'genuine-' + tag, (dst, 9999))\n")
    res = client.exec(room, f"python3 - {forged_src} {INET} {tag}", stdin=script)
    assert res["exitCode"] == 0 and res["stdout"] in ("sent\n", "no raw socket\n"), res
    wait_until(lambda: f"genuine-{tag}".encode() in testnet.udp_log.read_bytes(), 10,
               "the genuine datagram (control)")
    # the forged one was sent before the genuine one arrived: had it passed,
    # it would be there by now
    assert f"forged-{tag}".encode() not in testnet.udp_log.read_bytes()
    assert room_addr(client, room) == addr
    # The host end's filter on its own: with root in the room's net namespace
    # (what the room does not have), a forged source address gets nowhere.
    keeper = client.stack.keeper_pid(room)
    nsenter = ["nsenter", f"--net=/proc/{keeper}/ns/net"]
    forged = str(ipaddress.ip_address(addr) + 2)   # another room's address
    run(*nsenter, "ip", "addr", "add", f"{forged}/32", "dev", "eth0")
    try:
        ok = run(*nsenter, "curl", "-sS", "--max-time", "20", f"http://{INET}/file.txt", check=False)
        assert ok.returncode == 0, ok.stderr           # control: own address
        bad = run(*nsenter, "curl", "-sS", "--max-time", "3", "--interface", forged,
                  f"http://{INET}/file.txt", check=False)
        assert bad.returncode != 0 and not bad.stdout, bad
    finally:
        run(*nsenter, "ip", "addr", "del", f"{forged}/32", "dev", "eth0", check=False)


def test_nothing_is_left_after_stop_cleanup_and_a_crashed_keeper(client, testnet, stack):
    room = unique_room("n")
    addr = room_addr(client, room)
    ifname, _ = host_end(addr)
    # a connection of the room's own is tracked, and counted by the
    # connection cap's set, while it runs
    assert fetch(client, room, f"http://{INET}/file.txt")[0] == 0
    with open("/proc/net/nf_conntrack") as f:
        assert any(f"src={addr} " in l for l in f), "no conntrack entry to look for"
    assert f"{addr} " in ruleset(), "no connection counter of the room to look for"
    # stop: files kept, network gone
    assert stack.helper({"op": "stop", "room": room})[0] == 0
    assert_gone(ifname, addr)
    # a restart gets it back, working
    assert fetch(client, room, f"http://{INET}/file.txt")[0] == 0
    # a keeper killed from outside leaves its counter and tracked
    # connections behind: the next start clears them, and cleanup too
    os.kill(client.stack.keeper_pid(room), 9)
    wait_until(lambda: not client.stack.keeper_pid(room), 5, "the keeper to die")
    assert fetch(client, room, f"http://{INET}/file.txt")[0] == 0
    os.kill(client.stack.keeper_pid(room), 9)
    wait_until(lambda: not client.stack.keeper_pid(room), 5, "the keeper to die")
    client.destroy(room)
    assert_gone(ifname, addr)


def test_an_address_already_on_the_host_is_not_shared(client, testnet, stack, room):
    """Two instances whose state_dir hashes to the same /16 would give two
    rooms one address: the second start is refused, naming the address."""
    addr = room_addr(client, room)
    _, gateway = host_end(addr)
    assert stack.helper({"op": "stop", "room": room})[0] == 0
    dummy = f"egt{secrets.token_hex(2)}d"     # another instance's host end
    run("ip", "link", "add", dummy, "type", "veth", "peer", "name", dummy + "p")
    try:
        run("ip", "addr", "add", f"{gateway}/32", "dev", dummy)
        r = client.exec_raw(room, {"cmd": "true"})
        assert r.status == 500 and gateway in r.json["error"], r.json
    finally:
        run("ip", "link", "del", dummy)
    assert fetch(client, room, f"http://{INET}/file.txt")[0] == 0


def room_ends():
    """{host interface: room address} of every room's veth on the host."""
    out = run("ip", "-4", "-o", "addr", "show").stdout
    return {m.group(1): str(ipaddress.ip_address(m.group(2)) + 1)
            for m in re.finditer(r"^\d+: (rb[0-9a-f]{6}-\d+)\s+inet (\S+)/31", out, re.M)}


def test_cleanup_of_100_rooms_leaves_nothing(client, testnet, stack):
    before = room_ends()
    rooms = [unique_room("m") for _ in range(100)]
    for r in rooms:   # each room opens a connection of its own, to be tracked
        res = client.exec(r, f"curl -sS -o /dev/null --max-time 20 http://{INET}/file.txt")
        assert res["exitCode"] == 0, res
    ends = {i: a for i, a in room_ends().items() if i not in before}
    assert len(ends) == 100 and len(set(ends.values())) == 100, ends
    for r in rooms:
        client.destroy(r)
    links, rules, routes = host_links(), ruleset(), run("ip", "-4", "route", "show").stdout
    with open("/proc/net/nf_conntrack") as f:
        tracked = f.read()
    for ifname, addr in ends.items():
        assert not re.search(rf"\b{re.escape(ifname)}\b", links + routes), f"{ifname} left"
        assert f'"{ifname}"' not in rules and f"{addr} " not in rules + " ", f"{ifname} in nft"
        assert f"src={addr} " not in tracked, f"conntrack entry of {addr} left"


# ------------------------------------------------- stacks of their own

def finish(s, c, rooms):
    for r in rooms:
        c.destroy(r)
    problems = s.stop()
    assert not problems, problems


def test_egress_deny_closes_an_internet_host(testnet):
    s = started_stack(dict(ROOMBOX_CONFIG, egress_deny=f"{INET}/32"))
    c, room = Client(s), unique_room("d")
    try:
        assert fetch(c, room, f"http://{INET}/file.txt", timeout=3)[0] != 0
        # the policy is per instance: the allow list still works here
        assert fetch(c, room, f"http://{PRIV_HTTP}:{ALLOWED_PORT}/secret.txt")[0] == 0
    finally:
        finish(s, c, [room])


def test_two_instances_side_by_side_then_nothing_left(client, testnet, room):
    s = started_stack(dict(ROOMBOX_CONFIG))
    c, other = Client(s), unique_room("o")
    try:
        assert fetch(c, other, f"http://{INET}/file.txt")[0] == 0
        assert fetch(client, room, f"http://{INET}/file.txt")[0] == 0
        a, b = room_addr(c, other), room_addr(client, room)
        assert a != b
        tables = run("nft", "list", "tables").stdout
        assert len(re.findall(r"table inet roombox_[0-9a-f]{8}", tables)) >= 2, tables
    finally:
        before = run("nft", "list", "tables").stdout
        finish(s, c, [other])
    # its service stopped: its table is gone, ours stays
    after = run("nft", "list", "tables").stdout
    assert len(re.findall("roombox_", after)) == len(re.findall("roombox_", before)) - 1, after
    assert fetch(client, room, f"http://{INET}/file.txt")[0] == 0


def test_no_usable_name_server_is_said_at_start_and_in_health():
    # loopback name servers mean the room's own loopback: unusable
    s = started_stack(dict(ROOMBOX_CONFIG, dns="127.0.0.53"))
    try:
        h = Client(s).get("/api/health", auth=False).json
        assert h["network"] == "egress" and h["dns"] == [], h
        assert "no name server" in h["dnsWarning"], h
        assert "no name server is usable from a room" in (s.dir / "fcgi.log").read_text()
    finally:
        assert not s.stop()


def test_network_none_is_unchanged(testnet):
    s = started_stack({})
    c, room = Client(s), unique_room("z")
    try:
        assert c.sh(room, "ls /sys/class/net 2>/dev/null || cut -d: -f1 /proc/net/dev | tail -n +3").split() == ["lo"]
        res = c.exec(room, f"python3 -c 'import socket; socket.create_connection((\"{INET}\", 80), 3)'")
        assert "Network is unreachable" in res["stderr"], res
        h = c.get("/api/health", auth=False).json
        assert h["network"] == "none" and "dns" not in h, h
    finally:
        finish(s, c, [room])


# ------------------------------------- the host's directly connected networks

@pytest.fixture
def public_lan(testnet, tmp_path):
    """A network the host is directly connected to whose addresses are
    public-looking (a /28 of 198.51.100.0/24, picked at random below the
    "internet" link): the host holds .1 of it on a veth of its own, a test
    host in a namespace of its own serves HTTP on .2.  Removed afterwards."""
    base = 16 * (1 + secrets.randbelow(7))
    net = f"198.51.100.{base}/28"
    host_addr, lan_host = f"198.51.100.{base + 1}", f"198.51.100.{base + 2}"
    sfx = secrets.token_hex(2)
    ns, ifname = f"egt-{sfx}-lan", f"egt{sfx}l"
    www = tmp_path / "lan"
    www.mkdir()
    (www / "secret.txt").write_text("lan host\n")
    run("ip", "netns", "add", ns)
    proc = None
    try:
        run("ip", "link", "add", ifname, "type", "veth", "peer", "name", "eth0", "netns", ns)
        run("ip", "addr", "add", f"{host_addr}/28", "dev", ifname)
        run("ip", "link", "set", ifname, "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")
        run("ip", "-n", ns, "addr", "add", f"{lan_host}/28", "dev", "eth0")
        run("ip", "-n", ns, "link", "set", "eth0", "up")
        proc = subprocess.Popen(["ip", "netns", "exec", ns, "/usr/bin/python3", "-m", "http.server",
                                 "80", "--bind", lan_host, "--directory", str(www)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
        wait_until(lambda: listening(ns, lan_host, 80), 15, "HTTP on the LAN host")
        yield net, lan_host
    finally:
        if proc:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=10)
        run("ip", "netns", "del", ns, check=False)
        run("ip", "link", "del", ifname, check=False)
        assert run("ip", "link", "show", ifname, check=False).returncode != 0, f"{ifname} left"


def test_a_directly_connected_public_network_is_closed_unless_allowed(client, public_lan):
    net, lan_host = public_lan
    # control: the LAN host serves (from the host)
    socket.create_connection((lan_host, 80), timeout=3).close()
    room = unique_room("l")
    assert_unreachable(client, room, f"http://{lan_host}/secret.txt")
    # what the host reaches through a gateway of its own stays open
    code, out, err = fetch(client, room, f"http://{INET}/file.txt")
    assert code == 0 and out.encode() == PAYLOAD, (code, err)
    # egress_allow naming the network opens it
    s = started_stack(dict(ROOMBOX_CONFIG, egress_allow=f"{PRIV_HTTP}:{ALLOWED_PORT},{net}"))
    c, other = Client(s), unique_room("k")
    try:
        code, out, err = fetch(c, other, f"http://{lan_host}/secret.txt")
        assert code == 0 and out == "lan host\n", (code, out, err)
    finally:
        finish(s, c, [other])
