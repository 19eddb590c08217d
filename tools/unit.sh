#!/usr/bin/env bash
# Run each cmocka test binary given on the command line and sum their results.
# Prints cmocka's own output, then one closing line "N passed, N failed,
# N skipped".  A skipped test (cmocka's skip(), only where a control shows the
# kernel lacks a feature) is never counted as passed: it is listed with the
# reason the test printed ("skipped: ...") before the closing line.
# Exit status: 0 only when every binary ran to its end and no test failed.
set -uo pipefail

if [ $# -eq 0 ]; then
	echo "tools/unit.sh: no unit test binaries given (tests/unit/test_*.c)" >&2
	echo "0 passed, 0 failed, 0 skipped"
	exit 1
fi

unset CMOCKA_MESSAGE_OUTPUT CMOCKA_XML_FILE  # keep cmocka's standard output
passed=0 failed=0 skipped=0 broken=() reasons=()
out=$(mktemp)
trap 'rm -f "$out"' EXIT

for bin in "$@"; do
	echo "== $bin"
	"$bin" > "$out" 2>&1 < /dev/null
	rc=$?
	cat "$out"
	# "[  PASSED  ] 3 test(s)."  and  "[  FAILED  ] 1 test(s), listed below:"
	p=$(sed -n 's/^\[  PASSED  \] \([0-9][0-9]*\) test(s)\..*/\1/p' "$out" | awk '{s+=$1} END {print s+0}')
	f=$(sed -n 's/^\[  FAILED  \] \([0-9][0-9]*\) test(s).*/\1/p' "$out" | awk '{s+=$1} END {print s+0}')
	# "[  SKIPPED ] 1 test(s), listed below:" (cmocka's PASSED excludes them)
	s=$(sed -n 's/^\[  SKIPPED \] \([0-9][0-9]*\) test(s), listed below:.*/\1/p' "$out" | awk '{s+=$1} END {print s+0}')
	n=0
	while IFS= read -r line; do
		reasons+=("$(basename "$bin"): $line")
		n=$((n + 1))
	done < <(grep '^skipped: ' "$out")
	summary=$(grep -c '^\[==========\] [0-9][0-9]* test(s) run\.' "$out")
	passed=$((passed + p))
	failed=$((failed + f))
	skipped=$((skipped + s))
	if [ "$rc" -ge 128 ]; then
		broken+=("$bin (killed by signal $((rc - 128)))")
	elif [ "$summary" -eq 0 ]; then
		broken+=("$bin (exit $rc, no cmocka summary)")
	elif [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
		broken+=("$bin (exit $rc)")
	elif [ "$s" -gt "$n" ]; then
		broken+=("$bin ($s skipped, $n with a reason: print \"skipped: why\" first)")
	fi
done

status=0
for b in "${broken[@]}"; do
	echo "tools/unit.sh: BROKEN: $b" >&2
	failed=$((failed + 1))
done
for r in "${reasons[@]}"; do
	echo "tools/unit.sh: SKIPPED: $r"
done
[ "$failed" -eq 0 ] || status=1
echo "$passed passed, $failed failed, $skipped skipped"
exit $status
