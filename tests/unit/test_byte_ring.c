/* Unit tests for fcgi-app/terminals/byte_ring.c against a plain model: everything
 * ever written kept in one buffer; the ring must give back exactly the
 * model's last cap bytes, at the model's offsets, and say what a reader
 * behind them lost. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "byte_ring.h"

static void test_attach_gets_scrollback(void **state)
{
	struct byte_ring r;
	char out[64];
	uint64_t at = 0, lost;
	assert_int_equal(byte_ring_init(&r, 8), 0);
	byte_ring_write(&r, "hello ", 6);
	byte_ring_write(&r, "world", 5);
	/* a client attaching now reads from the oldest byte kept */
	assert_int_equal(byte_ring_read(&r, &at, out, sizeof(out), &lost), 8);
	assert_int_equal(lost, 3);
	assert_memory_equal(out, "lo world", 8);
	assert_int_equal(at, 11);
	/* and then only what comes after */
	assert_int_equal(byte_ring_read(&r, &at, out, sizeof(out), &lost), 0);
	byte_ring_write(&r, "!", 1);
	assert_int_equal(byte_ring_read(&r, &at, out, sizeof(out), &lost), 1);
	assert_int_equal(lost, 0);
	assert_memory_equal(out, "!", 1);
	byte_ring_free(&r);
}

static void test_write_longer_than_ring(void **state)
{
	struct byte_ring r;
	char out[16];
	uint64_t at = 0, lost;
	assert_int_equal(byte_ring_init(&r, 4), 0);
	byte_ring_write(&r, "abcdefghij", 10);
	assert_int_equal(r.start, 6);
	assert_int_equal(r.end, 10);
	assert_int_equal(byte_ring_read(&r, &at, out, sizeof(out), &lost), 4);
	assert_int_equal(lost, 6);
	assert_memory_equal(out, "ghij", 4);
	byte_ring_free(&r);
}

static void test_reader_past_end_and_short_reads(void **state)
{
	struct byte_ring r;
	char out[3];
	uint64_t at = 99, lost;
	assert_int_equal(byte_ring_init(&r, 16), 0);
	byte_ring_write(&r, "abcdef", 6);
	assert_int_equal(byte_ring_read(&r, &at, out, sizeof(out), &lost), 0);
	assert_int_equal(at, 6);
	at = 1;
	assert_int_equal(byte_ring_read(&r, &at, out, sizeof(out), &lost), 3);
	assert_memory_equal(out, "bcd", 3);
	assert_int_equal(byte_ring_read(&r, &at, out, sizeof(out), &lost), 2);
	assert_memory_equal(out, "ef", 2);
	byte_ring_free(&r);
}

/* Random writes and reads of random sizes against the model. */
static void test_against_model(void **state)
{
	enum { CAP = 97, TOTAL = 200000 };
	unsigned char *model = malloc(TOTAL + 4096), out[300];
	struct byte_ring r;
	uint64_t written = 0, at[3] = { 0, 0, 0 };
	unsigned seed = 12345;
	assert_int_equal(byte_ring_init(&r, CAP), 0);
	while (written < TOTAL) {
		size_t n = (seed = seed * 1103515245 + 12345) >> 16 & 255;
		for (size_t i = 0; i < n; i++)
			model[written + i] = (unsigned char)(written + i) ^ (unsigned char)((written + i) >> 8);
		byte_ring_write(&r, model + written, n);
		written += n;
		assert_int_equal(r.end, written);
		assert_true(r.end - r.start <= CAP);
		for (int k = 0; k < 3; k++) {
			if (((seed = seed * 1103515245 + 12345) >> 16) % (k + 2))
				continue;
			uint64_t before = at[k], lost;
			size_t max = ((seed = seed * 1103515245 + 12345) >> 16) % sizeof(out);
			size_t got = byte_ring_read(&r, &at[k], out, max, &lost);
			uint64_t from = before < r.start ? r.start : before;
			assert_int_equal(lost, from - before);
			assert_int_equal(at[k], from + got);
			assert_true(got <= max);
			assert_memory_equal(out, model + from, got);
		}
	}
	byte_ring_free(&r);
	free(model);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_attach_gets_scrollback),
		cmocka_unit_test(test_write_longer_than_ring),
		cmocka_unit_test(test_reader_past_end_and_short_reads),
		cmocka_unit_test(test_against_model),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
