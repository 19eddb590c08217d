/* Unit test of nsprocs_kill_others: the room's processes found by its pid
 * namespace, where the host has no cgroups; and of nsprocs_kill_uids: the
 * processes of a room's host ids, wherever they run.  Root only (a pid namespace);
 * failing, not skipping, without it.
 *
 * A stand-in keeper is PID 1 of a new pid namespace with three sleepers
 * (one daemonised, so not its child), and a control sleeper runs outside
 * it, all named "nsp-sleeper".  The kill must take the three, spare the
 * keeper and the control, and count three. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
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

#include "nsprocs.h"

#define NAME "nsp-sleeper"

static pid_t control = -1, outer = -1, keeper_pid = -1;

/* Whatever a failed assertion left running goes (it would hold the test
 * runner's output pipe, too). */
static int teardown(void **state)
{
	(void)state;
	if (keeper_pid > 0)
		kill(keeper_pid, SIGKILL);
	if (control > 0)
		kill(control, SIGKILL);
	if (outer > 0)
		waitpid(outer, NULL, 0);
	if (control > 0)
		waitpid(control, NULL, 0);
	control = outer = keeper_pid = -1;
	return 0;
}

static void __attribute__((noreturn)) sleeper(void)
{
	int null = open("/dev/null", O_RDWR);
	for (int fd = 0; fd < 3 && null >= 0; fd++)
		dup2(null, fd);
	prctl(PR_SET_NAME, NAME, 0, 0, 0);
	for (;;)
		pause();
}

/* Live (not zombie) processes named NAME whose parent chain we can see:
 * how many, in ns (pid_ns text) or outside it. */
static int count_sleepers(const char *ns, bool inside)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d))) {
		int pid = atoi(e->d_name);
		char path[64], buf[512], link[64];
		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		FILE *f = fopen(path, "re");
		if (!f)
			continue;
		size_t k = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
		buf[k] = '\0';
		char *close_paren = strrchr(buf, ')');
		if (!strstr(buf, "(" NAME ")") || !close_paren || close_paren[2] == 'Z')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
		ssize_t l = readlink(path, link, sizeof(link) - 1);
		if (l <= 0)
			continue;
		link[l] = '\0';
		if ((strcmp(link, ns) == 0) == inside)
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

static void test_kills_the_namespace_but_its_pid_1(void **state)
{
	(void)state;
	if (geteuid() != 0)
		fail_msg("needs root (a pid namespace)");
	int report[2];
	assert_int_equal(pipe(report), 0);
	control = fork();
	if (control == 0)
		sleeper();
	outer = fork();
	if (outer == 0) {
		if (unshare(CLONE_NEWPID) < 0)
			_exit(2);
		pid_t keeper = fork();
		if (keeper == 0) {
			for (int i = 0; i < 2; i++)
				if (fork() == 0)
					sleeper();
			if (fork() == 0) {
				if (fork() == 0)
					sleeper();
				_exit(0);
			}
			/* the keeper's part: reap what comes */
			int32_t ready = 1;
			if (write(report[1], &ready, sizeof(ready)) != sizeof(ready))
				_exit(2);
			for (;;)
				if (wait(NULL) < 0)
					pause();
		}
		int32_t pid = keeper;
		if (write(report[1], &pid, sizeof(pid)) != sizeof(pid))
			_exit(2);
		waitpid(keeper, NULL, 0);
		_exit(0);
	}
	close(report[1]);
	int32_t keeper = 0, ready = 0;
	assert_int_equal(read(report[0], &keeper, sizeof(keeper)), sizeof(keeper));
	keeper_pid = keeper;
	assert_int_equal(read(report[0], &ready, sizeof(ready)), sizeof(ready));
	close(report[0]);
	char ns[64], path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)keeper);
	ssize_t l = readlink(path, ns, sizeof(ns) - 1);
	assert_true(l > 0);
	ns[l] = '\0';
	/* the daemonised one may take a moment to be named */
	for (int i = 0; i < 200 && count_sleepers(ns, true) < 3; i++)
		usleep(5000);
	assert_int_equal(count_sleepers(ns, true), 3);

	int killed = -1;
	char err[256] = "";
	if (nsprocs_kill_others(keeper, &killed, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	assert_int_equal(killed, 3);
	assert_int_equal(count_sleepers(ns, true), 0);
	assert_int_equal(kill(keeper, 0), 0);                 /* PID 1 lives */
	assert_true(count_sleepers(ns, false) >= 1);           /* the control too */
	assert_int_equal(kill(control, 0), 0);
	/* again: nothing left to kill */
	assert_int_equal(nsprocs_kill_others(keeper, &killed, err, sizeof(err)), 0);
	assert_int_equal(killed, 0);

}

static void test_a_keeper_that_is_gone(void **state)
{
	(void)state;
	int killed = -1;
	char err[256] = "";
	pid_t p = fork();
	if (p == 0)
		_exit(0);
	waitpid(p, NULL, 0);
	assert_int_equal(nsprocs_kill_others(p, &killed, err, sizeof(err)), -1);
	assert_int_equal(killed, 0);
	assert_non_null(strstr(err, "read its pid namespace"));
}

/* A sleeper with the given real, effective and saved uid; its pid.
 * dumpable: as after a plain exec (else the change of ids made it
 * undumpable: the files in /proc/<pid> then belong to root, /proc/<pid>
 * itself to euid all the same). */
static pid_t sleeper_as(uid_t ruid, uid_t euid, bool dumpable)
{
	pid_t p = fork();
	if (p == 0) {
		if (setresuid(ruid, euid, euid) < 0 ||
		    (dumpable && prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0))
			_exit(2);
		sleeper();
	}
	return p;
}

/* The test's own child: dead (a zombie, reaped here) or still running. */
static bool running(pid_t *pid)
{
	if (waitpid(*pid, NULL, WNOHANG) != *pid)
		return true;
	*pid = -1;
	return false;
}

static bool named(pid_t pid)
{
	char path[64], buf[32] = "";
	snprintf(path, sizeof(path), "/proc/%d/comm", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool is = fgets(buf, sizeof(buf), f) && strcmp(buf, NAME "\n") == 0;
	fclose(f);
	return is;
}

/* far above any range the tests' stacks take */
#define IDS_LO 4100000000u
#define IDS_N 16u

#define BY_UID 5
static pid_t by_uid[BY_UID] = { -1, -1, -1, -1, -1 };

static int teardown_uids(void **state)
{
	(void)state;
	for (int i = 0; i < BY_UID; i++)
		if (by_uid[i] > 0) {
			kill(by_uid[i], SIGKILL);
			waitpid(by_uid[i], NULL, 0);
			by_uid[i] = -1;
		}
	return 0;
}

static void test_kills_every_process_of_the_ids_and_no_other(void **state)
{
	(void)state;
	if (geteuid() != 0)
		fail_msg("needs root (other uids)");
	by_uid[0] = sleeper_as(IDS_LO + 3, IDS_LO + 3, false);   /* one of the ids */
	by_uid[1] = sleeper_as(0, IDS_LO, false);                /* effective uid only */
	by_uid[2] = sleeper_as(IDS_LO + IDS_N, IDS_LO + IDS_N, false);   /* the next id: not of them */
	by_uid[3] = sleeper_as(IDS_LO + 5, IDS_LO + 5, true);    /* one of the ids, owning its /proc entry */
	by_uid[4] = sleeper_as(IDS_LO - 1, IDS_LO - 1, true);    /* the id before, owning its entry */
	/* each has taken its uid once it is named */
	for (int i = 0; i < BY_UID; i++)
		for (int k = 0; k < 400 && !named(by_uid[i]); k++)
			usleep(5000);
	for (int i = 0; i < BY_UID; i++)
		assert_true(named(by_uid[i]));
	struct stat st;
	char entry[32];
	snprintf(entry, sizeof(entry), "/proc/%d", (int)by_uid[3]);
	assert_int_equal(stat(entry, &st), 0);
	assert_int_equal(st.st_uid, IDS_LO + 5);
	/* what the sweep's stat relies on: undumpable, the entry is still
	 * its effective uid's, only the files in it are root's */
	snprintf(entry, sizeof(entry), "/proc/%d", (int)by_uid[0]);
	assert_int_equal(stat(entry, &st), 0);
	assert_int_equal(st.st_uid, IDS_LO + 3);
	FILE *sd = fopen("/proc/sys/fs/suid_dumpable", "re");
	int suid_dumpable = -1;
	if (sd) {
		if (fscanf(sd, "%d", &suid_dumpable) != 1)
			suid_dumpable = -1;
		fclose(sd);
	}
	snprintf(entry, sizeof(entry), "/proc/%d/status", (int)by_uid[0]);
	assert_int_equal(stat(entry, &st), 0);
	if (suid_dumpable != 1)   /* 1: a change of ids leaves it dumpable */
		assert_int_equal(st.st_uid, 0);
	int killed = -1;
	char err[256] = "";
	if (nsprocs_kill_uids(IDS_LO, IDS_N, &killed, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	assert_int_equal(killed, 3);
	assert_false(running(&by_uid[0]));
	assert_false(running(&by_uid[1]));
	assert_true(running(&by_uid[2]));
	assert_false(running(&by_uid[3]));
	assert_true(running(&by_uid[4]));
	assert_int_equal(nsprocs_kill_uids(IDS_LO, IDS_N, &killed, err, sizeof(err)), 0);
	assert_int_equal(killed, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(test_kills_the_namespace_but_its_pid_1, teardown),
		cmocka_unit_test(test_a_keeper_that_is_gone),
		cmocka_unit_test_teardown(test_kills_every_process_of_the_ids_and_no_other, teardown_uids),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
