/* The request encoder (see helper_rec.h). */
#include "helper_rec.h"

#include <stdlib.h>
#include <string.h>

#include "protocol.h"

static void put(struct helper_rec *b, const void *p, size_t len)
{
	if (b->failed)
		return;
	if (b->len + len > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		while (cap < b->len + len)
			cap *= 2;
		char *n = realloc(b->buf, cap);
		if (!n) {
			b->failed = true;
			return;
		}
		b->buf = n;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, p, len);
	b->len += len;
}

void helper_rec_begin(struct helper_rec *b, uint32_t op, const char *room,
		      const void *args, size_t args_size)
{
	struct helper_req h = { .magic = HELPER_MAGIC, .version = HELPER_VERSION, .op = op };
	*b = (struct helper_rec){ 0 };
	if (room) {
		size_t n = strlen(room);
		if (n >= sizeof(h.room))
			b->failed = true;
		else
			memcpy(h.room, room, n);
	}
	put(b, &h, sizeof(h));
	if (args_size)
		put(b, args, args_size);
}

void helper_rec_string(struct helper_rec *b, const char *s, size_t len)
{
	put(b, s, len);
	put(b, "", 1);
	if (!b->failed)
		((struct helper_req *)b->buf)->nstrings++;
}

void helper_rec_bytes(struct helper_rec *b, const void *p, size_t len)
{
	put(b, p, len);
}

char *helper_rec_end(struct helper_rec *b, size_t *len)
{
	if (b->failed || b->len > UINT32_MAX) {
		free(b->buf);
		*b = (struct helper_rec){ 0 };
		return NULL;
	}
	((struct helper_req *)b->buf)->size = (uint32_t)b->len;
	*len = b->len;
	return b->buf;
}
