/* A room's processes found by its pid namespace: see nsprocs.h. */
#include "nsprocs.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/stat.h>

#include "errbuf.h"

#define KILL_DEADLINE_MS 2000

/* "pid:[inode]" of pid's pid namespace; false if gone (a zombie has none). */
static bool pid_ns(pid_t pid, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)pid);
	ssize_t n = readlink(path, buf, len - 1);
	if (n <= 0)
		return false;
	buf[n] = '\0';
	return true;
}

static int64_t mono_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

struct seen {
	pid_t *pid;
	size_t n, cap;
};

/* Remember pid once; a process still dying is met again. */
static void seen_add(struct seen *s, pid_t pid)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->pid[i] == pid)
			return;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		pid_t *p = realloc(s->pid, cap * sizeof(pid_t));
		if (!p)
			return;
		s->pid = p;
		s->cap = cap;
	}
	s->pid[s->n++] = pid;
}

/* /proc/<pid>/<file>'s first len - 1 bytes, NUL-terminated; false if gone. */
static bool proc_read(pid_t pid, const char *file, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	size_t n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = '\0';
	return true;
}

/* A zombie keeps its pid namespace link until it is reaped (by the
 * keeper, which adopts them): it is nothing to kill. */
static bool zombie(pid_t pid)
{
	char buf[512];
	if (!proc_read(pid, "stat", buf, sizeof(buf)))
		return true;
	char *s = strrchr(buf, ')');
	return !s || s[1] != ' ' || s[2] == 'Z' || s[2] == 'X';
}

/* Whether pid is one to kill (never a zombie, the caller or the keeper
 * spared: kill_pass sees to those). */
struct match {
	pid_t spare;             /* the keeper of kill_others, or 0 */
	const char *ns;          /* its pid namespace, or NULL */
	uid_t lo, count;         /* else: real or effective uid in [lo, lo + count) */
};

/* Real and effective uid of pid, from its status (the owner of
 * /proc/<pid> is its effective uid alone: may_match). */
static bool proc_uids(pid_t pid, uid_t *ruid, uid_t *euid)
{
	char buf[4096];
	if (!proc_read(pid, "status", buf, sizeof(buf)))
		return false;
	char *u = strstr(buf, "\nUid:");
	unsigned long r, e;
	if (!u || sscanf(u + 5, "%lu %lu", &r, &e) != 2)
		return false;
	*ruid = (uid_t)r;
	*euid = (uid_t)e;
	return true;
}

static bool in_range(uid_t u, const struct match *m)
{
	return u >= m->lo && u - m->lo < m->count;
}

/* Whether pid, the entry of /proc (dfd), may be one of the ids' without
 * reading its status: /proc/<pid> itself belongs to the process's
 * effective uid, dumpable or not (task_dump_owner in fs/proc/base.c gives
 * root, or the root of its memory's user namespace, only the files inside
 * an undumpable process's entry, never its 0555 directory), and to root
 * for a kernel thread.  So an owner outside the ids and not 0 rules a
 * process out at the price of a stat, and a root-owned one without an
 * executable (a kernel thread: 10,000 rooms run 20,000 of them) at a
 * readlink; a host of many rooms is scanned at every destroy.  Unseen so:
 * a process whose real uid alone is one of the ids, its effective uid
 * another user's but root's -- never one inside the room's user namespace
 * (it maps only the ids, and a setuid file of an id it does not map runs
 * as its caller), only one that left it and ran a setuid file of another
 * user, or that root gave such ids; the cgroup and the pid namespace hold
 * a room's processes in any case, this sweep is for what escaped both. */
static bool may_match(int dfd, const char *name, const struct match *m)
{
	struct stat st;
	char path[64], exe[8];

	if (fstatat(dfd, name, &st, 0) < 0)
		return false;   /* gone */
	if (in_range(st.st_uid, m))
		return true;
	if (st.st_uid != 0)
		return false;
	snprintf(path, sizeof(path), "%s/exe", name);
	return readlinkat(dfd, path, exe, sizeof(exe)) >= 0 || errno != ENOENT;
}

static bool matches(pid_t pid, const struct match *m)
{
	if (m->ns) {
		char other[64];
		return pid_ns(pid, other, sizeof(other)) && strcmp(other, m->ns) == 0;
	}
	uid_t ru, eu;
	return proc_uids(pid, &ru, &eu) &&
	       (in_range(ru, m) || in_range(eu, m));
}

/* One pass over /proc: how many of the matching processes were still
 * there (and were sent SIGKILL), or -1. */
static int kill_pass(const struct match *m, struct seen *s)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	int left = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		pid_t pid = (pid_t)atoi(e->d_name);
		if (pid <= 0 || pid == m->spare || pid == getpid() ||
		    (!m->ns && !may_match(dirfd(d), e->d_name, m)) || !matches(pid, m) || zombie(pid))
			continue;
		if (kill(pid, SIGKILL) == 0) {
			left++;
			seen_add(s, pid);
		}
	}
	closedir(d);
	return left;
}

/* kill_pass again until none is left, for KILL_DEADLINE_MS at most; what
 * names the processes in err. */
static int kill_until_none(const struct match *m, const char *what, int *killed, char *err, size_t errlen)
{
	struct seen s = { 0 };
	int rc = 0;
	int64_t deadline = mono_ms() + KILL_DEADLINE_MS;
	for (;;) {
		int left = kill_pass(m, &s);
		if (left < 0) {
			rc = errorf(err, errlen, "%s: read /proc: %s", what, strerror(errno));
			break;
		}
		if (left == 0)
			break;
		if (mono_ms() >= deadline) {
			rc = errorf(err, errlen, "%s: %d processes left after %d ms", what, left,
				    KILL_DEADLINE_MS);
			break;
		}
		usleep(2000);
	}
	*killed = (int)s.n;
	free(s.pid);
	return rc;
}

int nsprocs_kill_others(pid_t keeper, int *killed, char *err, size_t errlen)
{
	char ns[64], what[32];
	*killed = 0;
	if (!pid_ns(keeper, ns, sizeof(ns)))
		return errorf(err, errlen, "keeper %d: read its pid namespace: %s", (int)keeper,
			      strerror(errno));
	struct match m = { .spare = keeper, .ns = ns };
	snprintf(what, sizeof(what), "keeper %d", (int)keeper);
	return kill_until_none(&m, what, killed, err, errlen);
}

int nsprocs_kill_uids(uid_t lo, uid_t count, int *killed, char *err, size_t errlen)
{
	char what[64];
	struct match m = { .lo = lo, .count = count };
	snprintf(what, sizeof(what), "host ids %lu-%lu", (unsigned long)lo, (unsigned long)(lo + count - 1));
	return kill_until_none(&m, what, killed, err, errlen);
}
