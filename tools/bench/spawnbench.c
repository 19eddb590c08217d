/* spawnbench -- the bare references of `make bench`.
 *
 *   spawnbench lat  [-f|-p] [-i FILE] N WARMUP -- ARGV...
 *        run ARGV N times one after another (after WARMUP unmeasured runs),
 *        each time fork+execve (-f, default) or posix_spawn (-p) + waitpid,
 *        with standard input from FILE, standard output to /dev/null and
 *        fds 3, 4, 5 pipes as roombox-fcgi passes an exec's own I/O to
 *        roombox-helper (an input at its end; outputs nobody reads: the
 *        measured command writes nothing) (-i, fork+execve only; without
 *        it the child inherits its descriptors);
 *        prints "n=N p50_ms=.. p90_ms=.. p99_ms=.. mean_ms=.. max_ms=.. fail=K"
 *        (fail: runs that did not exit 0).
 *   spawnbench tput LOOPS SECONDS -- ARGV...
 *        LOOPS processes, each running ARGV in a loop (fork+execve+waitpid)
 *        for SECONDS; prints "loops=L seconds=S spawns=N per_s=R fail=K".
 *
 * ARGV[0] is a path (execve, no PATH search); the environment is passed on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"

extern char **environ;
static const char *stdin_file;

/* fds 3, 4, 5: the read end of an empty input, the write ends of two
 * outputs (their read ends stay open above them, unread). */
static int passed_io(void)
{
	int p[3][2], keep[3];
	for (int k = 0; k < 3; k++) {
		int q[2];
		if (pipe(q) < 0)
			return -1;
		/* above 5, so the dup2s below overwrite none of them */
		p[k][0] = fcntl(q[0], F_DUPFD, 10);
		p[k][1] = fcntl(q[1], F_DUPFD, 10);
		close(q[0]);
		close(q[1]);
		if (p[k][0] < 0 || p[k][1] < 0)
			return -1;
	}
	keep[0] = p[0][0];
	keep[1] = p[1][1];
	keep[2] = p[2][1];
	for (int k = 0; k < 3; k++)
		if (dup2(keep[k], 3 + k) < 0)
			return -1;
	close(p[0][1]);   /* the input ends at once */
	for (int k = 0; k < 3; k++)
		close(keep[k]);
	return 0;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* 0 when the child exited 0. */
static int run_once(char **argv, int use_spawn)
{
	pid_t pid;
	int st;

	if (use_spawn) {
		if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0)
			return -1;
	} else {
		pid = fork();
		if (pid < 0)
			return -1;
		if (pid == 0) {
			if (stdin_file) {
				int fd = open(stdin_file, O_RDONLY);
				if (fd < 0 || dup2(fd, 0) < 0)
					_exit(126);
				if (fd != 0)
					close(fd);
				fd = open("/dev/null", O_WRONLY);
				if (fd < 0 || dup2(fd, 1) < 0)
					_exit(126);
				if (fd != 1)
					close(fd);
				if (passed_io() < 0)
					_exit(126);
			}
			execve(argv[0], argv, environ);
			_exit(127);
		}
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static void usage(void)
{
	fprintf(stderr, "usage: spawnbench lat [-f|-p] [-i FILE] N WARMUP -- ARGV...\n"
			"       spawnbench tput LOOPS SECONDS -- ARGV...\n");
	exit(2);
}

static int lat(int argc, char **argv)
{
	int use_spawn = 0, i = 0;
	if (i < argc && strcmp(argv[i], "-p") == 0)
		use_spawn = 1, i++;
	else if (i < argc && strcmp(argv[i], "-f") == 0)
		i++;
	if (i + 1 < argc && strcmp(argv[i], "-i") == 0) {
		stdin_file = argv[i + 1];
		i += 2;
	}
	if (use_spawn && stdin_file)
		usage();
	if (argc - i < 4 || strcmp(argv[i + 2], "--") != 0)
		usage();
	int n = atoi(argv[i]), warm = atoi(argv[i + 1]);
	char **cmd = argv + i + 3;
	if (n <= 0 || warm < 0)
		usage();
	double *v = calloc((size_t)n, sizeof(*v)), sum = 0;
	int fail = 0;
	for (int k = 0; k < warm; k++)
		run_once(cmd, use_spawn);
	for (int k = 0; k < n; k++) {
		double t0 = now_s();
		if (run_once(cmd, use_spawn) != 0)
			fail++;
		v[k] = (now_s() - t0) * 1e3;
		sum += v[k];
	}
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	printf("n=%d p50_ms=%.4f p90_ms=%.4f p99_ms=%.4f mean_ms=%.4f max_ms=%.4f fail=%d\n",
	       n, pct(v, n, 50), pct(v, n, 90), pct(v, n, 99), sum / n, v[n - 1], fail);
	return 0;
}

static int tput(int argc, char **argv)
{
	if (argc < 4 || strcmp(argv[2], "--") != 0)
		usage();
	int loops = atoi(argv[0]);
	double secs = atof(argv[1]);
	char **cmd = argv + 3;
	if (loops <= 0 || secs <= 0)
		usage();
	int fds[2];
	if (pipe(fds) < 0) {
		perror("pipe");
		return 1;
	}
	/* Every loop starts at the same moment and stops at the same deadline. */
	double start = now_s() + 0.1, end = start + secs;
	for (int l = 0; l < loops; l++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			close(fds[0]);
			while (now_s() < start)
				;
			long ok = 0, bad = 0;
			while (now_s() < end) {
				if (run_once(cmd, 0) == 0)
					ok++;
				else
					bad++;
			}
			long rec[2] = { ok, bad };
			if (write(fds[1], rec, sizeof(rec)) != sizeof(rec))
				_exit(1);
			_exit(0);
		}
	}
	close(fds[1]);
	long total = 0, bad = 0, rec[2];
	for (int l = 0; l < loops; l++) {
		if (read(fds[0], rec, sizeof(rec)) != sizeof(rec))
			break;
		total += rec[0];
		bad += rec[1];
	}
	while (wait(NULL) > 0)
		;
	double took = now_s() - start;
	printf("loops=%d seconds=%.2f spawns=%ld per_s=%.1f fail=%ld\n",
	       loops, took, total, total / took, bad);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2)
		usage();
	if (strcmp(argv[1], "lat") == 0)
		return lat(argc - 2, argv + 2);
	if (strcmp(argv[1], "tput") == 0)
		return tput(argc - 2, argv + 2);
	usage();
	return 2;
}
