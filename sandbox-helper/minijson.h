#ifndef ROOMBOX_MINIJSON_H
#define ROOMBOX_MINIJSON_H
/* minijson — the helper's JSON reader and writer.
 *
 * The helper is setuid and runs once per operation; it is linked against
 * musl with no other library, so a start costs a few pages and no loader.
 * It reads one request object and writes one answer object: this is all of
 * JSON it needs.  roombox-fcgi keeps using json-c.
 *
 * Reader: RFC 8259, strict.  One value, optional surrounding whitespace,
 * nothing after it.  More than MJ_MAX_VALUES values in all (every array
 * element, object member and the root count; a request of the helper has
 * a few dozen), nesting deeper than MJ_MAX_DEPTH, raw control
 * characters in strings, bad escapes, leading zeros, "+1", ".5", NaN and
 * trailing commas are errors.  Strings are decoded to UTF-8 (\u escapes
 * included, a surrogate pair to one code point, a lone surrogate to U+FFFD);
 * a string may hold NUL bytes (\u0000), so it carries its length.  In an
 * object with a repeated key the last one counts (as with json-c).
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MJ_MAX_DEPTH 32
#define MJ_MAX_VALUES 100000
#define MJ_STR_(x) #x
#define MJ_STR(x) MJ_STR_(x)

enum mj_type { MJ_NULL, MJ_BOOL, MJ_NUMBER, MJ_STRING, MJ_ARRAY, MJ_OBJECT };

struct mj_member;

struct mj_value {
	enum mj_type type;
	bool boolean;               /* MJ_BOOL */
	double number;              /* MJ_NUMBER */
	bool is_int;                /* MJ_NUMBER written without fraction or exponent, fits int64 */
	int64_t integer;            /* ... and then its exact value */
	const char *str;            /* MJ_STRING: NUL-terminated after len bytes */
	size_t len;                 /* MJ_STRING: bytes; MJ_ARRAY/MJ_OBJECT: members */
	struct mj_member *members;  /* MJ_ARRAY (keys NULL) / MJ_OBJECT, in document order */
};

struct mj_member {
	const char *key;            /* NUL-terminated; NULL in an array */
	size_t key_len;
	struct mj_value value;
};

struct mj_doc;

/* Parse text[0..len).  NULL with err ("at byte N: reason") on any error or
 * when out of memory; errno then tells which: ENOMEM (memory ran out),
 * E2BIG (more than MJ_MAX_VALUES values), EINVAL (anything else). */
struct mj_doc *mj_parse(const char *text, size_t len, char *err, size_t errlen);
const struct mj_value *mj_root(const struct mj_doc *d);
void mj_free(struct mj_doc *d);

/* Member `key` of an object (the last one if repeated); NULL when absent or
 * when obj is not an object. */
const struct mj_value *mj_get(const struct mj_value *obj, const char *key);
/* The string member `key`, or NULL when absent or not a string. */
const char *mj_get_str(const struct mj_value *obj, const char *key);

/* Writer: builds one document in a growing buffer.  Commas and colons are
 * placed by the writer; strings are escaped (", \, and bytes below 0x20;
 * '/' and bytes from 0x80 are copied as they are, so valid UTF-8 in gives
 * valid UTF-8 out).  Out of memory is remembered and reported by
 * mjw_finish. */
struct mj_writer {
	char *buf;
	size_t len, cap;
	bool oom;
	int depth;
	bool first[MJ_MAX_DEPTH + 1];   /* no member written yet at this depth */
	bool after_key;
};

void mjw_init(struct mj_writer *w);
void mjw_object_begin(struct mj_writer *w);
void mjw_object_end(struct mj_writer *w);
void mjw_array_begin(struct mj_writer *w);
void mjw_array_end(struct mj_writer *w);
void mjw_key(struct mj_writer *w, const char *key);
void mjw_string(struct mj_writer *w, const char *s, size_t n);
void mjw_cstring(struct mj_writer *w, const char *s);   /* NULL writes null */
void mjw_int(struct mj_writer *w, int64_t v);
void mjw_bool(struct mj_writer *w, bool v);
void mjw_null(struct mj_writer *w);
/* A number already formatted (e.g. "%.3f"); the caller vouches for it. */
void mjw_number_text(struct mj_writer *w, const char *text);
/* The document (NUL-terminated, *len bytes), owned by the caller; NULL if
 * memory ran out, nothing was written, the nesting is unbalanced or went
 * deeper than MJ_MAX_DEPTH.  The writer is emptied. */
char *mjw_finish(struct mj_writer *w, size_t *len);
void mjw_free(struct mj_writer *w);

#endif
