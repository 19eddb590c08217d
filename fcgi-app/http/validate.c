/* Field errors in zod v4's words: see validate.h.
 *
 * The schemas, as the original service would write them in zod:
 *
 *   exec:    z.object({
 *              cmd:      z.string().min(1, "Command cannot be empty"),
 *              timeout:  z.number().int().positive().max(exec_timeout_max).optional(),
 *              env:      z.record(z.string(), z.string()).optional(),
 *              cwd:      z.string().startsWith("/").optional(),
 *              encoding: z.enum(["utf8", "base64"]).optional(),
 *              stdin:    z.string().optional(),
 *              user:     z.enum(["root", "user"]).optional() })
 *
 * (key order = the order several bad fields must come back in)
 *   message: z.object({
 *              role:     z.enum(["user", "assistant"]),
 *              content:  z.string().min(1, "Content cannot be empty") })
 *
 * plus a NUL-byte refinement on cmd, cwd and env keys and values (they end
 * up as C strings in the sandbox).  Every message was checked against zod
 * 4.x; tests/unit/test_validate.c holds the table. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"
#include "json_strict.h"
#include "protocol.h"
#include "textenc.h"
#include "validate.h"

#define MAX_SAFE_INTEGER 9007199254740991.0

#define MSG_CMD_EMPTY     "Command cannot be empty"
#define MSG_CMD_NUL       "Command cannot contain NUL bytes"
#define MSG_CWD_NUL       "Working directory cannot contain NUL bytes"
#define MSG_ENV_KEY_NUL   "Environment variable names cannot contain NUL bytes"
#define MSG_ENV_VALUE_NUL "Environment variable values cannot contain NUL bytes"
#define MSG_CONTENT_EMPTY "Content cannot be empty"

/* ---- JavaScript's ToNumber, for zod's length check on non-strings ---- */

/* StrWhiteSpaceChar (ECMA-262 7.1.4.1.1): ASCII space and controls, NBSP,
 * BOM, the Zs category, LS, PS.  Returns its UTF-8 length at s, or 0. */
static size_t js_space_len(const unsigned char *s, size_t n)
{
	if (n >= 1 && (s[0] == ' ' || (s[0] >= '\t' && s[0] <= '\r')))
		return 1;
	if (n >= 2 && s[0] == 0xc2 && s[1] == 0xa0)
		return 2;                                     /* U+00A0 */
	if (n < 3)
		return 0;
	if (s[0] == 0xef && s[1] == 0xbb && s[2] == 0xbf)    /* U+FEFF */
		return 3;
	if (s[0] == 0xe1 && s[1] == 0x9a && s[2] == 0x80)    /* U+1680 */
		return 3;
	if (s[0] == 0xe2 && s[1] == 0x80 &&
	    (s[2] <= 0x8a || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
		return 3;                   /* U+2000..200A, U+2028/9, U+202F */
	if (s[0] == 0xe2 && s[1] == 0x81 && s[2] == 0x9f)    /* U+205F */
		return 3;
	if (s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80)    /* U+3000 */
		return 3;
	return 0;
}

static int digit_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'Z')
		return c - 'A' + 10;
	return 99;
}

/* StringToNumber: trimmed; "" is 0; Infinity; 0x/0o/0b; decimal. */
static double js_string_to_number(const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t k, i, d;
	const char *t;
	char *copy, *end;
	double v;

	while (n > 0 && (k = js_space_len(s, n)) > 0) {
		s += k;
		n -= k;
	}
	while (n > 0) {
		/* trailing: try each possible width ending at s + n */
		for (k = 1; k <= 3 && k <= n; k++)
			if (js_space_len(s + n - k, k) == k)
				break;
		if (k > 3 || k > n)
			break;
		n -= k;
	}
	if (n == 0)
		return 0;
	t = (const char *)s;
	if (n >= 2 && t[0] == '0' && strchr("xXoObB", t[1]) && t[1]) {
		int base = (t[1] == 'x' || t[1] == 'X') ? 16 :
			   (t[1] == 'o' || t[1] == 'O') ? 8 : 2;

		if (n == 2)
			return NAN;
		v = 0;
		for (i = 2; i < n; i++) {
			int dv = digit_value(t[i]);

			if (dv >= base)
				return NAN;
			v = v * base + dv;
		}
		return v;
	}
	i = 0;
	if (t[i] == '+' || t[i] == '-')
		i++;
	if (n - i == 8 && memcmp(t + i, "Infinity", 8) == 0)
		return t[0] == '-' ? -INFINITY : INFINITY;
	/* StrUnsignedDecimalLiteral: digits [. digits] | . digits, [e[+-]digits] */
	for (d = i; i < n && t[i] >= '0' && t[i] <= '9'; i++)
		;
	k = i - d;
	if (i < n && t[i] == '.') {
		for (d = ++i; i < n && t[i] >= '0' && t[i] <= '9'; i++)
			;
		k += i - d;
	}
	if (k == 0)
		return NAN;
	if (i < n && (t[i] == 'e' || t[i] == 'E')) {
		i++;
		if (i < n && (t[i] == '+' || t[i] == '-'))
			i++;
		for (d = i; i < n && t[i] >= '0' && t[i] <= '9'; i++)
			;
		if (i == d)
			return NAN;
	}
	if (i != n)
		return NAN;
	copy = strndup(t, n);
	if (!copy)
		return NAN;
	v = strtod(copy, &end);  /* the C locale: the program never sets one */
	free(copy);
	return v;
}

double js_to_number(json_object *v)
{
	switch (json_object_get_type(v)) {
	case json_type_null:
		return 0;
	case json_type_boolean:
		return json_object_get_boolean(v) ? 1 : 0;
	case json_type_int:
	case json_type_double:
		return json_object_get_double(v);
	case json_type_string:
		return js_string_to_number(json_object_get_string(v),
					   (size_t)json_object_get_string_len(v));
	case json_type_array: {
		/* ToNumber(ToString(a)): a.join(","); two or more elements
		 * always hold a comma, so only [] and [x] can be numbers. */
		size_t n = json_object_array_length(v);
		json_object *e;

		if (n == 0)
			return 0;
		if (n > 1)
			return NAN;
		e = json_object_array_get_idx(v, 0);
		if (json_object_is_type(e, json_type_boolean) ||
		    json_object_is_type(e, json_type_object))
			return NAN;   /* "true", "[object Object]" */
		return js_to_number(e);  /* null -> "" -> 0 */
	}
	case json_type_object:
	default:
		return NAN;           /* "[object Object]" */
	}
}

/* zod's length checks run, even after a type error, on any value with a
 * `.length` (its `when`); true when such a value is shorter than min. */
static bool js_length_below(json_object *v, size_t min)
{
	json_object *len;

	if (json_object_is_type(v, json_type_array))
		return json_object_array_length(v) < min;
	if (json_object_is_type(v, json_type_object) &&
	    json_object_object_get_ex(v, "length", &len))
		return !(js_to_number(len) >= (double)min);
	return false;
}

/* ---- building blocks ---- */

const char *zod_type_name(json_object *v, bool present)
{
	double d;

	if (!present)
		return "undefined";
	switch (json_object_get_type(v)) {
	case json_type_null:    return "null";
	case json_type_boolean: return "boolean";
	case json_type_int:     return "number";
	case json_type_double:
		d = json_object_get_double(v);
		if (isnan(d))
			return "NaN";
		if (isinf(d))
			return d > 0 ? "Infinity" : "-Infinity";
		return "number";
	case json_type_string:  return "string";
	case json_type_array:   return "array";
	case json_type_object:  return "object";
	default:                return "unknown";
	}
}

void zod_issue(json_object *details, const char *field, const char *msg)
{
	json_object *list;

	if (!json_object_object_get_ex(details, field, &list)) {
		list = json_object_new_array();
		json_object_object_add(details, field, list);
	}
	json_object_array_add(list, json_object_new_string(msg));
}

static void zod_issue_type(json_object *details, const char *field,
			   const char *expected, json_object *v, bool present)
{
	char msg[96];

	snprintf(msg, sizeof(msg), "Invalid input: expected %s, received %s",
		 expected, zod_type_name(v, present));
	zod_issue(details, field, msg);
}

bool zod_string(json_object *details, json_object *body, const char *field,
		bool optional, const struct zod_string_rules *rules,
		const char **out, size_t *outlen)
{
	json_object *v = NULL;
	bool present = json_object_object_get_ex(body, field, &v);
	bool ok = true;
	const char *s;
	size_t len;

	if (!present && optional)
		return true;
	if (!json_object_is_type(v, json_type_string) || !present) {
		zod_issue_type(details, field, "string", v, present);
		if (rules->min_msg && present && js_length_below(v, rules->min_len))
			zod_issue(details, field, rules->min_msg);
		return false;
	}
	s = json_object_get_string(v);
	len = (size_t)json_object_get_string_len(v);
	if (rules->min_msg && utf16_length(s, len) < rules->min_len) {
		zod_issue(details, field, rules->min_msg);
		ok = false;
	}
	if (rules->starts_with &&
	    (len < strlen(rules->starts_with) ||
	     memcmp(s, rules->starts_with, strlen(rules->starts_with)) != 0)) {
		char msg[128];

		snprintf(msg, sizeof(msg), "Invalid string: must start with \"%s\"",
			 rules->starts_with);
		zod_issue(details, field, msg);
		ok = false;
	}
	if (rules->nul_msg && memchr(s, '\0', len)) {
		zod_issue(details, field, rules->nul_msg);
		ok = false;
	}
	if (ok && out)
		*out = s;
	if (ok && outlen)
		*outlen = len;
	return ok;
}

bool zod_enum(json_object *details, json_object *body, const char *field,
	      bool optional, const char *const *options, const char **value)
{
	json_object *v = NULL;
	bool present = json_object_object_get_ex(body, field, &v);
	char msg[256];
	size_t used;
	int i;

	if (!present && optional)
		return true;
	if (present && json_object_is_type(v, json_type_string)) {
		const char *s = json_object_get_string(v);
		size_t len = (size_t)json_object_get_string_len(v);

		for (i = 0; options[i]; i++) {
			if (strlen(options[i]) == len && memcmp(s, options[i], len) == 0) {
				if (value)
					*value = options[i];
				return true;
			}
		}
	}
	used = (size_t)snprintf(msg, sizeof(msg), "Invalid option: expected one of ");
	for (i = 0; options[i] && used < sizeof(msg); i++)
		used += (size_t)snprintf(msg + used, sizeof(msg) - used, "%s\"%s\"",
					 i ? "|" : "", options[i]);
	zod_issue(details, field, msg);
	return false;
}

/* Number.isInteger for a finite d, without libm: every double of
 * magnitude 2^53 or more is an integer. */
static bool is_integral(double d)
{
	if (d >= 9007199254740992.0 || d <= -9007199254740992.0)
		return true;
	return d == (double)(int64_t)d;
}

/* z.number().int().positive().max(max).optional() */
static bool zod_timeout(json_object *details, json_object *body, const char *field,
			uint64_t max, uint64_t *out)
{
	json_object *v = NULL;
	bool present = json_object_object_get_ex(body, field, &v);
	bool ok = true;
	char msg[96];
	double d;

	if (!present)
		return true;
	if (!json_object_is_type(v, json_type_int) &&
	    !json_object_is_type(v, json_type_double)) {
		zod_issue_type(details, field, "number", v, present);
		return false;
	}
	d = json_object_get_double(v);
	if (!isfinite(d)) {
		zod_issue_type(details, field, "number", v, present);
		return false;
	}
	if (!is_integral(d)) {   /* Number.isInteger; this check aborts */
		zod_issue(details, field, "Invalid input: expected int, received number");
		return false;
	}
	if (d > MAX_SAFE_INTEGER || d < -MAX_SAFE_INTEGER) {  /* Number.isSafeInteger; continues */
		zod_issue(details, field, d > 0
			  ? "Too big: expected int to be <=9007199254740991"
			  : "Too small: expected int to be >=-9007199254740991");
		ok = false;
	}
	if (!(d > 0)) {
		zod_issue(details, field, "Too small: expected number to be >0");
		ok = false;
	}
	if (d > (double)max) {
		snprintf(msg, sizeof(msg), "Too big: expected number to be <=%llu",
			 (unsigned long long)max);
		zod_issue(details, field, msg);
		ok = false;
	}
	if (ok)
		*out = (uint64_t)d;
	return ok;
}

/* z.record(z.string(), z.string()).optional(), keys and values NUL-free.
 * As in zod, a bad key hides its value's problems. */
static bool zod_env(json_object *details, json_object *body, const char *field,
		    json_object **out)
{
	json_object *v = NULL;
	bool present = json_object_object_get_ex(body, field, &v);
	bool ok = true;

	if (!present)
		return true;
	if (!json_object_is_type(v, json_type_object)) {
		zod_issue_type(details, field, "record", v, present);
		return false;
	}
	json_object_object_foreach(v, key, val) {
		if (strchr(key, JSON_KEY_NUL_MARK)) {
			zod_issue(details, field, MSG_ENV_KEY_NUL);
			ok = false;
		} else if (!json_object_is_type(val, json_type_string)) {
			zod_issue_type(details, field, "string", val, true);
			ok = false;
		} else if (memchr(json_object_get_string(val), '\0',
				  (size_t)json_object_get_string_len(val))) {
			zod_issue(details, field, MSG_ENV_VALUE_NUL);
			ok = false;
		}
	}
	if (ok)
		*out = v;
	return ok;
}

/* ---- the schemas ---- */

json_object *validate_exec_request(json_object *body, uint64_t timeout_max_ms,
				   struct exec_request *out)
{
	static const struct zod_string_rules cmd_rules = {
		.min_len = 1, .min_msg = MSG_CMD_EMPTY, .nul_msg = MSG_CMD_NUL };
	static const struct zod_string_rules cwd_rules = {
		.starts_with = "/", .nul_msg = MSG_CWD_NUL };
	static const struct zod_string_rules stdin_rules = { 0 };
	static const char *const encodings[] = { "utf8", "base64", NULL };
	static const char *const users[] = { HK_USER_ROOT, HK_USER_USER, NULL };
	json_object *details = json_object_new_object();
	const char *encoding = NULL;

	memset(out, 0, sizeof(*out));
	if (!json_object_is_type(body, json_type_object))
		return details;
	zod_string(details, body, "cmd", false, &cmd_rules, &out->cmd, &out->cmd_len);
	zod_timeout(details, body, "timeout", timeout_max_ms, &out->timeout_ms);
	zod_env(details, body, "env", &out->env);
	zod_string(details, body, "cwd", true, &cwd_rules, &out->cwd, NULL);
	if (zod_enum(details, body, "encoding", true, encodings, &encoding) && encoding) {
		out->has_encoding = true;
		out->encoding = strcmp(encoding, "base64") == 0
			? EXEC_ENCODING_BASE64 : EXEC_ENCODING_UTF8;
	}
	zod_string(details, body, "stdin", true, &stdin_rules,
		   &out->stdin_data, &out->stdin_len);
	zod_enum(details, body, "user", true, users, &out->user);
	if (json_object_object_length(details) > 0)
		return details;
	json_object_put(details);
	return NULL;
}

json_object *validate_message_request(json_object *body,
				      struct message_request *out)
{
	static const struct zod_string_rules content_rules = {
		.min_len = 1, .min_msg = MSG_CONTENT_EMPTY };
	static const char *const roles[] = { "user", "assistant", NULL };
	json_object *details = json_object_new_object();

	memset(out, 0, sizeof(*out));
	if (!json_object_is_type(body, json_type_object))
		return details;
	zod_enum(details, body, "role", false, roles, &out->role);
	zod_string(details, body, "content", false, &content_rules,
		   &out->content, &out->content_len);
	if (json_object_object_length(details) > 0)
		return details;
	json_object_put(details);
	return NULL;
}
