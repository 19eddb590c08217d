/* JSON from outside, read strictly (json_strict.c): request bodies, etcd's
 * answers, records on disk.  One reader for all of them, in common/ because
 * roombox-fcgi and roomboxctl both read etcd with it. */
#ifndef ROOMBOX_JSON_STRICT_H
#define ROOMBOX_JSON_STRICT_H

#include <stddef.h>
#include <json-c/json.h>

/* Parse exactly one JSON value (RFC 8259: no comments, single quotes, NaN,
 * trailing commas, raw control characters or trailing garbage; valid UTF-8).
 * Returns 0 with *out set (NULL for a JSON null, json-c's convention), or -1
 * with err set to json-c's reason.
 *
 * json-c keeps object keys as C strings, so a key holding "\u0000" would be
 * silently cut short ({"cmd\u0000x":..} would read as "cmd").  Each such NUL
 * is therefore turned into the byte JSON_KEY_NUL_MARK, which valid UTF-8 never
 * holds: validate.c reports it, everything else sees an unknown key. */
#define JSON_KEY_NUL_MARK '\xff'
int json_parse_strict(const char *text, size_t len, json_object **out,
		      char *err, size_t errlen);

#endif
