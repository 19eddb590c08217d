/* The helper's malloc: a bump allocator over one static arena.
 *
 * roombox-helper lives for one operation and is single-threaded.  musl's
 * malloc maps a fresh group for each size class it meets and unmaps it when
 * it empties: on the exec path that was a third of the helper's CPU (mmap,
 * munmap, page-table teardown) in a profile of the throughput run.  Here an
 * allocation is a pointer bump in a zero-page-backed arena (pages cost only
 * when touched), free() gives memory back only when it is the last block
 * (enough for the grow-and-copy pattern of realloc), and everything goes
 * back to the kernel when the process exits.  Blocks of 1 MiB and more, and
 * anything once the arena is full, get their own mapping and are unmapped
 * on free.
 *
 * Linked into roombox-helper only (musl supports replacing malloc in a
 * static program); the unit tests use their libc's malloc.
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#define ARENA_SIZE (16u << 20)
#define BIG (1u << 20)
#define ALIGN 16u

struct block {
	size_t size;           /* usable bytes */
	size_t mapped;         /* bytes of its own mapping, 0 when in the arena */
};

static unsigned char arena[ARENA_SIZE] __attribute__((aligned(ALIGN)));
static size_t used;
static struct block *last;     /* the arena's last block, or NULL */

static size_t round_up(size_t n)
{
	return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

static struct block *header(void *p)
{
	return (struct block *)((unsigned char *)p - round_up(sizeof(struct block)));
}

static void *payload(struct block *b)
{
	return (unsigned char *)b + round_up(sizeof(struct block));
}

void *malloc(size_t n)
{
	size_t h = round_up(sizeof(struct block));
	if (n > SIZE_MAX / 2) {
		errno = ENOMEM;
		return NULL;
	}
	size_t need = h + round_up(n ? n : 1);
	if (n < BIG && need <= ARENA_SIZE - used) {
		struct block *b = (struct block *)(arena + used);
		used += need;
		b->size = need - h;
		b->mapped = 0;
		last = b;
		return payload(b);
	}
	void *m = mmap(NULL, need, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED) {
		errno = ENOMEM;
		return NULL;
	}
	struct block *b = m;
	b->size = need - h;
	b->mapped = need;
	return payload(b);
}

void free(void *p)
{
	if (!p)
		return;
	struct block *b = header(p);
	if (b->mapped) {
		munmap(b, b->mapped);
	} else if (b == last) {
		used = (size_t)((unsigned char *)b - arena);
		last = NULL;
	}
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

void *realloc(void *p, size_t n)
{
	if (!p)
		return malloc(n);
	struct block *b = header(p);
	if (n <= b->size)
		return p;
	if (b == last && n < BIG && round_up(n) - b->size <= ARENA_SIZE - used) {
		used += round_up(n) - b->size;
		b->size = round_up(n);
		return p;
	}
	void *q = malloc(n);
	if (!q)
		return NULL;
	memcpy(q, p, b->size);
	free(p);
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
