#!/usr/bin/env bash
# Run libFuzzer targets: tools/fuzz.sh SECONDS build/fuzz/fuzz_NAME...
#
# For each target, first every input in tests/fuzz/regress/NAME/ once (the
# crashes found so far must stay fixed), then SECONDS of fuzzing starting
# from the checked-in corpus tests/fuzz/corpus/NAME/.  New inputs go to
# build/fuzz/work/NAME/corpus/ (kept between runs, so a later run goes on
# from there; the tree stays clean), crash reproducers to
# build/fuzz/work/NAME/.
# Prints one line per target: execs done, exec/s, corpus size, coverage.
# Targets run FUZZ_JOBS at a time (default: the CPUs), each its own process.
# Exit status: 0 only when no target crashed, leaked or timed out.
set -uo pipefail

if [ $# -lt 2 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
	echo "usage: tools/fuzz.sh SECONDS build/fuzz/fuzz_NAME..." >&2
	exit 2
fi
seconds=$1
shift
top=$(cd "$(dirname "$0")/.." && pwd)
failed=()

# One target; its verdict (empty: clean) in $work/verdict.
run_one() {
	local bin=$1 name seeds regress work log rc execs rate status corp cov repro
	local -a inputs
	name=$(basename "$bin")
	name=${name#fuzz_}
	seeds=$top/tests/fuzz/corpus/$name
	regress=$top/tests/fuzz/regress/$name
	work=$top/build/fuzz/work/$name
	log=$work/fuzz.log
	mkdir -p "$work/corpus"
	: > "$work/verdict"
	if [ ! -x "$bin" ]; then
		echo "$name: no binary $bin" > "$work/verdict"
		return
	fi
	if [ ! -d "$seeds" ] || [ -z "$(ls -A "$seeds")" ]; then
		echo "$name: no seed corpus in tests/fuzz/corpus/$name/" > "$work/verdict"
		return
	fi

	# The regression inputs, each run once.
	mapfile -t inputs < <(find "$regress" -type f 2>/dev/null | sort)
	if [ ${#inputs[@]} -gt 0 ]; then
		if "$bin" -rss_limit_mb=2048 "${inputs[@]}" > "$work/regress.log" 2>&1; then
			echo "fuzz $name: ${#inputs[@]} regression inputs pass"
		else
			tail -n 40 "$work/regress.log"
			echo "$name: a regression input fails again (log: $work/regress.log)" > "$work/verdict"
			return
		fi
	fi

	# -timeout: one input taking 10 s is a hang; -rss_limit_mb: a leak or
	# a blow-up past 2 GiB is a failure, not an OOM kill of the machine.
	"$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$work/" \
		"$work/corpus" "$seeds" > "$log" 2>&1
	rc=$?
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n 1)
	# "#123 DONE cov: 456 ft: 789 corp: 42/3Kb ..." (the last status line)
	status=$(grep -aE '^#[0-9]+' "$log" | tail -n 1)
	corp=$(sed -n 's/.* corp: \([^ ]*\).*/\1/p' <<< "$status")
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$status")
	echo "fuzz $name: ${seconds}s, ${execs:-?} execs, ${rate:-?} exec/s," \
	     "corpus ${corp:-?} (inputs/bytes), cov ${cov:-?}"
	if [ $rc -ne 0 ]; then
		grep -aE '^==[0-9]+==|SUMMARY|runtime error|Test unit written|ALARM|out-of-memory' "$log" | head -n 20
		repro=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -n 1)
		echo "$name: exit $rc, reproducer ${repro:-none written} (log: $log)" > "$work/verdict"
	fi
}

jobs=${FUZZ_JOBS:-$(nproc)}
for bin in "$@"; do
	while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
		wait -n
	done
	run_one "$bin" &
done
wait
for bin in "$@"; do
	name=$(basename "$bin")
	v=$top/build/fuzz/work/${name#fuzz_}/verdict
	if [ ! -f "$v" ]; then
		failed+=("${name#fuzz_}: no verdict")
	elif [ -s "$v" ]; then
		failed+=("$(cat "$v")")
	fi
done

for f in "${failed[@]}"; do
	echo "tools/fuzz.sh: FAILED: $f" >&2
done
echo "fuzz: $(( $# - ${#failed[@]} )) targets clean, ${#failed[@]} failed"
[ ${#failed[@]} -eq 0 ]
