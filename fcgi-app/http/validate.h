/* Request validation in zod's words.
 *
 * The original service validates with zod v4 and answers
 *   400 {"error":"invalid request","details":z.flattenError(e).fieldErrors}
 * so `details` maps each failing field, in schema order, to the messages zod
 * would give, in the order zod's checks run.  The checks below are zod's
 * (including its quirks: `{"cmd":[]}` is both "received array" and "Command
 * cannot be empty", because zod's length check also runs on arrays), plus
 * roombox's one addition: strings handed to a process must not hold NUL.
 *
 * Each validate_* returns NULL when the body is valid (and fills *out with
 * pointers into body, valid while body lives), or a new `details` object
 * (the caller owns it).  A body that is not an object gives `{}`: zod puts
 * that in formErrors, which the original service drops. */
#ifndef ROOMBOX_FCGI_VALIDATE_H
#define ROOMBOX_FCGI_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

/* ---- POST /api/rooms/{id}/sandbox/exec ---- */

enum exec_encoding { EXEC_ENCODING_UTF8, EXEC_ENCODING_BASE64 };

struct exec_request {
	const char *cmd;          /* NUL-free, length >= 1 */
	size_t cmd_len;
	uint64_t timeout_ms;      /* 0 = not given (helper uses exec_timeout) */
	json_object *env;         /* NULL or an object of NUL-free strings */
	const char *cwd;          /* NULL or absolute, NUL-free */
	const char *stdin_data;   /* NULL or bytes (may hold NUL) */
	size_t stdin_len;
	bool has_encoding;
	enum exec_encoding encoding;
	const char *user;         /* NULL (exec_user) or HK_USER_ROOT / HK_USER_USER */
	bool timeout_cap;         /* not from a client: a second run's timeout is
				   * what the first left, cut to the room's
				   * maximum when the client asked none */
};

json_object *validate_exec_request(json_object *body, uint64_t timeout_max_ms,
				   struct exec_request *out);

/* ---- POST /api/rooms/{id}/messages ---- */

struct message_request {
	const char *role;         /* "user" or "assistant" */
	const char *content;      /* length >= 1 (may hold NUL) */
	size_t content_len;
};

json_object *validate_message_request(json_object *body,
				      struct message_request *out);

/* ---- building blocks, one per zod schema, for the next schema ----
 * `field` names the key in body and in details; each returns true when the
 * value passed (an absent optional field passes). */

/* What zod calls a value's type in "received X"; v is NULL for JSON null and
 * present is false for a missing key ("undefined"). */
const char *zod_type_name(json_object *v, bool present);
/* Append a message to details[field] (creating the array in order). */
void zod_issue(json_object *details, const char *field, const char *msg);

/* z.string() with the checks zod runs after it, in this order. */
struct zod_string_rules {
	size_t min_len;           /* .min(min_len, min_msg) when min_msg */
	const char *min_msg;
	const char *starts_with;  /* .startsWith(prefix) when not NULL */
	const char *nul_msg;      /* roombox: no NUL byte, when not NULL */
};
/* On success *s and *len (either may be NULL) point into body. */
bool zod_string(json_object *details, json_object *body, const char *field,
		bool optional, const struct zod_string_rules *rules,
		const char **s, size_t *len);
/* z.enum([options...]) (options NULL-terminated); *value (may be NULL)
 * gets the matching option. */
bool zod_enum(json_object *details, json_object *body, const char *field,
	      bool optional, const char *const *options, const char **value);

/* JavaScript's ToNumber applied to a JSON value (exposed for tests). */
double js_to_number(json_object *v);

#endif
