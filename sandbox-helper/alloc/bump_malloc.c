/* The helper's malloc: a bump allocator over one static arena, inside a
 * budget.
 *
 * Speed.  roombox-helper lives for one operation and is single-threaded.
 * musl's malloc maps a fresh group for each size class it meets and unmaps
 * it when it empties: on the exec path that was a third of the helper's CPU
 * (mmap, munmap, page-table teardown) in a profile of the throughput run.
 * Here an allocation is a pointer bump in a zero-page-backed arena (pages
 * cost only when touched), free() gives memory back only when it is the
 * last block (enough for the grow-and-copy pattern of realloc), and
 * everything goes back to the kernel when the process exits.
 *
 * Bound.  The helper is setuid root and reads its caller's bytes, so no
 * request may make it grow without limit (SPEC §4: 64 MiB).  Every byte it
 * can come to hold is charged against HELPER_HEAP_BUDGET (common/protocol.h,
 * 56 MiB: the other 8 of the 64 are the binary, its stack and static
 * buffers):
 *   - the arena, up to the highest point it was ever bumped to (pages
 *     below it are resident, pages above were never touched);
 *   - blocks of 64 KiB and more that do not fit the arena (and every block
 *     of 1 MiB and more) get their own mapping, charged at its page-rounded
 *     size, unmapped and uncharged on free, and grown by mremap (no copy,
 *     no second block while growing): what a freed big block held is
 *     reused by the next;
 *   - smaller blocks once the arena is full come from 1 MiB spill chunks,
 *     bumped like the arena and charged whole (before this, each got a
 *     mapping of its own: a page for every 30-byte string, 9.6 GiB for an
 *     8 MiB request of ["","",...]).
 * An allocation that would go past the budget fails: NULL and ENOMEM, as
 * when the kernel has no memory, and every caller already turns that into
 * an error answer ("request too complex: over the helper's 64 MiB memory
 * budget" from the request reader).  Small blocks freed in the middle of
 * the arena are lost until the exit, which the budget also covers: the JSON
 * reader (minijson.c) frees nothing while it reads, and caps a document at
 * MJ_MAX_VALUES values, so a legitimate request never comes near it.
 *
 * Threads.  A room's start runs a jail thread beside the main one, and the
 * keeper's clone shares the helper's memory until its execve (jail.c):
 * one lock, held for a bump, keeps their blocks apart.
 *
 * Linked into roombox-helper only (musl supports replacing malloc in a
 * static program); the unit tests use their libc's malloc.
 */
#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "protocol.h"

#define ARENA_SIZE (16u << 20)
#define BIG (1u << 20)          /* from here a block always has its own mapping */
#define OWN_MAP (64u << 10)     /* ... and from here when the arena is full */
#define SPILL (1u << 20)        /* a chunk for small blocks past the arena */
#define PAGE 4096u
#define ALIGN 16u
#ifndef BUDGET
#define BUDGET ((size_t)HELPER_HEAP_BUDGET)
#endif

struct block {
	size_t size;           /* usable bytes */
	size_t mapped;         /* bytes of its own mapping, 0 when in the arena or a chunk */
};

/* A bump region: the static arena, or the current spill chunk. */
struct region {
	unsigned char *base;
	size_t size, used;
	struct block *last;    /* its last block, or NULL */
};

static unsigned char arena[ARENA_SIZE] __attribute__((aligned(ALIGN)));
static struct region main_arena = { arena, ARENA_SIZE, 0, NULL };
static struct region spill;
static size_t arena_high;      /* highest main_arena.used so far */
static size_t charged;         /* bytes held against BUDGET */

static atomic_flag busy = ATOMIC_FLAG_INIT;

static void lock(void)
{
	while (atomic_flag_test_and_set_explicit(&busy, memory_order_acquire))
		sched_yield();
}

static void unlock(void)
{
	atomic_flag_clear_explicit(&busy, memory_order_release);
}

static size_t round_up(size_t n, size_t to)
{
	return (n + to - 1) & ~(to - 1);
}

static size_t header_size(void)
{
	return round_up(sizeof(struct block), ALIGN);
}

static struct block *header(void *p)
{
	return (struct block *)((unsigned char *)p - header_size());
}

static void *payload(struct block *b)
{
	return (unsigned char *)b + header_size();
}

/* Take n more bytes of the budget, or fail with ENOMEM. */
static int charge(size_t n)
{
	if (n > BUDGET - charged) {
		errno = ENOMEM;
		return -1;
	}
	charged += n;
	return 0;
}

/* need bytes (header included) from region r; NULL when it does not fit. */
static void *bump(struct region *r, size_t need)
{
	if (!r->base || need > r->size - r->used)
		return NULL;
	if (r == &main_arena && r->used + need > arena_high) {
		if (charge(r->used + need - arena_high) < 0)
			return NULL;
		arena_high = r->used + need;
	}
	struct block *b = (struct block *)(r->base + r->used);
	r->used += need;
	b->size = need - header_size();
	b->mapped = 0;
	r->last = b;
	return payload(b);
}

static void *own_mapping(size_t need)
{
	size_t len = round_up(need, PAGE);
	if (charge(len) < 0)
		return NULL;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		charged -= len;
		errno = ENOMEM;
		return NULL;
	}
	struct block *b = m;
	b->size = len - header_size();
	b->mapped = len;
	return payload(b);
}

/* A fresh spill chunk (the old one's tail, under OWN_MAP, stays unused). */
static void *spill_bump(size_t need)
{
	void *p = bump(&spill, need);
	if (p || charge(SPILL) < 0)
		return p;
	void *m = mmap(NULL, SPILL, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		charged -= SPILL;
		errno = ENOMEM;
		return NULL;
	}
	spill = (struct region){ m, SPILL, 0, NULL };
	return bump(&spill, need);
}

static void *alloc_locked(size_t n)
{
	if (n > SIZE_MAX / 2) {
		errno = ENOMEM;
		return NULL;
	}
	size_t need = header_size() + round_up(n ? n : 1, ALIGN);
	if (n < BIG && need <= ARENA_SIZE - main_arena.used)
		return bump(&main_arena, need);
	if (need >= OWN_MAP)
		return own_mapping(need);
	return spill_bump(need);
}

static void free_locked(void *p)
{
	struct block *b = header(p);
	if (b->mapped) {
		charged -= b->mapped;
		munmap(b, b->mapped);
		return;
	}
	struct region *r = b == main_arena.last ? &main_arena : b == spill.last ? &spill : NULL;
	if (r) {
		r->used = (size_t)((unsigned char *)b - r->base);
		r->last = NULL;
	}
}

void *malloc(size_t n)
{
	lock();
	void *p = alloc_locked(n);
	unlock();
	return p;
}

void free(void *p)
{
	if (!p)
		return;
	lock();
	free_locked(p);
	unlock();
}

void *calloc(size_t k, size_t n)
{
	if (n && k > SIZE_MAX / n) {
		errno = ENOMEM;
		return NULL;
	}
	/* arena and fresh mappings start zeroed, but a block given back by
	 * free() and handed out again does not */
	void *p = malloc(k * n);
	if (p)
		memset(p, 0, k * n);
	return p;
}

/* Grow a block with its own mapping where it is (or move it) without a
 * copy and without holding old and new at once. */
static void *remap(struct block *b, size_t n)
{
	size_t len = round_up(header_size() + n, PAGE);
	if (charge(len - b->mapped) < 0)
		return NULL;
	void *m = mremap(b, b->mapped, len, MREMAP_MAYMOVE);
	if (m == MAP_FAILED) {
		charged -= len - b->mapped;
		errno = ENOMEM;
		return NULL;
	}
	b = m;
	b->size = len - header_size();
	b->mapped = len;
	return payload(b);
}

/* The last block of the arena or of a spill chunk grows in place. */
static bool grow_in_place(struct block *b, size_t n)
{
	struct region *r = b == main_arena.last ? &main_arena : b == spill.last ? &spill : NULL;
	size_t more = round_up(n, ALIGN) - b->size;
	if (!r || n >= BIG || more > r->size - r->used)
		return false;
	if (r == &main_arena && r->used + more > arena_high) {
		if (charge(r->used + more - arena_high) < 0)
			return false;
		arena_high = r->used + more;
	}
	r->used += more;
	b->size += more;
	return true;
}

static void *realloc_locked(void *p, size_t n)
{
	struct block *b = header(p);
	if (n <= b->size)
		return p;
	if (n > SIZE_MAX / 2) {
		errno = ENOMEM;
		return NULL;
	}
	if (b->mapped)
		return remap(b, n);
	if (grow_in_place(b, n))
		return p;
	void *q = alloc_locked(n);
	if (!q)
		return NULL;
	memcpy(q, p, b->size);
	free_locked(p);
	return q;
}

void *realloc(void *p, size_t n)
{
	if (!p)
		return malloc(n);
	lock();
	void *q = realloc_locked(p, n);
	unlock();
	return q;
}

void *aligned_alloc(size_t align, size_t n)
{
	if (align <= ALIGN)
		return malloc(n);
	errno = EINVAL;
	return NULL;
}

int posix_memalign(void **out, size_t align, size_t n)
{
	if (align > ALIGN)
		return EINVAL;
	*out = malloc(n);
	return *out ? 0 : ENOMEM;
}

void *memalign(size_t align, size_t n)
{
	return aligned_alloc(align, n);
}

size_t malloc_usable_size(void *p)
{
	return p ? header(p)->size : 0;
}
