/* Unit tests for the cgroup back ends.
 *
 * Two kinds of test:
 *
 * - Scratch trees: detection on directories laid out like /sys/fs/cgroup,
 *   and the v2 back end's files.  A plain directory does not grow interface
 *   files the way cgroupfs does, so this file stands in for the kernel:
 *   mkdir() and rmdir() are defined here (they take precedence over libc's
 *   for cgroup.c linked into this program) and, under the scratch root
 *   only, mkdir creates the files a v2 cgroup shows and rmdir refuses with
 *   EBUSY while cgroup.procs lists a process, then takes the files along.
 *   The tests then read what cgroup.c wrote.
 *
 * - The real /sys/fs/cgroup (root only; failing, not skipping, without
 *   root): whatever back end this host has -- v1 on the hybrid build host --
 *   with real processes, plus the v2 process handling (cgroup.kill, moves)
 *   on a hybrid host's controller-less /sys/fs/cgroup/unified.  Rooms are
 *   named unit-cg-<pid>-<what> and removed, with roombox/ if it is left
 *   empty, by the group teardown even when a test fails half-way.  The test
 *   process is a child subreaper so that daemonised sleepers come back to
 *   it and are reaped rather than left to PID 1.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "cgroup.h"

#define MIB (1024ULL * 1024)

/* --- a stand-in for cgroupfs under the scratch root ------------------------ */

static char fake_root[PATH_MAX];	/* "" = mkdir and rmdir are plain */

static const char *const fake_files[] = {
	"cgroup.procs", "cgroup.controllers", "cgroup.subtree_control",
	"cgroup.events", "cgroup.kill", "memory.max", "memory.swap.max",
	"memory.current", "memory.reclaim", "pids.max", "pids.current", "cpu.max",
};

static bool under_fake_root(const char *path)
{
	size_t n = strlen(fake_root);
	return n && strncmp(path, fake_root, n) == 0 && path[n] == '/';
}

static void fake_populate(const char *dir)
{
	for (size_t i = 0; i < sizeof(fake_files) / sizeof(fake_files[0]); i++) {
		char path[PATH_MAX];
		snprintf(path, sizeof(path), "%s/%s", dir, fake_files[i]);
		int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd >= 0)
			close(fd);
	}
}

int mkdir(const char *path, mode_t mode)
{
	int r = mkdirat(AT_FDCWD, path, mode);
	if (r == 0 && under_fake_root(path))
		fake_populate(path);
	return r;
}

static bool fake_has_procs(const char *dir)
{
	char path[PATH_MAX];
	struct stat st;
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	return stat(path, &st) == 0 && st.st_size > 0;
}

int rmdir(const char *path)
{
	if (under_fake_root(path)) {
		if (fake_has_procs(path)) {
			errno = EBUSY;
			return -1;
		}
		DIR *d = opendir(path);
		struct dirent *de;
		while (d && (de = readdir(d)))
			if (de->d_type == DT_REG)
				unlinkat(dirfd(d), de->d_name, 0);
		if (d)
			closedir(d);
	}
	return unlinkat(AT_FDCWD, path, AT_REMOVEDIR);
}

/* --- file helpers ---------------------------------------------------------- */

static void put(const char *content, const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(content, f);
	assert_int_equal(fclose(f), 0);
}

static void make(const char *fmt, ...)
{
	char path[PATH_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	assert_int_equal(mkdir(path, 0755), 0);
}

/* Contents of a file without its trailing newline; "<absent>" if none. */
static const char *get(const char *fmt, ...)
{
	static char buf[4096];
	char path[PATH_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	FILE *f = fopen(path, "r");
	if (!f)
		return "<absent>";
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n && buf[n - 1] == '\n')
		buf[--n] = '\0';
	return buf;
}

static bool is_dir(const char *fmt, ...)
{
	char path[PATH_MAX];
	struct stat st;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(path, sizeof(path), fmt, ap);
	va_end(ap);
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static void remove_scratch(const char *dir)
{
	char cmd[PATH_MAX + 16];
	if (strncmp(dir, "/tmp/", 5) != 0)
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	assert_int_equal(system(cmd), 0);
}

static void scratch_dir(char *out, size_t len)
{
	snprintf(out, len, "/tmp/roombox-cg-XXXXXX");
	assert_non_null(mkdtemp(out));
}

/* --- detection ------------------------------------------------------------- */

static void detect(struct cgroup_sys *sys, const char *root,
		   enum cgroup_mode want)
{
	cgroup_detect(sys, root);
	assert_string_equal(cgroup_mode_name(sys->mode), cgroup_mode_name(want));
}

static void test_detect_pure_v2(void **state)
{
	(void)state;
	char root[256];
	struct cgroup_sys sys;

	scratch_dir(root, sizeof(root));
	put("cpuset cpu io memory pids\n", "%s/cgroup.controllers", root);
	detect(&sys, root, CG_V2);
	assert_string_equal(sys.v2_root, root);
	put("cpu io\n", "%s/cgroup.controllers", root);
	detect(&sys, root, CG_NONE);
	remove_scratch(root);
}

static void make_v1_tree(const char *root, bool freezer)
{
	const char *ctl[] = { "memory", "pids", "cpu", "freezer" };
	for (size_t i = 0; i < (freezer ? 4u : 3u); i++) {
		make("%s/%s", root, ctl[i]);
		put("", "%s/%s/cgroup.procs", root, ctl[i]);
	}
}

static void test_detect_v1(void **state)
{
	(void)state;
	char root[256];
	struct cgroup_sys sys;

	scratch_dir(root, sizeof(root));
	make_v1_tree(root, false);
	detect(&sys, root, CG_V1);
	assert_string_equal(sys.freezer_root, "");
	/* a directory without cgroup.procs is not a mounted hierarchy */
	make("%s/freezer", root);
	detect(&sys, root, CG_V1);
	assert_string_equal(sys.freezer_root, "");
	remove_scratch(root);

	scratch_dir(root, sizeof(root));
	make_v1_tree(root, true);
	detect(&sys, root, CG_V1);
	char want[PATH_MAX];
	snprintf(want, sizeof(want), "%s/memory", root);
	assert_string_equal(sys.memory_root, want);
	snprintf(want, sizeof(want), "%s/pids", root);
	assert_string_equal(sys.pids_root, want);
	snprintf(want, sizeof(want), "%s/cpu", root);
	assert_string_equal(sys.cpu_root, want);
	snprintf(want, sizeof(want), "%s/freezer", root);
	assert_string_equal(sys.freezer_root, want);
	remove_scratch(root);
}

/* The build host's layout: v1 controllers and a unified tree with none. */
static void test_detect_hybrid(void **state)
{
	(void)state;
	char root[256];
	struct cgroup_sys sys;

	scratch_dir(root, sizeof(root));
	make_v1_tree(root, true);
	make("%s/unified", root);
	put("", "%s/unified/cgroup.procs", root);
	put("hugetlb\n", "%s/unified/cgroup.controllers", root);
	detect(&sys, root, CG_V1);
	/* a unified tree that does hold memory and pids wins */
	put("memory pids\n", "%s/unified/cgroup.controllers", root);
	detect(&sys, root, CG_V2);
	char want[PATH_MAX];
	snprintf(want, sizeof(want), "%s/unified", root);
	assert_string_equal(sys.v2_root, want);
	remove_scratch(root);
}

static void test_detect_none(void **state)
{
	(void)state;
	char root[256];
	struct cgroup_sys sys;

	scratch_dir(root, sizeof(root));
	detect(&sys, root, CG_NONE);
	make("%s/memory", root);
	put("", "%s/memory/cgroup.procs", root);
	detect(&sys, root, CG_NONE);	/* memory without pids */
	assert_string_equal(sys.memory_root, "");
	remove_scratch(root);
	detect(&sys, "/nonexistent-roombox", CG_NONE);
}

/* --- v2 over a scratch tree ------------------------------------------------ */

struct scratch_v2 {
	char root[256];
	struct cgroup_sys sys;
};

static int scratch_v2_setup(void **state)
{
	struct scratch_v2 *s = calloc(1, sizeof(*s));
	if (!s)
		return -1;
	snprintf(s->root, sizeof(s->root), "/tmp/roombox-cg-XXXXXX");
	if (!mkdtemp(s->root))
		return -1;
	fake_populate(s->root);
	put("cpuset cpu io memory pids\n", "%s/cgroup.controllers", s->root);
	snprintf(fake_root, sizeof(fake_root), "%s", s->root);
	cgroup_detect(&s->sys, s->root);
	*state = s;
	return 0;
}

static void end_sleepers_left(void);

static int scratch_v2_teardown(void **state)
{
	struct scratch_v2 *s = *state;
	end_sleepers_left();
	fake_root[0] = '\0';
	remove_scratch(s->root);
	free(s);
	return 0;
}

static const struct cgroup_limits default_limits = { 512 * MIB, 256, 1.0 };

static void test_v2_setup_writes_limits(void **state)
{
	struct scratch_v2 *s = *state;
	const char *r = s->root;
	char err[512] = "";

	assert_int_equal(s->sys.mode, CG_V2);
	if (cgroup_room_setup(&s->sys, "r1", &default_limits, err, sizeof(err)))
		fail_msg("%s", err);
	assert_string_equal(get("%s/cgroup.subtree_control", r), "+memory +pids +cpu");
	assert_string_equal(get("%s/roombox/cgroup.subtree_control", r),
			    "+memory +pids +cpu");
	/* nothing is handed down below the room: keeper/ holds processes
	 * charged to the room, without cgroups of its own */
	assert_string_equal(get("%s/roombox/r1/cgroup.subtree_control", r), "");
	assert_string_equal(get("%s/roombox/r1/memory.max", r), "536870912");
	assert_string_equal(get("%s/roombox/r1/memory.swap.max", r), "0");
	assert_string_equal(get("%s/roombox/r1/pids.max", r), "256");
	assert_string_equal(get("%s/roombox/r1/cpu.max", r), "100000 100000");
	assert_true(is_dir("%s/roombox/r1/keeper", r));
	/* limits sit on the room, not on its leaves */
	assert_string_equal(get("%s/roombox/r1/keeper/memory.max", r), "");
	assert_string_equal(get("%s/roombox/r1/keeper/cgroup.subtree_control", r), "");
}

static void test_v2_setup_again_changes_limits(void **state)
{
	struct scratch_v2 *s = *state;
	const char *r = s->root;
	char err[512] = "";
	struct cgroup_limits half = { 256 * MIB, 64, 0.5 }, none = { 0, 0, 0 };

	assert_int_equal(cgroup_room_setup(&s->sys, "r1", &default_limits, err,
					   sizeof(err)), 0);
	assert_int_equal(cgroup_room_setup(&s->sys, "r1", &half, err, sizeof(err)), 0);
	assert_string_equal(get("%s/roombox/r1/memory.max", r), "268435456");
	assert_string_equal(get("%s/roombox/r1/pids.max", r), "64");
	assert_string_equal(get("%s/roombox/r1/cpu.max", r), "50000 100000");
	assert_int_equal(cgroup_room_setup(&s->sys, "r1", &none, err, sizeof(err)), 0);
	assert_string_equal(get("%s/roombox/r1/memory.max", r), "max");
	assert_string_equal(get("%s/roombox/r1/pids.max", r), "max");
	assert_string_equal(get("%s/roombox/r1/cpu.max", r), "max 100000");
}

/* A CPU limit the room already has is not written again: on the kernel,
 * every write of a CPU bandwidth file walks every cpu cgroup of the host
 * (about a millisecond at a few thousand rooms), and a room starts with
 * the same limit each time.  The file's mtime tells whether it was written. */
static void test_v2_setup_keeps_unchanged_cpu_limit(void **state)
{
	struct scratch_v2 *s = *state;
	char err[512] = "", path[PATH_MAX];
	struct cgroup_limits half = { 512 * MIB, 256, 0.5 };
	struct timespec epoch[2] = { { 0, 0 }, { 0, 0 } };
	struct stat st;

	assert_int_equal(cgroup_room_setup(&s->sys, "r1", &default_limits, err,
					   sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/roombox/r1/cpu.max", s->root);
	assert_int_equal(utimensat(AT_FDCWD, path, epoch, 0), 0);
	assert_int_equal(cgroup_room_setup(&s->sys, "r1", &default_limits, err,
					   sizeof(err)), 0);
	assert_int_equal(stat(path, &st), 0);
	assert_int_equal(st.st_mtime, 0);
	assert_string_equal(get("%s", path), "100000 100000");
	/* another limit is written */
	assert_int_equal(cgroup_room_setup(&s->sys, "r1", &half, err, sizeof(err)), 0);
	assert_string_equal(get("%s", path), "50000 100000");
}

/* The pids written are this test's own short-lived children, so that
 * nothing else could be signalled if a step went wrong.  They are
 * remembered so that a test that fails half-way does not leave them. */
static pid_t sleepers[8];
static size_t n_sleepers;

static pid_t sleeper(void)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		pause();
		_exit(0);
	}
	if (n_sleepers < sizeof(sleepers) / sizeof(sleepers[0]))
		sleepers[n_sleepers++] = pid;
	return pid;
}

static void end_sleeper(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* Only a child not yet reaped is signalled: a reaped one's pid may be
 * someone else's by now. */
static void end_sleepers_left(void)
{
	for (size_t i = 0; i < n_sleepers; i++)
		if (waitpid(sleepers[i], NULL, WNOHANG) == 0)
			end_sleeper(sleepers[i]);
	n_sleepers = 0;
}

static void test_v2_enter_kill_remove(void **state)
{
	struct scratch_v2 *s = *state;
	const char *r = s->root;
	char err[512] = "", num[32];
	pid_t a = sleeper(), b = sleeper();

	assert_int_equal(cgroup_room_setup(&s->sys, "r1", &default_limits, err,
					   sizeof(err)), 0);
	/* every pid goes to keeper/ and nowhere else (the stand-in's file
	 * holds the last pid written) */
	if (cgroup_enter(&s->sys, "r1", a, err, sizeof(err)))
		fail_msg("%s", err);
	snprintf(num, sizeof(num), "%d", a);
	assert_string_equal(get("%s/roombox/r1/keeper/cgroup.procs", r), num);
	if (cgroup_enter(&s->sys, "r1", b, err, sizeof(err)))
		fail_msg("%s", err);
	snprintf(num, sizeof(num), "%d", b);
	assert_string_equal(get("%s/roombox/r1/keeper/cgroup.procs", r), num);
	assert_string_equal(get("%s/roombox/r1/cgroup.procs", r), "");
	assert_string_equal(get("%s/roombox/cgroup.procs", r), "");

	/* the stand-in does not kill processes; as if the kernel had, keeper's
	 * list is emptied.  The kill is the room's cgroup.kill (its whole
	 * subtree), and it leaves the room, keeper/ and the limits in place
	 * for the next start. */
	put("", "%s/roombox/r1/keeper/cgroup.procs", r);
	if (cgroup_kill(&s->sys, "r1", err, sizeof(err)))
		fail_msg("%s", err);
	assert_string_equal(get("%s/roombox/r1/cgroup.kill", r), "1");
	assert_string_equal(get("%s/roombox/r1/keeper/cgroup.kill", r), "");
	assert_true(is_dir("%s/roombox/r1/keeper", r));
	assert_string_equal(get("%s/roombox/r1/memory.max", r), "536870912");

	put("123456789", "%s/roombox/r1/memory.current", r);
	put("3\n", "%s/roombox/r1/pids.current", r);
	uint64_t mem, procs;
	cgroup_room_usage(&s->sys, "r1", &mem, &procs);
	assert_int_equal(mem, 123456789);
	assert_int_equal(procs, 3);

	/* before the room goes, what is charged to it is reclaimed: as much
	 * as memory.current says */
	cgroup_room_release_memory(&s->sys, "r1");
	assert_string_equal(get("%s/roombox/r1/memory.reclaim", r), "123456789");
	assert_string_equal(get("%s/roombox/r1/keeper/memory.reclaim", r), "");

	/* cgroups below the room that set-up did not make (older versions
	 * made one per exec, and a stopped room keeps them across an upgrade)
	 * go with the room */
	make("%s/roombox/r1/old", r);
	make("%s/roombox/r1/old/deeper", r);
	make("%s/roombox/r1/keeper/nested", r);
	if (cgroup_room_remove(&s->sys, "r1", err, sizeof(err)))
		fail_msg("%s", err);
	assert_false(is_dir("%s/roombox/r1", r));
	assert_true(is_dir("%s/roombox", r));
	cgroup_room_usage(&s->sys, "r1", &mem, &procs);
	assert_int_equal(mem, 0);
	assert_int_equal(procs, 0);
	/* removing or stopping what is gone is not an error */
	assert_int_equal(cgroup_room_remove(&s->sys, "r1", err, sizeof(err)), 0);
	assert_int_equal(cgroup_kill(&s->sys, "r1", err, sizeof(err)), 0);
	assert_false(is_dir("%s/roombox/r1", r));
	end_sleeper(a);
	end_sleeper(b);
}

static void test_errors_name_room_and_step(void **state)
{
	struct scratch_v2 *s = *state;
	char err[512] = "", want[512];
	int status;

	assert_int_equal(cgroup_room_setup(&s->sys, "r3", &default_limits, err,
					   sizeof(err)), 0);
	/* a file where the room's directory should be */
	put("", "%s/roombox/r4", s->root);
	assert_int_equal(cgroup_room_setup(&s->sys, "r4", &default_limits, err,
					   sizeof(err)), -1);
	snprintf(want, sizeof(want), "cgroup r4: write %s/roombox/r4/%s: %s",
		 s->root, "memory.max", "Not a directory");
	assert_string_equal(err, want);
	char path[512];
	snprintf(path, sizeof(path), "%s/roombox/r4", s->root);
	unlink(path);

	/* every entry point checks the room id before it joins it to a path */
	assert_int_equal(cgroup_room_setup(&s->sys, "../x", &default_limits, err,
					   sizeof(err)), -1);
	assert_string_equal(err, "cgroup ../x: room id: Invalid argument");
	assert_int_equal(cgroup_enter(&s->sys, "../../x", getpid(), err,
				      sizeof(err)), -1);
	assert_string_equal(err, "cgroup ../../x: room id: Invalid argument");
	assert_int_equal(cgroup_kill(&s->sys, "r3/keeper", err, sizeof(err)), -1);
	assert_string_equal(err, "cgroup r3/keeper: room id: Invalid argument");
	assert_int_equal(cgroup_room_remove(&s->sys, "", err, sizeof(err)), -1);
	assert_string_equal(err, "cgroup : room id: Invalid argument");
	assert_true(is_dir("%s/roombox/r3/keeper", s->root));
	char room[80];
	memset(room, 'a', 65);
	room[65] = '\0';
	assert_int_equal(cgroup_room_setup(&s->sys, room, &default_limits, err,
					   sizeof(err)), -1);
	assert_non_null(strstr(err, ": room id: Invalid argument"));
	assert_int_equal(cgroup_enter(&s->sys, room, getpid(), err, sizeof(err)), -1);
	assert_non_null(strstr(err, ": room id: Invalid argument"));
	assert_int_equal(cgroup_kill(&s->sys, room, err, sizeof(err)), -1);
	assert_non_null(strstr(err, ": room id: Invalid argument"));

	/* entering a room that was never set up: no directories are made */
	assert_int_equal(cgroup_enter(&s->sys, "nope", getpid(), err,
				      sizeof(err)), -1);
	snprintf(want, sizeof(want),
		 "cgroup nope: write %s/roombox/nope/keeper/cgroup.procs: %s",
		 s->root, "No such file or directory");
	assert_string_equal(err, want);
	assert_false(is_dir("%s/roombox/nope", s->root));

	/* a process the stand-in keeps listing, in a cgroup below keeper/:
	 * the kill finds it there (it is this test's child and dies of
	 * SIGKILL), then gives up after its deadline and says so */
	pid_t c = sleeper();
	char num[32];
	snprintf(num, sizeof(num), "%d", c);
	make("%s/roombox/r3/keeper/nested", s->root);
	put(num, "%s/roombox/r3/keeper/nested/cgroup.procs", s->root);
	assert_int_equal(cgroup_kill(&s->sys, "r3", err, sizeof(err)), -1);
	assert_string_equal(err, "cgroup r3: kill r3: processes left after 2000 ms: "
			    "Device or resource busy");
	assert_int_equal(waitpid(c, &status, 0), c);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	put("", "%s/roombox/r3/keeper/nested/cgroup.procs", s->root);
	assert_int_equal(cgroup_room_remove(&s->sys, "r3", err, sizeof(err)), 0);
	assert_false(is_dir("%s/roombox/r3", s->root));
}

static void test_none_does_nothing(void **state)
{
	(void)state;
	struct cgroup_sys sys = { .mode = CG_NONE };
	char err[64] = "";
	uint64_t mem = 1, procs = 1;

	assert_string_equal(cgroup_mode_name(CG_NONE), "none");
	assert_int_equal(cgroup_room_setup(&sys, "r", &default_limits, err, sizeof(err)), 0);
	assert_int_equal(cgroup_enter(&sys, "r", getpid(), err, sizeof(err)), 0);
	assert_int_equal(cgroup_kill(&sys, "r", err, sizeof(err)), 0);
	assert_int_equal(cgroup_room_remove(&sys, "r", err, sizeof(err)), 0);
	cgroup_room_usage(&sys, "r", &mem, &procs);
	assert_int_equal(mem, 0);
	assert_int_equal(procs, 0);
}

/* --- the real cgroup tree -------------------------------------------------- */

static char room_prefix[64];

static void room_name(char *buf, size_t len, const char *what)
{
	snprintf(buf, len, "%s-%s", room_prefix, what);
}

static void real_sys(struct cgroup_sys *sys)
{
	if (geteuid() != 0)
		fail_msg("needs root: these tests use the real /sys/fs/cgroup");
	cgroup_detect(sys, "/sys/fs/cgroup");
	if (sys->mode == CG_NONE)
		fail_msg("no usable cgroup back end on this host");
}

/* The unified tree of a hybrid host: v2 with no controllers, enough for
 * the process handling of the v2 back end. */
static bool unified_sys(struct cgroup_sys *sys)
{
	memset(sys, 0, sizeof(*sys));
	if (geteuid() != 0)
		fail_msg("needs root: these tests use the real /sys/fs/cgroup");
	if (access("/sys/fs/cgroup/unified/cgroup.kill", F_OK) != 0 &&
	    access("/sys/fs/cgroup/unified/cgroup.controllers", F_OK) != 0)
		return false;
	sys->mode = CG_V2;
	snprintf(sys->v2_root, sizeof(sys->v2_root), "/sys/fs/cgroup/unified");
	snprintf(sys->group, sizeof(sys->group), "roombox");
	return true;
}

static size_t sys_roots(const struct cgroup_sys *sys, const char *roots[4])
{
	size_t n = 0;
	if (sys->mode == CG_V2) {
		roots[n++] = sys->v2_root;
		return n;
	}
	const char *all[4] = { sys->memory_root, sys->pids_root, sys->cpu_root,
			       sys->freezer_root };
	for (size_t i = 0; i < 4; i++)
		if (all[i][0])
			roots[n++] = all[i];
	return n;
}

/* Does <leaf> of the room exist in every tree (want) or in none? */
static void assert_dirs(const struct cgroup_sys *sys, const char *room,
			const char *leaf, bool want)
{
	const char *roots[4];
	size_t n = sys_roots(sys, roots);
	for (size_t i = 0; i < n; i++) {
		bool there = is_dir("%s/roombox/%s%s%s", roots[i], room,
				    leaf ? "/" : "", leaf ? leaf : "");
		if (there != want)
			fail_msg("%s/roombox/%s/%s: %s", roots[i], room,
				 leaf ? leaf : "", there ? "still there" : "missing");
	}
}

/* Running, as opposed to gone or a zombie. */
static bool alive(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return false;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

static bool dead_within(pid_t pid, int ms)
{
	for (int i = 0; i < ms; i++) {
		if (!alive(pid))
			return true;
		usleep(1000);
	}
	return !alive(pid);
}

static void reap_all(void)
{
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
}

/* The cgroup of pid in the tree that holds ctl ("" for v2). */
static bool in_cgroup(pid_t pid, const char *ctl, const char *want)
{
	char path[64], line[1024];
	snprintf(path, sizeof(path), "/proc/%d/cgroup", pid);
	FILE *f = fopen(path, "r");
	bool found = false;
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		char *field = c1 + 1;
		bool match = *ctl ? (!strcmp(field, ctl) ||
				     (strstr(field, ctl) && strchr(field, ',')))
				  : !*field;
		if (match)
			found = !strcmp(c2 + 1, want);
	}
	if (f)
		fclose(f);
	return found;
}

/* Where cgroup_enter puts a room's processes, below the room: keeper/ on
 * v2, the room itself (NULL) on v1, where a second memory cgroup per room
 * would cost the kernel a shrinker map for nothing. */
static const char *home(const struct cgroup_sys *sys)
{
	return sys->mode == CG_V2 ? "keeper" : NULL;
}

/* A cgroup a room process made below its home, relative to the room. */
static const char *nested(const struct cgroup_sys *sys)
{
	return sys->mode == CG_V2 ? "keeper/nested" : "nested";
}

/* Is pid in <room>[/<leaf>] in every tree of the back end?  No assertion,
 * so that a forked child can ask too. */
static bool in_leaf(const struct cgroup_sys *sys, pid_t pid, const char *room,
		    const char *leaf)
{
	char want[256];
	snprintf(want, sizeof(want), "/roombox/%s%s%s", room, leaf ? "/" : "", leaf ? leaf : "");
	if (sys->mode == CG_V2)
		return in_cgroup(pid, "", want);
	return in_cgroup(pid, "memory", want) && in_cgroup(pid, "pids", want) &&
	       (!sys->cpu_root[0] || in_cgroup(pid, "cpu", want)) &&
	       (!sys->freezer_root[0] || in_cgroup(pid, "freezer", want));
}

static void assert_in_leaf(const struct cgroup_sys *sys, pid_t pid,
			   const char *room, const char *leaf)
{
	if (!in_leaf(sys, pid, room, leaf))
		fail_msg("pid %d not in /roombox/%s/%s in every tree", pid, room,
			 leaf ? leaf : "");
}

/* <room>[/<leaf>] lists no process in any tree. */
static void assert_no_procs(const struct cgroup_sys *sys, const char *room,
			    const char *leaf)
{
	const char *roots[4];
	size_t n = sys_roots(sys, roots);
	if (!leaf)
		leaf = ".";
	for (size_t i = 0; i < n; i++) {
		const char *procs = get("%s/roombox/%s/%s/cgroup.procs", roots[i],
					room, leaf);
		if (strcmp(procs, ""))
			fail_msg("%s/roombox/%s/%s/cgroup.procs: %s", roots[i], room,
				 leaf, procs);
	}
}

/* What a process of the room could do to itself with a delegated tree
 * (the kernel does not mind who writes): make <room>/<sub> in every tree,
 * behind cgroup.c's back, and move pid there. */
static void move_below_room(const struct cgroup_sys *sys, pid_t pid,
			    const char *room, const char *sub)
{
	const char *roots[4];
	size_t n = sys_roots(sys, roots);
	char dir[PATH_MAX], num[32];

	snprintf(num, sizeof(num), "%d", pid);
	for (size_t i = 0; i < n; i++) {
		snprintf(dir, sizeof(dir), "%s/roombox/%s/%s", roots[i], room, sub);
		if (mkdir(dir, 0755) < 0 && errno != EEXIST)
			fail_msg("mkdir %s: %s", dir, strerror(errno));
		put(num, "%s/cgroup.procs", dir);
	}
}

/* Whether the room is left thawed: a frozen room would freeze the keeper
 * of its next start. */
static void assert_thawed(const struct cgroup_sys *sys, const char *room)
{
	const char *state;

	if (sys->mode == CG_V1 && sys->freezer_root[0]) {
		state = get("%s/roombox/%s/freezer.state", sys->freezer_root, room);
		assert_string_equal(state, "THAWED");
	} else if (sys->mode == CG_V2) {
		state = get("%s/roombox/%s/cgroup.freeze", sys->v2_root, room);
		if (strcmp(state, "<absent>"))
			assert_string_equal(state, "0");
	}
}

/* A child that waits until the parent has put it into the room (home()),
 * then runs body, which reports pids (ints) on fd.  Returns its pid. */
static pid_t spawn_in_room(const struct cgroup_sys *sys, const char *room,
			   void (*body)(int fd), int *report)
{
	int go[2], rep[2];
	char err[512], c;

	assert_int_equal(pipe(go), 0);
	assert_int_equal(pipe(rep), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		close(go[1]);
		close(rep[0]);
		if (read(go[0], &c, 1) != 1)
			_exit(90);
		body(rep[1]);
		_exit(0);
	}
	close(go[0]);
	close(rep[1]);
	if (cgroup_enter(sys, room, pid, err, sizeof(err)) < 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		fail_msg("%s", err);
	}
	assert_int_equal(write(go[1], "g", 1), 1);
	close(go[1]);
	*report = rep[0];
	return pid;
}

/* Does fd have something to read within ms? */
static bool readable_within(int fd, int ms)
{
	struct pollfd p = { fd, POLLIN, 0 };
	return poll(&p, 1, ms) == 1;
}

static int read_ints(int fd, int *out, int n)
{
	int got = 0;
	while (got < n && read(fd, &out[got], sizeof(int)) == sizeof(int))
		got++;
	return got;
}

static void report_int(int fd, int v)
{
	if (write(fd, &v, sizeof(v)) != sizeof(v))
		_exit(91);
}

static void child_sleeps(int fd)
{
	(void)fd;
	for (;;)
		pause();
}

/* Three children, and one that leaves the process tree (double fork and
 * setsid) as a daemon would; then waits to be killed. */
static void body_sleepers(int fd)
{
	for (int i = 0; i < 3; i++) {
		pid_t p = fork();
		if (p == 0)
			child_sleeps(fd);
		report_int(fd, p);
	}
	if (fork() == 0) {
		setsid();
		pid_t p = fork();
		if (p == 0)
			child_sleeps(fd);
		report_int(fd, p);
		_exit(0);
	}
	child_sleeps(fd);
}

/* Says it runs, then waits to be killed. */
static void body_report_self(int fd)
{
	report_int(fd, getpid());
	child_sleeps(fd);
}

/* Two daemons, then a normal end: what `server &` leaves behind. */
static void body_daemons(int fd)
{
	for (int i = 0; i < 2; i++) {
		if (fork() == 0) {
			setsid();
			pid_t p = fork();
			if (p == 0) {
				/* touch some memory so the room has usage */
				static char page[1 << 20];
				memset(page, 1, sizeof(page));
				child_sleeps(fd);
			}
			report_int(fd, p);
			_exit(0);
		}
	}
	while (wait(NULL) > 0)
		;
}

static void setup_room(const struct cgroup_sys *sys, const char *room,
		       const struct cgroup_limits *lim)
{
	char err[512];
	if (cgroup_room_setup(sys, room, lim, err, sizeof(err)) < 0)
		fail_msg("%s", err);
}

static void remove_room(const struct cgroup_sys *sys, const char *room)
{
	char err[512];
	if (cgroup_room_remove(sys, room, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	reap_all();
	assert_dirs(sys, room, NULL, false);
}

static void v1_expect_limits(const struct cgroup_sys *sys, const char *room,
			     uint64_t mem, int pids, long quota)
{
	char num[32];
	snprintf(num, sizeof(num), "%llu", (unsigned long long)mem);
	assert_string_equal(get("%s/roombox/%s/memory.limit_in_bytes",
				sys->memory_root, room), num);
	if (strcmp(get("%s/roombox/%s/memory.memsw.limit_in_bytes",
		       sys->memory_root, room), "<absent>"))
		assert_string_equal(get("%s/roombox/%s/memory.memsw.limit_in_bytes",
					sys->memory_root, room), num);
	assert_string_equal(get("%s/roombox/%s/memory.use_hierarchy",
				sys->memory_root, room), "1");
	snprintf(num, sizeof(num), "%d", pids);
	assert_string_equal(get("%s/roombox/%s/pids.max", sys->pids_root, room), num);
	if (!sys->cpu_root[0])
		return;
	snprintf(num, sizeof(num), "%ld", quota);
	assert_string_equal(get("%s/roombox/%s/cpu.cfs_quota_us", sys->cpu_root,
				room), num);
	assert_string_equal(get("%s/roombox/%s/cpu.cfs_period_us", sys->cpu_root,
				room), "100000");
}

static void v2_expect_limits(const struct cgroup_sys *sys, const char *room,
			     uint64_t mem, int pids, long quota)
{
	char num[64];
	snprintf(num, sizeof(num), "%llu", (unsigned long long)mem);
	assert_string_equal(get("%s/roombox/%s/memory.max", sys->v2_root, room), num);
	snprintf(num, sizeof(num), "%d", pids);
	assert_string_equal(get("%s/roombox/%s/pids.max", sys->v2_root, room), num);
	snprintf(num, sizeof(num), "%ld 100000", quota);
	const char *cpu = get("%s/roombox/%s/cpu.max", sys->v2_root, room);
	if (strcmp(cpu, "<absent>"))
		assert_string_equal(cpu, num);
}

static void expect_limits(const struct cgroup_sys *sys, const char *room,
			  uint64_t mem, int pids, long quota)
{
	if (sys->mode == CG_V1)
		v1_expect_limits(sys, room, mem, pids, quota);
	else
		v2_expect_limits(sys, room, mem, pids, quota);
}

/* Down and up again: on v1 memsw must never be below the limit. */
static void test_real_setup_applies_limits(void **state)
{
	(void)state;
	struct cgroup_sys sys;
	char room[96];
	struct cgroup_limits small = { 256 * MIB, 100, 0.5 },
			     big = { 1024 * MIB, 1000, 2.0 };

	real_sys(&sys);
	print_message("cgroup back end on this host: %s\n",
		      cgroup_mode_name(sys.mode));
	room_name(room, sizeof(room), "limits");
	setup_room(&sys, room, &default_limits);
	assert_dirs(&sys, room, NULL, true);
	assert_dirs(&sys, room, "keeper", sys.mode == CG_V2);
	expect_limits(&sys, room, 512 * MIB, 256, 100000);
	/* a v1 room stopped under an older version has an empty keeper/
	 * leaf in every tree: the next set-up drops it */
	if (sys.mode == CG_V1) {
		const char *roots[4];
		size_t n = sys_roots(&sys, roots);
		for (size_t i = 0; i < n; i++)
			make("%s/roombox/%s/keeper", roots[i], room);
		assert_dirs(&sys, room, "keeper", true);
		setup_room(&sys, room, &default_limits);
		assert_dirs(&sys, room, "keeper", false);
	}
	setup_room(&sys, room, &small);
	expect_limits(&sys, room, 256 * MIB, 100, 50000);
	setup_room(&sys, room, &big);
	expect_limits(&sys, room, 1024 * MIB, 1000, 200000);
	remove_room(&sys, room);
}

/* Everything of the room dies, wherever below the room it went; the
 * room's cgroups stay until the room is removed, and then all go. */
static void kill_room_scenario(const struct cgroup_sys *sys, const char *room,
			       const struct cgroup_limits *lim)
{
	char err[512];
	int report, pids[4], status;
	uint64_t mem, procs;

	setup_room(sys, room, lim);
	pid_t top = spawn_in_room(sys, room, body_sleepers, &report);
	assert_int_equal(read_ints(report, pids, 4), 4);
	close(report);
	for (int i = 0; i < 4; i++) {
		assert_true(alive(pids[i]));
		assert_in_leaf(sys, pids[i], room, home(sys));
	}
	/* one below their cgroup, the daemon beside it */
	move_below_room(sys, pids[0], room, nested(sys));
	move_below_room(sys, pids[3], room, "own");
	assert_in_leaf(sys, pids[0], room, nested(sys));
	assert_in_leaf(sys, pids[3], room, "own");
	cgroup_room_usage(sys, room, &mem, &procs);
	if (sys->mode == CG_V1 || strcmp(get("%s/roombox/%s/pids.current",
					     sys->v2_root, room), "<absent>"))
		assert_true(procs >= 5);

	if (cgroup_kill(sys, room, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	assert_int_equal(waitpid(top, &status, 0), top);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	for (int i = 0; i < 4; i++)
		if (!dead_within(pids[i], 1000))
			fail_msg("pid %d survived cgroup_kill", pids[i]);
	reap_all();
	assert_dirs(sys, room, NULL, true);
	assert_dirs(sys, room, "keeper", sys->mode == CG_V2);
	assert_no_procs(sys, room, home(sys));
	assert_no_procs(sys, room, nested(sys));
	assert_no_procs(sys, room, "own");
	/* still there, so that the removal is shown to take them along */
	assert_dirs(sys, room, nested(sys), true);
	assert_dirs(sys, room, "own", true);
	remove_room(sys, room);
}

static void test_real_kill_leaves_none_alive(void **state)
{
	(void)state;
	struct cgroup_sys sys;
	char room[96];

	real_sys(&sys);
	room_name(room, sizeof(room), "kill");
	kill_room_scenario(&sys, room, &default_limits);
}

static void daemons_scenario(const struct cgroup_sys *sys, const char *room,
			     const struct cgroup_limits *lim)
{
	int report, pids[2], status;
	uint64_t mem, procs;

	setup_room(sys, room, lim);
	pid_t top = spawn_in_room(sys, room, body_daemons, &report);
	assert_int_equal(read_ints(report, pids, 2), 2);
	close(report);
	assert_int_equal(waitpid(top, &status, 0), top);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	for (int i = 0; i < 2; i++) {
		assert_true(alive(pids[i]));
		assert_in_leaf(sys, pids[i], room, home(sys));
	}
	cgroup_room_usage(sys, room, &mem, &procs);
	print_message("room usage: %llu bytes, %llu processes\n",
		      (unsigned long long)mem, (unsigned long long)procs);
	if (sys->mode == CG_V1 || strcmp(get("%s/roombox/%s/pids.current",
					     sys->v2_root, room), "<absent>")) {
		assert_true(procs >= 2);
		assert_true(mem > 0);
	}

	remove_room(sys, room);
	for (int i = 0; i < 2; i++)
		if (!dead_within(pids[i], 1000))
			fail_msg("pid %d survived cgroup_room_remove", pids[i]);
	reap_all();
}

static void test_real_daemons_die_with_room(void **state)
{
	(void)state;
	struct cgroup_sys sys;
	char room[96];

	real_sys(&sys);
	room_name(room, sizeof(room), "daemons");
	daemons_scenario(&sys, room, &default_limits);
}

/* Forks until refused; reports how many worked and the errno of the
 * refusal. */
static void body_fork_many(int fd)
{
	int ok = 0, why = 0;
	for (int i = 0; i < 20; i++) {
		pid_t p = fork();
		if (p == 0)
			child_sleeps(fd);
		if (p < 0) {
			why = errno;
			break;
		}
		ok++;
	}
	report_int(fd, ok);
	report_int(fd, why);
	child_sleeps(fd);
}

static void test_real_pids_limit_stops_forks(void **state)
{
	(void)state;
	struct cgroup_sys sys;
	char room[96];
	struct cgroup_limits lim = { 512 * MIB, 8, 1.0 };
	int report, got[2];

	real_sys(&sys);
	room_name(room, sizeof(room), "pids");
	setup_room(&sys, room, &lim);
	pid_t top = spawn_in_room(&sys, room, body_fork_many, &report);
	assert_int_equal(read_ints(report, got, 2), 2);
	close(report);
	print_message("forks allowed under pids.max=8: %d (then %s)\n", got[0],
		      strerror(got[1]));
	assert_true(got[0] >= 1 && got[0] <= 7);
	assert_int_equal(got[1], EAGAIN);
	remove_room(&sys, room);
	waitpid(top, NULL, 0);
	reap_all();
}

static void body_fork_bomb(int fd)
{
	(void)fd;
	for (;;)
		fork();
}

/* Kill must win against processes that fork as fast as they can. */
static void test_real_kill_contains_fork_bomb(void **state)
{
	(void)state;
	struct cgroup_sys sys;
	char room[96], err[512];
	struct cgroup_limits lim = { 256 * MIB, 64, 0.5 };
	int report, status;
	uint64_t mem, procs;

	real_sys(&sys);
	room_name(room, sizeof(room), "bomb");
	setup_room(&sys, room, &lim);
	pid_t top = spawn_in_room(&sys, room, body_fork_bomb, &report);
	close(report);
	usleep(300 * 1000);
	cgroup_room_usage(&sys, room, &mem, &procs);
	print_message("fork bomb after 300 ms: %llu tasks\n",
		      (unsigned long long)procs);
	assert_true(procs > 1 && procs <= 64);
	if (cgroup_kill(&sys, room, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	assert_int_equal(waitpid(top, &status, 0), top);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	assert_no_procs(&sys, room, home(&sys));
	assert_dirs(&sys, room, "keeper", sys.mode == CG_V2);
	reap_all();
	remove_room(&sys, room);
}

/* Four sleeping children and nothing else that comes and goes. */
static void body_four_sleepers(int fd)
{
	for (int i = 0; i < 4; i++) {
		pid_t p = fork();
		if (p == 0)
			child_sleeps(fd);
		report_int(fd, p);
	}
	child_sleeps(fd);
}

/* kill-all: every process of the room but `keep` dies, in whatever cgroup
 * below the room; `keep` (the keeper, in the product) lives on, the room
 * is left thawed, and the count is of the processes killed. */
static void test_real_kill_others_spares_keep(void **state)
{
	(void)state;
	struct cgroup_sys sys;
	char room[96], err[512];
	int report, pids[4], killed = -1, status;

	real_sys(&sys);
	room_name(room, sizeof(room), "others");
	setup_room(&sys, room, &default_limits);
	pid_t top = spawn_in_room(&sys, room, body_four_sleepers, &report);
	assert_int_equal(read_ints(report, pids, 4), 4);
	close(report);
	move_below_room(&sys, pids[3], room, "own");
	if (cgroup_kill_others(&sys, room, top, &killed, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	assert_int_equal(killed, 4);
	for (int i = 0; i < 4; i++)
		if (!dead_within(pids[i], 1000))
			fail_msg("pid %d survived cgroup_kill_others", pids[i]);
	assert_true(alive(top));
	assert_thawed(&sys, room);
	/* nothing left but keep: a second call kills none */
	if (cgroup_kill_others(&sys, room, top, &killed, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	assert_int_equal(killed, 0);
	assert_true(alive(top));
	remove_room(&sys, room);
	waitpid(top, &status, 0);   /* remove_room may have reaped it */
}

/* The keeper's stand-in sleeps while its child bombs the room. */
static void body_keep_and_bomb(int fd)
{
	if (fork() == 0)
		body_fork_bomb(fd);
	report_int(fd, getpid());
	child_sleeps(fd);
}

/* kill-all must win against a fork bomb at the room's limit, sparing
 * `keep`; and the room is seen at its limit while the bomb runs, not
 * after. */
static void test_real_kill_others_contains_fork_bomb(void **state)
{
	(void)state;
	struct cgroup_sys sys;
	char room[96], err[512], want[32];
	struct cgroup_limits lim = { 256 * MIB, 32, 0.5 };
	int report, self, killed = -1, status;
	uint64_t mem, procs = 0;

	real_sys(&sys);
	room_name(room, sizeof(room), "bomb-others");
	setup_room(&sys, room, &lim);
	pid_t top = spawn_in_room(&sys, room, body_keep_and_bomb, &report);
	assert_int_equal(read_ints(report, &self, 1), 1);
	close(report);
	assert_int_equal(self, top);
	const char *pids_root = sys.mode == CG_V2 ? sys.v2_root : sys.pids_root;
	/* until the room is full and the kernel has refused a fork */
	for (int i = 0; i < 200 && (procs < 32 || !strcmp(get("%s/roombox/%s/pids.events",
				pids_root, room), "max 0")); i++) {
		usleep(10 * 1000);
		cgroup_room_usage(&sys, room, &mem, &procs);
	}
	print_message("fork bomb: %llu tasks of 32, pids.events: %s\n", (unsigned long long)procs,
		      get("%s/roombox/%s/pids.events", pids_root, room));
	assert_true(procs == 32);
	if (cgroup_kill_others(&sys, room, top, &killed, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	print_message("killed %d\n", killed);
	assert_true(killed >= 2);
	assert_true(alive(top));
	snprintf(want, sizeof(want), "%d", (int)top);
	const char *roots[4];
	size_t n = sys_roots(&sys, roots);
	for (size_t i = 0; i < n; i++)
		assert_string_equal(get("%s/roombox/%s/%s/cgroup.procs", roots[i], room,
					home(&sys) ? home(&sys) : "."), want);
	assert_thawed(&sys, room);
	/* the bomb's zombies count in pids.current until reaped (by us: the
	 * test is their subreaper; the keeper, in the product); top's own
	 * child stays its zombie */
	for (int i = 0; i < 200 && (reap_all(), cgroup_room_usage(&sys, room, &mem, &procs), procs > 2); i++)
		usleep(5 * 1000);
	assert_true(procs <= 2);
	remove_room(&sys, room);
	waitpid(top, &status, 0);   /* remove_room may have reaped it */
}

/* A stop (jail_stop) takes the keeper too and leaves the room ready to
 * start again: the room (and on v2 keeper/) in place, nothing frozen, and a new
 * keeper entered after a new set-up runs there. */
static void test_real_room_kill(void **state)
{
	(void)state;
	struct cgroup_sys sys;
	char room[96], err[512];
	int report, pids[4], status;

	real_sys(&sys);
	room_name(room, sizeof(room), "stop");
	setup_room(&sys, room, &default_limits);
	pid_t keeper = sleeper();
	if (cgroup_enter(&sys, room, keeper, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	assert_in_leaf(&sys, keeper, room, home(&sys));
	pid_t top = spawn_in_room(&sys, room, body_sleepers, &report);
	assert_int_equal(read_ints(report, pids, 4), 4);
	close(report);
	if (cgroup_kill(&sys, room, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	assert_int_equal(waitpid(keeper, &status, 0), keeper);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	assert_int_equal(waitpid(top, &status, 0), top);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	for (int i = 0; i < 4; i++)
		assert_true(dead_within(pids[i], 1000));
	reap_all();
	assert_dirs(&sys, room, NULL, true);
	assert_dirs(&sys, room, "keeper", sys.mode == CG_V2);
	assert_no_procs(&sys, room, home(&sys));
	assert_thawed(&sys, room);

	setup_room(&sys, room, &default_limits);
	pid_t again = spawn_in_room(&sys, room, body_report_self, &report);
	int got = 0;
	if (!readable_within(report, 2000))
		fail_msg("pid %d entered after the stop does not run", again);
	assert_int_equal(read_ints(report, &got, 1), 1);
	close(report);
	assert_int_equal(got, again);
	assert_in_leaf(&sys, again, room, home(&sys));
	end_sleeper(again);
	remove_room(&sys, room);
}

/* How the helper enters its own child before execve: pid 0, "myself". */
static void test_real_enter_self_with_pid_0(void **state)
{
	(void)state;
	struct cgroup_sys sys;
	char room[96], err[512];
	int status;

	real_sys(&sys);
	room_name(room, sizeof(room), "self");
	setup_room(&sys, room, &default_limits);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (cgroup_enter(&sys, room, 0, err, sizeof(err)) < 0)
			_exit(2);
		_exit(in_leaf(&sys, getpid(), room, home(&sys)) ? 0 : 3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* the caller moved, not its parent */
	char want[160];
	snprintf(want, sizeof(want), "/roombox/%s%s", room, sys.mode == CG_V2 ? "/keeper" : "");
	assert_false(in_cgroup(getpid(), sys.mode == CG_V2 ? "" : "pids", want));
	remove_room(&sys, room);
}

/* v2 process handling against a real kernel, where this host has one. */
static void test_real_v2_unified_processes(void **state)
{
	(void)state;
	struct cgroup_sys sys;
	char room[96];

	if (!unified_sys(&sys)) {
		print_message("no /sys/fs/cgroup/unified on this host\n");
		skip();
	}
	/* no controllers there, so no limits */
	struct cgroup_limits none = { 0, 0, 0 };
	room_name(room, sizeof(room), "v2kill");
	kill_room_scenario(&sys, room, &none);
	room_name(room, sizeof(room), "v2keeper");
	daemons_scenario(&sys, room, &none);
}

/* The room's memory given back before its cgroup goes (v1 force_empty,
 * v2 reclaim): a process of the room reads a file into the page cache (it
 * was dropped from the cache first, so the pages are charged to the room),
 * ends, and its pages are still charged to the room until the release. */
#define RELEASE_FILE_MIB 32
static char release_file[PATH_MAX];

static void body_read_file(int fd)
{
	char buf[65536];
	int in = open(release_file, O_RDONLY | O_CLOEXEC);
	long total = 0;
	ssize_t n;

	while (in >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		total += n;
	report_int(fd, (int)(total >> 20));
	_exit(0);
}

static void test_real_release_memory(void **state)
{
	(void)state;
	struct cgroup_sys sys;
	char room[96], chunk[65536];
	int report, mib, status;
	uint64_t before, after, procs;

	real_sys(&sys);
	room_name(room, sizeof(room), "release");
	setup_room(&sys, room, &default_limits);
	snprintf(release_file, sizeof(release_file), "/var/tmp/unit-cg-%d-release", (int)getpid());
	int out = open(release_file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	assert_true(out >= 0);
	memset(chunk, 'x', sizeof(chunk));
	for (int i = 0; i < RELEASE_FILE_MIB * 16; i++)
		assert_int_equal(write(out, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
	assert_int_equal(fsync(out), 0);
	assert_int_equal(posix_fadvise(out, 0, 0, POSIX_FADV_DONTNEED), 0);
	close(out);

	pid_t top = spawn_in_room(&sys, room, body_read_file, &report);
	assert_int_equal(read_ints(report, &mib, 1), 1);
	close(report);
	assert_int_equal(waitpid(top, &status, 0), top);
	assert_int_equal(mib, RELEASE_FILE_MIB);
	cgroup_room_usage(&sys, room, &before, &procs);
	cgroup_room_release_memory(&sys, room);
	cgroup_room_usage(&sys, room, &after, &procs);
	unlink(release_file);
	print_message("room memory before the release %llu KiB, after %llu KiB\n",
		      (unsigned long long)(before >> 10), (unsigned long long)(after >> 10));
	assert_true(before >= (RELEASE_FILE_MIB - 4) * MIB);
	assert_true(after < 4 * MIB);
	remove_room(&sys, room);
}

/* Whatever a failed test left: our rooms, then roombox/ if empty. */
static void cleanup_tree(const struct cgroup_sys *sys)
{
	const char *roots[4];
	size_t n = sys_roots(sys, roots);
	char err[512];

	for (size_t i = 0; i < n; i++) {
		char base[PATH_MAX];
		snprintf(base, sizeof(base), "%s/roombox", roots[i]);
		DIR *d = opendir(base);
		struct dirent *de;
		while (d && (de = readdir(d)))
			if (!strncmp(de->d_name, room_prefix, strlen(room_prefix)) &&
			    cgroup_room_remove(sys, de->d_name, err, sizeof(err)) < 0)
				fprintf(stderr, "cleanup: %s\n", err);
		if (d)
			closedir(d);
		rmdir(base);
	}
	reap_all();
}

static int real_teardown(void **state)
{
	(void)state;
	struct cgroup_sys sys;

	if (geteuid() != 0)
		return 0;
	cgroup_detect(&sys, "/sys/fs/cgroup");
	cleanup_tree(&sys);
	if (unified_sys(&sys))
		cleanup_tree(&sys);
	return 0;
}

/* Two instances on one host never share a room cgroup: the default
 * state_dir gets "roombox", any other its own "roombox-<hash>". */
static void test_instance_group(void **state)
{
	struct cgroup_sys sys;
	char other[32];

	(void)state;
	memset(&sys, 0, sizeof(sys));
	cgroup_set_instance(&sys, "/var/lib/roombox", "/var/lib/roombox");
	assert_string_equal(sys.group, "roombox");
	cgroup_set_instance(&sys, "/srv/rb/state", "/var/lib/roombox");
	assert_int_equal(strlen(sys.group), strlen("roombox-") + 8);
	assert_memory_equal(sys.group, "roombox-", 8);
	snprintf(other, sizeof(other), "%s", sys.group);
	cgroup_set_instance(&sys, "/srv/rb/state2", "/var/lib/roombox");
	assert_string_not_equal(sys.group, other);
	cgroup_set_instance(&sys, "/srv/rb/state", "/var/lib/roombox");
	assert_string_equal(sys.group, other);
}

int main(void)
{
	snprintf(room_prefix, sizeof(room_prefix), "unit-cg-%d", (int)getpid());
	prctl(PR_SET_CHILD_SUBREAPER, 1);

	const struct CMUnitTest scratch[] = {
		cmocka_unit_test(test_instance_group),
		cmocka_unit_test(test_detect_pure_v2),
		cmocka_unit_test(test_detect_v1),
		cmocka_unit_test(test_detect_hybrid),
		cmocka_unit_test(test_detect_none),
		cmocka_unit_test(test_none_does_nothing),
		cmocka_unit_test_setup_teardown(test_v2_setup_writes_limits,
						scratch_v2_setup, scratch_v2_teardown),
		cmocka_unit_test_setup_teardown(test_v2_setup_again_changes_limits,
						scratch_v2_setup, scratch_v2_teardown),
		cmocka_unit_test_setup_teardown(test_v2_setup_keeps_unchanged_cpu_limit,
						scratch_v2_setup, scratch_v2_teardown),
		cmocka_unit_test_setup_teardown(test_v2_enter_kill_remove,
						scratch_v2_setup, scratch_v2_teardown),
		cmocka_unit_test_setup_teardown(test_errors_name_room_and_step,
						scratch_v2_setup, scratch_v2_teardown),
	};
	const struct CMUnitTest real[] = {
		cmocka_unit_test(test_real_setup_applies_limits),
		cmocka_unit_test(test_real_kill_leaves_none_alive),
		cmocka_unit_test(test_real_daemons_die_with_room),
		cmocka_unit_test(test_real_pids_limit_stops_forks),
		cmocka_unit_test(test_real_kill_contains_fork_bomb),
		cmocka_unit_test(test_real_kill_others_spares_keep),
		cmocka_unit_test(test_real_kill_others_contains_fork_bomb),
		cmocka_unit_test(test_real_room_kill),
		cmocka_unit_test(test_real_enter_self_with_pid_0),
		cmocka_unit_test(test_real_release_memory),
		cmocka_unit_test(test_real_v2_unified_processes),
	};
	int failed = cmocka_run_group_tests_name("cgroup scratch", scratch, NULL, NULL);
	failed += cmocka_run_group_tests_name("cgroup real", real, NULL, real_teardown);
	return failed ? 1 : 0;
}
