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

/* A zombie keeps its pid namespace link until it is reaped (by the
 * keeper, which adopts them): it is nothing to kill. */
static bool zombie(pid_t pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return true;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	char *s = strrchr(buf, ')');
	return !s || s[1] != ' ' || s[2] == 'Z' || s[2] == 'X';
}

/* One pass over /proc: how many of the namespace's processes were still
 * there (and were sent SIGKILL), or -1. */
static int kill_pass(pid_t keeper, const char *ns, struct seen *s)
{
	DIR *d = opendir("/proc");
	if (!d)
		return -1;
	int left = 0;
	char other[64];
	struct dirent *e;
	while ((e = readdir(d))) {
		pid_t pid = (pid_t)atoi(e->d_name);
		if (pid <= 0 || pid == keeper || pid == getpid() ||
		    !pid_ns(pid, other, sizeof(other)) || strcmp(other, ns) != 0 || zombie(pid))
			continue;
		if (kill(pid, SIGKILL) == 0) {
			left++;
			seen_add(s, pid);
		}
	}
	closedir(d);
	return left;
}

int nsprocs_kill_others(pid_t keeper, int *killed, char *err, size_t errlen)
{
	char ns[64];
	struct seen s = { 0 };
	int rc = 0;

	*killed = 0;
	if (!pid_ns(keeper, ns, sizeof(ns)))
		return errorf(err, errlen, "keeper %d: read its pid namespace: %s", (int)keeper,
			      strerror(errno));
	int64_t deadline = mono_ms() + KILL_DEADLINE_MS;
	for (;;) {
		int left = kill_pass(keeper, ns, &s);
		if (left < 0) {
			rc = errorf(err, errlen, "keeper %d: read /proc: %s", (int)keeper, strerror(errno));
			break;
		}
		if (left == 0)
			break;
		if (mono_ms() >= deadline) {
			rc = errorf(err, errlen, "keeper %d: %d processes left after %d ms",
				    (int)keeper, left, KILL_DEADLINE_MS);
			break;
		}
		usleep(2000);
	}
	*killed = (int)s.n;
	free(s.pid);
	return rc;
}
