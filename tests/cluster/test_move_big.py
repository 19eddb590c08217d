"""A move of a big room, seen whole: 512 MiB of files (450 MiB of random
bytes that no compression shrinks, a 1 GiB sparse file with a few written
blocks, files of root and of the room's user with their own modes, a
symlink), its shell session, its messages and an exposed preview port,
moved with roomboxctl while a client appends a numbered line every 50 ms
through the router.

After the move: every file is byte for byte what it was, with its owner
and mode, and the sparse file still sparse (both described from inside the
room, before and after); the session, the messages and the preview URL are
the room's; the appender met only 200 and 503 + Retry-After and every
append it was told of is in the room's log, in order; the old host keeps
only its tombstone.  The room fits the default disk_limit (1 GiB): the
sparse file's hole takes no room.

Figures (printed; -rP shows them): the move's time per GiB of data held
and the longest the appender waited between two acknowledged appends."""

import re
import subprocess

from conftest import CTL, PREVIEW_DOMAIN, wait_until
from moving import Appender, describe, room_paths, served, stdout, tombstone_only

MIB = 1 << 20

FILL = (
    "set -e; mkdir -p /srv/big/etc /srv/big/work /srv/big/home && cd /srv/big && "
    "head -c 300M /dev/urandom > rand1 && head -c 150M /dev/urandom > etc/rand2 && "
    "yes 'a line of text that compresses well, unlike the rest' | head -c 55M > text && "
    "truncate -s 1G sparse && "
    "head -c 4096 /dev/urandom | dd of=sparse bs=4096 seek=1000 conv=notrunc status=none && "
    "head -c 8192 /dev/urandom | dd of=sparse bs=4096 seek=200000 conv=notrunc status=none && "
    "printf end | dd of=sparse bs=1 seek=$((1024*1024*1024-3)) conv=notrunc status=none && "
    "for i in $(seq 200); do head -c $((i * 97)) /dev/urandom > etc/small.$i; done && "
    "head -c 3M /dev/urandom > home/users-file && chown -R 1000:1000 home && "
    "chmod 0640 home/users-file && chmod 2750 home && chmod 0600 etc/rand2 && "
    "chmod 4755 etc/small.1 && ln -s etc/rand2 link-to-rand2 && ln -s /nowhere dangling && "
    "mkdir -p /srv/big/work/deep && cd /srv/big/work/deep && export MOVED_VAR=kept-across"
)


def test_a_big_room_moves_whole_under_an_appender(cluster_mode, room):
    c = cluster_mode
    a = c.request("POST", f"/api/rooms/{room}/sandbox/exec", {"cmd": FILL, "timeout": 300000},
                  timeout=330)
    assert a.status == 200 and a.json["result"]["exitCode"] == 0, a
    src = a.host
    dst = next(h for h in c.hosts if h != src)
    tree, sums, blocks = describe(c, room, "/srv/big")
    held = sum(blocks.values()) * 512
    assert held >= 500 * MIB and blocks["./sparse"] * 512 < 1 * MIB, (held, blocks["./sparse"])

    for m in ({"role": "user", "content": f"hello from {room}"},
              {"role": "assistant", "content": "noted: <run>echo ran-before-the-move</run>"}):
        r = c.request("POST", f"/api/rooms/{room}/messages", m)
        assert r.status in (200, 201), r
    messages = c.request("GET", f"/api/rooms/{room}/messages").json["messages"]
    assert len(messages) >= 2, messages

    serve = ("mkdir -p /srv/site && echo page-of-{r} > /srv/site/p.txt && cd /srv/site && "
             "nohup python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 </dev/null &")
    a = c.request("POST", f"/api/rooms/{room}/sandbox/exec",
                  {"cmd": serve.format(r=room), "cwd": "/srv"})
    assert a.status == 200, a
    e = c.request("POST", f"/api/rooms/{room}/sandbox/ports", {"port": 8000})
    assert e.status == 201, e
    token = e.json["token"]
    page = lambda: (lambda r: r if r.status == 200 else None)(
        c.request("GET", f"/preview/{token}/p.txt", auth=False))
    assert wait_until(page, 20, "the preview to answer").body == f"page-of-{room}\n"

    sandbox = next(r["sandboxName"] for r in c.request("GET", "/api/rooms").json["rooms"]
                   if r["roomId"] == room)
    c.ctl("route-sync")
    before_paths = room_paths(c, src, room, sandbox)
    assert len(before_paths) > 1, before_paths

    with Appender(c, room) as ap:
        ap.wait_acks(5)
        mv = subprocess.run([str(CTL), "-c", str(c.run / "h1" / "roombox.conf"),
                             "-e", ",".join(c.endpoints), "-a", str(c.admin), "move", room, dst],
                            capture_output=True, text=True, timeout=900)
        assert mv.returncode == 0, mv
        ap.wait_acks(5)
    m = re.search(r"moved from (\S+) to (\S+) \(epoch 2, ([0-9.]+) s\)", mv.stdout)
    assert m and m.group(1, 2) == (src, dst), mv.stdout

    assert not ap.bad, ap.bad[:5]
    a = served(c, room, f"cat {ap.log}")
    assert a.host == dst, a
    ap.check_log(stdout(a))

    after = describe(c, room, "/srv/big")
    assert after[0] == tree, "the files' names, types, owners, modes, sizes or targets changed"
    assert after[1] == sums, "a file's bytes changed"
    assert after[2]["./sparse"] * 512 < 1 * MIB, after[2]["./sparse"]

    s = served(c, room, "pwd; echo $MOVED_VAR")
    assert stdout(s) == "/srv/big/work/deep\nkept-across\n", s
    assert c.request("GET", f"/api/rooms/{room}/messages").json["messages"] == messages

    # processes do not move: the server is started again; the URL is the same
    a = served(c, room, serve.format(r=room), body={"cwd": "/srv"})
    assert a.host == dst
    assert wait_until(page, 20, "the preview to answer from the new host").body == f"page-of-{room}\n"
    r = c.request("GET", "/p.txt", auth=False,
                  headers={"Host": f"8000-{room}-{token}.{PREVIEW_DOMAIN}"})
    assert r.status == 200 and r.body == f"page-of-{room}\n", r

    assert c.etcd_get(f"/roombox/rooms/{room}") == {"host": dst, "epoch": 2}
    assert c.etcd_get(f"/roombox/moving/{room}") is None
    old = c.exec(room, "true", host=src)
    assert old.status == 421, old
    wait_until(lambda: tombstone_only(c, src, room, sandbox), 60,
               f"{src} to keep only the tombstone of {room} (has {room_paths(c, src, room, sandbox)})")

    secs = float(m.group(3))
    print(f"\nmove of a room holding {held / MIB:.0f} MiB ({held / (1 << 30):.2f} GiB; 1 GiB sparse "
          f"file included, its hole not counted): {secs:.2f} s, {secs / (held / (1 << 30)):.2f} s per GiB")
    print(f"appender (an exec every 50 ms through the router): {len(ap.acked)} acknowledged, "
          f"{ap.unavailable_answers()} answered 503 + Retry-After; longest time between two "
          f"acknowledged appends {ap.longest_gap():.2f} s")
    c.request("DELETE", f"/api/rooms/{room}")
