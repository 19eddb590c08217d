/* The text the keeper's tools answer with: see tool_text.c. */
#ifndef ROOMBOX_KEEPER_TOOL_TEXT_H
#define ROOMBOX_KEEPER_TOOL_TEXT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct stat;

/* The "E <kind>" a client is told for errno err (TOOL_KIND_*), or NULL
 * for one it is not told apart (then the C library's words go to stderr). */
const char *tool_errno_kind(int err);

/* One listing record, "<type>\t<size>\t<mode>\t<mtime>\t<rel>\0" (as
 * find's "%y\t%s\t%m\t%T@\t%P\0"), into buf; its length with the NUL, or 0
 * when it does not fit in len. */
size_t tool_entry_record(char *buf, size_t len, const struct stat *st, const char *rel);

/* The last TOOL_PUT_END_LEN bytes of an upload that stored `stored` bytes
 * in all: 0 with *len the body's length when they are the end mark, with
 * this request's nonce, of exactly that many bytes before it, else -1 (the
 * upload was cut). */
int tool_put_end_check(const char *mark, const char *nonce, uint64_t stored, uint64_t *len);

/* "0755"-style text (1 to 4 octal digits) as a mode; -1 if it is not one. */
int tool_mode_parse(const char *text, mode_t *mode);

#endif
