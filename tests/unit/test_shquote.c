/* Unit tests for common/shquote.c: a quoted word, handed to a real /bin/sh
 * as `printf %s <word>`, prints back exactly the bytes it was made of,
 * whatever they are; a NUL byte or a short buffer is refused. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "shquote.h"

/* execve takes no single string longer than this (MAX_ARG_STRLEN) */
#define ARG_STRLEN_MAX (32 * 4096 - 1)

static void write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		assert_true(w > 0);
		p += w;
		n -= (size_t)w;
	}
}

/* What /bin/sh prints running `printf %s <word>`: as `sh -c SCRIPT`, or
 * (a script past what execve takes) as `sh -s` reading it from a pipe.
 * The output malloc'd, its length in *outlen; sh must exit 0. */
static char *sh_prints(const char *word, size_t *outlen)
{
	size_t slen = strlen("printf %s ") + strlen(word);
	char *script = malloc(slen + 1), *out = NULL;
	bool via_stdin = slen > ARG_STRLEN_MAX;
	int o[2], in[2] = { -1, -1 }, status;
	size_t len = 0, cap = 0;
	pid_t pid;

	assert_non_null(script);
	snprintf(script, slen + 1, "printf %%s %s", word);
	assert_int_equal(pipe(o), 0);
	if (via_stdin)
		assert_int_equal(pipe(in), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(o[1], 1);
		if (via_stdin)
			dup2(in[0], 0);
		close(o[0]);
		close(o[1]);
		if (via_stdin) {
			close(in[0]);
			close(in[1]);
			execl("/bin/sh", "sh", "-s", (char *)NULL);
		} else {
			execl("/bin/sh", "sh", "-c", script, (char *)NULL);
		}
		_exit(127);
	}
	close(o[1]);
	if (via_stdin) {
		/* the shell reads the whole command before it prints a byte */
		close(in[0]);
		write_all(in[1], script, slen);
		close(in[1]);
	}
	for (;;) {
		if (cap - len < 4096) {
			cap = cap ? 2 * cap : 65536;
			out = realloc(out, cap);
			assert_non_null(out);
		}
		ssize_t r = read(o[0], out + len, cap - len);
		assert_true(r >= 0);
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(o[0]);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	free(script);
	*outlen = len;
	return out;
}

/* s[0..n) quoted both ways (into a buffer of exactly the size, and
 * malloc'd) gives the same word of the announced length, and the shell
 * reads that word back as s. */
static void assert_round_trip(const char *s, size_t n)
{
	char err[160] = "";
	size_t qlen = shquote_len(s, n), outlen;
	char *buf = malloc(qlen + 1), *q, *out;

	assert_non_null(buf);
	assert_int_equal(shquote(buf, qlen + 1, s, n, err, sizeof(err)), (ssize_t)qlen);
	assert_int_equal(strlen(buf), qlen);
	q = shquote_alloc(s, n, err, sizeof(err));
	assert_non_null(q);
	assert_string_equal(q, buf);
	out = sh_prints(q, &outlen);
	if (outlen != n || memcmp(out, s, n)) {
		print_error("the shell read %zu bytes back from a word of %zu (quoted: %.200s)\n",
			    outlen, n, q);
		fail();
	}
	free(out);
	free(q);
	free(buf);
}

static void assert_round_trip_str(const char *s)
{
	assert_round_trip(s, strlen(s));
}

static void test_hostile_words(void **state)
{
	static const char *const words[] = {
		"", "'", "''", "'''", "\\", "\\'", "'\\''", "\"", "\"'\"",
		"$(id)", "`id`", "$HOME", "${x:-y}", "$((1+1))", "$'\\x41'", "$1", "$@", "$*", "$$",
		"a\nb", "\n", "\n\n'\n", "\r", "\t \t", " ", "  lead and trail  ",
		"*", "?", "[a]", "~", "~root", "#c", "a#b", "; echo pwned", "' ; echo pwned ; '",
		"&& echo x", "| cat", "< /etc/passwd", "> /tmp/x", "2>&1", "!", "!!",
		"%s %b \\n %%", "-n", "--", "-e", "a=b", "{a,b}", "(subshell)",
		"'$(id)'", "\"$(id)\"", "\\$(id)", "'`id`'", "it's", "'\n'\\\n",
	};

	(void)state;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		assert_round_trip_str(words[i]);
}

/* Every byte but NUL, alone and between quotes and text. */
static void test_every_byte(void **state)
{
	char s[8];

	(void)state;
	for (int b = 1; b <= 0xff; b++) {
		s[0] = (char)b;
		assert_round_trip(s, 1);
		memcpy(s, "x'\\", 3);
		s[3] = (char)b;
		s[4] = (char)b;
		memcpy(s + 5, "'$", 2);
		assert_round_trip(s, 7);
	}
}

static void test_all_bytes_in_one_word(void **state)
{
	char s[3 * 255];

	(void)state;
	for (size_t i = 0; i < sizeof(s); i++)
		s[i] = (char)(1 + i % 255);
	assert_round_trip(s, sizeof(s));
}

/* Filled with bytes 1..255, every seventh a quote (the word grows by 3
 * bytes for each). */
static char *hostile_fill(size_t n)
{
	char *s = malloc(n);

	assert_non_null(s);
	srand(7);
	for (size_t i = 0; i < n; i++)
		s[i] = i % 7 == 3 ? '\'' : (char)(1 + rand() % 255);
	return s;
}

/* The longest that still goes through `sh -c`, and 1 MiB through a pipe. */
static void test_very_long(void **state)
{
	size_t n = 80000;
	char *s = hostile_fill(1 << 20);

	(void)state;
	assert_true(shquote_len(s, n) + strlen("printf %s ") <= ARG_STRLEN_MAX);
	assert_round_trip(s, n);
	assert_round_trip(s, 1 << 20);
	free(s);
}

static void test_nul_is_refused(void **state)
{
	char buf[64] = "untouched", err[160] = "";

	(void)state;
	assert_int_equal(shquote(buf, sizeof(buf), "ab\0c", 4, err, sizeof(err)), -1);
	assert_string_equal(buf, "");
	assert_non_null(strstr(err, "NUL byte at offset 2"));
	err[0] = '\0';
	assert_null(shquote_alloc("\0", 1, err, sizeof(err)));
	assert_non_null(strstr(err, "NUL byte at offset 0"));
	/* a length that stops before the NUL quotes what it covers */
	assert_int_equal(shquote(buf, sizeof(buf), "ab\0c", 2, err, sizeof(err)), 4);
	assert_string_equal(buf, "'ab'");
}

static void test_short_buffer_is_refused(void **state)
{
	char buf[16], err[160] = "";

	(void)state;
	/* 'it'\''s' is 9 bytes and its NUL */
	assert_int_equal(shquote_len("it's", 4), 9);
	assert_int_equal(shquote(buf, 9, "it's", 4, err, sizeof(err)), -1);
	assert_string_equal(buf, "");
	assert_non_null(strstr(err, "need 10"));
	assert_int_equal(shquote(buf, 10, "it's", 4, err, sizeof(err)), 9);
	assert_string_equal(buf, "'it'\\''s'");
	assert_int_equal(shquote(buf, 0, "", 0, err, sizeof(err)), -1);
	assert_int_equal(shquote(buf, 3, "", 0, err, sizeof(err)), 2);
	assert_string_equal(buf, "''");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hostile_words),
		cmocka_unit_test(test_every_byte),
		cmocka_unit_test(test_all_bytes_in_one_word),
		cmocka_unit_test(test_very_long),
		cmocka_unit_test(test_nul_is_refused),
		cmocka_unit_test(test_short_buffer_is_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
