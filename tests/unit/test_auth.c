/* Unit tests for fcgi-app/http/auth.c: Bearer tokens from tokens_file. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

#include "auth.h"

struct fixture {
	char dir[64];
	char path[96];
	struct auth_tokens *t;
};

static void write_file(const char *path, const char *text)
{
	char tmp[128];
	FILE *f;

	/* replace, as an admin's editor would (new inode, new mtime) */
	snprintf(tmp, sizeof(tmp), "%s.new", path);
	f = fopen(tmp, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	assert_int_equal(rename(tmp, path), 0);
}

static int setup(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	snprintf(fx->dir, sizeof(fx->dir), "/tmp/roombox-test-auth-XXXXXX");
	if (!mkdtemp(fx->dir))
		return -1;
	snprintf(fx->path, sizeof(fx->path), "%s/tokens", fx->dir);
	fx->t = auth_tokens_new(fx->path);
	*state = fx;
	return fx->t ? 0 : -1;
}

static int teardown(void **state)
{
	struct fixture *fx = *state;
	char tmp[128];

	auth_tokens_free(fx->t);
	unlink(fx->path);
	snprintf(tmp, sizeof(tmp), "%s.new", fx->path);
	unlink(tmp);
	rmdir(fx->dir);
	free(fx);
	return 0;
}

static void test_bearer_header(void **state)
{
	size_t len = 0;
	const char *t;

	(void)state;
	t = auth_bearer_token("Bearer abc", &len);
	assert_non_null(t);
	assert_int_equal(len, 3);
	assert_memory_equal(t, "abc", 3);
	t = auth_bearer_token("bearer   abc \t", &len);   /* scheme is case-insensitive */
	assert_non_null(t);
	assert_int_equal(len, 3);
	t = auth_bearer_token("BEARER\tx", &len);
	assert_non_null(t);
	assert_int_equal(len, 1);
	assert_null(auth_bearer_token(NULL, &len));
	assert_null(auth_bearer_token("", &len));
	assert_null(auth_bearer_token("Bearer", &len));
	assert_null(auth_bearer_token("Bearer ", &len));
	assert_null(auth_bearer_token("Bearerabc", &len));
	assert_null(auth_bearer_token("Basic YTpi", &len));
	assert_null(auth_bearer_token("abc", &len));
}

static void test_token_equal(void **state)
{
	(void)state;
	assert_true(auth_token_equal("secret", 6, "secret", 6));
	assert_false(auth_token_equal("secreT", 6, "secret", 6));
	assert_false(auth_token_equal("secret", 6, "secret2", 7));
	assert_false(auth_token_equal("secret2", 7, "secret", 6));
	assert_false(auth_token_equal("", 0, "secret", 6));
	assert_false(auth_token_equal("", 0, "", 0));         /* an empty token is no token */
	assert_false(auth_token_equal("secretsecret", 12, "secret", 6));  /* cyclic read */
	assert_false(auth_token_equal("a\0b", 3, "a\0c", 3));
}

static void test_tokens_file(void **state)
{
	struct fixture *fx = *state;

	write_file(fx->path, "\n  alpha  \r\n\nbeta\r\n\t\n gamma");
	assert_int_equal(auth_tokens_count(fx->t), 3);
	assert_true(auth_tokens_check(fx->t, "Bearer alpha"));
	assert_true(auth_tokens_check(fx->t, "Bearer beta"));
	assert_true(auth_tokens_check(fx->t, "Bearer gamma"));
	assert_true(auth_tokens_check(fx->t, "Bearer beta\r"));    /* trailing CR and */
	assert_true(auth_tokens_check(fx->t, "Bearer beta "));     /* space are dropped */
	assert_false(auth_tokens_check(fx->t, "Bearer  be ta"));
	assert_false(auth_tokens_check(fx->t, "Bearer alph"));
	assert_false(auth_tokens_check(fx->t, "Bearer alphaa"));
	assert_false(auth_tokens_check(fx->t, "Bearer "));
	assert_false(auth_tokens_check(fx->t, "alpha"));
	assert_false(auth_tokens_check(fx->t, NULL));
}

/* A changed file is read again on the next check: no restart needed. */
static void test_reload_on_change(void **state)
{
	struct fixture *fx = *state;

	write_file(fx->path, "old\n");
	assert_true(auth_tokens_check(fx->t, "Bearer old"));
	write_file(fx->path, "new\n");
	assert_false(auth_tokens_check(fx->t, "Bearer old"));
	assert_true(auth_tokens_check(fx->t, "Bearer new"));

	/* same size, same second: rewriting in place still shows (ctime/ns) */
	{
		FILE *f = fopen(fx->path, "w");

		assert_non_null(f);
		fputs("NEW\n", f);
		fclose(f);
	}
	assert_true(auth_tokens_check(fx->t, "Bearer NEW"));
	assert_false(auth_tokens_check(fx->t, "Bearer new"));
}

/* Empty, missing or unreadable: nobody gets in. */
static void test_no_tokens_no_entry(void **state)
{
	struct fixture *fx = *state;

	unlink(fx->path);
	assert_int_equal(auth_tokens_count(fx->t), -1);
	assert_false(auth_tokens_check(fx->t, "Bearer anything"));

	write_file(fx->path, "");
	assert_int_equal(auth_tokens_count(fx->t), 0);
	assert_false(auth_tokens_check(fx->t, "Bearer "));
	assert_false(auth_tokens_check(fx->t, "Bearer x"));

	write_file(fx->path, "\n \r\n\t\n");
	assert_int_equal(auth_tokens_count(fx->t), 0);

	write_file(fx->path, "back\n");
	assert_true(auth_tokens_check(fx->t, "Bearer back"));

	/* a directory is not a tokens file */
	unlink(fx->path);
	assert_int_equal(mkdir(fx->path, 0700), 0);
	assert_false(auth_tokens_check(fx->t, "Bearer back"));
	assert_int_equal(rmdir(fx->path), 0);

	if (geteuid() != 0) {   /* root reads anything */
		write_file(fx->path, "back\n");
		assert_int_equal(chmod(fx->path, 0), 0);
		assert_false(auth_tokens_check(fx->t, "Bearer back"));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bearer_header),
		cmocka_unit_test(test_token_equal),
		cmocka_unit_test_setup_teardown(test_tokens_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reload_on_change, setup, teardown),
		cmocka_unit_test_setup_teardown(test_no_tokens_no_entry, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
