#!/usr/bin/env bash
# Install, with apt-get, the Debian packages that roombox needs to build, test,
# run and package itself -- only those that are missing.  When everything is
# already there this is one dpkg-query and nothing else.
set -euo pipefail

packages=(
	build-essential pkg-config musl-tools
	clang libclang-rt-dev
	libfcgi-dev libjson-c-dev libseccomp-dev uuid-dev libcmocka-dev
	libcurl4-openssl-dev
	libarchive-dev libssl-dev zstd  # the export archive (room_archive.c); zstd: tests
	libxxhash-dev  # the XXH64 seal of an export (format version 2)
	lighttpd spawn-fcgi
	python3-pytest python3-requests python3-pip  # pip in rooms with rootfs = host (test_pip.py)
	python3-pytest-xdist  # tools/integration.sh: a suite's modules on several workers at once
	python3-jsonschema  # answers checked against docs/openapi.json (test_openapi.py)
	chromium chromium-driver python3-selenium  # the console's tests (tests/console/)
	time
	curl procps psmisc iproute2 e2fsprogs util-linux bubblewrap wrk
	xfsprogs  # make bench: snapshots and forks on an XFS with reflinks (figure 15)
	prometheus  # promtool, for test_metrics.py; no smaller package ships it
	nftables dnsmasq-base
	etcd-server  # cluster mode: where each room lives (tests/integration/test_cluster_node.py, make run-cluster)
	etcd-client  # etcdctl: looking at and changing a cluster's records by hand
	haproxy      # cluster mode: the router in front of the hosts (make run-cluster, tests/cluster/)
	netcat-openbsd  # make bench-cluster: the move's reference, tar | zstd | nc between two hosts
	debhelper devscripts lintian fakeroot
	dpkg-dev
)
# Any of these provides /usr/sbin/nginx; nginx-light is installed when none is.
nginx_flavours=(nginx-light nginx nginx-core nginx-full nginx-extras)

installed() {
	# Prints the names (without :arch) of the given packages that are installed.
	dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' "$@" 2>/dev/null |
		awk '$1 == "ii" { print $2 }'
}

mapfile -t have < <(installed "${packages[@]}" "${nginx_flavours[@]}")
declare -A is_installed=()
for p in "${have[@]}"; do is_installed[$p]=1; done

missing=()
for p in "${packages[@]}"; do
	[ -n "${is_installed[$p]:-}" ] || missing+=("$p")
done
nginx_ok=
for p in "${nginx_flavours[@]}"; do
	[ -n "${is_installed[$p]:-}" ] && nginx_ok=1
done
[ -n "$nginx_ok" ] || missing+=(nginx-light)

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	echo "tools/deps.sh: needs root to install missing Debian packages: ${missing[*]}" >&2
	echo "tools/deps.sh: run as root, or: sudo apt-get install ${missing[*]}" >&2
	exit 1
fi

echo "tools/deps.sh: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q

# nginx-light is gone from newer Debian releases; fall back to nginx.
for i in "${!missing[@]}"; do
	if [ "${missing[$i]}" = nginx-light ] &&
	   ! apt-cache show nginx-light >/dev/null 2>&1; then
		missing[$i]=nginx
	fi
done

# Installing nginx or lighttpd would start the system's copy on port 80;
# roombox starts its own instances, so keep maintainer scripts from starting
# services (policy-rc.d, honoured by invoke-rc.d), unless one already exists.
policy=/usr/sbin/policy-rc.d
made_policy=
if [ ! -e "$policy" ]; then
	printf '#!/bin/sh\nexit 101\n' > "$policy"
	chmod 0755 "$policy"
	made_policy=1
fi
cleanup() { if [ -n "$made_policy" ]; then rm -f "$policy"; fi; }
trap cleanup EXIT

apt-get install -y -q --no-install-recommends "${missing[@]}"
