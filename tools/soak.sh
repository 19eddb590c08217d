#!/usr/bin/env bash
# make soak: SOAK_S seconds (default 3600) of mixed load with faults over a
# pool of rooms, through nginx, against a stack and a test host of its own;
# fails on a resource that grew or an acknowledged write that was lost.
# The driver is tests/soak/soak.py (its opening comment says how it works).
#
# Knobs (environment): SOAK_S (3600), SOAK_ROOMS (12), SOAK_WORKERS (3),
# SOAK_INJECT (lose-append, leak-room: the soak's self-test, the run must
# fail), ROOMBOX_KEEP_TMP=1 keeps the stack's folder.
set -uo pipefail
# Every request of the soak goes to this machine: no proxy of the caller's.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "make soak: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] ||
	die "needs root: rooms are namespace jails set up by the setuid helper (sudo make soak)"
for b in roombox-fcgi roombox-helper roombox-keeper; do
	[ -x "$repo/build/$b" ] || die "build/$b is missing: run make first"
done
for t in nginx nft ip ss losetup du; do
	command -v "$t" >/dev/null || die "$t is not installed (tools/deps.sh installs it)"
done

cd "$repo"
# Debian's python: python3-pytest (the integration fixtures import it).
exec /usr/bin/python3 -u tests/soak/soak.py
