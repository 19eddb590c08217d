/* Unit tests for sandbox-helper/keeper/tool_text.c: the answers of the
 * keeper's own tools (listing records, error kinds), the upload's end mark
 * and modes.  The keeper is built apart (static, musl), so its source is
 * compiled in here. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "keeper/tool_text.c"

static void test_errno_kinds(void **state)
{
	(void)state;
	assert_string_equal(tool_errno_kind(ENOENT), "notfound");
	assert_string_equal(tool_errno_kind(EACCES), "denied");
	assert_string_equal(tool_errno_kind(EPERM), "denied");
	assert_string_equal(tool_errno_kind(EROFS), "denied");
	assert_string_equal(tool_errno_kind(ENOSPC), "nospace");
	assert_string_equal(tool_errno_kind(EDQUOT), "nospace");
	assert_string_equal(tool_errno_kind(EISDIR), "isdir");
	assert_string_equal(tool_errno_kind(ENOTDIR), "notdir");
	assert_string_equal(tool_errno_kind(ENOTEMPTY), "notempty");
	assert_string_equal(tool_errno_kind(EEXIST), "exists");
	assert_null(tool_errno_kind(EXDEV));
	assert_null(tool_errno_kind(0));
}

/* as find's "%y\t%s\t%m\t%T@\t%P\0" */
static void test_entry_record(void **state)
{
	struct stat st = { 0 };
	char buf[128];
	size_t n;

	(void)state;
	st.st_mode = S_IFREG | 04755;
	st.st_size = 12345;
	st.st_mtim.tv_sec = 1701600000;
	st.st_mtim.tv_nsec = 5;
	n = tool_entry_record(buf, sizeof(buf), &st, "sub/x y.txt");
	assert_int_equal(n, strlen("f\t12345\t4755\t1701600000.000000005\tsub/x y.txt") + 1);
	assert_memory_equal(buf, "f\t12345\t4755\t1701600000.000000005\tsub/x y.txt", n);
	st.st_mode = S_IFDIR | 0700;
	tool_entry_record(buf, sizeof(buf), &st, "d");
	assert_int_equal(buf[0], 'd');
	st.st_mode = S_IFLNK | 0777;
	tool_entry_record(buf, sizeof(buf), &st, "l");
	assert_int_equal(buf[0], 'l');
	st.st_mode = S_IFIFO | 0644;
	tool_entry_record(buf, sizeof(buf), &st, "p");
	assert_int_equal(buf[0], 'p');
	/* too long for the buffer: nothing, never a cut record */
	assert_int_equal(tool_entry_record(buf, 20, &st, "a-name-that-does-not-fit"), 0);
	assert_int_equal(tool_entry_record(buf, 0, &st, ""), 0);
}

static void test_put_end_mark(void **state)
{
	const char *nonce = "0123456789abcdef0123456789abcdef";
	const char *other = "0123456789abcdef0123456789abcdee";
	char mark[TOOL_PUT_END_LEN + 1];
	uint64_t len = 7;

	(void)state;
	tool_put_end(mark, nonce, 0x1234);
	assert_string_equal(mark, "#rbput:0123456789abcdef0123456789abcdef0000000000001234\n");
	assert_int_equal(tool_put_end_check(mark, nonce, 0x1234 + TOOL_PUT_END_LEN, &len), 0);
	assert_int_equal(len, 0x1234);
	/* a mark that does not count the bytes before it: a cut upload */
	assert_int_equal(tool_put_end_check(mark, nonce, 0x1233 + TOOL_PUT_END_LEN, &len), -1);
	assert_int_equal(tool_put_end_check(mark, nonce, TOOL_PUT_END_LEN - 1, &len), -1);
	/* a mark with another request's nonce (or one the client made up):
	 * a body that ends like a mark is not one */
	assert_int_equal(tool_put_end_check(mark, other, 0x1234 + TOOL_PUT_END_LEN, &len), -1);
	assert_int_equal(tool_put_end_check(mark, "", 0x1234 + TOOL_PUT_END_LEN, &len), -1);
	tool_put_end(mark, nonce, 0);
	assert_int_equal(tool_put_end_check(mark, nonce, TOOL_PUT_END_LEN, &len), 0);
	assert_int_equal(len, 0);
	tool_put_end(mark, nonce, UINT64_MAX - TOOL_PUT_END_LEN);
	assert_int_equal(tool_put_end_check(mark, nonce, UINT64_MAX, &len), 0);
	memcpy(mark, "#rbput:0123456789abcdef0123456789abcdef00000000000000G0\n", TOOL_PUT_END_LEN);
	assert_int_equal(tool_put_end_check(mark, nonce, 0x10 + TOOL_PUT_END_LEN, &len), -1);
	memcpy(mark, "#rbpu:0123456789abcdef0123456789abcdef000000000000000010\n", TOOL_PUT_END_LEN);
	assert_int_equal(tool_put_end_check(mark, nonce, 0x10 + TOOL_PUT_END_LEN, &len), -1);
}

static void test_modes(void **state)
{
	mode_t m = 0;

	(void)state;
	assert_int_equal(tool_mode_parse("0755", &m), 0);
	assert_int_equal(m, 0755);
	assert_int_equal(tool_mode_parse("4755", &m), 0);
	assert_int_equal(m, 04755);
	assert_int_equal(tool_mode_parse("7", &m), 0);
	assert_int_equal(m, 07);
	assert_int_equal(tool_mode_parse("", &m), -1);
	assert_int_equal(tool_mode_parse("08", &m), -1);
	assert_int_equal(tool_mode_parse("07550", &m), -1);
	assert_int_equal(tool_mode_parse("-1", &m), -1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_errno_kinds),
		cmocka_unit_test(test_entry_record),
		cmocka_unit_test(test_put_end_mark),
		cmocka_unit_test(test_modes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
