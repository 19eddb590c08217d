/* Unit tests for common/shell_env.c and common/session_file.c: the
 * shell's environment carries the session and the request's variables
 * (quoted, names a shell cannot take dropped), a session is kept only
 * when whole and changed, and the session file is read and rewritten in
 * place (the keeper holds it open: the same inode stays the session). */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "session_file.h"
#include "shell_env.h"

static const char *env_get(const struct shell_env *e, const char *prefix)
{
	for (size_t i = 0; i < e->n; i++)
		if (strncmp(e->envp[i], prefix, strlen(prefix)) == 0)
			return e->envp[i];
	return NULL;
}

static void test_env_carries_session_and_request(void **state)
{
	(void)state;
	struct shell_env e;
	char err[256];
	const char env[] = "A=it's\0bad-name=x\0B=2";
	assert_int_equal(shell_env_build(&e, "r1", "echo hi", true, false, "/tmp", "export X='1'\n",
					 env, 3, err, sizeof(err)), 0);
	assert_string_equal(env_get(&e, "HOME="), "HOME=/home/user");
	assert_string_equal(env_get(&e, "__RB_ONEOFF_CWD="), "__RB_ONEOFF_CWD=/tmp");
	assert_null(env_get(&e, "__RB_SAVE="));
	assert_string_equal(e.session, "__RB_SESSION=export X='1'\n\nexport A='it'\\''s'\nexport B='2'\n");
	assert_string_equal(e.argv[4], "echo hi");
	assert_null(e.argv[5]);
	shell_env_free(&e);
}

static void test_session_kept_only_whole_and_changed(void **state)
{
	(void)state;
	struct shell_env e;
	char err[256];
	size_t n;
	assert_int_equal(shell_env_build(&e, "r1", "true", false, true, NULL, "export X='1'\n", NULL, 0,
					 err, sizeof(err)), 0);
	assert_non_null(env_get(&e, "__RB_SAVE=1"));
	const char same[] = "export X='1'\n" SHELL_SESSION_END;
	const char other[] = "export X='2'\n" SHELL_SESSION_END;
	const char cut[] = "export X='2'\n";
	assert_false(shell_env_session_new(&e, same, strlen(same), &n));
	assert_true(shell_env_session_new(&e, other, strlen(other), &n));
	assert_int_equal(n, strlen("export X='2'\n"));
	assert_false(shell_env_session_new(&e, cut, strlen(cut), &n));
	shell_env_free(&e);
}

static void test_session_file_in_place(void **state)
{
	(void)state;
	int fd = memfd_create("session", 0);
	struct stat a, b;
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &a), 0);
	assert_int_equal(session_file_write(fd, "a long first session\n", 21), 0);
	assert_int_equal(session_file_write(fd, "short\n", 6), 0);
	char *s = session_file_read(fd, 1024);
	assert_string_equal(s, "short\n");
	free(s);
	s = session_file_read(fd, 3);     /* cut at max */
	assert_string_equal(s, "sho");
	free(s);
	assert_int_equal(fstat(fd, &b), 0);
	assert_int_equal(a.st_ino, b.st_ino);
	assert_int_equal(session_file_write(fd, "", 0), 0);
	s = session_file_read(fd, 1024);
	assert_string_equal(s, "");
	free(s);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_env_carries_session_and_request),
		cmocka_unit_test(test_session_kept_only_whole_and_changed),
		cmocka_unit_test(test_session_file_in_place),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
