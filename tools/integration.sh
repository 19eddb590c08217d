#!/usr/bin/env bash
# Run the pytest suite in DIR against the real stack (nginx and lighttpd in
# front of build/roombox-fcgi and build/roombox-helper).
# Always Debian's python (/usr/bin/python3, with python3-pytest and
# python3-requests): a `python3` earlier on PATH may lack them.
set -uo pipefail

dir=${1:?usage: tools/integration.sh DIR}
shift
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

if [ "$(id -u)" -ne 0 ]; then
	echo "tools/integration.sh: the tests in $dir start room jails (namespaces," >&2
	echo "cgroups, loop mounts, a setuid helper) and need root: run make check as root." >&2
	exit 1
fi
if [ ! -e "$dir" ]; then
	echo "tools/integration.sh: no such file or directory: $dir" >&2
	exit 1
fi

cd "$repo"
# -p no:cacheprovider: no .pytest_cache in the work tree.
# -rfEs: list failures, errors and skips (a skip is reported, never hidden).
/usr/bin/python3 -m pytest -q -p no:cacheprovider -rfEs "$dir" "$@"
rc=$?
case $rc in
	0) ;;
	5) echo "tools/integration.sh: no tests were collected in $dir: that is a failure" >&2 ;;
	*) echo "tools/integration.sh: pytest exited $rc" >&2 ;;
esac
exit $rc
