"""Moves and drains with roomboxctl (the mover; the hosts' side is
roombox-fcgi's): the room's files arrive byte for byte, the router follows
at once, the old host keeps no copy it would serve, and a drain under load
empties the host with no answer but 200 or 503 + Retry-After."""

import re
import threading
import time

from conftest import wait_until

LIVES = re.compile(r"room (\S+) lives on host (\S+)")


def served(c, room, cmd):
    """The room's answer once it serves again: right after a commit its new
    host may still answer 503 + Retry-After until its copy of etcd's
    records (a watch) has the commit; nothing else is allowed meanwhile."""
    def answer():
        a = c.exec(room, cmd)
        assert a.status in (200, 503), a
        if a.status == 503:
            assert "retry-after" in a.headers, a
            return None
        return a
    return wait_until(answer, 10, f"room {room} to serve after its move")


def other(c, host):
    return next(h for h in c.hosts if h != host)


def test_move_keeps_the_files_and_the_router_follows(cluster_mode, room):
    c = cluster_mode
    a = c.exec(room, "echo hello > /root/f && head -c 20000000 /dev/urandom > /root/big && "
               "truncate -s 1G /root/sparse && md5sum < /root/big")
    assert a.status == 200, a
    src, md5 = a.host, a.json["result"]["stdout"]
    dst = other(c, src)
    out = c.ctl("move", room, dst).stdout
    assert f"moved from {src} to {dst} (epoch 2" in out, out
    b = served(c, room, "cat /root/f && md5sum < /root/big && du -k /root/sparse | cut -f1 && "
               "stat -c %s /root/sparse")
    assert b.status == 200 and b.host == dst, b
    f, m, du, size = b.json["result"]["stdout"].splitlines()
    assert (f, m + "\n", size) == ("hello", md5, str(1 << 30)) and int(du) < 1024, b
    assert c.etcd_get(f"/roombox/rooms/{room}") == {"host": dst, "epoch": 2}
    old = c.exec(room, "true", host=src)
    assert old.status == 421 and LIVES.search(old.json["error"]).group(2) == dst, old
    assert f"router: {dst}" in c.ctl("where", room).stdout
    c.request("DELETE", f"/api/rooms/{room}")


def test_a_move_waits_for_a_long_exec_and_keeps_what_it_wrote(cluster_mode, room):
    """The source's export starts only once the room's running requests
    have ended; the target's import waits for it longer than a client's
    silence is allowed (10 s)."""
    c = cluster_mode
    a = c.exec(room, "true")
    assert a.status == 200, a
    src = a.host
    dst = other(c, src)
    started = threading.Event()
    long = {}

    def run_long():
        started.set()
        long["a"] = c.exec(room, "sleep 15; echo done > /root/long", host=src)
    t = threading.Thread(target=run_long)
    t.start()
    started.wait()
    # the exec is running once the room reports a busy shell
    wait_until(lambda: "sleep 15" in c.exec(room, "ps -eo args", host=src).json["result"]["stdout"],
               10, "the long exec to run")
    out = c.ctl("move", room, dst).stdout
    t.join()
    assert long["a"].status == 200, long["a"]
    assert f"moved from {src} to {dst} (epoch 2" in out, out
    b = served(c, room, "cat /root/long")
    assert b.host == dst and b.json["result"]["stdout"] == "done\n", b
    c.request("DELETE", f"/api/rooms/{room}")


def test_a_move_that_cannot_happen_leaves_the_room_where_it_was(cluster_mode, room):
    c = cluster_mode
    a = c.exec(room, "echo stay > /root/f")
    assert a.status == 200
    r = c.ctl("move", room, "h9", check=False)
    assert r.returncode == 1 and "not up" in r.stderr, r
    assert c.etcd_get(f"/roombox/moving/{room}") is None
    b = c.exec(room, "cat /root/f")
    assert b.status == 200 and b.host == a.host and b.json["result"]["stdout"] == "stay\n", b
    c.request("DELETE", f"/api/rooms/{room}")


def test_drain_under_load_empties_the_host(cluster_mode):
    c = cluster_mode
    host = "h3"
    rooms = [f"dr{i}x{c.port}" for i in range(6)]
    for r in rooms:
        a = c.exec(r, f"echo {r} > /root/log", host=host)
        assert a.status == 200 and a.host == host, a
    c.ctl("route-sync")
    stop = threading.Event()
    bad, acked = [], {r: 1 for r in rooms}

    def load(r):
        n = 1
        while not stop.is_set():
            a = c.exec(r, f"echo {n} >> /root/log")
            if a.status == 200:
                acked[r] += 1
                n += 1
            elif not (a.status == 503 and "retry-after" in a.headers):
                bad.append((r, a))
            time.sleep(0.05)
    threads = [threading.Thread(target=load, args=(r,)) for r in rooms]
    for t in threads:
        t.start()
    try:
        out = c.ctl("drain", host).stdout
    finally:
        stop.set()
        for t in threads:
            t.join()
    try:
        assert "0 rooms still on it" in out, out
        assert not bad, bad[:5]
        for r in rooms:
            a = served(c, r, "wc -l < /root/log")
            assert a.host != host, a
            # every acknowledged append is there
            assert int(a.json["result"]["stdout"]) == acked[r], (r, a, acked[r])
        hosts = c.ctl("hosts").stdout
        assert re.search(rf"^{host}\s+maint\s+0\s", hosts, re.M), hosts
        n = c.exec(f"new{c.port}", "true", host=host)
        assert n.status == 503 and "retry-after" in n.headers, n
    finally:
        c.ctl("undrain", host, check=False)
        for r in rooms:
            c.request("DELETE", f"/api/rooms/{r}")


def test_a_move_to_a_host_that_cannot_be_reached_is_given_up(cluster_mode, room):
    """The target's web server down mid-way: the import fails, the mover
    deletes the moving key, the room serves from its host as before."""
    c = cluster_mode
    a = c.exec(room, "echo stay > /root/f")
    assert a.status == 200, a
    dst = other(c, a.host)
    c.nginx_stop(dst)
    try:
        r = c.ctl("move", room, dst, check=False)
    finally:
        c.nginx_start(dst)
    assert r.returncode == 1 and f"the room stays on {a.host}" in r.stderr, r
    assert c.etcd_get(f"/roombox/moving/{room}") is None
    assert c.etcd_get(f"/roombox/rooms/{room}") == {"host": a.host, "epoch": 1}
    b = c.exec(room, "cat /root/f")
    assert b.status == 200 and b.host == a.host and b.json["result"]["stdout"] == "stay\n", b
    c.request("DELETE", f"/api/rooms/{room}")
