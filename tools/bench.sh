#!/usr/bin/env bash
# make bench: the speed figures, each beside its reference measured in the
# same run.
#
# A benchmark, not a test: it exits 0 whether targets are met or missed, and
# non-zero only when it could not run at all (not root, a tool missing, the
# stack would not start).  It starts its own stack, like tools/run.sh does
# (nginx -> roombox-fcgi -> roombox-helper, copies of build/), in a fresh
# /tmp/rbx-bench.* folder with its own configuration (max_rooms 1024,
# workers 32, max_concurrent_execs 64, idle_timeout 0), token, state, uid
# range and port; destroys every room it made through the API, checks that
# nothing of them is left, stops the stack and removes the folder -- also
# on Ctrl-C.  BENCH_KEEP_TMP=1 keeps the folder (logs, configuration).
#
# Helper programs (built into the temp folder with cc): tools/bench/
#   spawnbench.c  bare fork+execve / posix_spawn latency and 16-loop throughput
#   httpbench.c   keep-alive HTTP/1.1 client: client-side wall time per request
#   exec16.lua    wrk script: 16 connections, each bound to its own room
#   pageserver.c  one-thread epoll web server (1 KiB page): in a room behind a
#                 preview URL and on the host behind nginx (figure 11)
#   sselat.py     streamed-output latency client (figure 10)
#   termecho.py   terminal keystroke-to-echo client (figure 16)
#
# Figures 12-14 run on a second stack (network = egress, own state, socket,
# port, uid range) started by the same start_stack, against a test host of
# the run's own: a network namespace on a veth pair, 203.0.113.110 routed
# to it.  Every packet stays on this machine; the namespace, veth and route
# go at the end (also on Ctrl-C), ip_forward is put back as it was.
#
# Knobs (environment): BENCH_ROOMS (1000) rooms running for the last figure,
# BENCH_MEM_ROOMS (100), BENCH_CREATE_WORKERS (4), BENCH_WRK_SECONDS (10),
# PORT (a free one); BENCH_ONLY (the figures to measure, see below) and
# BENCH_SCALE_ROOMS (10000) for make bench-scale (BENCH_ONLY=scale,
# tools/bench-scale.sh).
set -uo pipefail
# Every request of the bench goes to this machine: no proxy of the caller's.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY

# Everything in one compound command: bash parses it all before running, so
# editing (or git-stashing) this file during a run cannot break the run.
{
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
me="make bench"
die() { echo "$me: $*" >&2; exit 1; }
# shellcheck source=tools/stack.sh
. "$repo/tools/stack.sh"
say() { echo "$me: $*" >&2; }

N_ROOMS=${BENCH_ROOMS:-1000}
early_n=0 early_fail=0   # rooms of the first stack deleted before figure 14
N_MEM=${BENCH_MEM_ROOMS:-100}
CREATE_WORKERS=${BENCH_CREATE_WORKERS:-4}
WRK_SECONDS=${BENCH_WRK_SECONDS:-10}
SCALE_ROOMS=${BENCH_SCALE_ROOMS:-10000}

# BENCH_ONLY: the figures to measure, by number, separated by commas or
# spaces (e.g. "9,11"), or "scale" for make bench-scale; empty: every
# figure 1-17 (not scale).  A figure brings the ones it is judged against:
# 4 brings 1 (bare fork+exec), 5 brings 2, 6 brings 3, 8 brings 4; 12, 13
# and 14 share the egress stack and run together.  The cleanup and its
# checks always run.
only=" $(tr ', ' '  ' <<<"${BENCH_ONLY:-}") "
for w in $only; do
	case $w in [1-9]|1[0-7]|scale) ;; *) die "BENCH_ONLY: '$w' is not a figure (1-17) or scale" ;; esac
done
case $only in *" 8 "*) only="$only 4 " ;; esac
case $only in *" 4 "*) only="$only 1 " ;; esac
case $only in *" 5 "*) only="$only 2 " ;; esac
case $only in *" 6 "*) only="$only 3 " ;; esac
case $only in *" 13 "*|*" 14 "*) only="$only 12 " ;; esac
[ -n "${only// /}" ] || only=" 1 2 3 4 5 6 7 8 9 10 11 12 15 16 17 "
# want FIGURE: whether FIGURE's section runs.
want() { [[ $only == *" $1 "* ]]; }

# ---------------------------------------------------------------- can we run

[ "$(id -u)" -eq 0 ] ||
	die "needs root: rooms are namespace jails set up by the setuid helper (sudo make bench)"
for b in roombox-fcgi roombox-helper roombox-keeper; do
	[ -x "$repo/build/$b" ] || die "build/$b is missing: run make first"
done
for t in nginx wrk bwrap cc curl python3 ip nft sha256sum; do
	command -v "$t" >/dev/null || die "$t is not installed (tools/deps.sh installs it)"
done
nginx -V 2>&1 | grep -q 'http_dav_module' ||
	die "nginx has no dav module (figure 9's reference: nginx storing a request body); Debian's nginx has it"
for n in "$N_ROOMS" "$N_MEM" "$CREATE_WORKERS" "$WRK_SECONDS" "$SCALE_ROOMS"; do
	case $n in ''|*[!0-9]*|0) die "BENCH_* knobs must be positive integers" ;; esac
done
! want 8 || [ "$N_ROOMS" -ge $((1 + 16 + 30 + N_MEM)) ] ||
	die "BENCH_ROOMS must be at least $((1 + 16 + 30 + N_MEM))"
# Each room owns 65536 host ids, all below 2^32.
! want scale || [ "$SCALE_ROOMS" -le 60000 ] || die "BENCH_SCALE_ROOMS must be at most 60000"

# ---------------------------------------------------------------- temp folder, cleanup

tmp=$(mktemp -d /tmp/rbx-bench.XXXXXX) || die "mktemp failed"
chmod 0755 "$tmp"
mkdir -p "$tmp/bin" "$tmp/out" "$tmp/ref/tmp" "$tmp/ref/dav"
# The first stack (network = none) lives in $tmp itself, the egress stack
# (figures 12-14) in $tmp/eg: each has its roombox.conf, tokens, state/,
# run/ (fcgi.sock) and nginx/ there.
conf=$tmp/roombox.conf
tokens=$tmp/tokens
socket=$tmp/run/fcgi.sock
eg=$tmp/eg
# The stacks run copies of build/roombox-{fcgi,helper,keeper} taken now (the
# keeper must sit beside the helper), so a rebuild during the run changes
# nothing.
helper=$tmp/bin/roombox-helper
# Room ids: unique to this run (room cgroups are named roombox/<id> host-wide).
prefix=bx$(od -An -N3 -tx1 /dev/urandom | tr -d ' \n')-

fcgi_pid= nginx_pid= cleaned= stack_up=
# Values the summary of one figure takes from another's section (n/a when
# BENCH_ONLY left that section out).
bare_p50=n/a bare_p50_after=n/a tput_after=n/a warm_p50=n/a bw_p50=n/a fresh_p50=n/a running=0 have=0 mem_drop_k=n/a
eg_fcgi_pid= eg_nginx_pid= eg_up= eg_port=
xd=$tmp/xfs x_fcgi_pid= x_nginx_pid= x_up= x_port= x_mounted=
xp_ms=n/a xp_ref=n/a im_ms=n/a im_ref=n/a xp_mb=n/a xs_ms=n/a ims_ref=n/a
sn_frozen=n/a sn_req=n/a sn_fork=n/a sn_cp=n/a sn_cps=n/a sn_copy=n/a
sx_frozen=n/a sx_req=n/a sx_fork=n/a sx_cp=n/a sx_cps=n/a sx_copy=n/a
page_pid= th_nginx_pid= th_ns= th_if= forward_before=

stop_stack() {
	# shellcheck disable=SC2086  # empty when not started
	stop_pids 200 $nginx_pid $fcgi_pid
	nginx_pid= fcgi_pid= stack_up=
}
stop_eg_stack() {
	# shellcheck disable=SC2086
	stop_pids 200 $eg_nginx_pid $eg_fcgi_pid
	eg_nginx_pid= eg_fcgi_pid= eg_up=
}

# Figure 15's second stack, its state_dir on an XFS (reflink=1) made on a
# loop file of the run's own.
stop_xfs_stack() {
	# shellcheck disable=SC2086
	stop_pids 200 $x_nginx_pid $x_fcgi_pid
	x_nginx_pid= x_fcgi_pid= x_up=
}
xfs_unmount() {
	[ -z "$x_mounted" ] || umount "$xd" 2>/dev/null || umount -l "$xd" 2>/dev/null
	x_mounted=
}

# rooms_left DIR: rooms of the stack in DIR whose state is still on disk.
rooms_left() {
	local d
	for d in "$1/state/rooms"/*/; do
		[ -d "$d" ] && basename "$d"
	done
}

# state_hash STATE_DIR: what names an instance on the host (its cgroup
# folder roombox-<hash>, sandbox-helper/cgroup.c; its nft table and room
# interfaces, net.c): FNV-1a (32 bits) of its state_dir, in hex.
state_hash() {
	python3 -c 'import sys
h = 2166136261
for c in sys.argv[1].encode(): h = ((h ^ c) * 16777619) & 0xffffffff
print("%08x" % h)' "$1"
}

# cgroup_groups DIR: the cgroup folders of the stack in DIR, one for each
# hierarchy (one on cgroup v2, one per controller on v1).
cgroup_groups() {
	local g d
	g=roombox-$(state_hash "$1/state")
	for d in "/sys/fs/cgroup/$g" /sys/fs/cgroup/*/"$g"; do
		[ -d "$d" ] && echo "$d"
	done
}

# all_rooms_left DIR: every room of the stack in DIR that anything is left
# of on the host: its state folder, its run folder or a cgroup.  A destroy
# removes a room's files even when its cgroup will not go yet (processes
# still on their way out), so after a DELETE that failed or timed out the
# cgroup can be all there is left of a room: thousands of empty cgroups
# after a bench-scale run slow every room start on the host.
all_rooms_left() {
	local d g
	{
		rooms_left "$1"
		for d in "$1/run/rooms"/*/; do
			[ -d "$d" ] && basename "$d"
		done
		while read -r g; do
			for d in "$g"/*/; do
				[ -d "$d" ] && basename "$d"
			done
		done < <(cgroup_groups "$1")
	} | sort -u
}

# cgroup_sweep DIR: rmdir what is left below the stack's cgroup folders,
# deepest first (a cgroup goes only once it is empty), then the folders;
# prints how many room cgroups it removed.
cgroup_sweep() {
	local g d n=0
	while read -r g; do
		while read -r d; do
			rmdir "$d" 2>/dev/null && n=$((n + 1))
		done < <(find "$g" -mindepth 1 -depth -type d 2>/dev/null)
		rmdir "$g" 2>/dev/null
	done < <(cgroup_groups "$1")
	echo "$n"
}

# destroy_left DIR PORT UP: destroy what is left of a stack's rooms with its
# API if it is UP (helper_destroy_left then deals with what that leaves).
destroy_left() {
	local dir=$1 p=$2 up=$3
	[ -n "$up" ] && [ -n "$(rooms_left "$dir" | head -n1)" ] || return 0
	say "destroying the rooms left over in $dir through its API"
	rooms_left "$dir" | xargs -r -P 8 -I{} curl -s --max-time 120 -o /dev/null -X DELETE \
		-H "Authorization: Bearer $(head -n1 "$dir/tokens")" \
		"http://127.0.0.1:$p/api/rooms/{}"
}
# helper_destroy_left DIR: with the stack stopped, destroy with its helper
# directly every room anything is left of (all_rooms_left: a destroy also
# removes the cgroup of a room whose files are gone), in up to three rounds
# (a room whose processes are still ending keeps its cgroup for a moment),
# then remove the cgroups still there; says what it did.
helper_destroy_left() {
	local dir=$1 n round swept
	[ -s "$dir/roombox.conf" ] || return 0
	n=$(all_rooms_left "$dir" | wc -l)
	if [ "$n" -gt 0 ]; then
		say "destroying the $n rooms left over in $dir with its helper"
		timeout 300 "$helper" -c "$dir/roombox.conf" stop-all >/dev/null 2>&1 </dev/null
		for round in 1 2 3; do
			# (no </dev/null here: that would be xargs' input, not the
			# helper's; xargs gives the helper /dev/null itself)
			all_rooms_left "$dir" | xargs -r -P 8 -I{} \
				timeout 60 "$helper" -c "$dir/roombox.conf" destroy {} \
				>>"$dir/cleanup.log" 2>&1
			n=$(all_rooms_left "$dir" | wc -l)
			[ "$n" -gt 0 ] || break
			say "round $round: $n rooms still have something left (the helper's errors: $dir/cleanup.log)"
			sleep 2
		done
	fi
	swept=$(cgroup_sweep "$dir")
	[ "$swept" -eq 0 ] || say "removed $swept cgroups the helper's destroys left in $dir's cgroup folders"
	n=$(all_rooms_left "$dir" | wc -l)
	[ "$n" -eq 0 ] || say "$n rooms of $dir could not be removed: $(all_rooms_left "$dir" | head -n5 | tr '\n' ' ')"
}

# The egress figures' test host: a network namespace with nginx, joined by
# a veth pair, reached through a host route of its own.  Removes all of it
# and puts ip_forward back as it was (the helper turns it on).
stop_testhost() {
	# shellcheck disable=SC2086
	[ -z "$th_nginx_pid" ] || stop_pids 100 $th_nginx_pid
	th_nginx_pid=
	[ -z "$th_ns" ] || ip netns del "$th_ns" 2>/dev/null
	[ -z "$th_if" ] || ! ip link show "$th_if" >/dev/null 2>&1 || ip link del "$th_if" 2>/dev/null
	[ -z "$forward_before" ] || echo "$forward_before" > /proc/sys/net/ipv4/ip_forward
	th_ns= th_if= forward_before=
}

cleanup() {
	[ -z "$cleaned" ] || return 0
	cleaned=1
	trap '' INT TERM
	# Normally every room is gone by now (the cleanup sections delete them
	# through the API); after an interruption destroy what is left, with
	# the API if it is up, else with the helper directly.
	destroy_left "$tmp" "${port:-}" "$stack_up"
	destroy_left "$eg" "$eg_port" "$eg_up"
	destroy_left "$xd" "$x_port" "$x_up"
	stop_stack
	stop_eg_stack
	stop_xfs_stack
	# shellcheck disable=SC2086
	[ -z "$page_pid" ] || stop_pids 100 $page_pid
	helper_destroy_left "$tmp"
	helper_destroy_left "$eg"
	helper_destroy_left "$xd"
	xfs_unmount
	stop_testhost
	if [ -n "${BENCH_KEEP_TMP:-}" ]; then
		say "kept $tmp"
	elif [ -n "$(all_rooms_left "$tmp" | head -n1)$(all_rooms_left "$eg" | head -n1)" ]; then
		say "rooms could not be destroyed; keeping $tmp for inspection"
	else
		rm -rf "$tmp"
	fi
}
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap cleanup EXIT

# ---------------------------------------------------------------- helpers

# kv "<line of k=v pairs>" key
kv() { sed -n "s/.*\\b$2=\\([^ ]*\\).*/\\1/p" <<<"$1"; }
# calc "<awk expression>"  (empty or non-numeric inputs give "n/a")
calc() { awk "BEGIN { printf \"%s\", ($1) }" 2>/dev/null; }
num() { case ${1:-} in ''|n/a|*[!0-9.e+-]*) return 1 ;; esac; }
ratio() { if num "$1" && num "$2" && [ "$(calc "$2 != 0")" = 1 ]; then calc "sprintf(\"%.3f\", $1 / $2)"; else echo n/a; fi; }
# verdict <ok-expression using values>  -> MET / MISSED / n/a
verdict() {
	local e=$1; shift
	local v
	for v in "$@"; do num "$v" || { echo n/a; return; }; done
	[ "$(calc "$e")" = 1 ] && echo MET || echo MISSED
}
f2() { num "${1:-}" && calc "sprintf(\"%.2f\", $1)" || echo n/a; }
f0() { num "${1:-}" && calc "sprintf(\"%.0f\", $1)" || echo n/a; }

section() { printf '\n== %s  [%d s into the run]\n' "$*" "$SECONDS"; }

# Wait (at most 30 s) until the CPUs have been at least 95 % idle for two
# half-second samples in a row, so that a figure is not measured while the
# kernel still cleans up after the previous one (bwrap's network namespaces
# are torn down by a workqueue long after bwrap exits; destroyed rooms free
# their mounts and loop devices in the background).
idle_sample() { awk '/^cpu / { print $5 + $6, $2 + $3 + $4 + $5 + $6 + $7 + $8 + $9 }' /proc/stat; }
settle() {
	local t0=$SECONDS quiet=0 a b
	while [ $((SECONDS - t0)) -lt 30 ] && [ "$quiet" -lt 2 ]; do
		a=$(idle_sample); sleep 0.5; b=$(idle_sample)
		if [ "$(awk -v a="$a" -v b="$b" 'BEGIN { split(a, x, " "); split(b, y, " ");
			print (y[2] > x[2] && (y[1] - x[1]) / (y[2] - x[2]) >= 0.95) }')" = 1 ]; then
			quiet=$((quiet + 1))
		else
			quiet=0
		fi
	done
	echo "(settled: $((SECONDS - t0)) s until the CPUs were idle$([ "$quiet" -ge 2 ] || echo ' -- gave up, measuring anyway'))"
}

hb() { "$tmp/bin/httpbench" -P "$port" -T "$tokens" "$@"; }
exec_body='{"cmd":"true"}'
exec_path() { echo "/api/rooms/$prefix$1/sandbox/exec"; }

# "<pid>" of a room's keeper, from the helper's record, if alive.
keeper_of() {
	local rec pid
	rec=$(cat "$tmp/run/rooms/$1/keeper" 2>/dev/null) || return 1
	pid=${rec%% *}
	[ -n "$pid" ] && [ -d "/proc/$pid" ] && echo "$pid"
}
running_rooms() {
	local n=0 d
	for d in "$tmp/run/rooms"/*/; do
		keeper_of "$(basename "$d")" >/dev/null && n=$((n + 1))
	done
	echo "$n"
}
mem_available_kib() { awk '/^MemAvailable:/ { print $2 }' /proc/meminfo; }
# The room's memory cgroup usage in bytes (v1 or v2), empty if none.
cgroup_mem() {
	local f
	for f in /sys/fs/cgroup/memory/roombox*/$1/memory.usage_in_bytes \
		 /sys/fs/cgroup/roombox*/$1/memory.current \
		 /sys/fs/cgroup/unified/roombox*/$1/memory.current; do
		[ -r "$f" ] && { cat "$f"; return; }
	done
}

# delete_all DIR PORT NAME: DELETE every room of the stack in DIR through
# its API, 8 at a time (statuses in out/NAME.txt); sets n_left, del (the
# statuses counted) and del_fail.  A DELETE not answered within 5 minutes
# counts as failed (000): the cleanup's helper_destroy_left takes its room.
delete_all() {
	local dir=$1 p=$2 out=$tmp/out/$3.txt t0
	rooms_left "$dir" > "$tmp/rooms.txt"
	n_left=$(wc -l < "$tmp/rooms.txt")
	t0=$(date +%s.%N)
	del=$(xargs -a "$tmp/rooms.txt" -P 8 -n 64 sh -c '
		for r in "$@"; do
			code=$(curl -s --max-time 300 -o /dev/null -w "%{http_code}" -X DELETE \
				-H "Authorization: Bearer $(head -n1 "'"$dir/tokens"'")" \
				"http://127.0.0.1:'"$p"'/api/rooms/$r")
			echo "$code $r"
		done' _ | tee "$out" | awk '{ n[$1]++ } END { for (c in n) printf "%s=%d ", c, n[c] }')
	echo "DELETE of $n_left rooms took $(calc "sprintf(\"%.1f\", $(date +%s.%N) - $t0)") s; statuses: $del"
	grep -v '^200 ' "$out" | head -n5 | sed 's/^/  not 200: /'
	del_fail=$(grep -vc '^200 ' "$out")
}

# ---------------------------------------------------------------- build the helper programs

say "building tools/bench/*.c into $tmp/bin, copying build/roombox-* there"
for b in roombox-fcgi roombox-helper roombox-keeper; do
	cp "$repo/build/$b" "$tmp/bin/$b" && chmod 0755 "$tmp/bin/$b" || die "could not copy build/$b"
done
cc -O2 -Wall -Wextra -o "$tmp/bin/spawnbench" "$repo/tools/bench/spawnbench.c" ||
	die "could not build tools/bench/spawnbench.c"
cc -O2 -Wall -Wextra -pthread -o "$tmp/bin/httpbench" "$repo/tools/bench/httpbench.c" ||
	die "could not build tools/bench/httpbench.c"
cc -O2 -Wall -Wextra -o "$tmp/bin/pageserver" "$repo/tools/bench/pageserver.c" ||
	die "could not build tools/bench/pageserver.c"

# ---------------------------------------------------------------- the stacks

free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
if [ -n "${PORT:-}" ]; then
	port=$PORT
else
	port=$(free_port)
fi
case $port in ''|*[!0-9]*) die "PORT must be a number, not '$port'" ;; esac

# free_uid_base FIRST SPAN END: a uid range of SPAN rooms (65536 host ids
# each) that no process uses, at FIRST + k x its size for a random k < 16,
# ending by END.  Each stack of the run has a region of its own (the bench
# stack below 1.2e9, the XFS one below 1.5e9, the egress one up to the 2^31
# host ids a configuration may give rooms, uid_base + max_rooms x 65536):
# a range picked at random in one region can then never hold another
# stack's rooms, which would leave that stack no free range.
free_uid_base() {
	local first=$1 n=$(($2 * 65536)) end=$3 b
	for _ in $(seq 200); do
		b=$((first + (RANDOM % 16) * n))
		[ $((b + n)) -le "$end" ] || continue
		if ! ps -eo uid=,gid= | awk -v lo="$b" -v hi=$((b + n)) \
			'($1 >= lo && $1 < hi) || ($2 >= lo && $2 < hi) { f = 1 } END { exit !f }'; then
			echo "$b"
			return 0
		fi
	done
	return 1
}

# start_stack DIR PORT UID_BASE SPAN EXTRA_CONF EXTRA_NGINX: write DIR's
# roombox.conf (the keys every bench stack has, then EXTRA_CONF's lines) and
# a token, make DIR/nginx/nginx.conf from nginx.conf.example (EXTRA_NGINX's
# server blocks added at the end of its http block), start roombox-fcgi and
# nginx and wait for /api/health.  Sets started_fcgi, started_nginx and
# health; dies when the stack does not come up.
start_stack() {
	local dir=$1 p=$2 base=$3 span=$4 extra=$5 extra_nginx=$6
	local sock=$dir/run/fcgi.sock
	mkdir -p "$dir/nginx/tmp" "$dir/run"
	chmod 0711 "$dir/run"
	printf '%s\n' "# Generated by tools/bench.sh for make bench." \
		"state_dir = $dir/state" "run_dir = $dir/run" "socket = $sock" \
		"tokens_file = $dir/tokens" "helper = $helper" "uid_base = $base" \
		"max_rooms = $span" "workers = 32" "max_concurrent_execs = 64" \
		"idle_timeout = 0" "$extra" \
		"# 1000 rooms of 1G images written little: more than the disk has free" \
		"disk_overcommit = 1000" > "$dir/roombox.conf"
	chmod 0644 "$dir/roombox.conf"
	(umask 077; od -An -N24 -tx1 /dev/urandom | tr -d ' \n' > "$dir/tokens"; echo >> "$dir/tokens")
	{ nginx_conf_from_example "$repo" "$p" "$sock" "$dir/nginx" | sed '$d' &&
	  printf '%s\n}\n' "$extra_nginx"; } > "$dir/nginx/nginx.conf" ||
		die "could not make $dir/nginx/nginx.conf from nginx.conf.example (see above)"
	local ngx=(nginx -e "$dir/nginx/error.log" -c "$dir/nginx/nginx.conf")
	"${ngx[@]}" -t -q || die "nginx rejects $dir/nginx/nginx.conf"

	"$tmp/bin/roombox-fcgi" -c "$dir/roombox.conf" < /dev/null > "$dir/fcgi.log" 2>&1 &
	started_fcgi=$!
	for _ in $(seq 200); do
		[ -S "$sock" ] && break
		kill -0 "$started_fcgi" 2>/dev/null || die "roombox-fcgi exited during start-up: $(tail -n5 "$dir/fcgi.log")"
		sleep 0.05
	done
	[ -S "$sock" ] || die "roombox-fcgi did not create $sock within 10 s"
	"${ngx[@]}" -g 'daemon off;' < /dev/null > "$dir/nginx/out.log" 2>&1 &
	started_nginx=$!
	health=
	for _ in $(seq 200); do
		health=$(curl -fsS --max-time 1 "http://127.0.0.1:$p/api/health" 2>/dev/null) && break
		health=
		kill -0 "$started_fcgi" 2>/dev/null || die "roombox-fcgi exited during start-up: $(tail -n5 "$dir/fcgi.log")"
		kill -0 "$started_nginx" 2>/dev/null || die "nginx exited during start-up: $(tail -n5 "$dir/nginx/error.log")"
		sleep 0.05
	done
	[ -n "$health" ] || die "no answer from http://127.0.0.1:$p/api/health within 10 s"
}

# The first stack's nginx also serves the references of figures 9 and 11,
# on a port of their own: nginx's own PUT (the dav module: the body into a
# temporary file, renamed into place) and static GET of the same bytes, and
# a location proxying straight to the page server on the host, with the
# preview location's own settings, and "Connection: close" to the server
# (a new connection per request: how nginx proxies unless told to keep
# them).  The relay keeps its connections into the room; for context only,
# a second location proxies to the same server with nginx keeping its
# connections too (an upstream with keepalive), so a reader sees both.
ref_port=$(free_port)
page_port=$(free_port)
ref_nginx="    upstream bench_page_keep {
        server 127.0.0.1:$page_port;
        keepalive 32;
    }
    server {
        listen 127.0.0.1:$ref_port;
        location /dav/ {
            root $tmp/ref;
            sendfile on;
            client_body_temp_path $tmp/ref/tmp;
            dav_methods PUT DELETE;
            client_max_body_size 0;
        }
        location /proxy/ {
            proxy_pass http://127.0.0.1:$page_port/;
            proxy_http_version 1.1;
            proxy_set_header Host       \$http_host;
            proxy_set_header Upgrade    \$http_upgrade;
            proxy_set_header Connection close;
            proxy_buffering         off;
            proxy_request_buffering off;
            client_max_body_size    0;
            proxy_read_timeout      1h;
            proxy_send_timeout      1h;
        }
        location /proxykeep/ {
            proxy_pass http://bench_page_keep/;
            proxy_http_version 1.1;
            proxy_set_header Host       \$http_host;
            proxy_set_header Connection \"\";
            proxy_buffering         off;
            proxy_request_buffering off;
            client_max_body_size    0;
            proxy_read_timeout      1h;
            proxy_send_timeout      1h;
        }
    }"

# A uid range no process uses: each room owns 65536 host ids (the tests use
# 70000000 to 300000000, make run 200000 to 65736000).
span=1024
# make bench-scale: room for its rooms and the one measured beside them.
! want scale || [ $((SCALE_ROOMS + 8)) -le "$span" ] || span=$((SCALE_ROOMS + 8))
ids=$((span * 65536))
uid_base=$(free_uid_base 300000000 "$span" 1200000000) || die "no free uid range for the bench stack"
start_stack "$tmp" "$port" "$uid_base" "$span" "" "$ref_nginx"
fcgi_pid=$started_fcgi nginx_pid=$started_nginx stack_up=1

t_start=$(date +%s)
echo "roombox bench -- $(date -u +%Y-%m-%dT%H:%M:%SZ), $(uname -r), $(nproc) CPUs, $(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM"
echo "stack: nginx 127.0.0.1:$port -> roombox-fcgi -> roombox-helper (copies of build/ taken at start, git $(git -C "$repo" describe --always --dirty 2>/dev/null || echo '?')); $tmp"
echo "health: $health"
echo "config: workers 32, max_concurrent_execs 64, max_rooms $span, idle_timeout 0, disk_overcommit 1000, uid_base $uid_base, other keys default"
echo "load before the run: $(cut -d' ' -f1-3 /proc/loadavg) (other work on this host skews every figure)"

if want 1; then
# ---------------------------------------------------------------- 1-3: bare references

section "1. bare fork+execve /bin/sh -c true + waitpid, sequential, N=1000 after 100 warm-up"
settle
bare=$("$tmp/bin/spawnbench" lat -f 1000 100 -- /bin/sh -c true)
echo "fork+execve:  $bare"
bare_spawn=$("$tmp/bin/spawnbench" lat -p 1000 100 -- /bin/sh -c true)
echo "posix_spawn:  $bare_spawn   (context only)"
bare_p50=$(kv "$bare" p50_ms) bare_p99=$(kv "$bare" p99_ms)
bare_p50_before=$bare_p50

fi
if want 2; then
section "2. bare spawn throughput: 16 processes each looping fork+execve sh -c true for 5 s"
settle
echo "(measured again right after figure 5; its reference is the mean of the two)"
tput=$("$tmp/bin/spawnbench" tput 16 5 -- /bin/sh -c true)
echo "$tput"
tput_s=$(kv "$tput" per_s)
tput_before=$tput_s

fi
if want 3; then
section "3. fresh bubblewrap jail running sh -c true, sequential, N=200 after 10 warm-up"
settle
bwrap_cmd=(/usr/bin/bwrap --unshare-all --die-with-parent --ro-bind /usr /usr
	--symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64
	--symlink usr/sbin /sbin --proc /proc --dev /dev sh -c true)
echo "${bwrap_cmd[*]}"
bw=$("$tmp/bin/spawnbench" lat -f 200 10 -- "${bwrap_cmd[@]}")
echo "$bw"
bw_p50=$(kv "$bw" p50_ms)
[ "$(kv "$bw" fail)" = 0 ] || say "bwrap failed $(kv "$bw" fail) times: the figure is not meaningful"

fi

if want 4; then
# ---------------------------------------------------------------- 4: warm exec, sequential

section "4. warm exec of true through nginx, one room, sequential, N=1000 on one keep-alive connection"
settle
echo "client: tools/bench/httpbench.c (C, HTTP/1.1 keep-alive, TCP_NODELAY); client-side wall time per request"
echo "first exec (creates room ${prefix}w):"
first=$(hb -m POST -b "$exec_body" -n 1 -k '"exitCode":0' "$(exec_path w)")
echo "  $first"
settle
warm=$(hb -m POST -b "$exec_body" -n 1000 -w 50 -k '"exitCode":0' "$(exec_path w)")
echo "warm: $warm"
warm_p50=$(kv "$warm" p50_ms) warm_p99=$(kv "$warm" p99_ms)
[ "$(kv "$warm" bad)" = 0 ] || say "figure 4: $(kv "$warm" bad) answers were not 200 with exitCode 0"
# The host drifts over minutes: figure 4's reference is the mean of the
# bare p50 taken before figure 1's section and this one, right after.
bare_after=$("$tmp/bin/spawnbench" lat -f 1000 100 -- /bin/sh -c true)
echo "bare fork+execve again, right after: $bare_after"
bare_p50_after=$(kv "$bare_after" p50_ms)
bare_p50=$(calc "($bare_p50_before + $bare_p50_after) / 2")
echo "figure 4's reference: bare p50 $bare_p50_before ms before, $bare_p50_after ms after, mean $bare_p50 ms"
echo "where the time goes (context only, not judged figures):"
hl=$(hb -m GET -n 1000 -w 50 /api/health)
echo "  GET /api/health through nginx (HTTP + FastCGI, no helper): $hl"
# the helper's own command line: the command's I/O is the helper's (/dev/null)
hx=$("$tmp/bin/spawnbench" lat -f -i /dev/null 300 20 -- "$helper" -c "$conf" exec "${prefix}w" true)
echo "  roombox-helper exec run directly (no HTTP, no fcgi):        $hx"
health_p50=$(kv "$hl" p50_ms) helper_p50=$(kv "$hx" p50_ms)

fi

if want 5; then
# ---------------------------------------------------------------- 5: throughput, 16 rooms

section "5. warm exec throughput: wrk -t16 -c16 -d${WRK_SECONDS}s, each connection bound to its own room"
echo "creating rooms ${prefix}t0..${prefix}t15 (first exec each, 4 at a time):"
echo "  $(hb -m POST -b "$exec_body" -n 16 -c 4 -k '"exitCode":0' "$(exec_path 't{i}')")"
settle
BENCH_TOKEN=$(head -n1 "$tokens") BENCH_ROOM_PREFIX=${prefix}t \
	wrk -t16 -c16 -d"${WRK_SECONDS}s" --latency --timeout 30s \
	-s "$repo/tools/bench/exec16.lua" "http://127.0.0.1:$port" > "$tmp/out/wrk.txt" 2>&1
sed 's/^/  /' "$tmp/out/wrk.txt"
wrk_rps=$(sed -n 's/^Requests\/sec:[[:space:]]*\([0-9.]*\).*/\1/p' "$tmp/out/wrk.txt")
wrk_non2xx=$(sed -n 's/^[[:space:]]*Non-2xx or 3xx responses:[[:space:]]*\([0-9]*\).*/\1/p' "$tmp/out/wrk.txt")
wrk_non2xx=${wrk_non2xx:-0}
wrk_errors=$(sed -n 's/^[[:space:]]*Socket errors:\(.*\)/\1/p' "$tmp/out/wrk.txt")
wrk_badbody=$(sed -n 's/^bad_body=\([0-9]*\)/\1/p' "$tmp/out/wrk.txt")
echo "non-2xx responses: $wrk_non2xx; 200s without exitCode 0: ${wrk_badbody:-?}${wrk_errors:+; socket errors:$wrk_errors}"
wrk_n=$(sed -n 's/^[[:space:]]*\([0-9]*\) requests in .*/\1/p' "$tmp/out/wrk.txt")
tput_again=$("$tmp/bin/spawnbench" tput 16 5 -- /bin/sh -c true)
echo "bare spawn throughput again, right after: $tput_again"
tput_after=$(kv "$tput_again" per_s)
tput_s=$(calc "($tput_before + $tput_after) / 2")
echo "figure 5's reference: $tput_before spawns/s before, $tput_after after, mean $tput_s"

fi

# fresh_rooms HB PATTERN [N]: once the CPUs are idle, the first exec in
# each of N (30) new rooms (PATTERN with {i}), one after another, through
# HB (hb or ehb: the stack); prints httpbench's line and keeps it in
# fresh_line.  Figures 6 and 14.
fresh_rooms() {
	settle
	fresh_line=$("$1" -m POST -b "$exec_body" -n "${3:-30}" -k '"exitCode":0' "$(exec_path "$2")")
	echo "$fresh_line"
}

if want 6; then
# ---------------------------------------------------------------- 6: first exec in a new room

section "6. first exec in a new room (jail created), 30 fresh rooms, sequential"
fresh_rooms hb 'f{i}'
fresh_p50=$(kv "$fresh_line" p50_ms)

fi

if want 7; then
# ---------------------------------------------------------------- 7: memory per idle room

section "7. memory per idle running room: $N_MEM new rooms, one exec each ($CREATE_WORKERS at a time)"
settle
sync
sleep 1
mem0=$(mem_available_kib)
run0=$(running_rooms)
memc=$(hb -m POST -b "$exec_body" -n "$N_MEM" -c "$CREATE_WORKERS" -k '"exitCode":0' "$(exec_path 'm{i}')")
echo "create: $memc"
sleep 1
mem1=$(mem_available_kib)
run1=$(running_rooms)
pss_sum=0 pss_n=0 cg_sum=0 cg_n=0
for i in $(seq 0 $((N_MEM - 1))); do
	r=${prefix}m$i
	if pid=$(keeper_of "$r"); then
		p=$(awk '/^Pss:/ { print $2 }' "/proc/$pid/smaps_rollup" 2>/dev/null)
		[ -n "$p" ] && { pss_sum=$((pss_sum + p)); pss_n=$((pss_n + 1)); }
	fi
	c=$(cgroup_mem "$r")
	[ -n "$c" ] && { cg_sum=$((cg_sum + c)); cg_n=$((cg_n + 1)); }
done
added=$((run1 - run0))
echo "running rooms: $run0 -> $run1"
mem_drop=n/a pss_avg=n/a cg_avg=n/a
[ "$added" -gt 0 ] && mem_drop=$(calc "($mem0 - $mem1) / $added")
[ "$pss_n" -gt 0 ] && pss_avg=$(calc "$pss_sum / $pss_n")
[ "$cg_n" -gt 0 ] && cg_avg=$(calc "$cg_sum / $cg_n / 1024")
echo "MemAvailable: $mem0 KiB -> $mem1 KiB: $(f0 "$mem_drop") KiB per room (as is: no cache drop; host-wide, so other work on the host shows up here)"
echo "keeper PSS (/proc/<pid>/smaps_rollup): $(f0 "$pss_avg") KiB per room average over $pss_n keepers"
echo "room cgroup memory usage (memory.usage_in_bytes or memory.current): $(f0 "$cg_avg") KiB per room average over $cg_n rooms"

fi

if want 8; then
# ---------------------------------------------------------------- 8: 1000 rooms

have=$(running_rooms)
more=$((N_ROOMS - have))
section "8. $N_ROOMS running rooms: $more more new rooms ($CREATE_WORKERS at a time), then warm exec in room ${prefix}w"
settle
t0=$(date +%s.%N)
sync
memk0=$(mem_available_kib)
if [ "$more" -gt 0 ]; then
	kc=$(hb -m POST -b "$exec_body" -n "$more" -c "$CREATE_WORKERS" -k '"exitCode":0' "$(exec_path 'k{i}')")
	echo "create: $kc"
fi
running=$(running_rooms)
echo "running rooms now: $running (creating took $(calc "sprintf(\"%.1f\", $(date +%s.%N) - $t0)") s)"
sleep 1
memk1=$(mem_available_kib)
mem_drop_k=n/a
[ "$((running - have))" -gt 0 ] && mem_drop_k=$(calc "($memk0 - $memk1) / ($running - have)")
echo "MemAvailable: $memk0 KiB -> $memk1 KiB: $(f0 "$mem_drop_k") KiB per room over these $((running - have)) rooms (context for figure 7)"
many=$(hb -m POST -b "$exec_body" -n 300 -w 20 -k '"exitCode":0' "$(exec_path w)")
echo "warm exec with $running rooms running, N=300: $many"
many_p50=$(kv "$many" p50_ms)
echo "GET /api/rooms with $running rooms: $(hb -m GET -n 1 /api/rooms)"

fi

# ---------------------------------------------------------------- 9: files up and down

# median < numbers, one a line: their median ("n/a" for none)
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%s", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2); else printf "n/a" }'; }
# xfer PUT|GET URL FILE [CURL-OPTION...]: "<status> <MB/s>" of one curl
# transfer (MB = 10^6 bytes, over curl's time_total); PUT sends FILE, GET
# writes into it.
xfer() {
	local m=$1 url=$2 f=$3
	shift 3
	local w='%{http_code} %{size_upload} %{size_download} %{time_total}' out
	if [ "$m" = PUT ]; then
		out=$(curl -s -o /dev/null -w "$w" -T "$f" "$@" "$url")
	else
		out=$(curl -s -o "$f" -w "$w" "$@" "$url")
	fi
	awk -v m="$m" '{ b = (m == "PUT" ? $2 : $3); printf "%s %.1f", $1, ($4 > 0 ? b / $4 / 1e6 : 0) }' <<<"$out"
}
# warm_put URL [CURL-OPTION...]: the same upload to URL, unmeasured, and
# its file deleted at once, so that the measured upload after it writes
# into pages freed a moment before.  On a VM that returns free memory to
# the hypervisor (virtio-balloon's free page reporting) the first touch of
# a page the guest gave back costs ~30 us (10 x a plain fault; this VM
# writes a new 64 MiB file at 100-160 MB/s into such pages and at ~5 GB/s
# into pages freed a moment ago).  An upload fills a file's worth of new
# pages: which side of a round got the warm ones decided the figure, not
# the path.  Each side warms its own way (the room's file pages, pipe and
# socket buffers are not nginx's: a file written and deleted on the host
# warmed nginx's upload only, anonymous memory neither).
warm_put() {
	local url=$1 put del
	shift
	put=$(curl -s -o /dev/null -w '%{http_code}' -T "$tmp/ref/src.bin" "$@" "$url")
	del=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$@" "$url")
	case "$put $del" in
	20[014]" "20[04]) ;;
	*) echo "warning: the warm-up upload to $url answered $put, its DELETE $del: this round is not warmed" ;;
	esac
}
# 64 MiB of random bytes: figure 9's file; four of them make figure 12's.
! want 9 && ! want 12 || head -c $((64 * 1048576)) /dev/urandom > "$tmp/ref/src.bin"
# cpu_ms PID...: CPU time (user + system, all threads) the processes used
# so far, in ms; with the children they reaped (roombox-fcgi's helpers).
cpu_ms() {
	local t p f=()
	for p in "$@"; do f+=("/proc/$p/stat"); done
	t=$(cat "${f[@]}" 2>/dev/null | awk '{ sub(/.*\) /, ""); s += $12 + $13 + $14 + $15 } END { print s + 0 }')
	calc "$t * 1000 / $(getconf CLK_TCK)"
}
# per_req NAME BEFORE AFTER: ms of CPU per request of wrk run NAME.
per_req() {
	local n
	n=$(sed -n 's/^[[:space:]]*\([0-9]*\) requests in .*/\1/p' "$tmp/out/$1.txt")
	num "$n" && [ "$n" -gt 0 ] && calc "sprintf(\"%.3f\", ($3 - $2) / $n)" || echo n/a
}
ngx_pids() { echo "$nginx_pid" $(pgrep -P "$nginx_pid"); }
auth=(-H "Authorization: Bearer $(head -n1 "$tokens")")
if want 9; then
FILE_REPS=5
section "9. upload then download of a 64 MiB file through nginx, $FILE_REPS rounds, median MB/s"
echo "measured: curl -T to PUT /api/rooms/${prefix}x/sandbox/files/big.bin, curl GET of it (room ${prefix}x, as root)"
echo "reference: the same nginx storing the same bytes as a request body (its dav module's PUT: the body into a"
echo "  temporary file, renamed into place, on the same file system as the rooms' state) and serving them as a static file (sendfile on)"
src_sha=$(sha256sum < "$tmp/ref/src.bin" | cut -d' ' -f1)
echo "first exec (creates room ${prefix}x): $(hb -m POST -b "$exec_body" -n 1 -k '"exitCode":0' "$(exec_path x)")"
files_url="http://127.0.0.1:$port/api/rooms/${prefix}x/sandbox/files/big.bin"
dav_url="http://127.0.0.1:$ref_port/dav/big.bin"
# CPU of nginx, roombox-fcgi (with the helpers it reaped) and the room's
# keeper (with the tools it reaped) over each transfer: what the path
# costs, which other work on the host does not skew as it skews MB/s.
kx=$(keeper_of "${prefix}x")
# shellcheck disable=SC2046,SC2086  # pids, one a word; none without a keeper
files_cpu() { cpu_ms $(ngx_pids) "$fcgi_pid" ${kx:-}; }
settle
: > "$tmp/out/files.txt"
: > "$tmp/out/files_cpu.txt"
for i in $(seq "$FILE_REPS"); do
	warm_put "$files_url.warm" "${auth[@]}"
	c0=$(files_cpu)
	u=$(xfer PUT "$files_url" "$tmp/ref/src.bin" "${auth[@]}")
	c1=$(files_cpu)
	warm_put "$dav_url.warm"
	c2a=$(files_cpu)
	ru=$(xfer PUT "$dav_url" "$tmp/ref/src.bin")
	c2=$(files_cpu)
	d=$(xfer GET "$files_url" /dev/null "${auth[@]}")
	c3=$(files_cpu)
	rd=$(xfer GET "$dav_url" /dev/null)
	c4=$(files_cpu)
	echo "round $i: upload $u, reference $ru; download $d, reference $rd (status MB/s)"
	echo "$u $ru $d $rd" >> "$tmp/out/files.txt"
	calc "sprintf(\"%.0f %.0f %.0f %.0f\n\", $c1 - $c0, $c2 - $c2a, $c3 - $c2, $c4 - $c3)" >> "$tmp/out/files_cpu.txt"
done
echo "CPU ms per 64 MiB (context; nginx + roombox-fcgi + the room's keeper and its tools, median):" \
	"upload $(awk '{ print $1 }' "$tmp/out/files_cpu.txt" | median), reference $(awk '{ print $2 }' "$tmp/out/files_cpu.txt" | median);" \
	"download $(awk '{ print $3 }' "$tmp/out/files_cpu.txt" | median), reference $(awk '{ print $4 }' "$tmp/out/files_cpu.txt" | median)"
up_mbs=$(awk '$1 ~ /^20[01]$/ { print $2 }' "$tmp/out/files.txt" | median)
upref_mbs=$(awk '$3 ~ /^20[14]$/ { print $4 }' "$tmp/out/files.txt" | median)
down_mbs=$(awk '$5 == 200 { print $6 }' "$tmp/out/files.txt" | median)
downref_mbs=$(awk '$7 == 200 { print $8 }' "$tmp/out/files.txt" | median)
files_bad=$(awk '$1 !~ /^20[01]$/ || $3 !~ /^20[14]$/ || $5 != 200 || $7 != 200' "$tmp/out/files.txt" | wc -l)
curl -s -o "$tmp/out/back.bin" "${auth[@]}" "$files_url"
back_sha=$(sha256sum < "$tmp/out/back.bin" | cut -d' ' -f1)
ref_sha=$(sha256sum < "$tmp/ref/dav/big.bin" | cut -d' ' -f1)
rm -f "$tmp/out/back.bin"
files_exact=no
[ "$back_sha" = "$src_sha" ] && [ "$ref_sha" = "$src_sha" ] && files_exact=yes
echo "sha256: sent $src_sha, room's download $back_sha, reference's file $ref_sha: exact: $files_exact"
echo "median: upload $up_mbs MB/s (reference $upref_mbs), download $down_mbs MB/s (reference $downref_mbs); rounds with a bad status: $files_bad"

fi

if want 10; then
# ---------------------------------------------------------------- 10: streamed output

SSE_LINES=50
section "10. streamed output: command's timestamp to the client, $SSE_LINES lines 100 ms apart"
echo "client: tools/bench/sselat.py (a plain socket through nginx, Accept: text/event-stream); the command prints"
echo "  \`date +%s%N\` (CLOCK_REALTIME, ns) every 100 ms; latency = arrival (CLOCK_REALTIME) - printed; room ${prefix}s"
echo "first exec (creates room ${prefix}s): $(hb -m POST -b "$exec_body" -n 1 -k '"exitCode":0' "$(exec_path s)")"
settle
sse=$(python3 "$repo/tools/bench/sselat.py" "$port" "$tokens" "${prefix}s" "$SSE_LINES")
echo "$sse"
sse_p50=$(kv "$sse" p50_ms) sse_p99=$(kv "$sse" p99_ms)
[ "$(kv "$sse" n)" = "$SSE_LINES" ] && [ "$(kv "$sse" complete)" = 1 ] ||
	say "figure 10: not every line arrived, or no complete event: $sse"

fi

if want 16; then
# ---------------------------------------------------------------- 16: terminal keystroke to echo

TERM_KEYS=500
section "16. terminal: keystroke to echo through nginx, $TERM_KEYS keystrokes"
echo "client: tools/bench/termecho.py (a plain socket through nginx, the terminal's WebSocket); each keystroke a"
echo "  one-byte binary frame, timed to the arrival of its echo by the room's pty; room ${prefix}t"
settle
te=$(python3 "$repo/tools/bench/termecho.py" "$port" "$tokens" "${prefix}t" "$TERM_KEYS")
echo "$te"
te_p50=$(kv "$te" p50_ms) te_p99=$(kv "$te" p99_ms)
[ "$(kv "$te" n)" = "$TERM_KEYS" ] || say "figure 16: not every keystroke came back: $te"

fi

if want 17; then
# ---------------------------------------------------------------- 17: export and import

XP_N=3
section "17. export and import of a room with 200 MiB written (x$XP_N each), against tar --sparse | zstd -1 of the same tree"
# The room runs (a process left in it) while it is exported: the export
# is cut as a snapshot is.  The reference is the same tree, the room's
# disk's upper/, read from its image mounted read-only once the room is
# stopped: tar --sparse -c | zstd -1 > file, and zstd -d | tar -x into
# a directory of this run.  Random data: nothing compresses.  Same cache
# state: each export reads a fresh mount of its cut (the image file's
# pages cached, the mounted file system's not), so each reference run
# reads a fresh mount of the image too (mounted once for all three, the
# second and third read the first's cached pages: a tenth faster).
# Context beside the verdicts: the stopped room exported (no cut), and
# tar -x followed by a sync of what it wrote (an import's 201 promises
# its files are on disk, which tar -x does not).
xroom=${prefix}xp
xauth="Authorization: Bearer $(head -n1 "$tokens")"
xbase=http://127.0.0.1:$port/api/rooms
xapi() { curl -sS --max-time 900 -H "$xauth" "$@"; }
xapi -H 'Content-Type: application/json' -X POST \
	-d '{"cmd":"head -c 200M /dev/urandom > /workspace/big && sync && du -sh /workspace/big"}' \
	"$xbase/$xroom/sandbox/exec" | sed -n 's/.*"stdout":"\([^"\\]*\).*/  written: \1/p'
xapi -o /dev/null -H 'Content-Type: application/json' -X POST -d '{"cmd":"sleep 100000 >/dev/null 2>&1 &"}' \
	"$xbase/$xroom/sandbox/exec"
: > "$tmp/out/xp" ; : > "$tmp/out/xpref" ; : > "$tmp/out/im" ; : > "$tmp/out/imref"
for i in $(seq "$XP_N"); do
	out=$(xapi -o "$tmp/xp.roombox" -w '%{http_code} %{time_total}' "$xbase/$xroom/export")
	[ "${out%% *}" = 200 ] || { say "export $i: $out"; continue; }
	calc "${out##* } * 1000" >> "$tmp/out/xp"; echo >> "$tmp/out/xp"
done
xp_mb=$(calc "sprintf(\"%.1f\", $(stat -c %s "$tmp/xp.roombox") / 1e6)")
for i in $(seq "$XP_N"); do
	out=$(xapi -o /dev/null -w '%{http_code} %{time_total}' -X PUT -H 'Content-Type: application/x-roombox-room' \
		--data-binary @"$tmp/xp.roombox" "$xbase/${xroom}i$i/import")
	[ "${out%% *}" = 201 ] || { say "import $i: $out"; continue; }
	calc "${out##* } * 1000" >> "$tmp/out/im"; echo >> "$tmp/out/im"
	xapi -o /dev/null -X DELETE "$xbase/${xroom}i$i"
done
xapi -o /dev/null -X POST "$xbase/$xroom/sandbox/stop"
: > "$tmp/out/xps" ; : > "$tmp/out/imsref"
for i in $(seq "$XP_N"); do
	out=$(xapi -o /dev/null -w '%{http_code} %{time_total}' "$xbase/$xroom/export")
	[ "${out%% *}" = 200 ] || { say "export of the stopped room $i: $out"; continue; }
	calc "${out##* } * 1000" >> "$tmp/out/xps"; echo >> "$tmp/out/xps"
done
mkdir -p "$tmp/xpmnt" "$tmp/xpx"
for i in $(seq "$XP_N"); do
	mount -o ro,loop "$tmp/state/rooms/$xroom/disk.img" "$tmp/xpmnt" ||
		{ say "figure 17: could not mount the room's image for the reference"; break; }
	ms=$( { TIMEFORMAT=%R; time { tar --sparse -c -C "$tmp/xpmnt/upper" . | zstd -q -1 > "$tmp/xpref.tar.zst"; }; } 2>&1 )
	calc "$ms * 1000" >> "$tmp/out/xpref"; echo >> "$tmp/out/xpref"
	umount "$tmp/xpmnt"
done
for i in $(seq "$XP_N"); do
	[ -s "$tmp/xpref.tar.zst" ] || break
	rm -rf "$tmp/xpx" && mkdir "$tmp/xpx"
	ms=$( { TIMEFORMAT=%R; time { zstd -q -d < "$tmp/xpref.tar.zst" | tar -x -C "$tmp/xpx"; }; } 2>&1 )
	calc "$ms * 1000" >> "$tmp/out/imref"; echo >> "$tmp/out/imref"
	rm -rf "$tmp/xpx" && mkdir "$tmp/xpx"
	ms=$( { TIMEFORMAT=%R; time { zstd -q -d < "$tmp/xpref.tar.zst" | tar -x -C "$tmp/xpx" &&
		find "$tmp/xpx" -print0 | xargs -0 sync --; }; } 2>&1 )
	calc "$ms * 1000" >> "$tmp/out/imsref"; echo >> "$tmp/out/imsref"
done
rm -rf "$tmp/xpx" "$tmp/xp.roombox" "$tmp/xpref.tar.zst"
xapi -o /dev/null -X DELETE "$xbase/$xroom"
xp_ms=$(median < "$tmp/out/xp") xp_ref=$(median < "$tmp/out/xpref") xs_ms=$(median < "$tmp/out/xps")
im_ms=$(median < "$tmp/out/im") im_ref=$(median < "$tmp/out/imref") ims_ref=$(median < "$tmp/out/imsref")
echo "  archive $xp_mb MB; export p50 $(f2 "$xp_ms") ms (all: $(tr '\n' ' ' < "$tmp/out/xp")), tar | zstd p50 $(f2 "$xp_ref") ms" \
	"(all: $(tr '\n' ' ' < "$tmp/out/xpref")); the stopped room's export p50 $(f2 "$xs_ms") ms"
echo "  import p50 $(f2 "$im_ms") ms (all: $(tr '\n' ' ' < "$tmp/out/im")), zstd -d | tar -x p50 $(f2 "$im_ref") ms" \
	"(all: $(tr '\n' ' ' < "$tmp/out/imref")), with a sync of its files $(f2 "$ims_ref") ms"

fi

if want 11; then
# ---------------------------------------------------------------- 11: preview URL

section "11. requests through a preview URL: wrk -t16 -c16 -d${WRK_SECONDS}s, a 1 KiB page"
echo "server: tools/bench/pageserver.c (epoll, one thread), uploaded into room ${prefix}p as /workspace/pageserver"
echo "  and run there as a managed process on 127.0.0.1:8000; the same binary on the host's 127.0.0.1:$page_port"
echo "reference: nginx proxying straight to the host's copy (a location with the preview location's settings,"
echo "  a new connection to the server per request); measured before and after the preview run, mean"
echo "context only: nginx keeping its connections to the host's copy (upstream keepalive), as the relay keeps its own"
echo "first exec (creates room ${prefix}p): $(hb -m POST -b "$exec_body" -n 1 -k '"exitCode":0' "$(exec_path p)")"
api="http://127.0.0.1:$port/api/rooms/${prefix}p/sandbox"
echo "upload: $(curl -s "${auth[@]}" -T "$tmp/bin/pageserver" "$api/files/pageserver?mode=0755")"
echo "process: $(curl -s "${auth[@]}" -d '{"cmd":"/workspace/pageserver 8000","name":"page"}' "$api/processes")"
expose=$(curl -s "${auth[@]}" -d '{"port":8000}' "$api/ports")
echo "expose: $expose"
ptoken=$(sed -n 's/.*"token":"\([a-z0-9]*\)".*/\1/p' <<<"$expose")
preview_url="http://127.0.0.1:$port/preview/$ptoken/"
"$tmp/bin/pageserver" "$page_port" 2> "$tmp/out/pageserver.log" &
page_pid=$!
proxy_url="http://127.0.0.1:$ref_port/proxy/"
for _ in $(seq 100); do
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$preview_url")" = 200 ] &&
	[ "$(curl -s -o /dev/null -w '%{http_code}' "$proxy_url")" = 200 ] && break
	sleep 0.1
done
cmp -s <(curl -s "$preview_url") <(curl -s "$proxy_url") &&
	echo "the preview URL and the reference serve the same page ($(curl -s "$proxy_url" | wc -c) bytes)" ||
	say "figure 11: the preview URL does not serve the reference's page"
# wrk_run URL NAME: requests/s of one wrk run (output kept in out/NAME.txt)
wrk_run() {
	wrk -t16 -c16 -d"${WRK_SECONDS}s" --latency --timeout 30s "$1" > "$tmp/out/$2.txt" 2>&1
	sed -n 's/^Requests\/sec:[[:space:]]*\([0-9.]*\).*/\1/p' "$tmp/out/$2.txt"
}
non2xx() { sed -n 's/^[[:space:]]*Non-2xx or 3xx responses:[[:space:]]*\([0-9]*\).*/\1/p' "$tmp/out/$1.txt"; }
settle
pv_ref1=$(wrk_run "$proxy_url" proxy1)
c_ngx0=$(cpu_ms $(ngx_pids)) c_fcgi0=$(cpu_ms "$fcgi_pid")
pv_rps=$(wrk_run "$preview_url" preview)
c_ngx1=$(cpu_ms $(ngx_pids)) c_fcgi1=$(cpu_ms "$fcgi_pid")
pv_ref2=$(wrk_run "$proxy_url" proxy2)
c_ngx2=$(cpu_ms $(ngx_pids))
pv_keep=$(wrk_run "http://127.0.0.1:$ref_port/proxykeep/" proxykeep)
echo "CPU per request (context): nginx $(per_req preview "$c_ngx0" "$c_ngx1") ms through the preview URL," \
	"$(per_req proxy2 "$c_ngx1" "$c_ngx2") ms proxying straight; roombox-fcgi (its relay loop; the room's connector not counted)" \
	"$(per_req preview "$c_fcgi0" "$c_fcgi1") ms"
pv_ref=$(calc "($pv_ref1 + $pv_ref2) / 2")
sed 's/^/  /' "$tmp/out/preview.txt"
pv_non2xx=$(( $(non2xx preview) + $(non2xx proxy1) + $(non2xx proxy2) + $(non2xx proxykeep) + 0 ))
echo "preview $pv_rps req/s; reference $pv_ref1 before, $pv_ref2 after, mean $pv_ref; non-2xx answers: $pv_non2xx"
echo "context: nginx keeping its connections to the server $pv_keep req/s; the preview URL $(ratio "${pv_rps:-}" "$pv_keep") x that"
stop_pids 100 "$page_pid"
page_pid=

fi

if want 15; then
# ---------------------------------------------------------------- 15: snapshots and forks

SNAP_N=9 FORK_N=20 CP_N=5
# snap_bench DIR PORT TAG: on the stack in DIR, a room that wrote 200 MiB
# (random, so nothing compresses or dedups), a process left running in it;
# SNAP_N snapshots (each deleted again: snapshots_max), the processes'
# frozen time from each answer's frozenMs and each request's wall time;
# FORK_N forks of the room as it is (each cut as a snapshot, then deleted
# again); CP_N runs of cp --sparse=always of its image, alone and followed
# by sync of the copy (a snapshot's copy is fdatasync'ed before its 201).
# Sets s_frozen s_req s_fork s_cp s_cps s_copy (p50s in ms; the copy method).
snap_bench() {
	local d=$1 p=$2 tag=$3 room out i ms sid img
	local base=http://127.0.0.1:$p/api/rooms auth
	auth="Authorization: Bearer $(head -n1 "$d/tokens")"
	room=${prefix}${tag}
	sapi() { curl -sS --max-time 600 -H "$auth" -H 'Content-Type: application/json' "$@"; }
	sapi -X POST -d '{"cmd":"head -c 200M /dev/urandom > /workspace/big && sync && du -sh /workspace/big"}' \
		"$base/$room/sandbox/exec" | sed -n 's/.*"stdout":"\([^"\\]*\).*/  written: \1/p'
	sapi -o /dev/null -X POST -d '{"cmd":"sleep 100000 >/dev/null 2>&1 &"}' "$base/$room/sandbox/exec"
	s_copy=$(sapi "http://127.0.0.1:$p/api/health" | sed -n 's/.*"snapshotCopy":"\([^"]*\)".*/\1/p')
	: > "$tmp/out/frozen.$tag" ; : > "$tmp/out/req.$tag" ; : > "$tmp/out/fork.$tag"
	: > "$tmp/out/cp.$tag" ; : > "$tmp/out/cps.$tag"
	for i in $(seq "$SNAP_N"); do
		out=$(sapi -w '\n%{http_code} %{time_total}' -X POST -d '{}' "$base/$room/snapshots" | tr '\n' ' ')
		[ "$(awk '{ print $(NF-1) }' <<<"$out")" = 201 ] || { say "snapshot $i: $out"; continue; }
		sed -n 's/.*"frozenMs":\([0-9.e+-]*\).*/\1/p' <<<"$out" >> "$tmp/out/frozen.$tag"
		calc "$(awk '{ print $NF }' <<<"$out") * 1000" >> "$tmp/out/req.$tag"; echo >> "$tmp/out/req.$tag"
		sid=$(sed -n 's/.*"id":"\([0-9a-f]*\)".*/\1/p' <<<"$out")
		sapi -o /dev/null -X DELETE "$base/$room/snapshots/$sid"
	done
	for i in $(seq "$FORK_N"); do
		out=$(sapi -o /dev/null -w '%{http_code} %{time_total}' -X POST -d "{\"to\":\"${room}f$i\"}" "$base/$room/fork")
		[ "${out%% *}" = 201 ] || { say "fork $i: $out"; continue; }
		calc "${out##* } * 1000" >> "$tmp/out/fork.$tag"; echo >> "$tmp/out/fork.$tag"
		sapi -o /dev/null -X DELETE "$base/${room}f$i"
	done
	img=$d/state/rooms/$room/disk.img
	for i in $(seq "$CP_N"); do
		ms=$( { TIMEFORMAT=%R; time cp --sparse=always "$img" "$d/state/cp-ref.img"; } 2>&1 )
		calc "$ms * 1000" >> "$tmp/out/cp.$tag"; echo >> "$tmp/out/cp.$tag"
		rm -f "$d/state/cp-ref.img"
		ms=$( { TIMEFORMAT=%R; time { cp --sparse=always "$img" "$d/state/cp-ref.img" &&
			sync "$d/state/cp-ref.img"; }; } 2>&1 )
		calc "$ms * 1000" >> "$tmp/out/cps.$tag"; echo >> "$tmp/out/cps.$tag"
		rm -f "$d/state/cp-ref.img"
	done
	sapi -o /dev/null -X DELETE "$base/$room"
	s_frozen=$(median < "$tmp/out/frozen.$tag") s_req=$(median < "$tmp/out/req.$tag")
	s_fork=$(median < "$tmp/out/fork.$tag") s_cp=$(median < "$tmp/out/cp.$tag")
	s_cps=$(median < "$tmp/out/cps.$tag")
	echo "  copy: $s_copy; frozen p50 $(f2 "$s_frozen") ms (all: $(tr '\n' ' ' < "$tmp/out/frozen.$tag"));" \
		"snapshot request p50 $(f2 "$s_req") ms"
	echo "  fork p50 $(f2 "$s_fork") ms ($(wc -l < "$tmp/out/fork.$tag") of $FORK_N);" \
		"cp --sparse=always p50 $(f2 "$s_cp") ms, with sync $(f2 "$s_cps") ms"
}

section "15. snapshot of a room with 200 MiB written (N=$SNAP_N), fork of it x$FORK_N, cp --sparse=always of its image x$CP_N"
echo "ext4-backed state_dir of the first stack ($(df -T "$tmp" | awk 'NR == 2 { print $2 }')):"
snap_bench "$tmp" "$port" z
sn_frozen=$s_frozen sn_req=$s_req sn_fork=$s_fork sn_cp=$s_cp sn_cps=$s_cps sn_copy=$s_copy
if command -v mkfs.xfs >/dev/null; then
	echo "XFS (mkfs.xfs -m reflink=1 on a 4 GiB loop file of this run), a second stack with its state_dir there:"
	mkdir -p "$xd" && truncate -s 4G "$tmp/xfs.img" && mkfs.xfs -q -m reflink=1 "$tmp/xfs.img" &&
		mount -o loop "$tmp/xfs.img" "$xd" && x_mounted=1 ||
		die "could not make and mount an XFS on $tmp/xfs.img"
	x_port=$(free_port)
	x_base=$(free_uid_base 1200000000 16 1500000000) || die "no free uid range for the XFS stack"
	start_stack "$xd" "$x_port" "$x_base" 16 "" ""
	x_fcgi_pid=$started_fcgi x_nginx_pid=$started_nginx x_up=1
	snap_bench "$xd" "$x_port" x
	sx_frozen=$s_frozen sx_req=$s_req sx_fork=$s_fork sx_cp=$s_cp sx_cps=$s_cps sx_copy=$s_copy
	stop_xfs_stack
	xfs_unmount
	rm -f "$tmp/xfs.img"
else
	echo "XFS: mkfs.xfs is not installed (xfsprogs; tools/deps.sh installs it): left out"
fi

fi

if want 12; then
# ---------------------------------------------------------------- 12-14: the egress stack

section "egress stack: a second instance with network = egress, and a test host on a veth pair"
# Every packet stays on this machine: the test host is a network namespace
# of this run's own, joined to the host by a veth pair (198.51.100.217/30,
# TEST-NET-2), holding 203.0.113.110 (TEST-NET-3, "the internet") behind a
# host route via that pair.  The rooms' dns is that address too (nothing
# resolves names here).  The test host has no default route: it answers
# what comes over its link (the host, and the rooms masqueraded to the
# host's end) and can send nothing anywhere else.  Not 203.0.113.10 and the tests' link: a test run of
# tests/security/test_egress.py on the same host would clash with them.
TH_ADDR=203.0.113.110 TH_LINK_HOST=198.51.100.217 TH_LINK_NS=198.51.100.218
EG_ROUNDS=5
sfx=$(od -An -N2 -tx1 /dev/urandom | tr -d ' \n')
forward_before=$(cat /proc/sys/net/ipv4/ip_forward)
th_ns=bxt-$sfx th_if=bxt${sfx}h
th=$eg/testhost
mkdir -p "$th/www" "$th/tmp"
ip netns add "$th_ns" &&
ip link add "$th_if" type veth peer name eth0 netns "$th_ns" &&
ip addr add "$TH_LINK_HOST/30" dev "$th_if" &&
ip link set "$th_if" up &&
ip -n "$th_ns" link set lo up &&
ip -n "$th_ns" addr add "$TH_LINK_NS/30" dev eth0 &&
ip -n "$th_ns" addr add "$TH_ADDR/32" dev eth0 &&
ip -n "$th_ns" link set eth0 up &&
ip route add "$TH_ADDR/32" via "$TH_LINK_NS" dev "$th_if" ||
	die "could not make the test host (network namespace $th_ns, veth $th_if)"
for _ in 1 2 3 4; do cat "$tmp/ref/src.bin"; done > "$th/www/big.bin"
big_sha=$(sha256sum < "$th/www/big.bin" | cut -d' ' -f1)
cat > "$th/nginx.conf" <<EOF
worker_processes 2;
pid $th/nginx.pid;
error_log $th/error.log warn;
events { worker_connections 256; }
http {
    access_log off;
    client_body_temp_path $th/tmp; proxy_temp_path $th/tmp; fastcgi_temp_path $th/tmp;
    uwsgi_temp_path $th/tmp; scgi_temp_path $th/tmp;
    sendfile on;
    server { listen $TH_ADDR:80; root $th/www; }
}
EOF
ip netns exec "$th_ns" nginx -e "$th/error.log" -c "$th/nginx.conf" -g 'daemon off;' < /dev/null > "$th/out.log" 2>&1 &
th_nginx_pid=$!
eg_port=$(free_port)
eg_span=64
eg_uid_base=$(free_uid_base 1500000000 "$eg_span" 2147483648) || die "no free uid range for the egress stack"
start_stack "$eg" "$eg_port" "$eg_uid_base" "$eg_span" "network = egress
dns = $TH_ADDR" ""
eg_fcgi_pid=$started_fcgi eg_nginx_pid=$started_nginx eg_up=1
eg_hash=$(state_hash "$eg/state")
eg_table=roombox_$eg_hash eg_ifprefix=rb${eg_hash:2:6}-
echo "stack: nginx 127.0.0.1:$eg_port -> roombox-fcgi -> roombox-helper; network = egress, dns $TH_ADDR, max_rooms $eg_span, uid_base $eg_uid_base"
echo "health: $health"
echo "instance: nft table inet $eg_table, room interfaces $eg_ifprefix*"
echo "test host: netns $th_ns, veth $th_if ($TH_LINK_HOST/30), $TH_ADDR/32 routed to it; nginx (sendfile) serving a 256 MiB file"
for _ in $(seq 100); do
	curl -s --noproxy '*' -o /dev/null -r 0-0 "http://$TH_ADDR/big.bin" && break
	kill -0 "$th_nginx_pid" 2>/dev/null || die "the test host's nginx exited: $(tail -n3 "$th/error.log")"
	sleep 0.1
done
ehb() { "$tmp/bin/httpbench" -P "$eg_port" -T "$eg/tokens" "$@"; }

# ---------------------------------------------------------------- 12: egress download

section "12. egress: room ${prefix}g downloads 256 MiB from the test host, against the host downloading it, $EG_ROUNDS rounds"
echo "first exec (creates room ${prefix}g): $(ehb -m POST -b "$exec_body" -n 1 -k '"exitCode":0' "$(exec_path g)")"
echo "both: curl -o /dev/null http://$TH_ADDR/big.bin (the room's through its veth, forwarded and masqueraded"
echo "  by the host; the host's straight through the test host's veth); MB/s = 10^6 bytes per second, median"
settle
dl_cmd="curl -s --noproxy '*' -o /dev/null -w '%{http_code} %{size_download} %{speed_download}' http://$TH_ADDR/big.bin"
eg_ex=$(python3 -c 'import json, sys; print(json.dumps({"cmd": sys.argv[1], "timeout": 120000}))' "$dl_cmd")
eg_auth=(-H "Authorization: Bearer $(head -n1 "$eg/tokens")")
: > "$tmp/out/egress.txt"
for i in $(seq "$EG_ROUNDS"); do
	h=$(sh -c "$dl_cmd")
	r=$(curl -s "${eg_auth[@]}" -d "$eg_ex" "http://127.0.0.1:$eg_port/api/rooms/${prefix}g/sandbox/exec" |
		python3 -c 'import json, sys; print(json.load(sys.stdin)["result"]["stdout"])' 2>/dev/null)
	echo "round $i: host ${h:-failed}, room ${r:-failed} (status bytes bytes/s)"
	echo "${h:-x 0 0} ${r:-x 0 0}" >> "$tmp/out/egress.txt"
done
eg_sz=$((256 * 1048576))
eg_host=$(awk -v n=$eg_sz '$1 == 200 && $2 == n { print $3 / 1e6 }' "$tmp/out/egress.txt" | median)
eg_room=$(awk -v n=$eg_sz '$4 == 200 && $5 == n { print $6 / 1e6 }' "$tmp/out/egress.txt" | median)
eg_bad=$(awk -v n=$eg_sz '$1 != 200 || $2 != n || $4 != 200 || $5 != n' "$tmp/out/egress.txt" | wc -l)
r=$(ehb -m POST -b "{\"cmd\":\"curl -s --noproxy '*' http://$TH_ADDR/big.bin | sha256sum\",\"timeout\":120000}" \
	-n 1 -k "$big_sha" "$(exec_path g)")
eg_exact=no
[ "$(kv "$r" bad)" = 0 ] && eg_exact=yes
echo "sha256 of the room's download equal to the file's ($big_sha): $eg_exact"
echo "median: room $eg_room MB/s, host $eg_host MB/s; rounds with a bad status or size: $eg_bad"

# ---------------------------------------------------------------- 13: warm exec, egress and root

section "13. warm exec of true, network = egress as the room's root, against network = none as user, N=1000 each"
echo "measured: room ${prefix}g of the egress stack, {\"cmd\":\"true\"} (exec_user root: the room's root in its user namespace)"
echo "reference: room ${prefix}w of the first stack (network = none), {\"cmd\":\"true\",\"user\":\"user\"}"
echo "  (the user namespace is always on, so \"without them\" is no network and no root); before and after, mean"
user_body='{"cmd":"true","user":"user"}'
settle
nu1=$(hb -m POST -b "$user_body" -n 1000 -w 50 -k '"exitCode":0' "$(exec_path w)")
echo "reference before: $nu1"
ew=$(ehb -m POST -b "$exec_body" -n 1000 -w 50 -k '"exitCode":0' "$(exec_path g)")
echo "measured:         $ew"
nu2=$(hb -m POST -b "$user_body" -n 1000 -w 50 -k '"exitCode":0' "$(exec_path w)")
echo "reference after:  $nu2"
ew_p50=$(kv "$ew" p50_ms) ew_p99=$(kv "$ew" p99_ms)
nu_p50=$(calc "($(kv "$nu1" p50_ms) + $(kv "$nu2" p50_ms)) / 2")
ew_bad=$(( $(kv "$ew" bad) + $(kv "$nu1" bad) + $(kv "$nu2" bad) + 0 ))
echo "p50: egress+root $ew_p50 ms, none+user $(f2 "$nu_p50") ms; figure 4 (none, root) $warm_p50 ms; bad answers: $ew_bad"

# ---------------------------------------------------------------- 14: first exec, egress

section "14. first exec in a new room with network = egress, 30 fresh rooms, sequential"
# fresh_pair TAG: 30 fresh egress rooms, between two batches of 20 fresh
# rooms of the first stack (network = none) taken as the same-moment
# reference; each reference batch is deleted again once measured (the first
# stack has room for 21 more while its $N_ROOMS run).  Sets e_p50, n_p50.
fresh_pair() {
	local tag=$1 before after
	echo "network = none, now (reference):"
	fresh_rooms hb "${tag}g{i}" 20
	before=$(kv "$fresh_line" p50_ms)
	echo "  deleted again: $(hb -m DELETE -n 20 -k '"cleaned":true' "/api/rooms/${prefix}${tag}g{i}")"
	echo "network = egress:"
	fresh_rooms ehb "${tag}e{i}"
	e_p50=$(kv "$fresh_line" p50_ms)
	echo "network = none, now again (reference):"
	fresh_rooms hb "${tag}h{i}" 20
	after=$(kv "$fresh_line" p50_ms)
	echo "  deleted again: $(hb -m DELETE -n 20 -k '"cleaned":true' "/api/rooms/${prefix}${tag}h{i}")"
	n_p50=$(calc "($before + $after) / 2")
	echo "reference: none p50 $before ms before, $after ms after, mean $n_p50 ms"
}
# First while the first stack's $N_ROOMS rooms run (context: a room's start
# slows with the rooms the host holds), then as figure 6 was taken, with a
# few dozen: the first stack's rooms are deleted in between (their cleanup
# is checked at the end with the rest).
echo "-- while the first stack's rooms run:"
fresh_pair k
efresh_many=$e_p50 nfresh_many=$n_p50
echo "-- the first stack's rooms deleted first, as for figure 6:"
delete_all "$tmp" "$port" delete_early
early_n=$n_left early_fail=$del_fail
fresh_pair ''
efresh_p50=$e_p50 nfresh_p50=$n_p50

# ---------------------------------------------------------------- egress cleanup

section "egress cleanup: DELETE every room of the egress stack, then check nothing of its network is left"
delete_all "$eg" "$eg_port" eg_delete
eg_del_fail=$del_fail eg_n=$n_left
eg_leak=()
sleep 0.5
links=$(ip -o link show | awk -F': ' '{ print $2 }' | sed 's/@.*//' | grep "^$eg_ifprefix")
[ -z "$links" ] || eg_leak+=("$(wc -l <<<"$links") veth $eg_ifprefix*: $(head -n3 <<<"$links" | tr '\n' ' ')")
nft list table inet "$eg_table" >/dev/null 2>&1 && eg_leak+=("nft table inet $eg_table")
eg_routes=$(ip -4 route show | grep -c "dev $eg_ifprefix")
[ "$eg_routes" -eq 0 ] || eg_leak+=("$eg_routes routes via room interfaces")
[ -z "$(rooms_left "$eg" | head -n1)" ] || eg_leak+=("$(rooms_left "$eg" | wc -l) room state folders")
if [ ${#eg_leak[@]} -eq 0 ]; then
	eg_clean="clean: no veth $eg_ifprefix*, no nft table $eg_table, no route of a room, no room folder left"
else
	eg_clean="LEFT OVER: $(IFS=';'; echo "${eg_leak[*]}")"
fi
echo "$eg_clean"
stop_eg_stack
th_ns_was=$th_ns th_if_was=$th_if
stop_testhost
if ip netns list | grep -q "^$th_ns_was\b" || ip link show "$th_if_was" >/dev/null 2>&1 ||
   ip -4 route show | grep -q "^$TH_ADDR "; then
	eg_leak+=("the test host ($th_ns_was, $th_if_was or its route)")
	echo "LEFT OVER: the test host's namespace, veth or route"
else
	echo "stopped the egress stack; removed the test host (netns, veth, route); ip_forward back to what it was"
fi

fi

if want scale; then
# shellcheck source=tools/bench-scale.sh
. "$repo/tools/bench-scale.sh"
fi

section "cleanup: DELETE every room of the first stack (8 at a time), then check nothing of either stack is left"
delete_all "$tmp" "$port" delete

leak=()
sleep 0.5
keepers=()
for d in /proc/[0-9]*; do
	[ "$(cat "$d/comm" 2>/dev/null)" = roombox-keeper ] || continue
	if grep -q "/roombox[^/]*/$prefix" "$d/cgroup" 2>/dev/null ||
	   grep -q "$tmp" "$d/mountinfo" 2>/dev/null; then
		keepers+=("${d#/proc/}")
	fi
done
[ ${#keepers[@]} -eq 0 ] || leak+=("${#keepers[@]} roombox-keeper processes of this run: ${keepers[*]:0:10}")
loops=$(for f in /sys/block/loop*/loop/backing_file; do
	[ -r "$f" ] && grep -l "^$tmp/" "$f" 2>/dev/null; done | wc -l)
[ "$loops" -eq 0 ] || leak+=("$loops loop devices backed by $tmp")
# a zombie is an ended process whose parent has not reaped it yet: a
# room's keeper, once its helper has exited, is the host init's child, and
# some inits (a VM's agent as PID 1) reap seconds later; it holds nothing
uprocs=$(ps -eo uid=,stat= | awk -v lo="$uid_base" -v hi=$((uid_base + ids)) -v elo="${eg_uid_base:-0}" \
	-v ehi=$((${eg_uid_base:-0} + ${eg_span:-0} * 65536)) \
	'$2 !~ /^Z/ && (($1 >= lo && $1 < hi) || ($1 >= elo && $1 < ehi))' | wc -l)
[ "$uprocs" -eq 0 ] || leak+=("$uprocs processes with a room uid")
cgs=$(ls -d /sys/fs/cgroup/*/roombox*/"$prefix"* /sys/fs/cgroup/roombox*/"$prefix"* 2>/dev/null | wc -l)
[ "$cgs" -eq 0 ] || leak+=("$cgs room cgroups")
mnts=$(grep -c "$tmp" /proc/self/mountinfo)
[ "$mnts" -eq 0 ] || leak+=("$mnts host mounts under $tmp")
st=$( (rooms_left "$tmp"; rooms_left "$eg") | wc -l)
[ "$st" -eq 0 ] || leak+=("$st room state folders")
if [ ${#leak[@]} -eq 0 ]; then
	clean="clean: no keeper, loop device, room-uid process, room cgroup, mount or room folder left"
else
	clean="LEFT OVER: $(IFS=';'; echo "${leak[*]}")"
fi
echo "$clean"

# logs_check DIR: 4xx, 5xx and errors logged by the stack in DIR.
logs_check() {
	local d=$1 n5xx n4xx n499 nreq nerr nflog fbad
	n5xx=$(awk '$9 ~ /^5/' "$d/nginx/access.log" 2>/dev/null | wc -l)
	n4xx=$(awk '$9 ~ /^4/ && $9 != 499' "$d/nginx/access.log" 2>/dev/null | wc -l)
	n499=$(awk '$9 == 499' "$d/nginx/access.log" 2>/dev/null | wc -l)
	nreq=$(wc -l < "$d/nginx/access.log" 2>/dev/null)
	echo "nginx access log: $nreq requests, $n4xx 4xx, $n5xx 5xx, $n499 499 (client closed: wrk drops its requests in flight when its time is up)"
	awk '$9 ~ /^[45]/ && $9 != 499 { print "  " $0 }' "$d/nginx/access.log" | head -n5
	nerr=$(grep -c '\[error\]\|\[crit\]\|\[alert\]' "$d/nginx/error.log" 2>/dev/null)
	[ "${nerr:-0}" -eq 0 ] || { echo "nginx error log: $nerr errors"; grep '\[error\]\|\[crit\]\|\[alert\]' "$d/nginx/error.log" | head -n3 | sed 's/^/  /'; }
	# roombox-fcgi logs one line per request ("... status=NNN ..."), and
	# the helper's reason with a 5xx.
	nflog=$(grep -c '' "$d/fcgi.log" 2>/dev/null)
	fbad=$(grep -v ' [23][0-9][0-9] [0-9.]* ms$\| status=[23][0-9][0-9] ' "$d/fcgi.log" |
		grep -v ': [0-9]* token(s) in \|: listening on \|Terminated: stopping' )
	echo "roombox-fcgi log: $nflog lines, $(grep -c . <<<"$fbad") other than a 2xx request line or start/stop$([ -n "$fbad" ] && echo ':')"
	[ -n "$fbad" ] && head -n8 <<<"$fbad" | sed 's/^/  /'
}
echo "first stack:"
logs_check "$tmp"
if want 12; then
echo "egress stack:"
logs_check "$eg"
fi

stop_stack
elapsed=$(( $(date +%s) - t_start ))
echo "load after the run: $(cut -d' ' -f1-3 /proc/loadavg)"

# ---------------------------------------------------------------- summary

section "summary (one run, $(date -u +%Y-%m-%dT%H:%M:%SZ), ${elapsed} s after the stack started)"
row() { printf '%-44s %-22s %-30s %-8s %-16s %s\n' "$@"; }
row "figure" "measured" "reference (same run)" "ratio" "target" "verdict"
if want 1; then
row "1. bare fork+exec sh -c true p50 / p99" "$(f2 "$bare_p50") / $(f2 "$bare_p99") ms" \
	"p50 $(f2 "$bare_p50_before") before 4, $(f2 "$bare_p50_after") after" "-" "reference" "-"
fi
if want 2; then
row "2. bare spawn, 16 loops" "$(f0 "$tput_s") spawns/s" "$(f0 "$tput_before") before 5, $(f0 "$tput_after") after" "-" "reference" "-"
fi
if want 3; then
row "3. fresh bwrap jail sh -c true p50" "$(f2 "$bw_p50") ms" "-" "-" "reference" "-"
fi
if want 4; then
row "4. warm exec, sequential p50 (p99)" "$(f2 "$warm_p50") ms ($(f2 "$warm_p99"))" "bare p50 $(f2 "$bare_p50") ms" \
	"$(ratio "$warm_p50" "$bare_p50")" "<= 2.5 (1.5) x" \
	"$(verdict "$warm_p50 <= 2.5 * $bare_p50" "$warm_p50" "$bare_p50"), 1.5: $(verdict "$warm_p50 <= 1.5 * $bare_p50" "$warm_p50" "$bare_p50")"
row "" "" "bwrap p50 $(f2 "$bw_p50") ms" \
	"$(ratio "$warm_p50" "$bw_p50")" "< 0.5 x bwrap" "$(verdict "$warm_p50 < 0.5 * $bw_p50" "$warm_p50" "$bw_p50")"
fi
if want 5; then
v5="$(verdict "$wrk_rps >= 0.5 * $tput_s" "${wrk_rps:-}" "$tput_s"), 0.70: $(verdict "$wrk_rps >= 0.7 * $tput_s" "${wrk_rps:-}" "$tput_s")"
[ "$wrk_non2xx" = 0 ] || v5="$v5 ($wrk_non2xx of ${wrk_n:-?} not 2xx!)"
row "   context: health via nginx / helper alone" "$(f2 "$health_p50") / $(f2 "$helper_p50") ms" "-" "-" "-" "-"
row "5. warm exec, 16 clients x 16 rooms" "$(f0 "${wrk_rps:-}") req/s" "bare $(f0 "$tput_s") spawns/s" \
	"$(ratio "${wrk_rps:-}" "$tput_s")" ">= 0.50 (0.70) x" "$v5"
fi
if want 6; then
row "6. first exec in a new room p50" "$(f2 "$fresh_p50") ms" "bwrap p50 $(f2 "$bw_p50") ms" \
	"$(ratio "$fresh_p50" "$bw_p50")" "<= 25 (10) ms" \
	"$(verdict "$fresh_p50 <= 25" "$fresh_p50"), 10 ms: $(verdict "$fresh_p50 <= 10" "$fresh_p50")"
fi
if want 7; then
# Judged on the drop over the figure-7 rooms; when other work on the host
# made that negative, on the drop over the (many more) figure-8 rooms.
v7=$(verdict "$mem_drop <= 512" "$mem_drop")
if num "$mem_drop" && [ "$(calc "$mem_drop < 0")" = 1 ]; then
	v7="$(verdict "$mem_drop_k <= 512" "$mem_drop_k") (on the 2nd drop)"
fi
row "7. idle running room (MemAvailable drop)" "$(f0 "$mem_drop") KiB/room" "keeper PSS $(f0 "$pss_avg") KiB" "-" "<= 512 KiB" "$v7"
row "" "" "cgroup usage $(f0 "$cg_avg") KiB" "" "" ""
want 8 &&
row "" "" "drop over $((running - have)) rooms $(f0 "$mem_drop_k") KiB" "" "" ""
fi
if want 8; then
row "8. warm exec p50, $running rooms running" "$(f2 "$many_p50") ms" "1 room p50 $(f2 "$warm_p50") ms" \
	"$(ratio "$many_p50" "$warm_p50")" "<= 1.20 x 1 room" "$(verdict "$many_p50 <= 1.2 * $warm_p50" "$many_p50" "$warm_p50")"
fi
if want 9; then
v9u="$(verdict "$up_mbs >= 0.4 * $upref_mbs" "$up_mbs" "$upref_mbs"), 0.70: $(verdict "$up_mbs >= 0.7 * $upref_mbs" "$up_mbs" "$upref_mbs")"
v9d="$(verdict "$down_mbs >= 0.4 * $downref_mbs" "$down_mbs" "$downref_mbs"), 0.70: $(verdict "$down_mbs >= 0.7 * $downref_mbs" "$down_mbs" "$downref_mbs")"
[ "$files_exact" = yes ] && [ "$files_bad" -eq 0 ] || { v9u="$v9u (not exact/200!)"; v9d="$v9d (not exact/200!)"; }
row "9. 64 MiB upload via files API, median" "$(f0 "$up_mbs") MB/s" "nginx PUT (dav) $(f0 "$upref_mbs") MB/s" \
	"$(ratio "$up_mbs" "$upref_mbs")" ">= 0.40 (0.70) x" "$v9u"
row "   64 MiB download via files API, median" "$(f0 "$down_mbs") MB/s" "nginx static $(f0 "$downref_mbs") MB/s" \
	"$(ratio "$down_mbs" "$downref_mbs")" ">= 0.40 (0.70) x" "$v9d"
fi
if want 10; then
v10=$(verdict "$sse_p50 <= 20" "$sse_p50")
[ "$(kv "$sse" n)" = "$SSE_LINES" ] || v10="$v10 ($(kv "$sse" n) of $SSE_LINES lines!)"
row "10. streamed output to client, p50 (p99)" "$(f2 "$sse_p50") ms ($(f2 "$sse_p99"))" "-" "-" "<= 20 ms" "$v10"
fi
if want 11; then
v11="$(verdict "$pv_rps >= 0.5 * $pv_ref" "${pv_rps:-}" "$pv_ref"), 0.80: $(verdict "$pv_rps >= 0.8 * $pv_ref" "${pv_rps:-}" "$pv_ref")"
[ "$pv_non2xx" -eq 0 ] || v11="$v11 ($pv_non2xx not 2xx!)"
row "11. preview URL, 16 clients, 1 KiB page" "$(f0 "${pv_rps:-}") req/s" "nginx proxy $(f0 "$pv_ref") req/s" \
	"$(ratio "${pv_rps:-}" "$pv_ref")" ">= 0.50 (0.80) x" "$v11"
fi
if want 12; then
v12=$(verdict "$eg_room >= 0.5 * $eg_host" "$eg_room" "$eg_host")
[ "$eg_exact" = yes ] && [ "$eg_bad" -eq 0 ] || v12="$v12 (not exact/complete!)"
row "12. egress: room downloads 256 MiB, median" "$(f0 "$eg_room") MB/s" "host $(f0 "$eg_host") MB/s" \
	"$(ratio "$eg_room" "$eg_host")" ">= 0.50 x host" "$v12"
v13=$(verdict "$ew_p50 <= 1.1 * $nu_p50" "$ew_p50" "$nu_p50")
[ "$ew_bad" -eq 0 ] || v13="$v13 ($ew_bad bad answers!)"
row "13. warm exec p50, egress + root (p99)" "$(f2 "$ew_p50") ms ($(f2 "$ew_p99"))" "none + user $(f2 "$nu_p50") ms" \
	"$(ratio "$ew_p50" "$nu_p50")" "<= 1.10 x" "$v13"
row "" "" "figure 4 (none, root) $(f2 "$warm_p50") ms" "$(ratio "$ew_p50" "$warm_p50")" "context" "-"
row "14. first exec in a new room, egress, p50" "$(f2 "$efresh_p50") ms" "none, same moment $(f2 "$nfresh_p50") ms" \
	"$(ratio "$efresh_p50" "$nfresh_p50")" "<= 25 ms" "$(verdict "$efresh_p50 <= 25" "$efresh_p50")"
row "" "" "figure 6 $(f2 "$fresh_p50") ms" "$(ratio "$efresh_p50" "$fresh_p50")" "context" "-"
row "    the same, $running rooms running" "$(f2 "$efresh_many") ms" "none, same moment $(f2 "$nfresh_many") ms" \
	"$(ratio "$efresh_many" "$nfresh_many")" "context" "-"
fi
if want 12; then
row "   egress cleanup after DELETE of $eg_n rooms" "$eg_del_fail not 200" "-" "-" "nothing left" \
	"$([ ${#eg_leak[@]} -eq 0 ] && [ "$eg_del_fail" -eq 0 ] && echo OK || echo PROBLEM)"
fi
if want 15; then
row "15. snapshot, 200 MiB written: frozen p50" "$(f2 "$sn_frozen") ms" "$sn_copy; request p50 $(f2 "$sn_req") ms" \
	"-" "<= 100 ms" "$(verdict "$sn_frozen <= 100" "$sn_frozen")"
row "    fork x$FORK_N p50, without sharing" "$(f2 "$sn_fork") ms" "cp --sparse=always $(f2 "$sn_cp") ms" \
	"$(ratio "$sn_fork" "$sn_cp")" "<= 1.5 x cp" "$(verdict "$sn_fork <= 1.5 * $sn_cp" "$sn_fork" "$sn_cp")"
row "" "" "cp + sync $(f2 "$sn_cps") ms" "$(ratio "$sn_fork" "$sn_cps")" "context" "-"
row "    XFS reflink: frozen p50" "$(f2 "$sx_frozen") ms" "$sx_copy; request p50 $(f2 "$sx_req") ms" \
	"-" "<= 100 ms" "$(verdict "$sx_frozen <= 100" "$sx_frozen")"
row "    XFS reflink: fork x$FORK_N p50" "$(f2 "$sx_fork") ms" "cp --sparse=always $(f2 "$sx_cp") ms" \
	"$(ratio "$sx_fork" "$sx_cp")" "<= 50 ms" "$(verdict "$sx_fork <= 50" "$sx_fork")"
fi
if want 16; then
row "16. terminal keystroke to echo p50 (p99)" "$(f2 "$te_p50") ms ($(f2 "$te_p99"))" "-" "-" "<= 5 ms" \
	"$(verdict "$te_p50 <= 5" "$te_p50")"
fi
if want 17; then
row "17. export, 200 MiB written, p50" "$(f2 "$xp_ms") ms" "tar --sparse | zstd -1 $(f2 "$xp_ref") ms" \
	"$(ratio "$xp_ref" "$xp_ms")" ">= 0.80 of it" "$(verdict "$xp_ref >= 0.8 * $xp_ms" "$xp_ms" "$xp_ref")"
row "" "stopped room $(f2 "$xs_ms") ms" "(no cut)" "$(ratio "$xp_ref" "$xs_ms")" "context" "-"
row "    import of it, p50" "$(f2 "$im_ms") ms" "zstd -d | tar -x $(f2 "$im_ref") ms" \
	"$(ratio "$im_ref" "$im_ms")" ">= 0.80 of it" "$(verdict "$im_ref >= 0.8 * $im_ms" "$im_ms" "$im_ref")"
row "" "" "tar -x + sync $(f2 "$ims_ref") ms" "$(ratio "$ims_ref" "$im_ms")" "context" "-"
fi
if want scale; then
row "scale: warm exec p50, $sc_run1 rooms running" "$(f2 "$sc_p50_n") ms" "1 room p50 $(f2 "$sc_p50_1") ms" \
	"$(ratio "$sc_p50_n" "$sc_p50_1")" "<= 1.20 x 1 room" "$(verdict "$sc_p50_n <= 1.2 * $sc_p50_1" "$sc_p50_n" "$sc_p50_1")"
row "scale: memory per running room" "$(f0 "$sc_mem") KiB/room" "MemAvailable drop / $sc_added rooms" "-" "<= 384 KiB" \
	"$(verdict "$sc_mem <= 384" "$sc_mem")"
row "scale: time per 1,000 rooms started" "$sc_last_s1000 s (last)" "first 1,000: $sc_first_s1000 s" \
	"$(ratio "$sc_last_s1000" "$sc_first_s1000")" "<= 10 s (10 ms each)" "$(verdict "$sc_last_s1000 <= 10" "$sc_last_s1000")"
fi
row "   cleanup after DELETE of $((early_n + n_left)) rooms" "$((early_fail + del_fail)) not 200" "-" "-" "nothing left" \
	"$([ ${#leak[@]} -eq 0 ] && [ "$((early_fail + del_fail))" -eq 0 ] && echo OK || echo PROBLEM)"
echo "latencies: client-side wall time per request (tools/bench/httpbench.c); throughput: wrk; memory: MemAvailable as is (no cache drop);"
echo "transfers: curl, MB = 10^6 bytes; streamed output: tools/bench/sselat.py."
exit 0
}
