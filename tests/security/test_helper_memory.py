"""The setuid helper's request reader is bounded: input over max_body +
64 KiB is refused, and no request makes roombox-helper use more than 64 MiB
-- among them the shapes of the hostile 8 MiB inputs that once took its JSON
reader to 3.4 and 9.6 GiB as root (small env keys; many small strings),
now as records, which the helper holds once, as they came.

The helper runs directly as root with a request on stdin, under GNU time
(its %M is the helper's own peak RSS: time forks it from a process of a few
hundred KiB, where a child of this Python process would inherit Python's
peak in its ru_maxrss), and under an address-space limit of 1 GiB so that a
helper without its bound fails the assertion instead of exhausting the
machine.  max_body is 8M and output_limit 16M here, the largest a
configuration accepts.
"""

import subprocess
import tempfile

import pytest

from conftest import HELPER, encode_request, record, unique_room
from helper_records import EXEC_ARGS
from security_helpers import helper_answer, run_with_io

SERVERS = ("nginx",)
ROOMBOX_CONFIG = {"max_body": "8M", "output_limit": "16M"}

MAX_BODY = 8 << 20
SLACK = 64 << 10                       # HELPER_REQUEST_SLACK
MEMORY_MAX = 64 << 20                  # HELPER_MEMORY_MAX
HOSTILE_SIZE = 8 << 20


def measured(argv, rss):
    return ["prlimit", f"--as={1 << 30}", "--", "/usr/bin/time", "-o", rss, "-f", "%M"] + argv


def peak_of(rss):
    # time prints "Command exited with non-zero status N" first then
    return int(open(rss).read().split()[-1]) * 1024


def run_measured(stack, data):
    """(exit status, answer, peak RSS in bytes) of one helper run."""
    with tempfile.NamedTemporaryFile(prefix="rbx-rss-") as rss:
        r = subprocess.run(measured([str(HELPER), "-c", str(stack.conf_path)], rss.name),
                           input=data, capture_output=True, timeout=120, cwd="/")
        return r.returncode, helper_answer(r), peak_of(rss.name)


def exec_measured(stack, request, stdin=b""):
    """An exec run as roombox-fcgi runs it (passed I/O): (exit status,
    answer, the command's stdout and stderr bytes, peak RSS)."""
    with tempfile.NamedTemporaryFile(prefix="rbx-rss-") as rss:
        r, out, err = run_with_io(measured([HELPER, "-c", stack.conf_path], rss.name),
                                  dict(request, io=True), stdin, timeout=120)
        return r.returncode, helper_answer(r), out, err, peak_of(rss.name)


def env_of_small_keys(room, size):
    """An exec whose env is as many one-letter pairs as fit in size bytes."""
    n = (size - 200) // 5
    return record(1, room, EXEC_ARGS.pack(0, 0, n, 0, 0),
                  [b"true"] + [b"a%02d=" % (i % 100) for i in range(n)])


def many_empty_strings(room, size):
    """A status (which takes no strings) followed by as many empty strings
    as fit: read whole, then refused."""
    return record(3, room, b"", [b""] * (size - 200))


def count_overflow(room):
    """An exec claiming 2^32-1 env pairs in a small request."""
    return record(1, room, EXEC_ARGS.pack(0, 0, 0xffffffff, 0, 0), [b"true"])


def clear_refusal(rc, out):
    return rc != 0 and out.get("code") in ("invalid", "failed") and out.get("error")


@pytest.mark.parametrize("kind", ["env-of-small-keys", "many-empty-strings"])
def test_hostile_request_stays_within_the_memory_budget(stack, client, kind):
    """The inputs that once took the JSON reader to gigabytes, as records:
    the helper holds the request once, as it came, whatever its strings."""
    room = unique_room("mem")
    client.touch(room)
    data = (env_of_small_keys(room, HOSTILE_SIZE) if kind == "env-of-small-keys"
            else many_empty_strings(room, HOSTILE_SIZE))
    assert HOSTILE_SIZE - 256 <= len(data) <= MAX_BODY + SLACK
    rc, out, peak = run_measured(stack, data)
    assert clear_refusal(rc, out) or rc == 0, out
    assert peak < MEMORY_MAX, f"the helper peaked at {peak >> 20} MiB on {kind}: {out}"
    # the room was not touched by a refused request, and works
    assert client.sh(room, "echo ok") == "ok\n"


def test_count_overflow_is_refused_small(stack, client):
    room = unique_room("mem")
    client.touch(room)
    rc, out, peak = run_measured(stack, count_overflow(room))
    assert rc == 1 and out["code"] == "invalid" and "strings expected" in out["error"], out
    assert peak < 8 << 20


def test_the_measurement_sees_the_helpers_memory(stack, client):
    """Control for the tests above: a request the helper must hold whole
    (almost 8 MiB of strings, read into its buffer before it is refused for
    what it holds) shows up in the figure, so a low figure is the helper's,
    not a tool's."""
    room = unique_room("mem")
    data = many_empty_strings(room, MAX_BODY)
    rc, out, peak = run_measured(stack, data)
    assert rc == 1 and out["error"] == "status takes no strings", out
    assert len(data) - 4096 <= peak < MEMORY_MAX, f"{peak} bytes"


def test_request_over_max_body_plus_slack_is_refused(stack):
    room = unique_room("mem")
    limit = MAX_BODY + SLACK
    base = len(record(3, room, b"", [b""]))
    fits = record(3, room, b"", [b"x" * (limit - base)])
    assert len(fits) == limit
    rc, out, _ = run_measured(stack, fits)
    assert rc == 1 and out["error"] == "status takes no strings", out   # control: read whole
    rc, out, peak = run_measured(stack, record(3, room, b"", [b"x" * (limit - base + 1)]))
    assert rc == 1 and out["code"] == "invalid" and f"to {limit} bytes" in out["error"], out
    assert peak < MEMORY_MAX
    # more bytes than the header declares
    rc, out, _ = run_measured(stack, fits + b" " * (16 << 20))
    assert rc == 1 and out["code"] == "invalid" and "longer than its declared" in out["error"], out


def test_exec_works_through_the_stack(client, stack, room):
    """The reader moved: a normal exec (env, stdin, cwd, timeout) still runs,
    through nginx and directly through the helper."""
    stdin = "line\n" * 100000
    res = client.exec(room, 'wc -c; echo "$A $B"; pwd', env={"A": "a", "B": "b b"},
                      stdin=stdin, cwd="/tmp", timeout=20000)
    assert res["exitCode"] == 0 and res["stdout"] == f"{len(stdin)}\na b b\n/tmp\n", res
    rc, out, stdout, _, peak = exec_measured(
        stack, {"op": "exec", "room": room, "cmd": "cat; echo \"$A\"", "env": {"A": "é"}}, b"in\n")
    assert rc == 0 and stdout == "in\né\n".encode() and out["wait_status"] == 0, (out, stdout)
    assert peak < MEMORY_MAX


def test_the_largest_output_limit_fits_the_budget(stack, client, room):
    """A command filling both streams past the largest output_limit, its
    stdin almost max_body: the helper's peak stays in the budget, for input
    and output never pass through it -- every byte goes between the room and
    the caller's own pipes, none held or cut by the helper."""
    client.touch(room)
    limit = 16 << 20
    cmd = (f"head -c {limit + 4096} /dev/zero | tr '\\0' a; "
           f"head -c {limit + 4096} /dev/zero | tr '\\0' b >&2; wc -c")
    stdin = b"x" * (MAX_BODY - 4096)
    rc, out, stdout, stderr, peak = exec_measured(
        stack, {"op": "exec", "room": room, "cmd": cmd}, stdin)
    assert rc == 0 and out["wait_status"] == 0, out
    assert stdout == b"a" * (limit + 4096) + f"{len(stdin)}\n".encode()
    assert stderr == b"b" * (limit + 4096)
    assert peak < MEMORY_MAX, f"the helper peaked at {peak >> 20} MiB"
