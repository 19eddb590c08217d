"""Preview URLs through the router: a path-style URL names only a token,
which the router learns from the answer that exposed the port
(previews.map: token -> room); a host-style URL names the room itself."""

from conftest import PREVIEW_DOMAIN, wait_until


def test_previews_reach_their_room_through_the_router(cluster, room):
    c = cluster
    a = c.exec(room, f"mkdir -p /tmp/site && echo page-of-{room} > /tmp/site/p.txt && "
               "cd /tmp/site && nohup python3 -m http.server 8000 --bind 127.0.0.1 "
               ">/tmp/http.log 2>&1 </dev/null &")
    assert a.status == 200, a
    e = c.request("POST", f"/api/rooms/{room}/sandbox/ports", {"port": 8000})
    assert e.status == 201, e
    token = e.json["token"]
    previews = c.admin_cmd(f"show map {c.run / 'haproxy' / 'previews.map'}")
    assert f" {token} {room}\n" in previews, previews

    def page(headers=None, path=f"/preview/{token}/p.txt"):
        r = c.request("GET", path, auth=False, headers=headers)
        return r if r.status != 502 else None
    # the room's server may take a moment to listen
    r = wait_until(page, 20, "the room's server to answer through the router")
    assert r.status == 200 and r.body == f"page-of-{room}\n", r
    # the same token exposed again: 200 and the same entry
    again = c.request("POST", f"/api/rooms/{room}/sandbox/ports", {"port": 8000})
    assert again.status == 200 and again.json["token"] == token, again

    # host-style: the room's id is in the Host
    host = f"8000-{room}-{token}.{PREVIEW_DOMAIN}"
    r = c.request("GET", "/p.txt", auth=False, headers={"Host": host})
    assert r.status == 200 and r.body == f"page-of-{room}\n", r

    if c.owner(room):     # cluster mode: route-sync keeps the token, and saves it
        c.ctl("route-sync")
        assert f" {token} {room}\n" in c.admin_cmd(f"show map {c.run / 'haproxy' / 'previews.map'}")
        assert f"{token} {room}\n" in (c.run / "haproxy" / "previews.map").read_text()
    c.request("DELETE", f"/api/rooms/{room}")
    if c.owner(room) is None:
        # the room is gone: route-sync drops its tokens
        c.ctl("route-sync")
        assert token not in c.admin_cmd(f"show map {c.run / 'haproxy' / 'previews.map'}")


def test_a_preview_url_follows_its_room_when_it_moves(cluster_mode, room):
    """The exposure moves with the room (its export carries it) and the
    router finds the token's room, then the room's new host."""
    c = cluster_mode
    serve = (f"mkdir -p /tmp/site && echo page-of-{room} > /tmp/site/p.txt && "
             "cd /tmp/site && nohup python3 -m http.server 8000 --bind 127.0.0.1 "
             ">/tmp/http.log 2>&1 </dev/null &")
    a = c.exec(room, serve)
    assert a.status == 200, a
    e = c.request("POST", f"/api/rooms/{room}/sandbox/ports", {"port": 8000})
    assert e.status == 201, e
    token = e.json["token"]
    dst = next(h for h in c.hosts if h != a.host)
    c.ctl("move", room, dst)

    def again():
        r = c.exec(room, serve)       # processes do not move: start the server again
        return r if r.status == 200 else None
    assert wait_until(again, 10, "the moved room to serve").host == dst

    last = []

    def page():
        r = c.request("GET", f"/preview/{token}/p.txt", auth=False)
        last[:] = [r]
        return r if r.status == 200 else None
    try:
        r = wait_until(page, 20, "the preview to answer from the room's new host")
    except AssertionError as err:
        raise AssertionError(f"{err}: last answer {last}, ports on {dst}: "
                             f"{c.request('GET', f'/api/rooms/{room}/sandbox/ports')}, straight to {dst}: "
                             f"{c.request('GET', f'/preview/{token}/p.txt', host=dst, auth=False)}, "
                             f"host-style: {c.request('GET', '/p.txt', auth=False, headers={'Host': f'8000-{room}-{token}.{PREVIEW_DOMAIN}'})}") from None
    assert r.body == f"page-of-{room}\n", r
    c.request("DELETE", f"/api/rooms/{room}")
