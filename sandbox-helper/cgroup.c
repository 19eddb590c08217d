/* Per-room cgroups: cgroup v2 and cgroup v1 behind one small interface.
 *
 * Why it looks like this:
 *
 * - A room's limits sit on <group>/<room>/ (<group> is "roombox", or
 *   "roombox-<hash of state_dir>" for another instance on the same host, so
 *   two instances never share a room cgroup).  Its processes -- the keeper,
 *   which forks every exec, and whatever the execs leave running -- live in
 *   the leaf keeper/ on v2, which demands processes only in leaves, and in
 *   <room>/ itself on v1, which does not.  Not a second cgroup on v1 because
 *   every memory cgroup costs the kernel a shrinker map sized for every
 *   superblock the host ever had at once (a room mounts about nine): after
 *   1000 rooms, ~147 KiB per memory cgroup, and a keeper/ leaf doubled it.
 *   (On v2 keeper/ has no memory controller of its own: the room does not
 *   enable controllers below itself.)
 *
 * - keeper/ (v2) is the only cgroup made below a room, but not necessarily
 *   the only one there: older versions made a leaf per exec and a keeper/
 *   leaf on v1, and a stopped room keeps its directories across an upgrade.
 *   So nothing assumes the shape below <room>/: a kill covers the room's
 *   whole subtree, removing a room removes the whole subtree, and setting a
 *   v1 room up drops an empty keeper/ left by an older version.
 *
 * - v1 has one tree per controller (memory, pids, cpu, freezer), so every
 *   directory operation and every move of a pid is done once per tree.  The
 *   "roots" of a cgroup_sys are that list; v2 has a single root.  Only the
 *   limits differ per back end.
 *
 * - Killing must not race a fork bomb: between reading cgroup.procs and
 *   sending SIGKILL new children appear.  v2 (5.14+) has cgroup.kill, which
 *   the kernel applies atomically.  Otherwise the group is frozen first (v1
 *   freezer, or v2 cgroup.freeze), signalled, then thawed so the kills take
 *   effect -- and that is repeated until cgroup.procs reads empty in every
 *   tree, for at most KILL_DEADLINE_MS.  Zombies are not listed in
 *   cgroup.procs and do not hold a cgroup, so their parents' reaping is
 *   nobody's business here.
 *
 * - The cpu controller is best-effort: v2 cannot enable it while a realtime
 *   thread sits outside the root, and some v1 hosts do not mount it.  A
 *   memory or pids limit that cannot be applied is an error.
 *
 * Every failure reads "cgroup <room>: <step>: <strerror>", where the step
 * names the path, so that on v1 one can tell which tree refused.
 */
#include "cgroup.h"
#include "fnv.h"
#include "clock.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KILL_DEADLINE_MS 2000
#define FREEZE_WAIT_MS 100
#define CPU_PERIOD_US 100000
#define CPU_QUOTA_MIN_US 1000	/* the kernel refuses less */
#define MAX_ROOTS 4
#define MAX_TREE_DEPTH 8	/* rooms are two levels deep; a bound, not a need */

/* The context of one public call: who to blame in messages. */
struct cg_op {
	const struct cgroup_sys *sys;
	const char *room;
	char *err;
	size_t errlen;
};

/* --- small helpers ------------------------------------------------------- */

__attribute__((format(printf, 2, 3)))
static int op_fail(struct cg_op *op, const char *fmt, ...)
{
	int e = errno;
	char step[PATH_MAX + 64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(step, sizeof(step), fmt, ap);
	va_end(ap);
	snprintf(op->err, op->errlen, "cgroup %s: %s: %s", op->room, step,
		 strerror(e));
	errno = e;
	return -1;
}

__attribute__((format(printf, 3, 4)))
static int path_fmt(char *buf, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	int n = vsnprintf(buf, len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Names become path components; the caller validated room ids, but a
 * setuid program checks again what it is about to join to a path. */
static bool component_ok(const char *s)
{
	size_t n = 0;
	for (; s[n]; n++) {
		char c = s[n];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		      (c >= '0' && c <= '9') || c == '_' || c == '-'))
			return false;
	}
	return n > 0 && n <= 64;
}

/* cgroupfs files are written in one write(2) each: the kernel parses each
 * write as a whole.  O_TRUNC means nothing to cgroupfs (as with `echo >`)
 * and keeps a plain file, as in tests, holding only the last value. */
static int cgroup_file_write(const char *path, const char *value)
{
	int fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	size_t len = strlen(value);
	ssize_t n = write(fd, value, len);
	int e = errno;
	close(fd);
	if (n < 0) {
		errno = e;
		return -1;
	}
	if ((size_t)n != len) {
		errno = EIO;
		return -1;
	}
	return 0;
}

static int read_file(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	int e = errno;
	close(fd);
	if (n < 0) {
		errno = e;
		return -1;
	}
	buf[n] = '\0';
	return 0;
}

static int read_u64(const char *path, uint64_t *out)
{
	char buf[64], *end;

	if (read_file(path, buf, sizeof(buf)) < 0)
		return -1;
	errno = 0;
	unsigned long long v = strtoull(buf, &end, 10);
	if (errno || end == buf) {
		errno = EINVAL;
		return -1;
	}
	*out = v;
	return 0;
}

/* Is `word` one of the space-separated words of `list`? */
static bool has_word(const char *list, const char *word)
{
	size_t wl = strlen(word);
	for (const char *p = list; (p = strstr(p, word)); p += wl) {
		bool starts = p == list || p[-1] == ' ' || p[-1] == '\n';
		bool ends = p[wl] == '\0' || p[wl] == ' ' || p[wl] == '\n';
		if (starts && ends)
			return true;
	}
	return false;
}

static bool file_exists(const char *path)
{
	return access(path, F_OK) == 0;
}

/* --- detection ----------------------------------------------------------- */

static bool v2_has_controllers(const char *dir)
{
	char path[PATH_MAX], list[512];

	if (path_fmt(path, sizeof(path), "%s/cgroup.controllers", dir) < 0 ||
	    read_file(path, list, sizeof(list)) < 0)
		return false;
	return has_word(list, "memory") && has_word(list, "pids");
}

/* A v1 hierarchy has cgroup.procs but, unlike a v2 one, no
 * cgroup.controllers.  Copies the path into out when it is one. */
static void v1_find(const char *fsroot, const char *name, char *out, size_t len)
{
	char dir[PATH_MAX], procs[PATH_MAX], ctl[PATH_MAX];

	out[0] = '\0';
	if (path_fmt(dir, sizeof(dir), "%s/%s", fsroot, name) < 0 ||
	    path_fmt(procs, sizeof(procs), "%s/cgroup.procs", dir) < 0 ||
	    path_fmt(ctl, sizeof(ctl), "%s/cgroup.controllers", dir) < 0)
		return;
	if (file_exists(procs) && !file_exists(ctl) && strlen(dir) < len)
		strcpy(out, dir);
}

static bool v2_pick(struct cgroup_sys *sys, const char *dir)
{
	if (strlen(dir) >= sizeof(sys->v2_root) || !v2_has_controllers(dir))
		return false;
	strcpy(sys->v2_root, dir);
	sys->mode = CG_V2;
	return true;
}

void cgroup_detect(struct cgroup_sys *sys, const char *fsroot)
{
	char unified[PATH_MAX];

	memset(sys, 0, sizeof(*sys));
	sys->mode = CG_NONE;
	snprintf(sys->group, sizeof(sys->group), "roombox");
	if (v2_pick(sys, fsroot))
		return;
	/* A hybrid host whose unified tree was given the controllers. */
	if (path_fmt(unified, sizeof(unified), "%s/unified", fsroot) == 0 &&
	    v2_pick(sys, unified))
		return;

	v1_find(fsroot, "memory", sys->memory_root, sizeof(sys->memory_root));
	v1_find(fsroot, "pids", sys->pids_root, sizeof(sys->pids_root));
	v1_find(fsroot, "cpu", sys->cpu_root, sizeof(sys->cpu_root));
	v1_find(fsroot, "freezer", sys->freezer_root, sizeof(sys->freezer_root));
	if (sys->memory_root[0] && sys->pids_root[0]) {
		sys->mode = CG_V1;
	} else {
		memset(sys, 0, sizeof(*sys));
		snprintf(sys->group, sizeof(sys->group), "roombox");
	}
}

void cgroup_set_instance(struct cgroup_sys *sys, const char *state_dir, const char *default_state_dir)
{
	if (strcmp(state_dir, default_state_dir) == 0) {
		snprintf(sys->group, sizeof(sys->group), "roombox");
		return;
	}
	snprintf(sys->group, sizeof(sys->group), "roombox-%08x", fnv1a32(state_dir));
}

const char *cgroup_mode_name(enum cgroup_mode m)
{
	switch (m) {
	case CG_V1: return "v1";
	case CG_V2: return "v2";
	default:    return "none";
	}
}

/* --- paths and trees ----------------------------------------------------- */

/* The trees a room lives in: one on v2, one per mounted controller on v1. */
static size_t cg_roots(const struct cgroup_sys *sys, const char *roots[MAX_ROOTS])
{
	size_t n = 0;

	if (sys->mode == CG_V2) {
		roots[n++] = sys->v2_root;
	} else if (sys->mode == CG_V1) {
		const char *all[MAX_ROOTS] = { sys->memory_root, sys->pids_root,
					       sys->cpu_root, sys->freezer_root };
		for (size_t i = 0; i < MAX_ROOTS; i++)
			if (all[i][0])
				roots[n++] = all[i];
	}
	return n;
}

/* <root>/<group>/<room>[/<leaf>] */
static int room_path(char *buf, size_t len, const struct cgroup_sys *sys, const char *root,
		     const char *room, const char *leaf)
{
	if (leaf)
		return path_fmt(buf, len, "%s/%s/%s/%s", root, sys->group, room, leaf);
	return path_fmt(buf, len, "%s/%s/%s", root, sys->group, room);
}

static int make_dir(struct cg_op *op, const char *path)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return op_fail(op, "mkdir %s", path);
	return 0;
}

static int write_value(struct cg_op *op, const char *dir, const char *file,
		       const char *value)
{
	char path[PATH_MAX];

	if (path_fmt(path, sizeof(path), "%s/%s", dir, file) < 0 ||
	    cgroup_file_write(path, value) < 0)
		return op_fail(op, "write %s/%s", dir, file);
	return 0;
}

/* A CPU bandwidth file (cpu.max, cpu.cfs_period_us, cpu.cfs_quota_us):
 * each write makes the kernel check the bandwidth of every cpu cgroup of
 * the host (walk_tg_tree), about a millisecond with a few thousand rooms,
 * so a value the file already reads (a room started again with its limit;
 * a new cgroup's default period) is not written. */
static int write_cpu_value(struct cg_op *op, const char *dir, const char *file,
			   const char *value, bool required)
{
	char path[PATH_MAX], now[64];

	if (path_fmt(path, sizeof(path), "%s/%s", dir, file) < 0)
		return op_fail(op, "write %s/%s", dir, file);
	if (read_file(path, now, sizeof(now)) == 0) {
		size_t n = strlen(now);
		while (n && now[n - 1] == '\n')
			now[--n] = '\0';
		if (!strcmp(now, value))
			return 0;
	} else if (!required && errno == ENOENT) {
		return 0;   /* as write_limit: no controller, nothing to lift */
	}
	return write_value(op, dir, file, value);
}

/* A limit that is off (optional) may be absent: its controller is not
 * there, and there is nothing to lift. */
static int write_limit(struct cg_op *op, const char *dir, const char *file,
		       const char *value, bool required)
{
	char path[PATH_MAX];

	if (path_fmt(path, sizeof(path), "%s/%s", dir, file) < 0)
		return op_fail(op, "write %s/%s", dir, file);
	if (!required && !file_exists(path))
		return 0;
	return write_value(op, dir, file, value);
}

/* Remove a cgroup and every cgroup below it; a cgroup directory holds only
 * kernel files, which rmdir takes along.  Absent is done. */
static int remove_tree(struct cg_op *op, const char *dir, int depth)
{
	DIR *d = opendir(dir);
	if (!d)
		return errno == ENOENT ? 0 : op_fail(op, "open %s", dir);
	int rc = 0;
	struct dirent *de;
	while (rc == 0 && (de = readdir(d))) {
		char sub[PATH_MAX];
		if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") ||
		    !strcmp(de->d_name, ".."))
			continue;
		if (depth >= MAX_TREE_DEPTH || path_fmt(sub, sizeof(sub), "%s/%s",
							dir, de->d_name) < 0)
			rc = op_fail(op, "remove %s/%s", dir, de->d_name);
		else
			rc = remove_tree(op, sub, depth + 1);
	}
	closedir(d);
	if (rc == 0 && rmdir(dir) < 0 && errno != ENOENT)
		rc = op_fail(op, "rmdir %s", dir);
	return rc;
}

/* In every tree: remove <room>/ and whatever cgroups are below it. */
static int remove_everywhere(struct cg_op *op)
{
	const char *roots[MAX_ROOTS];
	size_t n = cg_roots(op->sys, roots);

	for (size_t i = 0; i < n; i++) {
		char dir[PATH_MAX];
		if (room_path(dir, sizeof(dir), op->sys, roots[i], op->room, NULL) < 0)
			return op_fail(op, "path %s", roots[i]);
		if (remove_tree(op, dir, 0) < 0)
			return -1;
	}
	return 0;
}

/* --- processes ----------------------------------------------------------- */

typedef int (*pid_fn)(pid_t pid, void *arg);

/* Call fn for every process listed in dir/cgroup.procs (and, when deep,
 * in the cgroups below); returns how many were listed, or -1. */
static int for_each_pid(const char *dir, bool deep, int depth, pid_fn fn,
			void *arg)
{
	char path[PATH_MAX];
	if (path_fmt(path, sizeof(path), "%s/cgroup.procs", dir) < 0)
		return -1;
	FILE *f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : -1;
	int count = 0;
	long pid;
	while (fscanf(f, "%ld", &pid) == 1)
		if (pid > 0 && fn((pid_t)pid, arg) == 0)
			count++;
	fclose(f);
	if (!deep || depth >= MAX_TREE_DEPTH)
		return count;

	DIR *d = opendir(dir);
	if (!d)
		return count;
	struct dirent *de;
	while ((de = readdir(d))) {
		char sub[PATH_MAX];
		if (de->d_type != DT_DIR || de->d_name[0] == '.' ||
		    path_fmt(sub, sizeof(sub), "%s/%s", dir, de->d_name) < 0)
			continue;
		int c = for_each_pid(sub, true, depth + 1, fn, arg);
		if (c > 0)
			count += c;
	}
	closedir(d);
	return count;
}

/* Counts a process as still there unless it is already gone.  Never the
 * caller: a helper that wandered into the room must not kill itself. */
static int sigkill_pid(pid_t pid, void *arg)
{
	(void)arg;
	if (pid == getpid())
		return -1;
	if (kill(pid, SIGKILL) < 0 && errno == ESRCH)
		return -1;
	return 0;
}

/* --- freezing ------------------------------------------------------------ */

/* The freezer file and values of the back end, for the room's cgroup;
 * false when this host cannot freeze.  Freezing the room freezes every
 * cgroup below it (v1's freezer is hierarchical too). */
static bool freeze_file(const struct cgroup_sys *sys, const char *room,
			char *path, size_t len, bool on, const char **value)
{
	if (sys->mode == CG_V1 && sys->freezer_root[0]) {
		*value = on ? "FROZEN" : "THAWED";
		return path_fmt(path, len, "%s/%s/%s/freezer.state",
				sys->freezer_root, sys->group, room) == 0;
	}
	if (sys->mode == CG_V2) {
		*value = on ? "1" : "0";
		return path_fmt(path, len, "%s/%s/%s/cgroup.freeze",
				sys->v2_root, sys->group, room) == 0 && file_exists(path);
	}
	return false;
}

static bool is_frozen(const struct cgroup_sys *sys, const char *room)
{
	char path[PATH_MAX], buf[256];
	const char *root = sys->mode == CG_V1 ? sys->freezer_root : sys->v2_root;
	const char *file = sys->mode == CG_V1 ? "freezer.state" : "cgroup.events";

	if (path_fmt(path, sizeof(path), "%s/%s/%s/%s", root, sys->group, room, file) < 0 ||
	    read_file(path, buf, sizeof(buf)) < 0)
		return false;
	if (sys->mode == CG_V1)
		return strncmp(buf, "FROZEN", 6) == 0;
	return strstr(buf, "frozen 1") != NULL;
}

/* Best effort: a task stuck in the kernel may keep a group FREEZING; the
 * kill loop then simply runs unfrozen.  True if the caller must thaw. */
static bool freeze(const struct cgroup_sys *sys, const char *room)
{
	char path[PATH_MAX];
	const char *value;

	if (!freeze_file(sys, room, path, sizeof(path), true, &value) ||
	    cgroup_file_write(path, value) < 0)
		return false;
	for (int i = 0; i < FREEZE_WAIT_MS && !is_frozen(sys, room); i++)
		sleep_ms(1);
	return true;
}

static void thaw(const struct cgroup_sys *sys, const char *room)
{
	char path[PATH_MAX];
	const char *value;

	if (freeze_file(sys, room, path, sizeof(path), false, &value))
		cgroup_file_write(path, value);
}

/* --- kill ---------------------------------------------------------------- */

/* v2's atomic kill of the room's whole subtree; false where the kernel
 * predates it (< 5.14). */
static bool kill_by_kernel(const struct cgroup_sys *sys, const char *room)
{
	char path[PATH_MAX];

	if (sys->mode != CG_V2 ||
	    path_fmt(path, sizeof(path), "%s/%s/%s/cgroup.kill",
		     sys->v2_root, sys->group, room) < 0)
		return false;
	return cgroup_file_write(path, "1") == 0;
}

/* One pass: SIGKILL whatever is listed anywhere under the room, in any
 * tree.  Returns how many processes were still there. */
static int kill_pass(struct cg_op *op)
{
	const char *roots[MAX_ROOTS];
	size_t n = cg_roots(op->sys, roots);
	bool kernel = kill_by_kernel(op->sys, op->room);
	bool frozen = !kernel && freeze(op->sys, op->room);
	int left = 0;

	for (size_t i = 0; i < n; i++) {
		char dir[PATH_MAX];
		if (room_path(dir, sizeof(dir), op->sys, roots[i], op->room, NULL) < 0) {
			left = op_fail(op, "path %s/%s/%s", roots[i], op->sys->group,
				       op->room);
			break;
		}
		int c = for_each_pid(dir, true, 0, sigkill_pid, NULL);
		if (c < 0) {
			left = op_fail(op, "read %s/cgroup.procs", dir);
			break;
		}
		left += c;
	}
	if (frozen)
		thaw(op->sys, op->room);
	return left;
}

static int kill_until_empty(struct cg_op *op)
{
	int64_t deadline = monotonic_ms() + KILL_DEADLINE_MS;

	for (;;) {
		int left = kill_pass(op);
		if (left <= 0)
			return left;
		if (monotonic_ms() >= deadline) {
			errno = EBUSY;
			return op_fail(op, "kill %s: processes left after %d ms",
				       op->room, KILL_DEADLINE_MS);
		}
		sleep_ms(5);
	}
}

/* --- limits -------------------------------------------------------------- */

static long cpu_quota_us(double cpus)
{
	double q = cpus * CPU_PERIOD_US + 0.5;
	if (q < CPU_QUOTA_MIN_US)
		return CPU_QUOTA_MIN_US;
	if (q > (double)LONG_MAX / 2)
		return LONG_MAX / 2;
	return (long)q;
}

static int v2_set_limits(struct cg_op *op, const char *dir,
			 const struct cgroup_limits *lim)
{
	char mem[32] = "max", pids[32] = "max", cpu[64] = "max 100000";

	if (lim->memory_bytes)
		snprintf(mem, sizeof(mem), "%llu",
			 (unsigned long long)lim->memory_bytes);
	if (lim->pids > 0)
		snprintf(pids, sizeof(pids), "%d", lim->pids);
	if (lim->cpus > 0)
		snprintf(cpu, sizeof(cpu), "%ld %d", cpu_quota_us(lim->cpus),
			 CPU_PERIOD_US);
	if (write_limit(op, dir, "memory.max", mem, lim->memory_bytes > 0) < 0 ||
	    write_limit(op, dir, "memory.swap.max", "0", false) < 0 ||
	    write_limit(op, dir, "pids.max", pids, lim->pids > 0) < 0 ||
	    write_cpu_value(op, dir, "cpu.max", cpu, false) < 0)
		return -1;
	return 0;
}

/* memory.memsw.limit_in_bytes (memory + swap) may never be below
 * memory.limit_in_bytes, so it is lifted first and set last. */
static int v1_set_memory(struct cg_op *op, const char *dir, uint64_t bytes)
{
	char value[32] = "-1";
	char memsw[PATH_MAX];
	bool has_memsw = path_fmt(memsw, sizeof(memsw), "%s/%s", dir,
				  "memory.memsw.limit_in_bytes") == 0 &&
			 file_exists(memsw);

	if (bytes)
		snprintf(value, sizeof(value), "%llu", (unsigned long long)bytes);
	if (has_memsw &&
	    write_value(op, dir, "memory.memsw.limit_in_bytes", "-1") < 0)
		return -1;
	if (write_value(op, dir, "memory.limit_in_bytes", value) < 0)
		return -1;
	if (has_memsw && bytes &&
	    write_value(op, dir, "memory.memsw.limit_in_bytes", value) < 0)
		return -1;
	return 0;
}

/* A v1 memory cgroup counts its children only with use_hierarchy; it must
 * be set before the first child exists (kernels since 5.x force it on). */
static int v1_check_hierarchy(struct cg_op *op, const char *dir)
{
	char path[PATH_MAX];
	uint64_t v;

	if (path_fmt(path, sizeof(path), "%s/memory.use_hierarchy", dir) < 0 ||
	    read_u64(path, &v) < 0)
		return op_fail(op, "read %s/memory.use_hierarchy", dir);
	if (v == 1)
		return 0;
	return write_value(op, dir, "memory.use_hierarchy", "1");
}

static int v1_set_limits(struct cg_op *op, const struct cgroup_limits *lim)
{
	const struct cgroup_sys *sys = op->sys;
	char dir[PATH_MAX], value[32];

	if (room_path(dir, sizeof(dir), op->sys, sys->memory_root, op->room, NULL) < 0 ||
	    v1_set_memory(op, dir, lim->memory_bytes) < 0)
		return -1;

	snprintf(value, sizeof(value), "%d", lim->pids);
	if (room_path(dir, sizeof(dir), op->sys, sys->pids_root, op->room, NULL) < 0 ||
	    write_value(op, dir, "pids.max", lim->pids > 0 ? value : "max") < 0)
		return -1;

	if (!sys->cpu_root[0])
		return 0;
	snprintf(value, sizeof(value), "%ld",
		 lim->cpus > 0 ? cpu_quota_us(lim->cpus) : -1L);
	if (room_path(dir, sizeof(dir), op->sys, sys->cpu_root, op->room, NULL) < 0 ||
	    write_cpu_value(op, dir, "cpu.cfs_period_us", "100000", true) < 0 ||
	    write_cpu_value(op, dir, "cpu.cfs_quota_us", value, true) < 0)
		return -1;
	return 0;
}

/* --- v2 controller delegation -------------------------------------------- */

/* The controllers we want, as far as the host offers them ("+memory +pids
 * +cpu" on a usual host).  cgroup.controllers of the root is the offer. */
static void v2_wanted(const struct cgroup_sys *sys, char *out, size_t len)
{
	static const char *const want[] = { "memory", "pids", "cpu" };
	char path[PATH_MAX], list[512] = "";

	out[0] = '\0';
	if (path_fmt(path, sizeof(path), "%s/cgroup.controllers", sys->v2_root) == 0)
		read_file(path, list, sizeof(list));
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		if (!has_word(list, want[i]))
			continue;
		size_t used = strlen(out);
		snprintf(out + used, len - used, "%s+%s", used ? " " : "", want[i]);
	}
}

static bool v2_all_enabled(const char *dir, const char *wanted)
{
	char path[PATH_MAX], list[512];

	if (path_fmt(path, sizeof(path), "%s/cgroup.subtree_control", dir) < 0 ||
	    read_file(path, list, sizeof(list)) < 0)
		return false;
	char copy[128];
	snprintf(copy, sizeof(copy), "%s", wanted);
	for (char *save, *w = strtok_r(copy, " ", &save); w;
	     w = strtok_r(NULL, " ", &save))
		if (!has_word(list, w + 1))
			return false;
	return true;
}

/* One write enables all; if the kernel refuses the set (cpu, typically),
 * each is tried alone and only memory and pids are required. */
static int v2_enable(struct cg_op *op, const char *dir)
{
	char wanted[128];

	v2_wanted(op->sys, wanted, sizeof(wanted));
	if (!wanted[0] || v2_all_enabled(dir, wanted))
		return 0;
	if (write_value(op, dir, "cgroup.subtree_control", wanted) == 0)
		return 0;
	char copy[128];
	snprintf(copy, sizeof(copy), "%s", wanted);
	for (char *save, *w = strtok_r(copy, " ", &save); w;
	     w = strtok_r(NULL, " ", &save)) {
		bool required = strcmp(w, "+cpu") != 0;
		if (write_value(op, dir, "cgroup.subtree_control", w) < 0 && required)
			return -1;
	}
	return 0;
}

/* --- set-up -------------------------------------------------------------- */

static int v2_setup(struct cg_op *op, const struct cgroup_limits *lim)
{
	const char *root = op->sys->v2_root;
	char base[PATH_MAX], dir[PATH_MAX], leaf[PATH_MAX];

	if (path_fmt(base, sizeof(base), "%s/%s", root, op->sys->group) < 0 ||
	    room_path(dir, sizeof(dir), op->sys, root, op->room, NULL) < 0 ||
	    room_path(leaf, sizeof(leaf), op->sys, root, op->room, "keeper") < 0)
		return op_fail(op, "path %s", root);
	/* no controller is enabled below the room: keeper/ only holds the
	 * processes (v2 allows none in a cgroup that hands controllers down)
	 * and is charged to the room, without cgroups of its own */
	if (v2_enable(op, root) < 0 ||
	    make_dir(op, base) < 0 || v2_enable(op, base) < 0 ||
	    make_dir(op, dir) < 0 ||
	    v2_set_limits(op, dir, lim) < 0 ||
	    make_dir(op, leaf) < 0)
		return -1;
	return 0;
}

static int v1_make_dirs(struct cg_op *op, const char *root)
{
	char base[PATH_MAX], dir[PATH_MAX], leaf[PATH_MAX];

	if (path_fmt(base, sizeof(base), "%s/%s", root, op->sys->group) < 0 ||
	    room_path(dir, sizeof(dir), op->sys, root, op->room, NULL) < 0 ||
	    room_path(leaf, sizeof(leaf), op->sys, root, op->room, "keeper") < 0)
		return op_fail(op, "path %s", root);
	if (make_dir(op, base) < 0 || make_dir(op, dir) < 0)
		return -1;
	/* an empty keeper/ of an older version would be a second memory
	 * cgroup for nothing; busy (its keeper still runs) it stays */
	rmdir(leaf);
	if (root == op->sys->memory_root && v1_check_hierarchy(op, dir) < 0)
		return -1;
	return 0;
}

static int v1_setup(struct cg_op *op, const struct cgroup_limits *lim)
{
	const char *roots[MAX_ROOTS];
	size_t n = cg_roots(op->sys, roots);

	for (size_t i = 0; i < n; i++)
		if (v1_make_dirs(op, roots[i]) < 0)
			return -1;
	return v1_set_limits(op, lim);
}

static int op_begin(struct cg_op *op, const struct cgroup_sys *sys,
		    const char *room, char *err, size_t errlen)
{
	*op = (struct cg_op){ sys, room, err, errlen };
	if (!component_ok(room)) {
		errno = EINVAL;
		return op_fail(op, "room id");
	}
	return 0;
}

int cgroup_room_setup(const struct cgroup_sys *sys, const char *room,
		      const struct cgroup_limits *lim, char *err, size_t errlen)
{
	struct cg_op op;

	if (sys->mode == CG_NONE)
		return 0;
	if (op_begin(&op, sys, room, err, errlen) < 0)
		return -1;
	return sys->mode == CG_V2 ? v2_setup(&op, lim) : v1_setup(&op, lim);
}

/* --- kill all but the keeper ----------------------------------------------- */

/* The pids signalled so far, sorted after each pass: a process still
 * dying is listed again by the next pass and must not count twice. */
struct pid_set {
	pid_t *pid;
	size_t n, cap, sorted;
	pid_t keep;
	int left;        /* listed in this pass, keep aside */
};

static int pid_cmp(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
	return (x > y) - (x < y);
}

static int kill_and_note(pid_t pid, void *arg)
{
	struct pid_set *s = arg;
	if (pid == s->keep || pid == getpid())
		return -1;
	if (kill(pid, SIGKILL) < 0 && errno == ESRCH)
		return -1;
	s->left++;
	if (bsearch(&pid, s->pid, s->sorted, sizeof(pid_t), pid_cmp))
		return 0;
	for (size_t i = s->sorted; i < s->n; i++)
		if (s->pid[i] == pid)
			return 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		pid_t *p = realloc(s->pid, cap * sizeof(pid_t));
		if (!p)
			return 0;   /* still killed, only not counted */
		s->pid = p;
		s->cap = cap;
	}
	s->pid[s->n++] = pid;
	return 0;
}

/* One pass over every tree, frozen where the host can freeze: nothing
 * forks between the listing and the signal.  -1 on a read error. */
static int kill_others_pass(struct cg_op *op, struct pid_set *s)
{
	const char *roots[MAX_ROOTS];
	size_t n = cg_roots(op->sys, roots);
	bool frozen = freeze(op->sys, op->room);
	int rc = 0;

	s->left = 0;
	for (size_t i = 0; i < n && rc == 0; i++) {
		char dir[PATH_MAX];
		if (room_path(dir, sizeof(dir), op->sys, roots[i], op->room, NULL) < 0)
			rc = op_fail(op, "path %s/%s/%s", roots[i], op->sys->group, op->room);
		else if (for_each_pid(dir, true, 0, kill_and_note, s) < 0)
			rc = op_fail(op, "read %s/cgroup.procs", dir);
	}
	if (frozen)
		thaw(op->sys, op->room);
	qsort(s->pid, s->n, sizeof(pid_t), pid_cmp);
	s->sorted = s->n;
	return rc;
}

int cgroup_kill_others(const struct cgroup_sys *sys, const char *room, pid_t keep,
		       int *killed, char *err, size_t errlen)
{
	struct cg_op op;
	struct pid_set s = { .keep = keep };
	int rc = 0;

	*killed = 0;
	if (sys->mode == CG_NONE)
		return 0;
	if (op_begin(&op, sys, room, err, errlen) < 0)
		return -1;
	int64_t deadline = monotonic_ms() + KILL_DEADLINE_MS;
	for (;;) {
		if ((rc = kill_others_pass(&op, &s)) < 0 || s.left == 0)
			break;
		if (monotonic_ms() >= deadline) {
			errno = EBUSY;
			rc = op_fail(&op, "kill %s: %d processes left after %d ms",
				     room, s.left, KILL_DEADLINE_MS);
			break;
		}
		sleep_ms(2);
	}
	*killed = (int)s.n;
	free(s.pid);
	return rc;
}

/* --- public: processes --------------------------------------------------- */

int cgroup_enter(const struct cgroup_sys *sys, const char *room, pid_t pid,
		 char *err, size_t errlen)
{
	struct cg_op op;
	const char *roots[MAX_ROOTS];
	char num[32];

	if (sys->mode == CG_NONE)
		return 0;
	if (op_begin(&op, sys, room, err, errlen) < 0)
		return -1;
	snprintf(num, sizeof(num), "%ld", (long)pid);
	/* Moving a whole process takes the global threadgroup rwsem for
	 * writing: an RCU grace period, ~10 ms, per call.  v1 moves the calling
	 * thread alone ("0" into tasks) without it; callers that pass pid 0 are
	 * single-threaded, so that thread is the whole process. */
	const char *file = pid == 0 && sys->mode == CG_V1 ? "tasks" : "cgroup.procs";
	size_t n = cg_roots(sys, roots);
	for (size_t i = 0; i < n; i++) {
		char dir[PATH_MAX];
		if (room_path(dir, sizeof(dir), sys, roots[i], room,
			      sys->mode == CG_V2 ? "keeper" : NULL) < 0)
			return op_fail(&op, "path %s", roots[i]);
		/* the room (and on v2 keeper/) is cgroup_room_setup's, which
		 * callers run first; a missing one means a room not set up or
		 * being removed, which is reported (ENOENT) rather than papered
		 * over with a mkdir */
		if (write_value(&op, dir, file, num) < 0)
			return -1;
	}
	return 0;
}

/* Only processes go: the directories are cgroup_room_remove's (a stop's
 * and a destroy's), with whatever is below the room (keeper/, per-exec
 * leaves of older versions). */
int cgroup_kill(const struct cgroup_sys *sys, const char *room,
		char *err, size_t errlen)
{
	struct cg_op op;

	if (sys->mode == CG_NONE)
		return 0;
	if (op_begin(&op, sys, room, err, errlen) < 0)
		return -1;
	return kill_until_empty(&op);
}

void cgroup_group_remove_if_empty(const struct cgroup_sys *sys)
{
	const char *roots[MAX_ROOTS];
	size_t n = cg_roots(sys, roots);
	char dir[PATH_MAX];

	for (size_t i = 0; i < n; i++)
		if (path_fmt(dir, sizeof(dir), "%s/%s", roots[i], sys->group) == 0)
			rmdir(dir);   /* EBUSY or ENOTEMPTY: rooms are left */
}

void cgroup_room_release_memory(const struct cgroup_sys *sys, const char *room)
{
	char dir[PATH_MAX], path[PATH_MAX], amount[32];
	uint64_t used = 0;

	if (sys->mode == CG_NONE || !component_ok(room))
		return;
	if (sys->mode == CG_V1) {
		if (room_path(dir, sizeof(dir), sys, sys->memory_root, room, NULL) == 0 &&
		    path_fmt(path, sizeof(path), "%s/memory.force_empty", dir) == 0)
			cgroup_file_write(path, "0");
		return;
	}
	if (room_path(dir, sizeof(dir), sys, sys->v2_root, room, NULL) < 0 ||
	    path_fmt(path, sizeof(path), "%s/memory.current", dir) < 0 ||
	    read_u64(path, &used) < 0 || used == 0 ||
	    path_fmt(path, sizeof(path), "%s/memory.reclaim", dir) < 0)
		return;
	snprintf(amount, sizeof(amount), "%llu", (unsigned long long)used);
	cgroup_file_write(path, amount);   /* EAGAIN when not all of it could go */
}

int cgroup_room_remove(const struct cgroup_sys *sys, const char *room,
		       char *err, size_t errlen)
{
	struct cg_op op;

	if (sys->mode == CG_NONE)
		return 0;
	if (op_begin(&op, sys, room, err, errlen) < 0)
		return -1;
	if (kill_until_empty(&op) < 0)
		return -1;
	cgroup_room_release_memory(sys, room);
	return remove_everywhere(&op);
}

void cgroup_room_usage(const struct cgroup_sys *sys, const char *room,
		       uint64_t *memory_bytes, uint64_t *processes)
{
	char dir[PATH_MAX], path[PATH_MAX];
	const char *mem_root = sys->mode == CG_V2 ? sys->v2_root : sys->memory_root;
	const char *pids_root = sys->mode == CG_V2 ? sys->v2_root : sys->pids_root;
	const char *mem_file = sys->mode == CG_V2 ? "memory.current"
						  : "memory.usage_in_bytes";

	*memory_bytes = 0;
	*processes = 0;
	if (sys->mode == CG_NONE || !component_ok(room))
		return;
	if (room_path(dir, sizeof(dir), sys, mem_root, room, NULL) == 0 &&
	    path_fmt(path, sizeof(path), "%s/%s", dir, mem_file) == 0 &&
	    read_u64(path, memory_bytes) < 0)
		*memory_bytes = 0;
	if (room_path(dir, sizeof(dir), sys, pids_root, room, NULL) == 0 &&
	    path_fmt(path, sizeof(path), "%s/pids.current", dir) == 0 &&
	    read_u64(path, processes) < 0)
		*processes = 0;
}

/* "max N" of pids.events: forks refused for this cgroup's limit. */
static int pids_refused(const char *dir, uint64_t *n)
{
	char path[PATH_MAX], events[256];
	if (path_fmt(path, sizeof(path), "%s/pids.events", dir) < 0 ||
	    read_file(path, events, sizeof(events)) < 0)
		return -1;
	const char *m = strstr(events, "max ");
	*n = m ? strtoull(m + 4, NULL, 10) : 0;
	return m ? 0 : -1;
}

/* A fork bomb keeps pids.current moving (its processes die as fast as
 * they are made), so "at the limit" is: the shell said it could not fork,
 * or full now, or forks being refused right now (the count grows within
 * PIDS_WATCH_MS) -- and in any case some fork refused for the limit. */
#define PIDS_WATCH_MS 100
bool cgroup_room_pids_exhausted(const struct cgroup_sys *sys, const char *room, int limit,
				bool evidence)
{
	char dir[PATH_MAX], path[PATH_MAX];
	const char *root = sys->mode == CG_V2 ? sys->v2_root : sys->pids_root;
	uint64_t current = 0, refused = 0, later = 0;

	if (sys->mode == CG_NONE || limit <= 0 || !component_ok(room) ||
	    room_path(dir, sizeof(dir), sys, root, room, NULL) < 0 ||
	    pids_refused(dir, &refused) < 0 || refused == 0)
		return false;
	if (evidence)
		return true;
	if (path_fmt(path, sizeof(path), "%s/pids.current", dir) == 0 &&
	    read_u64(path, &current) == 0 && current + 2 >= (uint64_t)limit)
		return true;
	for (int ms = 0; ms < PIDS_WATCH_MS; ms += 5) {
		sleep_ms(5);
		if (pids_refused(dir, &later) < 0 || later != refused)
			return later > refused;
	}
	return false;
}

/* --- a snapshot's cut ---------------------------------------------------- */

bool cgroup_room_freeze(const struct cgroup_sys *sys, const char *room)
{
	return freeze(sys, room);
}

void cgroup_room_thaw(const struct cgroup_sys *sys, const char *room)
{
	thaw(sys, room);
}
