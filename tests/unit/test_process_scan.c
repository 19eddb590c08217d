/* Unit tests for fcgi-app/processes/process_scan.c, the stderr scanner: the control
 * lines of a managed process's wrapper are taken out of its stderr,
 * whatever the pieces the pipe gives, and nothing else is. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "process_scan.h"

#define PREFIX "\036rbx:0123456789abcdef0123456789abcdef "

struct seen {
	char out[4096], ctl[4096];
	size_t nout, nctl;
};

static void on_out(void *ctx, const char *d, size_t n)
{
	struct seen *s = ctx;

	assert_true(s->nout + n < sizeof(s->out));
	memcpy(s->out + s->nout, d, n);
	s->nout += n;
}

static void on_ctl(void *ctx, const char *line, size_t n)
{
	struct seen *s = ctx;

	assert_true(s->nctl + n + 1 < sizeof(s->ctl));
	memcpy(s->ctl + s->nctl, line, n);
	s->nctl += n;
	s->ctl[s->nctl++] = '|';
}

/* text fed in pieces of `step` bytes, then the end */
static struct seen scan(const char *text, size_t len, size_t step)
{
	struct seen s = { 0 };
	struct proc_scan st = { 0 };

	for (size_t i = 0; i < len; i += step)
		proc_stderr_scan(&st, PREFIX, text + i, len - i < step ? len - i : step, false,
				 on_out, on_ctl, &s);
	proc_stderr_scan(&st, PREFIX, "", 0, true, on_out, on_ctl, &s);
	s.out[s.nout] = s.ctl[s.nctl] = '\0';
	return s;
}

static void test_control_lines_are_taken_out_in_any_pieces(void **state)
{
	static const char text[] = "warn: a\n" PREFIX "pid 12 11\nmid" PREFIX "exit 0\nend\n";

	(void)state;
	for (size_t step = 1; step <= sizeof(text); step++) {
		struct seen s = scan(text, sizeof(text) - 1, step);

		assert_string_equal(s.out, "warn: a\nmidend\n");
		assert_string_equal(s.ctl, "pid 12 11|exit 0|");
	}
}

static void test_other_markers_stay_output(void **state)
{
	/* another nonce, a marker with no newline close behind, one cut by
	 * the end: all are the process's own output */
	static const char wrong[] = "\036rbx:ffffffffffffffffffffffffffffffff exit 9\n";
	char lone[300];
	struct seen s;

	(void)state;
	s = scan(wrong, sizeof(wrong) - 1, 7);
	assert_string_equal(s.out, wrong);
	assert_int_equal(s.nctl, 0);
	memset(lone, 'x', sizeof(lone));
	lone[0] = '\036';
	lone[sizeof(lone) - 1] = '\n';
	s = scan(lone, sizeof(lone), 5);
	assert_int_equal(s.nout, sizeof(lone));
	assert_memory_equal(s.out, lone, sizeof(lone));
	s = scan(PREFIX "exit 1", strlen(PREFIX "exit 1"), 3);
	assert_string_equal(s.out, PREFIX "exit 1");
	assert_int_equal(s.nctl, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_control_lines_are_taken_out_in_any_pieces),
		cmocka_unit_test(test_other_markers_stay_output),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
