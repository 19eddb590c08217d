"""roomboxctl restore: a room's host lost for good, the room brought back
from its backup onto another host.  Refused while the host is still
registered; forced, the new host serves the room's data through the router
at a higher epoch, and the old host, come back, never serves the room."""

import http.client

import moving
from conftest import wait_until


def fcgi_start(c, host):
    moving.fcgi_start(c, host)
    wait_until(lambda: c.etcd_get(f"/roombox/hosts/{host}"), 20, f"{host} to register again")

    # and the router's health checks see it up again (the suite's later tests expect every host up)
    def router_up():
        state = c.admin_cmd("show servers state roombox_hosts")
        rows = [line.split() for line in state.splitlines() if line.startswith(tuple("0123456789"))]
        return any(len(row) > 5 and row[3] == host and row[5] == "2" for row in rows)
    wait_until(router_up, 30, f"the router to see {host} up")


def export_to(c, room, path):
    conn = http.client.HTTPConnection(*c.addr(), timeout=120)
    try:
        conn.request("GET", f"/api/rooms/{room}/export",
                     headers={"Authorization": f"Bearer {c.token}"})
        r = conn.getresponse()
        data = r.read()
    finally:
        conn.close()
    assert r.status == 200, (r.status, data[:300])
    path.write_bytes(data)


def test_restore_of_a_lost_hosts_room(cluster_mode, room, tmp_path):
    c = cluster_mode
    a = c.exec(room, "echo precious > /root/f")
    assert a.status == 200, a
    src = a.host
    dst = next(h for h in c.hosts if h != src)
    backup = tmp_path / "room.rbx"
    export_to(c, room, backup)
    epoch = c.etcd_get(f"/roombox/rooms/{room}")["epoch"]

    # the host still registered: refused, and nothing changes
    r = c.ctl("restore", room, "--to", dst, "--from", str(backup), check=False)
    assert r.returncode != 0 and "still registered" in r.stderr, r
    assert c.etcd_get(f"/roombox/rooms/{room}") == {"host": src, "epoch": epoch}

    moving.fcgi_kill(c, src)
    try:
        wait_until(lambda: c.etcd_get(f"/roombox/hosts/{src}") is None, 30,
                   f"{src}'s lease to expire")
        out = c.ctl("restore", room, "--to", dst, "--from", str(backup), "--force").stdout
        assert f"room {room}: restored from {src} to {dst}" in out, out
        assert c.etcd_get(f"/roombox/rooms/{room}") == {"host": dst, "epoch": epoch + 1}

        def served():
            r = c.exec(room, "cat /root/f")
            return r if r.status == 200 else None
        r = wait_until(served, 10, "the restored room to serve")
        assert r.host == dst and r.json["result"]["stdout"] == "precious\n", r
    finally:
        fcgi_start(c, src)

    # the old host back: its copy's epoch is older, it never serves the room
    def refused():
        r = c.exec(room, "cat /root/f", host=src)
        return r if r.status == 421 else None
    wait_until(refused, 10, f"{src} to refuse the room")
    r = c.exec(room, "cat /root/f")
    assert r.status == 200 and r.host == dst, r
    c.request("DELETE", f"/api/rooms/{room}")
