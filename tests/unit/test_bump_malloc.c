/* Unit tests for sandbox-helper/alloc/bump_malloc.c, the setuid helper's
 * allocator.  It is compiled in here under other names (bm_malloc, ...), so
 * this test program keeps its libc's malloc; the functions are the same
 * code the helper links. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <cmocka.h>

#define malloc bm_malloc
#define free bm_free
#define calloc bm_calloc
#define realloc bm_realloc
#define aligned_alloc bm_aligned_alloc
#define posix_memalign bm_posix_memalign
#define memalign bm_memalign
#define malloc_usable_size bm_malloc_usable_size
#include "../../sandbox-helper/alloc/bump_malloc.c"
#undef malloc
#undef free
#undef calloc
#undef realloc
#undef aligned_alloc
#undef posix_memalign
#undef memalign
#undef malloc_usable_size

static bool in_arena(const void *p)
{
	return (const unsigned char *)p >= arena && (const unsigned char *)p < arena + ARENA_SIZE;
}

/* Is the page holding p mapped?  (msync fails with ENOMEM if not.) */
static bool mapped(const void *p)
{
	long page = sysconf(_SC_PAGESIZE);
	void *start = (void *)((uintptr_t)p & ~(uintptr_t)(page - 1));
	return msync(start, (size_t)page, MS_ASYNC) == 0;
}

static void test_blocks_are_aligned_distinct_and_hold_their_bytes(void **state)
{
	(void)state;
	enum { N = 500 };
	unsigned char *p[N];
	for (int i = 0; i < N; i++) {
		size_t n = (size_t)(i * 37 % 300) + 1;
		p[i] = bm_malloc(n);
		assert_non_null(p[i]);
		assert_int_equal((uintptr_t)p[i] % 16, 0);
		assert_true(bm_malloc_usable_size(p[i]) >= n);
		memset(p[i], i & 0xff, n);
	}
	for (int i = 0; i < N; i++) {
		size_t n = (size_t)(i * 37 % 300) + 1;
		for (size_t k = 0; k < n; k++)
			assert_int_equal(p[i][k], i & 0xff);
	}
	void *z1 = bm_malloc(0), *z2 = bm_malloc(0);
	assert_non_null(z1);
	assert_non_null(z2);
	assert_ptr_not_equal(z1, z2);
}

static void test_free_gives_back_only_the_last_block(void **state)
{
	(void)state;
	char *a = bm_malloc(100), *b = bm_malloc(100);
	memset(a, 'a', 100);
	memset(b, 'b', 100);
	bm_free(b);
	char *c = bm_malloc(100);
	assert_ptr_equal(c, b);             /* the last block is reused */
	bm_free(a);                         /* not the last: kept as it is */
	char *d = bm_malloc(100);
	assert_ptr_not_equal(d, a);
	assert_true(d > c);
	bm_free(NULL);
}

static void test_realloc_grows_in_place_when_last_and_copies_otherwise(void **state)
{
	(void)state;
	char *a = bm_malloc(40);
	memcpy(a, "0123456789", 11);
	char *a2 = bm_realloc(a, 4000);
	assert_ptr_equal(a2, a);            /* last block: grown in place */
	assert_string_equal(a2, "0123456789");
	char *b = bm_malloc(10);
	char *a3 = bm_realloc(a2, 8000);     /* no longer last: moved */
	assert_ptr_not_equal(a3, a2);
	assert_true(a3 > b);
	assert_string_equal(a3, "0123456789");
	assert_ptr_equal(bm_realloc(a3, 5), a3);   /* shrinking keeps it */
	char *n = bm_realloc(NULL, 12);
	assert_non_null(n);
}

static void test_calloc_zeroes_memory_given_back(void **state)
{
	(void)state;
	unsigned char *p = bm_malloc(256);
	memset(p, 0xaa, 256);
	bm_free(p);
	unsigned char *q = bm_calloc(16, 16);
	assert_ptr_equal(q, p);
	for (int i = 0; i < 256; i++)
		assert_int_equal(q[i], 0);
}

static void test_sizes_that_cannot_be_are_enomem(void **state)
{
	(void)state;
	errno = 0;
	assert_null(bm_calloc(SIZE_MAX / 2, 3));
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	assert_null(bm_malloc(SIZE_MAX));
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	assert_null(bm_malloc(SIZE_MAX / 2 + 1));
	assert_int_equal(errno, ENOMEM);
	char *p = bm_malloc(16);
	errno = 0;
	assert_null(bm_realloc(p, SIZE_MAX - 8));
	assert_int_equal(errno, ENOMEM);
	assert_non_null(p);                  /* the old block is still there */
}

static void test_alignment_requests(void **state)
{
	(void)state;
	void *p = NULL;
	assert_non_null(bm_aligned_alloc(16, 10));
	errno = 0;
	assert_null(bm_aligned_alloc(64, 10));
	assert_int_equal(errno, EINVAL);
	assert_int_equal(bm_posix_memalign(&p, 8, 10), 0);
	assert_non_null(p);
	assert_int_equal(bm_posix_memalign(&p, 4096, 10), EINVAL);
	assert_null(bm_memalign(32, 1));
}

static void test_big_blocks_get_their_own_mapping_and_lose_it_on_free(void **state)
{
	(void)state;
	size_t n = 3u << 20;
	unsigned char *p = bm_malloc(n);
	assert_non_null(p);
	assert_false(in_arena(p));
	memset(p, 7, n);
	assert_int_equal(p[n - 1], 7);
	bm_free(p);
	assert_false(mapped(p));
	/* growing an arena block past 1 MiB moves it to a mapping */
	char *s = bm_malloc(100);
	strcpy(s, "kept");
	char *t = bm_realloc(s, 2u << 20);
	assert_false(in_arena(t));
	assert_string_equal(t, "kept");
	bm_free(t);
}

/* Last: it fills the arena. */
static void test_a_full_arena_falls_back_to_mappings(void **state)
{
	(void)state;
	void *p;
	int in = 0, out = 0;
	for (int i = 0; i < 64; i++) {
		p = bm_malloc(512u << 10);
		assert_non_null(p);
		memset(p, 1, 512u << 10);
		in_arena(p) ? in++ : out++;
	}
	assert_true(in >= 20 && in <= 32);
	assert_true(out >= 32);
	/* what is left of the arena still serves what fits in it */
	size_t left = ARENA_SIZE - main_arena.used;
	assert_true(left < (512u << 10) + 64);
	unsigned char *q = bm_calloc(1, left + 1);
	assert_non_null(q);
	assert_false(in_arena(q));
	assert_int_equal(q[left], 0);
	if (left > 64) {
		unsigned char *r = bm_malloc(left - 32);
		assert_non_null(r);
		assert_true(in_arena(r));
	}
}

/* After the arena: the budget (HELPER_HEAP_BUDGET) holds whatever the
 * callers do.  These run after the arena is full. */

/* Small blocks past the arena share 1 MiB chunks: ten thousand strings
 * cost about a chunk, not a page each. */
static void test_small_blocks_past_the_arena_share_chunks(void **state)
{
	(void)state;
	size_t before = charged;
	for (int i = 0; i < 10000; i++) {
		char *p = bm_malloc(9);
		assert_non_null(p);
		assert_false(in_arena(p));
		memcpy(p, "12345678", 9);
	}
	assert_true(charged - before <= 2 * SPILL);
	/* the last one of a chunk is given back and reused */
	char *a = bm_malloc(100), *b;
	bm_free(a);
	b = bm_malloc(100);
	assert_ptr_equal(a, b);
}

/* A big block grows by mremap: the content moves along, the charge is the
 * new size only (the old one is not held beside it). */
static void test_big_blocks_grow_in_their_mapping(void **state)
{
	(void)state;
	size_t before = charged;
	unsigned char *p = bm_malloc(2u << 20);
	assert_non_null(p);
	memset(p, 0x5a, 2u << 20);
	p = bm_realloc(p, 12u << 20);
	assert_non_null(p);
	assert_int_equal(p[0], 0x5a);
	assert_int_equal(p[(2u << 20) - 1], 0x5a);
	assert_true(charged - before <= (12u << 20) + 2 * PAGE);
	p[(12u << 20) - 1] = 1;
	bm_free(p);
	assert_int_equal(charged, before);
}

/* Past the budget every allocation fails with ENOMEM, whatever its size
 * and wherever it would come from; what is freed can be had again. */
static void test_the_budget_is_never_exceeded_and_freed_memory_is_reused(void **state)
{
	(void)state;
	enum { N = 64 };
	void *big[N];
	int got = 0;
	while (got < N && (big[got] = bm_malloc(4u << 20)))
		got++;
	assert_true(got < N);
	assert_int_equal(errno, ENOMEM);
	assert_true(charged <= BUDGET);
	assert_true(charged > BUDGET - (4u << 20) - SPILL);
	/* small ones run out too (less than a spill chunk is left), then
	 * everything else */
	while (bm_malloc(200))
		;
	assert_int_equal(errno, ENOMEM);
	assert_true(charged <= BUDGET && BUDGET - charged < SPILL);
	errno = 0;
	assert_null(bm_calloc(1, SPILL));
	assert_int_equal(errno, ENOMEM);
	assert_null(bm_realloc(big[0], 8u << 20));
	assert_int_equal(errno, ENOMEM);
	/* a freed big block makes room for the next one */
	bm_free(big[1]);
	void *again = bm_malloc(4u << 20);
	assert_non_null(again);
	memset(again, 1, 4u << 20);
	assert_true(charged <= BUDGET);
	assert_null(bm_malloc(4u << 20));
}

/* A room's start allocates from two threads and the keeper's clone at once
 * (jail.c): blocks taken side by side never overlap, and each keeps its
 * bytes while the others are written and freed. */
enum { RACE_N = 20000 };
struct racer {
	unsigned char tag;
	unsigned char *kept[RACE_N / 2];
	int bad;
};

static void *race(void *arg)
{
	struct racer *r = arg;
	int k = 0;
	for (int i = 0; i < RACE_N; i++) {
		size_t n = (size_t)(i % 61) + 1;
		unsigned char *p = bm_malloc(n);
		if (!p) {
			r->bad++;
			continue;
		}
		memset(p, r->tag, n);
		if (i % 2)
			bm_free(p);     /* mostly not the last block: lost, as designed */
		else
			r->kept[k++] = p;
	}
	for (int i = 0; i < k; i++)
		for (size_t b = 0; b < (size_t)(i * 2 % 61) + 1; b++)
			if (r->kept[i][b] != r->tag)
				r->bad++;
	return NULL;
}

static void test_threads_get_blocks_of_their_own(void **state)
{
	(void)state;
	static struct racer a = { .tag = 0xa5 }, b = { .tag = 0x5a };
	pthread_t ta, tb;
	assert_int_equal(pthread_create(&ta, NULL, race, &a), 0);
	assert_int_equal(pthread_create(&tb, NULL, race, &b), 0);
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	assert_int_equal(a.bad, 0);
	assert_int_equal(b.bad, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_blocks_are_aligned_distinct_and_hold_their_bytes),
		cmocka_unit_test(test_free_gives_back_only_the_last_block),
		cmocka_unit_test(test_realloc_grows_in_place_when_last_and_copies_otherwise),
		cmocka_unit_test(test_calloc_zeroes_memory_given_back),
		cmocka_unit_test(test_sizes_that_cannot_be_are_enomem),
		cmocka_unit_test(test_alignment_requests),
		cmocka_unit_test(test_big_blocks_get_their_own_mapping_and_lose_it_on_free),
		cmocka_unit_test(test_a_full_arena_falls_back_to_mappings),
		cmocka_unit_test(test_small_blocks_past_the_arena_share_chunks),
		cmocka_unit_test(test_big_blocks_grow_in_their_mapping),
		cmocka_unit_test(test_threads_get_blocks_of_their_own),
		cmocka_unit_test(test_the_budget_is_never_exceeded_and_freed_memory_is_reused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
