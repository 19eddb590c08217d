#!/usr/bin/env bash
# make bench-cluster: what the router costs, and what moves cost.  A warm exec of `true` in one
# room, p50 over N sequential requests on one keep-alive connection, through
# HAProxy (127.0.0.1:PORT) and straight to the room's host's nginx
# (10.77.0.N:80, the same bridge HAProxy reaches it over), against the
# reference: through HAProxy at most 0.3 ms above straight.
#
# The cluster is tools/run-cluster.sh's (3 hosts), in a fresh folder under
# /tmp, stopped at the end.  The two paths are measured in turn, twice each
# (router, host, router, host), and each figure is the mean of its two p50s,
# so a drift of the machine's load during the run falls on both alike.
# The client is make bench's (tools/bench/httpbench.c).
#
# Then the moves (tools/bench/cluster_moves.py, on the same cluster): a
# room of BENCH_MOVE_MIB (256) MiB moved, its time scaled to a GiB, and the
# longest a client appending every 50 ms through the router waited between
# two 200s; a drain of a host with BENCH_DRAIN_ROOMS (8) rooms under such a
# client, its time and the answers that were neither 200 nor 503 +
# Retry-After; the first exec of a new room (its placement claim in etcd
# and its start), p50 over BENCH_FIRST_N (20).  Another cluster on the
# machine is waited for (CLUSTER_LOCK_WAIT, 1800 s).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
me="make bench-cluster"
N=${BENCH_CLUSTER_N:-2000}
CLUSTER_LOCK_WAIT=${CLUSTER_LOCK_WAIT:-1800}
die() { echo "$me: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "needs root (make run-cluster does)"

tmp=$(mktemp -d /tmp/rbx-bench-cluster.XXXXXX)
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
cl_pid=
cleanup() {
	if [ -n "$cl_pid" ]; then
		kill -TERM "$cl_pid" 2>/dev/null || true
		wait "$cl_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

mkdir -p "$tmp/bin" "$tmp/cluster"
cc -O2 -Wall -Wextra -pthread -o "$tmp/bin/httpbench" "$repo/tools/bench/httpbench.c" ||
	die "could not build tools/bench/httpbench.c"

CLUSTER_LOCK_WAIT=$CLUSTER_LOCK_WAIT CLUSTER_RUN_DIR=$tmp/cluster PORT=$port HOSTS=3 "$repo/tools/run-cluster.sh" \
	> "$tmp/run-cluster.out" 2>&1 &
cl_pid=$!
# 90 s to start, after the wait for another cluster if run-cluster says it waits
limit=900
for ((i = 0; i < limit; i++)); do
	grep -q "Press Ctrl-C" "$tmp/run-cluster.out" && break
	kill -0 "$cl_pid" 2>/dev/null || { cat "$tmp/run-cluster.out" >&2; die "run-cluster exited"; }
	if [ "$limit" -eq 900 ] && grep -q "waiting for another cluster" "$tmp/run-cluster.out"; then
		echo "$me: waiting for another cluster on this machine to stop (up to $CLUSTER_LOCK_WAIT s)"
		limit=$((900 + CLUSTER_LOCK_WAIT * 10))
	fi
	sleep 0.1
done
grep -q "Press Ctrl-C" "$tmp/run-cluster.out" || die "the cluster did not start in time"

tokens=$tmp/cluster/tokens
room=bc$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')
path=/api/rooms/$room/sandbox/exec
body='{"cmd":"true"}'
hb() { "$tmp/bin/httpbench" -T "$tokens" -m POST -b "$body" -k '"exitCode":0' "$@" "$path"; }
kv() { sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" <<<"$1"; }

echo "first exec (creates room $room through the router): $(hb -P "$port" -n 1)"
# The room's host: its answers say (X-Roombox-Host).
owner=$(curl -sS -o /dev/null -D - -H "Authorization: Bearer $(head -n1 "$tokens")" -d "$body" \
	"http://127.0.0.1:$port$path" | tr -d '\r' | awk 'tolower($1) == "x-roombox-host:" { print $2 }')
[ -n "$owner" ] || die "could not tell which host has room $room"
addr=10.77.0.${owner#h}
"$repo/build/roomboxctl" -c "$tmp/cluster/h1/roombox.conf" -e "$(cat "$tmp/cluster/etcd-endpoints")" \
	-a "$tmp/cluster/haproxy/admin.sock" route-sync > /dev/null 2>&1 || true
echo "room $room is on $owner ($addr); N=$N per measurement after 100 unmeasured, router and host in turn"

r1=$(hb -P "$port" -n "$N" -w 100)
echo "router: $r1"
h1=$(hb -P 80 -A "$addr" -n "$N" -w 100)
echo "host:   $h1"
r2=$(hb -P "$port" -n "$N" -w 100)
echo "router: $r2"
h2=$(hb -P 80 -A "$addr" -n "$N" -w 100)
echo "host:   $h2"
for l in "$r1" "$h1" "$r2" "$h2"; do
	[ "$(kv "$l" bad)" = 0 ] || die "answers that were not 200 with exitCode 0: $l"
done

router=$(awk -v a="$(kv "$r1" p50_ms)" -v b="$(kv "$r2" p50_ms)" 'BEGIN { printf "%.3f", (a + b) / 2 }')
host=$(awk -v a="$(kv "$h1" p50_ms)" -v b="$(kv "$h2" p50_ms)" 'BEGIN { printf "%.3f", (a + b) / 2 }')
over=$(awk -v r="$router" -v h="$host" 'BEGIN { printf "%.3f", r - h }')
verdict=$(awk -v o="$over" 'BEGIN { print (o <= 0.3 ? "MET" : "MISSED") }')
echo
printf '%-46s %-24s %-10s %s\n' "figure" "reference" "measured" "verdict"
printf '%-46s %-24s %-10s %s\n' "cluster: warm exec p50, router vs host" "router <= host + 0.3 ms" \
	"+$over ms" "$verdict"
echo "  (router $router ms, host $host ms: means of two p50s each)"

echo
echo "moves (tools/bench/cluster_moves.py; BENCH_MOVE_MIB, BENCH_DRAIN_ROOMS, BENCH_FIRST_N):"
/usr/bin/python3 "$repo/tools/bench/cluster_moves.py" "$port" "$tmp/cluster" "$repo/build/roomboxctl" ||
	die "the moves' figures failed (above)"
