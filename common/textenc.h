/* Byte strings to JSON-safe text: UTF-8 with U+FFFD for every invalid
 * sequence (as WHATWG's decoder does), base64, UTF-16 lengths.  roombox-fcgi
 * shapes text for clients with it, and the etcd client (etcd.c) writes and
 * reads keys and values in its base64; the helper never links it: none of
 * this runs setuid. */
#ifndef ROOMBOX_TEXTENC_H
#define ROOMBOX_TEXTENC_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Returns a malloc'd NUL-terminated valid UTF-8 string; each maximal invalid
 * subpart becomes U+FFFD (EF BF BD), exactly as JavaScript's TextDecoder
 * does. NUL bytes are kept (U+0000 is valid, JSON escapes it as \u0000), so
 * use *outlen (may be NULL), not strlen. A leading byte order mark is kept,
 * as Node's Buffer.toString('utf8') keeps it (TextDecoder's default drops it):
 * output bytes are the command's, not ours to remove. NULL on allocation
 * failure. */
char *utf8_sanitize(const char *in, size_t len, size_t *outlen);
/* Whether in[0..len) is valid UTF-8 (the decoder above would replace
 * nothing in it).  U+0000 counts as valid. */
bool utf8_valid(const char *in, size_t len);

/* Standard base64 with padding; malloc'd, NUL-terminated. */
char *base64_encode(const unsigned char *in, size_t len);
/* The inverse, strict: only the standard alphabet, length a multiple of 4,
 * '=' only as the last one or two characters.  malloc'd bytes (plus a NUL
 * not counted in *outlen), or NULL when the text is not such base64 or on
 * allocation failure. */
unsigned char *base64_decode(const char *in, size_t len, size_t *outlen);

/* Length of `s` (valid UTF-8) counted in UTF-16 code units. */
size_t utf16_length(const char *s, size_t len);
/* Byte length of the longest prefix of `s` holding at most `units` UTF-16
 * code units. A character outside the BMP counts 2 units and is never split:
 * when only one unit is left for it, the prefix stops before it (JavaScript's
 * slice would keep a lone high surrogate there, which UTF-8 cannot carry; the
 * runtags module decides what to do in that case). */
size_t utf8_prefix_for_utf16_units(const char *s, size_t len, size_t units);

#endif
