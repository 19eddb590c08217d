#!/usr/bin/env bash
# Run the pytest suite in DIR against the real stack (nginx and lighttpd in
# front of build/roombox-fcgi and build/roombox-helper).
# Always Debian's python (/usr/bin/python3, with python3-pytest,
# python3-pytest-xdist and python3-requests): a `python3` earlier on PATH may
# lack them.
#
# Two passes (tests/integration/conftest.py, "serial tests"): first every
# test not marked serial on ROOMBOX_TEST_JOBS pytest-xdist workers at once
# (default 4, the fastest of 2, 3 and 4 measured on 2 cores: the tests wait on
# jails, servers and disks), each module's tests on one worker with the
# module's own stacks (--dist loadfile); then the serial ones, alone.  Extra
# arguments go to both passes; -n 0 runs the first in one process.
set -uo pipefail

# One compound command: bash reads it whole before running it, so editing
# this file while a suite runs (a checkout, a rebase) cannot break that run.
{
dir=${1:?usage: tools/integration.sh DIR [PYTEST ARGS]}
shift
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=${ROOMBOX_TEST_JOBS:-4}

if [ "$(id -u)" -ne 0 ]; then
	echo "tools/integration.sh: the tests in $dir start room jails (namespaces," >&2
	echo "cgroups, loop mounts, a setuid helper) and need root: run make check as root." >&2
	exit 1
fi
if [ ! -e "$dir" ]; then
	echo "tools/integration.sh: no such file or directory: $dir" >&2
	exit 1
fi
if ! /usr/bin/python3 -c 'import xdist' 2>/dev/null; then
	echo "tools/integration.sh: pytest-xdist is missing: run tools/deps.sh (python3-pytest-xdist)" >&2
	exit 1
fi
case $jobs in ''|*[!0-9]*) echo "tools/integration.sh: ROOMBOX_TEST_JOBS must be a number" >&2; exit 1 ;; esac

cd "$repo"
# -p no:cacheprovider: no .pytest_cache in the work tree.
# -rfEs: list failures, errors and skips (a skip is reported, never hidden).
pytest=(/usr/bin/python3 -m pytest -q -p no:cacheprovider -rfEs)

# How many serial tests the arguments select (-n 0 last: counted in this
# process whatever -n the arguments give).
serial=$(ROOMBOX_TEST_PASS=serial "${pytest[@]}" --collect-only "$dir" "$@" -n 0 2>/dev/null |
	grep -c '::')

ROOMBOX_TEST_PASS=parallel "${pytest[@]}" -n "$jobs" --dist loadfile "$dir" "$@"
rc=$?
rc_serial=5
case $rc in
	0|1|5)
		if [ "$serial" -gt 0 ]; then
			echo "tools/integration.sh: the tests marked serial in $dir ($serial), alone:"
			ROOMBOX_TEST_PASS=serial "${pytest[@]}" "$dir" "$@"
			rc_serial=$?
		fi ;;
esac
# 5 (no test collected) only when neither pass ran a test; else the first
# other failure.
if [ "$rc" -eq 5 ] && [ "$rc_serial" -ne 5 ]; then
	rc=$rc_serial
elif [ "$rc" -eq 0 ] && [ "$rc_serial" -ne 5 ]; then
	rc=$rc_serial
fi
case $rc in
	0) ;;
	5) echo "tools/integration.sh: no tests were collected in $dir: that is a failure" >&2 ;;
	*) echo "tools/integration.sh: pytest exited $rc" >&2 ;;
esac
exit $rc
}
