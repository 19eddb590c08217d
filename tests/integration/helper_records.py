"""The helper's request and answer records (common/protocol.h) in Python,
for tests that run build/roombox-helper directly.

encode_request() takes the dict the tests have always written ({"op":
"status", "room": R}, an exec's cmd/env/cwd/user/tool/existing/detach,
port-connect's port/serve) and makes the record (an exec's input and output
are on the caller's fds 3-5, never in a record); decode_answer() turns an
answer back into a dict with the protocol's field names ("error"/"code" for
an error).  Layouts are the C structs' (host byte order, no padding: each
struct is laid out so that none is needed).
"""

import struct

MAGIC = 0x72626870
VERSION = 1
ROOM_LEN = 72

OPS = {"exec": 1, "create": 2, "status": 3, "list": 4, "destroy": 5, "stop": 6,
       "stop-idle": 7, "stop-all": 8, "info": 9, "kill-all": 10, "restart": 11,
       "port-connect": 12, "set-limits": 13, "snapshot": 14, "snapshots": 15,
       "snapshot-delete": 16, "restore": 17, "fork": 18, "export": 19, "import": 20,
       "exec-channel": 21, "touch": 22}
OP_NAMES = {v: k for k, v in OPS.items()}
ROOMLESS = {"list", "stop-idle", "stop-all", "info"}
ERRORS = {1: "invalid", 2: "not_found", 3: "limit", 4: "denied", 5: "failed",
          6: "refused", 7: "no_space", 8: "conflict", 9: "exists"}

REQ = struct.Struct("=6I72s")
EXEC_ARGS = struct.Struct("=QIIII")
PAIR = struct.Struct("=II")
ANS = struct.Struct("=6I")
EXEC_ANS = struct.Struct("=iIQq")
LIMITS = struct.Struct("=6Q")
LIMIT_NAMES = ("memory", "pids", "cpu_milli", "disk", "idle_timeout_ms", "exec_timeout_max_ms")
LIMITS_ARGS = struct.Struct("=6QII")
STATUS = struct.Struct("=72s32sIIqQQQ6Q")
INFO = struct.Struct("=8s32s8sI32I")
SNAP_ARGS = struct.Struct("=72s72s")          # snapshot (id or name), to
SNAPSHOT = struct.Struct("=72s72s32s16sQQQ")  # id, name, createdAt, copy, size, frozen, fs frozen

HX_TOOL, HX_CWD, HX_USER_SET, HX_AS_USER = 1, 2, 4, 8
HX_EXISTING, HX_DETACH, HX_TIMEOUT_CAP, HX_RUNNING = 16, 32, 64, 128


def _b(s):
    return s if isinstance(s, bytes) else str(s).encode()


def record(op, room=b"", args=b"", strings=(), tail=b"", *, magic=MAGIC, version=VERSION,
           size=None, nstrings=None):
    """A request record from its parts; the keywords make broken ones."""
    body = args + b"".join(_b(s) + b"\0" for s in strings) + tail
    total = REQ.size + len(body) if size is None else size
    n = len(strings) if nstrings is None else nstrings
    return REQ.pack(magic, version, op, total, n, 0, _b(room)) + body


def encode_request(req):
    """The record for a request dict."""
    name = req["op"]
    op = OPS[name]
    room = b"" if name in ROOMLESS else _b(req.get("room", ""))
    if name == "exec":
        flags, strings = 0, []
        tool = req.get("tool")
        if tool:
            flags |= HX_TOOL
            strings += list(tool)
        else:
            strings.append(req["cmd"])
        if "cwd" in req:
            flags |= HX_CWD
            strings.append(req["cwd"])
        env = req.get("env") or {}
        strings += [f"{k}={v}" for k, v in env.items()]
        if "user" in req:
            flags |= HX_USER_SET | (HX_AS_USER if req["user"] == "user" else 0)
        if req.get("existing"):
            flags |= HX_EXISTING
        if req.get("detach"):
            flags |= HX_DETACH
        if req.get("running_only"):
            flags |= HX_RUNNING
        # no input in a record: the command's I/O is the caller's fds 3-5
        assert "stdin" not in req, "an exec's input goes into the caller's pipe, not the request"
        args = EXEC_ARGS.pack(req.get("timeout_ms", 0), flags, len(env), len(tool or ()), 0)
        return record(op, room, args, strings)
    if name == "stop-idle":
        keep = req.get("keep", [])
        return record(op, room, PAIR.pack(len(keep), 0), keep)
    if name == "kill-all":
        return record(op, room, PAIR.pack(1 if req.get("at_limit") else 0, 0))
    if name == "set-limits":
        # {"limits": {"memory": N, ...}}: those named are set (0: the
        # configuration's again)
        lim = req.get("limits", {})
        values = [lim.get(n, 0) for n in LIMIT_NAMES]
        mask = sum(1 << i for i, n in enumerate(LIMIT_NAMES) if n in lim)
        return record(op, room, LIMITS_ARGS.pack(*values, req.get("set", mask), 0))
    if name in ("snapshot", "snapshots", "snapshot-delete", "restore", "fork", "export"):
        return record(op, room, SNAP_ARGS.pack(_b(req.get("snapshot", "")), _b(req.get("to", ""))))
    if name == "port-connect":
        serve = bool(req.get("serve"))
        return record(op, room, PAIR.pack(0 if serve else req.get("port", 0), int(serve)))
    return record(op, room)


def _s(b):
    return b.split(b"\0", 1)[0].decode()


def _status(b):
    room, created, running, _, last, disk, mem, procs, *limits = STATUS.unpack(b)
    return {"room": _s(room), "running": bool(running), "created_at": _s(created),
            "last_active_ms": last, "disk_bytes": disk, "memory_bytes": mem, "processes": procs,
            "limits": dict(zip(LIMIT_NAMES, limits))}


def _snapshot(b):
    sid, name, created, copy, size, frozen, fs_frozen = SNAPSHOT.unpack(b)
    return {"id": _s(sid), "name": _s(name), "created_at": _s(created), "copy": _s(copy),
            "size": size, "frozen_us": frozen, "fs_frozen_us": fs_frozen}


def decode_answer(data):
    """An answer's dict; AssertionError for bytes that are not one."""
    assert len(data) >= ANS.size, f"not an answer record: {data[:300]!r}"
    magic, version, op, size, status, _ = ANS.unpack_from(data)
    assert magic == MAGIC and version == VERSION, f"not an answer record: {data[:300]!r}"
    rec, tail = data[ANS.size:size], data[size:]
    if status:
        assert not tail and rec.endswith(b"\0"), data
        return {"error": rec[:-1].decode("utf-8", "replace"), "code": ERRORS.get(status, "failed")}
    name = OP_NAMES.get(op)
    assert not tail, f"{len(tail)} bytes after the {name} answer"
    if name == "exec":
        (ws, to, dur, started) = EXEC_ANS.unpack(rec)
        return {"wait_status": ws, "timed_out": bool(to), "duration_us": dur, "started_ms": started}
    if name in ("create", "status", "set-limits"):
        return _status(rec)
    if name == "list":
        (count, _) = PAIR.unpack_from(rec)
        assert len(rec) == PAIR.size + count * STATUS.size
        return {"rooms": [_status(rec[PAIR.size + i * STATUS.size:][:STATUS.size]) for i in range(count)]}
    if name in ("stop-idle", "stop-all"):
        (count, _) = PAIR.unpack_from(rec)
        assert len(rec) == PAIR.size + count * ROOM_LEN
        return {"stopped": [_s(rec[PAIR.size + i * ROOM_LEN:][:ROOM_LEN]) for i in range(count)]}
    if name == "kill-all":
        return {"killed": PAIR.unpack(rec)[0]}
    if name == "info":
        cg, ver, net, ndns, *dns = INFO.unpack(rec)
        out = {"cgroup": _s(cg), "version": _s(ver), "network": _s(net)}
        if out["network"] == "egress":
            out["dns"] = [".".join(str(a >> s & 255) for s in (24, 16, 8, 0)) for a in dns[:ndns]]
        return out
    if name in ("snapshot", "snapshot-delete", "restore", "fork"):
        return _snapshot(rec)
    if name == "snapshots":
        (count, _) = PAIR.unpack_from(rec)
        assert len(rec) == PAIR.size + count * SNAPSHOT.size
        return {"snapshots": [_snapshot(rec[PAIR.size + i * SNAPSHOT.size:][:SNAPSHOT.size])
                              for i in range(count)]}
    flag = {"destroy": "destroyed", "stop": "stopped", "restart": "restarted",
            "port-connect": "connected", "exec-channel": "channel", "touch": "touched"}[name]
    assert not rec, rec
    return {flag: True}
