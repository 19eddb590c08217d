# Shared by tools/run.sh (make run) and tools/bench.sh (make bench): the
# parts of a local stack both start the same way.  Source it; it defines
# functions only.

# nginx_conf_from_example REPO PORT SOCKET DIR: print nginx.conf.example with
# only the port, the FastCGI socket, the worker user (root: the stack's
# roombox-fcgi runs as root and owns its socket) and the files nginx writes
# (under DIR) changed.  Fails if the example names a path or port this does
# not rewrite, so a change there cannot silently reach the system's nginx.
nginx_conf_from_example() {
	local repo=$1 port=$2 socket=$3 dir=$4 out
	out=$(sed -e "s|^user[[:space:]].*;|user root;|" \
	    -e "s|listen 127\.0\.0\.1:8080;|listen 127.0.0.1:$port;|" \
	    -e "s|unix:/run/roombox/fcgi/fcgi\.sock|unix:$socket|" \
	    -e "s|unix:/run/roombox/fcgi/preview\.sock|unix:${socket%/*}/preview.sock|" \
	    -e "s|unix:/run/roombox/fcgi/term\.sock|unix:${socket%/*}/term.sock|" \
	    -e "s|^pid[[:space:]].*;|pid $dir/nginx.pid;|" \
	    -e "s|^error_log[[:space:]][^[:space:];]*|error_log $dir/error.log|" \
	    -e "s|access_log[[:space:]][^;]*;|access_log $dir/access.log;|" \
	    -e "s|\(_temp_path[[:space:]]*\)/var/lib/nginx/\([a-z]*\);|\1$dir/tmp/\2;|" \
	    -e "s|alias /usr/share/roombox/console/;|alias $repo/build/console/;|" \
	    "$repo/nginx.conf.example") || return 1
	if printf '%s\n' "$out" | grep -n '/var/\|/run/roombox\|127\.0\.0\.1:8080;' |
	   grep -v '^[0-9]*:[[:space:]]*#' | grep -q .; then
		echo "nginx.conf.example has a path or port that tools/stack.sh does not rewrite" >&2
		return 1
	fi
	printf '%s\n' "$out"
}

# stop_pids TRIES PID...: SIGTERM each, wait up to TRIES x 50 ms for each to
# end, then SIGKILL what is left, and reap.
stop_pids() {
	local tries=$1 pid
	shift
	for pid in "$@"; do
		kill -TERM "$pid" 2>/dev/null || true
	done
	for pid in "$@"; do
		for _ in $(seq "$tries"); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
}
