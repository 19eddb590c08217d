/* A bounded history of a stream of bytes; see byte_ring.h. */
#include "byte_ring.h"

#include <stdlib.h>
#include <string.h>

int byte_ring_init(struct byte_ring *r, size_t cap)
{
	memset(r, 0, sizeof(*r));
	r->buf = malloc(cap ? cap : 1);
	if (!r->buf)
		return -1;
	r->cap = cap;
	return 0;
}

void byte_ring_free(struct byte_ring *r)
{
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

void byte_ring_write(struct byte_ring *r, const void *data, size_t len)
{
	const unsigned char *p = data;
	if (r->cap == 0) {
		r->start = r->end += len;
		return;
	}
	if (len > r->cap) {
		r->end += len - r->cap;
		p += len - r->cap;
		len = r->cap;
	}
	size_t at = (size_t)(r->end % r->cap), first = r->cap - at < len ? r->cap - at : len;
	memcpy(r->buf + at, p, first);
	memcpy(r->buf, p + first, len - first);
	r->end += len;
	if (r->end - r->start > r->cap)
		r->start = r->end - r->cap;
}

size_t byte_ring_read(const struct byte_ring *r, uint64_t *at, void *out, size_t max, uint64_t *lost)
{
	*lost = 0;
	if (*at < r->start) {
		*lost = r->start - *at;
		*at = r->start;
	}
	if (*at > r->end)
		*at = r->end;
	uint64_t avail = r->end - *at;
	size_t n = avail < max ? (size_t)avail : max;
	if (n == 0)
		return 0;
	size_t from = (size_t)(*at % r->cap), first = r->cap - from < n ? r->cap - from : n;
	memcpy(out, r->buf + from, first);
	memcpy((unsigned char *)out + first, r->buf, n - first);
	*at += n;
	return n;
}
