"""What `make soak` judges, kept apart from the driver so that the rules can
be tested on made-up figures (tests/soak/test_judge.py) without a stack.

Two judgements:

  growth   a resource that should be flat once the room set is steady may
           not end higher than it was at the first steady sample by more
           than its margin: last > first + max(abs, rel * first) fails.
           The driver takes every sample with the load paused and every
           room of the pool woken, so the same set of rooms runs at each
           sample and what differs between samples is what leaked.
  appends  every append acknowledged with a 2xx is in the file, exactly
           once, and the acknowledged lines are in the order they were
           acknowledged in.  Appends that failed may or may not be there.
"""

# name: (absolute margin, relative margin, unit, what it is).  The margins
# are the noise seen between samples of a leak-free run on a 2-core VM
# shared with other work, rounded up; a leak of one object per room
# recycled, per fault or per minute crosses them within ten minutes.
RESOURCES = {
    "fcgi_fds":     (24, 0.0, "", "roombox-fcgi's open descriptors but the 3 pipes of "
                                  "each running managed process"),
    "fcgi_threads": (4, 0.0, "", "roombox-fcgi's threads"),
    "fcgi_rss":     (8 << 20, 0.25, "B", "roombox-fcgi's resident memory"),
    "keepers":      (0, 0.0, "", "keepers of the stack's rooms"),
    "room_procs":   (24, 0.0, "", "host processes under the stack's room ids"),
    "room_mounts":  (4, 0.0, "", "mounts in all rooms' mount namespaces"),
    "mounts_own":   (0, 0.0, "", "host mounts under the stack's folder"),
    "loops_own":    (1, 0.0, "", "loop devices backed by the stack's files"),
    "cgroups":      (2, 0.0, "", "cgroup directories under the instance's group"),
    "veths":        (1, 0.0, "", "host ends of the instance's veth pairs"),
    "nft_elems":    (4, 0.0, "", "elements of the instance's nft sets"),
    "conntrack":    (64, 0.5, "", "conntrack entries from the instance's rooms"),
    "state_rest":   (16 << 20, 0.5, "B", "state_dir size without disk images (du)"),
}

# Recorded and shown, not judged: they are the host's, shared with every
# other user of the machine, or vary with load on purpose.
INFO = {
    "fcgi_fds_raw": "roombox-fcgi's open descriptors, all",
    "managed": "managed processes running (the rooms' preview servers)",
    "mounts": "lines of /proc/self/mountinfo (host-wide)",
    "loops": "loop devices in use (losetup -a, host-wide)",
    "conntrack_all": "conntrack entries (host-wide)",
    "state_du": "state_dir size (du), disk images included",
    "helpers": "roombox-helper processes (connectors, execs in flight)",
}

# roombox-fcgi's own figures are judged within the life of the last
# roombox-fcgi only (the driver restarts it in the first half of the run).
FCGI_KEYS = ("fcgi_fds", "fcgi_threads", "fcgi_rss")


def margin(name, first):
    a, rel, _, _ = RESOURCES[name]
    return max(a, int(rel * first))


def steady_index(samples):
    """The first steady sample: the one a minute in (the pool is full and
    every kind of request has run), or the last there is."""
    return min(1, len(samples) - 1)


def baseline(samples, name):
    """The sample a resource is judged against, or None: the first steady
    sample; for roombox-fcgi's figures the second sample of the last
    roombox-fcgi's life (its first when it has two)."""
    if name in FCGI_KEYS:
        life = [s for s in samples if s.get("fcgi_pid") == samples[-1].get("fcgi_pid")]
        if len(life) < 2:
            return None
        return life[0] if len(life) < 3 else life[1]
    return samples[steady_index(samples)]


def growth_problems(samples):
    """[(name, message)] for every judged resource that grew past its
    margin between its baseline and the last sample.  A sample is a dict
    name -> int (None: not measurable here, with a reason in
    sample['skipped'][name]); samples also carry 't' (seconds) and
    'fcgi_pid'."""
    problems = []
    if len(samples) < 2:
        return [("samples", f"only {len(samples)} sample(s): nothing to compare")]
    last = samples[-1]
    for name in RESOURCES:
        base = baseline(samples, name)
        if base is None:
            continue            # said in skipped_judgements()
        first, now = base.get(name), last.get(name)
        if first is None or now is None:
            continue
        allowed = margin(name, first)
        if now > first + allowed:
            problems.append((name, f"{RESOURCES[name][3]} grew from {fmt(name, first)} "
                                   f"(t={base['t']:.0f}s) to {fmt(name, now)} (t={last['t']:.0f}s), "
                                   f"more than the margin of {fmt(name, allowed)}"))
    return problems


def skipped_judgements(samples):
    """[(name, reason)] of resources that could not be judged."""
    out = []
    if not samples:
        return out
    last = samples[-1]
    life = [s for s in samples if s.get("fcgi_pid") == last.get("fcgi_pid")]
    if len(life) < 2:
        for k in FCGI_KEYS:
            out.append((k, "the last roombox-fcgi lived through fewer than 2 samples"))
    for name, why in (last.get("skipped") or {}).items():
        out.append((name, why))
    return out


def fmt(name, v):
    if v is None:
        return "-"
    unit = RESOURCES[name][2] if name in RESOURCES else ("B" if name == "state_du" else "")
    if unit == "B":
        return f"{v / (1 << 20):.1f}MiB"
    return str(v)


def append_problems(acked, lines):
    """acked: the numbers whose append was acknowledged, in order; lines:
    the file's lines.  Returns a list of messages (empty: all kept)."""
    problems = []
    where = {}
    for i, line in enumerate(lines):
        where.setdefault(line, []).append(i)
    last_pos = -1
    for n in acked:
        pos = where.get(str(n), [])
        if not pos:
            problems.append(f"acknowledged line {n} is missing")
            continue
        if len(pos) > 1:
            problems.append(f"acknowledged line {n} is there {len(pos)} times (lines {pos[:5]})")
        if pos[0] < last_pos:
            problems.append(f"acknowledged line {n} (file line {pos[0] + 1}) comes before "
                            f"an earlier acknowledged line (file line {last_pos + 1})")
        last_pos = max(last_pos, pos[0])
    return problems
