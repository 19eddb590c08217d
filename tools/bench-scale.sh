# shellcheck shell=bash
# shellcheck disable=SC2154,SC2034  # tmp, prefix, exec_body... are tools/bench.sh's; sc_* are its summary's
# make bench-scale: the 10,000-room figure, as a section of tools/bench.sh
# (BENCH_ONLY=scale), which sources this file on its stack (started with
# max_rooms at least BENCH_SCALE_ROOMS + 8) and uses its helpers (hb, settle,
# running_rooms, keeper_of, cgroup_mem, calc, kv, f0, f2, verdict, ratio).
#
# Warns when kernel.pid_max is too low for the rooms (3 pids each).
#
# Starts BENCH_SCALE_ROOMS running rooms (one exec each, BENCH_CREATE_WORKERS
# at a time, in batches of 1,000) and prints:
#   - warm exec p50 of one room before the rooms start and with all running
#     (target: within 20 % of the 1-room figure);
#   - memory per running room: the drop of MemAvailable over the rooms
#     started (host-wide, as is: no cache drop), judged against 384 KiB, and
#     where it went: the deltas of /proc/meminfo's fields (AnonPages, Slab,
#     PageTables, KernelStack, Percpu, Shmem, Cached...) per room, the
#     slab caches that grew most (/proc/slabinfo, num_objs x objsize), a
#     sample of keepers' RSS and PSS, and the rooms' cgroup usage;
#   - the time per 1,000 rooms started, batch by batch, judged against
#     10 s (1,000 x the 10 ms first-exec target, back to back).
# The rooms are deleted by bench.sh's cleanup section, like every other.
#
# Why per-room memory grows with N: every memory cgroup keeps, per NUMA
# node, a shrinker slot (16 bytes once kmalloc rounds it: 1 KiB per 64)
# for every superblock the host has had at once since boot -- the mark
# never goes down -- and each running room has a memory cgroup and eight
# superblocks (its disk, three overlays, proc, devpts, /dev/shm, its IPC
# namespace's mqueue).  So N rooms hold ~128 x N bytes each in those
# maps: ~1.25 MiB at 10,000, beyond everything else a room costs; and
# after such a run every new memory cgroup costs that much until a
# reboot, whatever runs.  The section prints that cost before and after
# (memcg_probe_kib).

# meminfo_snap FILE: /proc/meminfo's values (kB) as "Name value" lines.
meminfo_snap() { awk '{ sub(":", "", $1); print $1, $2 }' /proc/meminfo > "$1"; }
# slab_snap FILE: "cache KiB" for every slab cache (num_objs x objsize).
slab_snap() { awk 'NR > 2 { printf "%s %.0f\n", $1, $3 * $4 / 1024 }' /proc/slabinfo > "$1"; }

# memcg_probe_kib: KiB of kmalloc-1k a new memory cgroup takes now -- its
# shrinker maps -- from 20 empty ones made beside the rooms' and removed
# (n/a without a memory controller).
memcg_probe_kib() {
	local root a b i n=20
	if [ -f /sys/fs/cgroup/memory/memory.usage_in_bytes ]; then
		root=/sys/fs/cgroup/memory
	elif grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
		root=/sys/fs/cgroup
	else
		echo n/a
		return
	fi
	a=$(awk '$1 == "kmalloc-1k" { print $2 }' /proc/slabinfo)
	for i in $(seq $n); do mkdir "$root/rbx-bench-probe-$$-$i" || break; done
	b=$(awk '$1 == "kmalloc-1k" { print $2 }' /proc/slabinfo)
	for i in $(seq $n); do rmdir "$root/rbx-bench-probe-$$-$i" 2>/dev/null; done
	echo $(((b - a) / n))
}

# A running room holds three host pids (its keeper, and the kernel's jbd2
# and ext4-rsv-conversion threads of its disk), and every exec forks more.
sc_pids=$(cat /proc/sys/kernel/pid_max)
if [ "$sc_pids" -lt $((3 * SCALE_ROOMS + 4096)) ]; then
	say "kernel.pid_max is $sc_pids: $SCALE_ROOMS rooms take about $((3 * SCALE_ROOMS)) pids, so forks will fail" \
		"near the end (sysctl -w kernel.pid_max=4194304 first)"
fi

section "scale. $SCALE_ROOMS running rooms ($CREATE_WORKERS at a time, batches of 1,000): warm exec of one room before and with them, memory and time per room"
echo "first exec (creates room ${prefix}w, the one measured): $(hb -m POST -b "$exec_body" -n 1 -k '"exitCode":0' "$(exec_path w)")"
settle
sc_one=$(hb -m POST -b "$exec_body" -n 1000 -w 50 -k '"exitCode":0' "$(exec_path w)")
echo "warm exec, 1 room running, N=1000: $sc_one"
sc_p50_1=$(kv "$sc_one" p50_ms)

settle
echo "a new memory cgroup takes $(memcg_probe_kib) KiB of kmalloc-1k now (its shrinker maps: 1 KiB per 64 superblocks the host has had at once since boot)"
sync
sleep 1
sc_run0=$(running_rooms)
meminfo_snap "$tmp/out/meminfo0"
slab_snap "$tmp/out/slab0"
sc_last_s1000=n/a sc_first_s1000=n/a
done_n=0
sc_t0=$(date +%s.%N)
while [ "$done_n" -lt "$SCALE_ROOMS" ]; do
	b=$((SCALE_ROOMS - done_n))
	[ "$b" -le 1000 ] || b=1000
	tb=$(date +%s.%N)
	r=$(hb -m POST -b "$exec_body" -n "$b" -c "$CREATE_WORKERS" -o "$done_n" -k '"exitCode":0' "$(exec_path 'z{i}')")
	s=$(calc "$(date +%s.%N) - $tb")
	s1000=$(calc "sprintf(\"%.1f\", $s * 1000 / $b)")
	done_n=$((done_n + b))
	[ "$sc_first_s1000" != n/a ] || sc_first_s1000=$s1000
	sc_last_s1000=$s1000
	echo "rooms $((done_n - b))..$((done_n - 1)): $(f2 "$s") s, $s1000 s per 1,000 ($(calc "sprintf(\"%.0f\", $b / $s)") rooms/s); MemAvailable $(mem_available_kib) KiB; first exec $r"
	[ "$(kv "$r" bad)" = 0 ] || say "scale: $(kv "$r" bad) of $b first execs were not 200 with exitCode 0"
done
sc_all_s=$(calc "$(date +%s.%N) - $sc_t0")
sleep 1
sc_run1=$(running_rooms)
meminfo_snap "$tmp/out/meminfo1"
slab_snap "$tmp/out/slab1"
sc_added=$((sc_run1 - sc_run0))
echo "running rooms: $sc_run0 -> $sc_run1 (all started in $(f0 "$sc_all_s") s)"

# Per room: (after - before) / rooms added, of each /proc/meminfo field.
sc_per() {
	[ "$sc_added" -gt 0 ] || { echo n/a; return; }
	awk -v k="$1" -v n="$sc_added" 'FNR == 1 { f++ } $1 == k { v[f] = $2 }
		END { printf "%.0f", (f == 2 ? (k == "MemAvailable" || k == "MemFree" ? v[1] - v[2] : v[2] - v[1]) / n : 0) }' \
		"$tmp/out/meminfo0" "$tmp/out/meminfo1"
}
sc_mem=$(sc_per MemAvailable)
echo "memory per room, from /proc/meminfo over these $sc_added rooms (KiB per room; host-wide, as is -- other work on the host shows up):"
echo "  MemAvailable drop $sc_mem (judged: everything the rooms took that the kernel cannot give back)"
echo "  MemFree drop $(sc_per MemFree); of it: AnonPages $(sc_per AnonPages), Slab $(sc_per Slab)" \
	"(SUnreclaim $(sc_per SUnreclaim), SReclaimable $(sc_per SReclaimable)), PageTables $(sc_per PageTables)," \
	"KernelStack $(sc_per KernelStack), Percpu $(sc_per Percpu), Shmem $(sc_per Shmem), Cached $(sc_per Cached)," \
	"Buffers $(sc_per Buffers), Mapped $(sc_per Mapped)"
echo "  slab caches that grew most (KiB per room: num_objs x objsize after - before, /proc/slabinfo):"
awk -v n="$sc_added" 'FNR == 1 { f++ } { v[f, $1] = $2; names[$1] = 1 }
	END { for (c in names) { d = v[2, c] - v[1, c]; if (n > 0 && d > 0) printf "%.1f %s\n", d / n, c } }' \
	"$tmp/out/slab0" "$tmp/out/slab1" | sort -rn | head -n 15 | awk '{ printf "    %-28s %s\n", $2, $1 }'
echo "  a new memory cgroup takes $(memcg_probe_kib) KiB of kmalloc-1k now (was that at the start, above)"
rss_sum=0 pss_sum=0 sc_k=0 cg_sum=0 cg_n=0
for i in $(seq 0 $(( (SCALE_ROOMS - 1) / 100 + 1 )) $((SCALE_ROOMS - 1))); do
	r=${prefix}z$i
	if pid=$(keeper_of "$r"); then
		read -r rs ps < <(awk '/^Rss:/ { r = $2 } /^Pss:/ { p = $2 } END { print r + 0, p + 0 }' "/proc/$pid/smaps_rollup" 2>/dev/null)
		rss_sum=$((rss_sum + ${rs:-0})) pss_sum=$((pss_sum + ${ps:-0})) sc_k=$((sc_k + 1))
	fi
	c=$(cgroup_mem "$r")
	[ -n "$c" ] && { cg_sum=$((cg_sum + c)); cg_n=$((cg_n + 1)); }
done
[ "$sc_k" -gt 0 ] && echo "  keepers (/proc/<pid>/smaps_rollup, $sc_k sampled): RSS $((rss_sum / sc_k)) KiB, PSS $((pss_sum / sc_k)) KiB each"
# Less skewed by other work's page cache and processes than MemAvailable:
# the kernel's unreclaimable parts (host-wide still) and the keepers' PSS.
[ "$sc_k" -gt 0 ] && echo "  context, less skewed by the host's other work: SUnreclaim + PageTables + KernelStack + Percpu" \
	"per room + keeper PSS = $(calc "sprintf(\"%.0f\", $(sc_per SUnreclaim) + $(sc_per PageTables) + $(sc_per KernelStack) + $(sc_per Percpu) + $pss_sum / $sc_k)") KiB"
[ "$cg_n" -gt 0 ] && echo "  room cgroups (memory.usage_in_bytes or memory.current, $cg_n sampled): $((cg_sum / cg_n / 1024)) KiB each (includes the page cache of the room's files)"

settle
sc_many=$(hb -m POST -b "$exec_body" -n 1000 -w 50 -k '"exitCode":0' "$(exec_path w)")
echo "warm exec, $sc_run1 rooms running, N=1000: $sc_many"
sc_p50_n=$(kv "$sc_many" p50_ms)
sc_one2=$(hb -m GET -n 200 -w 20 /api/health)
echo "context: GET /api/health with $sc_run1 rooms running: $sc_one2"
