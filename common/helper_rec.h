/* Building one request record of common/protocol.h: roombox-fcgi's client
 * (fcgi-app/helper_client.c) and the helper's own command line both make
 * their requests here, so a request has one encoder. */
#ifndef ROOMBOX_HELPER_REC_H
#define ROOMBOX_HELPER_REC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct helper_rec {
	char *buf;
	size_t len, cap;
	bool failed;              /* out of memory, or a room id too long */
};

/* The header (room NULL or "" for ops without one) and the argument
 * record. */
void helper_rec_begin(struct helper_rec *b, uint32_t op, const char *room,
		      const void *args, size_t args_size);
/* One counted string, with its NUL (s must hold none: len bytes of it). */
void helper_rec_string(struct helper_rec *b, const char *s, size_t len);
/* Raw bytes after the strings (exec's HX_COLLECT input). */
void helper_rec_bytes(struct helper_rec *b, const void *p, size_t len);
/* The finished request (malloc'd, *len bytes, the header's size filled
 * in), or NULL when building failed or it is over 4 GiB. */
char *helper_rec_end(struct helper_rec *b, size_t *len);

#endif
