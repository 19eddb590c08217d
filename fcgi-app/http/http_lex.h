/* The pieces of HTTP/1.x message heads (RFC 9110/9112) the preview relay
 * reads: where a head ends, field names and values, comma-separated
 * lists.  For untrusted bytes: every function reads only the bytes it is
 * given. */
#ifndef ROOMBOX_FCGI_HTTP_LEX_H
#define ROOMBOX_FCGI_HTTP_LEX_H

#include <stdbool.h>
#include <stddef.h>

/* Offset just past the blank line ending a head ("\n\n" or "\n\r\n"), or 0. */
size_t http_head_end(const char *buf, size_t len);

/* Does buf[0..len) end a head, when buf[0..before) did not?  Looks only
 * at the new bytes (and the two before them, where an end may begin), so
 * a head that comes a byte a read costs its length, not its square. */
bool http_head_ended(const char *buf, size_t before, size_t len);

/* A token character (field names, methods). */
bool http_tchar(char c);

/* s[0..n) is name, in any case. */
bool http_name_is(const char *s, size_t n, const char *name);

/* The field line buf[i..le) (its line end excluded): "name: value" with a
 * name of token characters right before the colon; the name's length and
 * the value without the whitespace around it.  false when it is not one. */
bool http_field(const char *buf, size_t i, size_t le, size_t *name_len, size_t *va, size_t *vb);

/* In the comma-separated list v[0..n): does token appear (any case), and
 * how many other elements are there. */
bool http_list_has(const char *v, size_t n, const char *token, size_t *others);

#endif
