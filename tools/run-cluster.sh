#!/usr/bin/env bash
# make run-cluster: a roombox cluster on this one machine, in the foreground.
#
#   HAProxy on 127.0.0.1:$PORT (default 8080, conf/haproxy-cluster.cfg.example)
#     -> hosts h1..h$HOSTS (default 3): network namespaces roombox-hN, each
#        with an etcd member (one etcd cluster of HOSTS members), nginx on
#        10.77.0.N:80 and roombox-fcgi + roombox-helper with a state_dir and
#        uid range of its own
#
# The hosts are joined by veth pairs to a bridge of their own (rbxbr0,
# 10.77.0.0/24; the machine itself is 10.77.0.254 on it): no packet leaves
# the machine.  Everything lives under .run/cluster/ (CLUSTER_RUN_DIR
# overrides it, for the tests): hN/ (roombox.conf, state, logs, etcd's
# data), haproxy/ (its configuration, maps, admin socket), the token in
# tokens.  Stale namespaces and the bridge of an earlier run are removed
# first; Ctrl-C (or SIGTERM) stops everything and removes them again.
# A process that dies is reported and the rest go on: losing a member or a
# host is what a cluster is for (tests/cluster/ kills some on purpose).
#
# Per host, two generated scripts start its processes again as this run
# started them (the tests use them after killing some): hN/etcd.sh (its
# etcd member, in the foreground) and hN/start.sh (the whole host after a
# crash or a power loss: its etcd member, roombox-fcgi and nginx, in the
# background, with the state they left; it rewrites their pid files, so a
# Ctrl-C still stops them, and returns once nginx answers /api/health).
set -euo pipefail

# Start again with SIGINT and SIGTERM at their defaults (see tools/run.sh).
sig_ignored=$(awk '/^SigIgn:/ { print $2 }' /proc/$$/status)
if (( 16#$sig_ignored & ((1 << (2 - 1)) | (1 << (15 - 1))) )); then
	exec env --default-signal=INT,TERM "${BASH_SOURCE[0]}" "$@"
fi

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
port=${PORT:-8080}
hosts=${HOSTS:-3}
sync_s=${ROUTE_SYNC_S:-5}
run=${CLUSTER_RUN_DIR:-$repo/.run/cluster}
me="make run-cluster"
bridge=rbxbr0
net=10.77.0
# One host's uid range: max_rooms rooms of 65536 ids each, the hosts' ranges
# side by side from a base away from make run's (200000), the test stacks'
# (70,000,000 + ...) and make bench's.
max_rooms=256
uid_first=1600000000

die() { echo "$me: $*" >&2; exit 1; }
say() { echo "$me: $*" >&2; }
# shellcheck source=tools/stack.sh
. "$repo/tools/stack.sh"

[ "$(id -u)" -eq 0 ] || die "needs root: network namespaces, a bridge, and rooms (see make run). Run it as root, e.g. sudo make run-cluster"
case $port in ''|*[!0-9]*) die "PORT must be a number, not '$port'" ;; esac
case $hosts in [1-9]) ;; *) die "HOSTS must be 1 to 9, not '$hosts'" ;; esac
case $sync_s in ''|*[!0-9]*) die "ROUTE_SYNC_S must be a number of seconds, not '$sync_s'" ;; esac
for b in roombox-fcgi roombox-helper roomboxctl; do
	[ -x "$repo/build/$b" ] || die "build/$b is missing: run make first"
done
for c in etcd haproxy nginx curl ip nsenter flock; do
	command -v "$c" >/dev/null || die "$c is not installed (tools/deps.sh installs it)"
done

mkdir -p "$run"
run=$(cd "$run" && pwd)

# One cluster per machine: the names (roombox-hN, rbxbr0, 10.77.0.0/24) are
# fixed.  The lock is held for the life of this script.
exec {lockfd}> /run/roombox-cluster.lock
# CLUSTER_LOCK_WAIT (seconds, default 0): wait that long for another
# cluster to stop instead of refusing at once (the tests set it: one
# cluster at a time, whoever runs them).
flock -n "$lockfd" || {
	[ "${CLUSTER_LOCK_WAIT:-0}" -gt 0 ] && echo "waiting for another cluster to stop (lock /run/roombox-cluster.lock)"
	flock -w "${CLUSTER_LOCK_WAIT:-0}" "$lockfd"
} || die "another make run-cluster is running (lock /run/roombox-cluster.lock)"

# ---- the network: namespaces, veths, the bridge

ns_of() { echo "roombox-h$1"; }
in_ns() { local n=$1; shift; nsenter --net="/run/netns/$(ns_of "$n")" "$@"; }

# net_clean: every roombox-hN namespace (its processes killed first), their
# veths and the bridge.  Only ours: the names are this script's.
net_clean() {
	local ns pid
	for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^roombox-h[0-9]+$/ { print $1 }'); do
		for pid in $(ip netns pids "$ns" 2>/dev/null); do
			kill -KILL "$pid" 2>/dev/null || true
		done
		ip netns delete "$ns" 2>/dev/null || true
	done
	for l in $(ip -o link show 2>/dev/null | awk -F': ' '$2 ~ /^rbxv[0-9]+@/ { sub(/@.*/, "", $2); print $2 }'); do
		ip link delete "$l" 2>/dev/null || true
	done
	ip link delete "$bridge" 2>/dev/null || true
}

net_up() {
	ip link add "$bridge" type bridge
	ip addr add "$net.254/24" dev "$bridge"
	ip link set "$bridge" up
	for n in $(seq "$hosts"); do
		ip netns add "$(ns_of "$n")"
		ip link add "rbxv$n" type veth peer name eth0 netns "$(ns_of "$n")"
		ip link set "rbxv$n" master "$bridge" up
		in_ns "$n" ip link set lo up
		in_ns "$n" ip addr add "$net.$n/24" dev eth0
		in_ns "$n" ip link set eth0 up
	done
}

# ---- stop everything on the way out

# The rooms' keepers outlive roombox-fcgi by design: each host's helper
# stops them (their files stay for the next run), then every process left
# in a namespace is killed with it.
stopping=
stop_all() {
	[ -z "$stopping" ] || return 0
	stopping=1
	say "stopping"
	[ -z "${sync_pid:-}" ] || stop_pids 100 "$sync_pid"
	[ -z "${haproxy_pid:-}" ] || stop_pids 100 "$haproxy_pid"
	for n in $(seq "$hosts"); do
		# shellcheck disable=SC2046
		stop_pids 100 $(cat "$run/h$n/nginx.pid" "$run/h$n/fcgi.pid" 2>/dev/null)
		if [ -f "$run/h$n/roombox.conf" ]; then
			timeout 60 "$repo/build/roombox-helper" -c "$run/h$n/roombox.conf" stop-all \
				>/dev/null 2>&1 </dev/null || true
		fi
	done
	for n in $(seq "$hosts"); do
		# shellcheck disable=SC2046
		stop_pids 100 $(cat "$run/h$n/etcd.pid" 2>/dev/null)
	done
	net_clean
	# checked here, with the lock still held: once it is let go, the next
	# cluster's namespaces carry the same names
	local left
	left=$(ip netns list 2>/dev/null | awk '$1 ~ /^roombox-h[0-9]+$/ { printf "%s ", $1 }')
	if [ -n "$left" ]; then
		say "namespaces left behind: $left"
		stop_rc=1
	fi
	rm -f "$run"/h*/*.pid "$run/haproxy/haproxy.pid"
}
on_signal() { stop_all; exit "${stop_rc:-0}"; }
trap on_signal INT TERM HUP
trap stop_all EXIT

net_clean
net_up

# ---- the token, the shared key

tokens=$run/tokens
if [ ! -s "$tokens" ]; then
	(umask 077; od -An -N24 -tx1 /dev/urandom | tr -d ' \n' > "$tokens"; echo >> "$tokens")
fi
chmod 0600 "$tokens"
key=$run/cluster.key
if [ ! -s "$key" ]; then
	(umask 077; od -An -N32 -tx1 /dev/urandom | tr -d ' \n' > "$key"; echo >> "$key")
fi
chmod 0600 "$key"

# ---- etcd: one member per host

initial=
endpoints=
for n in $(seq "$hosts"); do
	initial+="${initial:+,}h$n=http://$net.$n:2380"
	endpoints+="${endpoints:+,}http://$net.$n:2379"
done
echo "$endpoints" > "$run/etcd-endpoints"

# start_bg N NAME CMD...: CMD in host N's namespace, in a session of its own
# (a Ctrl-C reaches only this script, which stops it: see tools/run.sh), its
# output in hN/NAME.log, its pid in hN/NAME.pid.
start_bg() {
	local n=$1 name=$2
	shift 2
	setsid nsenter --net="/run/netns/$(ns_of "$n")" "$@" < /dev/null >> "$run/h$n/$name.log" 2>&1 &
	echo $! > "$run/h$n/$name.pid"
}

for n in $(seq "$hosts"); do
	mkdir -p "$run/h$n"
	# hN/etcd.sh starts the member again as this run started it (the tests
	# stop and restart members with it).  Election timing for a loaded
	# 2-core machine: heartbeats every 200 ms, an election after 2 s of
	# silence.  --pre-vote (etcd 3.5's default, not 3.4's): a member back
	# from a partition, its term raised by the elections it ran alone,
	# does not unseat the leader (seconds without one: no writes).
	cat > "$run/h$n/etcd.sh" <<EOF
#!/bin/sh
# Generated by tools/run-cluster.sh: host h$n's etcd member, in its namespace.
exec nsenter --net=/run/netns/$(ns_of "$n") etcd --name h$n \\
	--data-dir "$run/h$n/etcd" \\
	--listen-client-urls http://$net.$n:2379,http://127.0.0.1:2379 \\
	--advertise-client-urls http://$net.$n:2379 \\
	--listen-peer-urls http://$net.$n:2380 \\
	--initial-advertise-peer-urls http://$net.$n:2380 \\
	--initial-cluster $initial \\
	--initial-cluster-token roombox-cluster --initial-cluster-state new \\
	--heartbeat-interval 200 --election-timeout 2000 --pre-vote \\
	--log-level warn --logger zap
EOF
	chmod 0755 "$run/h$n/etcd.sh"
	setsid "$run/h$n/etcd.sh" < /dev/null >> "$run/h$n/etcd.log" 2>&1 &
	echo $! > "$run/h$n/etcd.pid"
done

etcd_ok=
for _ in $(seq 300); do
	if curl -fsS --max-time 1 -X POST -d '{"key":"AA=="}' "http://$net.1:2379/v3/kv/range" >/dev/null 2>&1; then
		etcd_ok=1
		break
	fi
	for n in $(seq "$hosts"); do
		kill -0 "$(cat "$run/h$n/etcd.pid")" 2>/dev/null ||
			die "h$n's etcd exited during start-up (see $run/h$n/etcd.log)"
	done
	sleep 0.1
done
[ -n "$etcd_ok" ] || die "etcd did not answer within 30 s (see $run/h*/etcd.log)"

# ---- roombox on each host

for n in $(seq "$hosts"); do
	h=$run/h$n
	mkdir -p "$h/nginx/tmp" "$h/run"
	chmod 0711 "$h/run"
	{
		echo "# Generated by tools/run-cluster.sh for make run-cluster; rewritten on every start."
		echo "state_dir = $h/state"
		echo "run_dir = $h/run"
		echo "socket = $h/run/fcgi.sock"
		echo "tokens_file = $tokens"
		echo "helper = $repo/build/roombox-helper"
		echo "uid_base = $((uid_first + (n - 1) * max_rooms * 65536))"
		echo "max_rooms = $max_rooms"
		echo "# many rooms of 1G images written little: more than the disk has free"
		echo "disk_overcommit = 1000"
		echo "cluster_etcd = $endpoints"
		echo "cluster_host = h$n"
		echo "cluster_url = http://$net.$n:80"
		echo "cluster_key_file = $key"
		if [ -f "$run/local.conf" ]; then
			echo "# appended from $run/local.conf"
			cat "$run/local.conf"
		fi
	} > "$h/roombox.conf"
	chmod 0644 "$h/roombox.conf"
	nginx_conf_from_example "$repo" 80 "$h/run/fcgi.sock" "$h/nginx" |
		sed "s|listen 127\.0\.0\.1:80;|listen $net.$n:80;|" > "$h/nginx/nginx.conf" ||
		die "could not make $h/nginx/nginx.conf from nginx.conf.example (see above)"
	in_ns "$n" nginx -e "$h/nginx/error.log" -c "$h/nginx/nginx.conf" -t -q ||
		die "nginx rejects $h/nginx/nginx.conf (see above)"

	rm -f "$h/run/fcgi.sock"
	start_bg "$n" fcgi "$repo/build/roombox-fcgi" -c "$h/roombox.conf"

	cat > "$h/start.sh" <<EOF
#!/bin/sh
# Generated by tools/run-cluster.sh: host h$n back after all its processes
# died (a crash, a power loss): its etcd member, roombox-fcgi and nginx,
# in its namespace, with the state they left.  The rooms' keepers are not
# among them: roombox-fcgi starts a room again when it is next used.
set -eu
h="$h"
setsid "\$h/etcd.sh" < /dev/null >> "\$h/etcd.log" 2>&1 &
echo \$! > "\$h/etcd.pid"
rm -f "\$h/run/fcgi.sock"
setsid nsenter --net=/run/netns/$(ns_of "$n") "$repo/build/roombox-fcgi" -c "\$h/roombox.conf" \\
	< /dev/null >> "\$h/fcgi.log" 2>&1 &
echo \$! > "\$h/fcgi.pid"
i=0
until [ -S "\$h/run/fcgi.sock" ]; do
	i=\$((i + 1))
	[ \$i -le 600 ] || { echo "h$n: roombox-fcgi made no socket within 30 s (see \$h/fcgi.log)" >&2; exit 1; }
	sleep 0.05
done
setsid nsenter --net=/run/netns/$(ns_of "$n") nginx -e "\$h/nginx/error.log" -c "\$h/nginx/nginx.conf" \\
	-g 'daemon off;' < /dev/null >> "\$h/nginx.log" 2>&1 &
echo \$! > "\$h/nginx.pid"
i=0
until curl -fsS --max-time 1 -o /dev/null "http://$net.$n/api/health" 2>/dev/null; do
	i=\$((i + 1))
	[ \$i -le 600 ] || { echo "h$n: no answer from http://$net.$n/api/health within 30 s" >&2; exit 1; }
	sleep 0.05
done
EOF
	chmod 0755 "$h/start.sh"
done
for n in $(seq "$hosts"); do
	h=$run/h$n
	for _ in $(seq 200); do
		[ -S "$h/run/fcgi.sock" ] && break
		kill -0 "$(cat "$h/fcgi.pid")" 2>/dev/null || die "h$n's roombox-fcgi exited during start-up (see $h/fcgi.log)"
		sleep 0.05
	done
	[ -S "$h/run/fcgi.sock" ] || die "h$n's roombox-fcgi did not create its socket within 10 s"
	start_bg "$n" nginx nginx -e "$h/nginx/error.log" -c "$h/nginx/nginx.conf" -g 'daemon off;'
done
for n in $(seq "$hosts"); do
	ok=
	for _ in $(seq 200); do
		if curl -fsS --max-time 1 "http://$net.$n/api/health" >/dev/null 2>&1; then
			ok=1
			break
		fi
		kill -0 "$(cat "$run/h$n/nginx.pid")" 2>/dev/null || die "h$n's nginx exited during start-up (see $run/h$n/nginx/error.log)"
		sleep 0.05
	done
	[ -n "$ok" ] || die "no answer from h$n (http://$net.$n/api/health) within 10 s"
done

# ---- the router

hp=$run/haproxy
mkdir -p "$hp"
: > "$hp/hosts.map"
: > "$hp/previews.map"
rm -f "$hp/admin.sock"
servers=
for n in $(seq "$hosts"); do
	servers+="    server h$n $net.$n:80\n"
done
haproxy_conf_from_example() {
	awk -v servers="$servers" '
		/# servers:/ { print; printf "%s", servers; skip = 1; next }
		/# end of servers/ { skip = 0 }
		!skip { print }' "$repo/conf/haproxy-cluster.cfg.example" |
	sed -e "s|bind 127\.0\.0\.1:8080|bind 127.0.0.1:$port|" \
	    -e "s|/run/roombox/haproxy-admin\.sock|$hp/admin.sock|" \
	    -e "s|/run/roombox/haproxy/|$hp/|g"
}
haproxy_conf_from_example > "$hp/haproxy.cfg"
if grep -n '/run/roombox\|127\.0\.0\.1:8080' "$hp/haproxy.cfg" | grep -v '^[0-9]*:[[:space:]]*#' | grep -q .; then
	die "conf/haproxy-cluster.cfg.example has a path or port that tools/run-cluster.sh does not rewrite"
fi
haproxy -c -q -f "$hp/haproxy.cfg" || die "haproxy rejects $hp/haproxy.cfg (see above)"
setsid haproxy -db -f "$hp/haproxy.cfg" < /dev/null >> "$hp/haproxy.log" 2>&1 &
haproxy_pid=$!
echo "$haproxy_pid" > "$hp/haproxy.pid"
ok=
for _ in $(seq 200); do
	if curl -fsS --max-time 1 "http://127.0.0.1:$port/api/health" >/dev/null 2>&1; then
		ok=1
		break
	fi
	kill -0 "$haproxy_pid" 2>/dev/null || die "haproxy exited during start-up (see $hp/haproxy.log)"
	sleep 0.05
done
[ -n "$ok" ] || die "no answer from http://127.0.0.1:$port/api/health within 10 s"

# The router's map kept in step with etcd: route-sync now, then every
# ROUTE_SYNC_S seconds (0: never; the tests run it themselves).
ctl=("$repo/build/roomboxctl" -c "$run/h1/roombox.conf" -e "$endpoints" -a "$hp/admin.sock")
"${ctl[@]}" route-sync >/dev/null || say "roomboxctl route-sync failed (see above)"
if [ "$sync_s" -gt 0 ]; then
	( while sleep "$sync_s"; do
		"${ctl[@]}" route-sync >/dev/null 2>>"$hp/route-sync.log" || true
	  done ) < /dev/null &
	sync_pid=$!
fi

case $tokens in
	"$repo"/*) shown=${tokens#"$repo"/} ;;
	*) shown=$tokens ;;
esac
cat <<EOF
roombox cluster is running: HAProxy on http://127.0.0.1:$port -> h1..h$hosts ($net.1..$net.$hosts:80, namespaces roombox-h1..)
  etcd:    $endpoints
  state:   $run   (hN/roombox.conf, hN/*.log, haproxy/haproxy.cfg)
  operate: build/roomboxctl -c ${run#"$repo"/}/h1/roombox.conf -a ${hp#"$repo"/}/admin.sock hosts | where ROOM | route-sync | drain HOST
           (route-sync also runs every ${sync_s} s: ROUTE_SYNC_S, 0 for never)
Try (from $repo):
curl -i -H "Authorization: Bearer \$(cat $shown)" -d '{"cmd":"echo hi"}' localhost:$port/api/rooms/room-123/sandbox/exec
Press Ctrl-C to stop.
EOF

# Stay in the foreground until Ctrl-C; report a process that ends.
set +e
while :; do
	wait -n
	rc=$?
	[ -n "$stopping" ] && exit 0
	[ "$rc" -eq 127 ] && { sleep 1; continue; }
	say "a process exited (status $rc); the rest go on (logs in $run)"
done
