/* Unit tests for sandbox-helper/minijson.c, written from the contract in
 * sandbox-helper/minijson.h and RFC 8259.
 *
 * Every input handed to mj_parse is first copied into a heap block of
 * exactly its length, with no NUL after it, so that a read past `len`
 * shows up under valgrind. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "minijson.h"

#define FFFD "\xEF\xBF\xBD"

/* ---------------------------------------------------------------- helpers */

/* Parse `len` bytes of `text` from an exact-size copy.  *copy receives the
 * copy (the caller frees it after mj_free: the document may point into it). */
static struct mj_doc *parse_n(const char *text, size_t len, char *err, size_t errlen, char **copy)
{
	char *buf = malloc(len ? len : 1);

	assert_non_null(buf);
	memcpy(buf, text, len);
	*copy = buf;
	return mj_parse(buf, len, err, errlen);
}

/* A parsed document and its input copy, freed together. */
struct parsed {
	struct mj_doc *doc;
	char *copy;
	const struct mj_value *root;
};

static struct parsed parse_ok_n(const char *text, size_t len)
{
	struct parsed p;
	char err[256] = "";

	p.doc = parse_n(text, len, err, sizeof(err), &p.copy);
	if (p.doc == NULL)
		fail_msg("mj_parse rejected valid input \"%.*s\": %s", (int)(len > 200 ? 200 : len), text, err);
	p.root = mj_root(p.doc);
	assert_non_null(p.root);
	return p;
}

static struct parsed parse_ok(const char *text)
{
	return parse_ok_n(text, strlen(text));
}

static void parsed_free(struct parsed *p)
{
	mj_free(p->doc);
	free(p->copy);
}

/* mj_parse must return NULL and write a NUL-terminated, non-empty message
 * "at byte N: reason" into err. */
static void check_parse_error_n(const char *text, size_t len)
{
	char err[256];
	char *copy;
	struct mj_doc *d;

	memset(err, 'X', sizeof(err));
	d = parse_n(text, len, err, sizeof(err), &copy);
	if (d != NULL) {
		mj_free(d);
		free(copy);
		fail_msg("mj_parse accepted invalid input \"%.*s\" (%zu bytes)", (int)(len > 200 ? 200 : len), text, len);
	}
	free(copy);
	if (memchr(err, '\0', sizeof(err)) == NULL)
		fail_msg("err not NUL-terminated for \"%.*s\"", (int)(len > 200 ? 200 : len), text);
	if (err[0] == '\0')
		fail_msg("err empty for \"%.*s\"", (int)(len > 200 ? 200 : len), text);
	if (strncmp(err, "at byte ", 8) != 0)
		fail_msg("err \"%s\" does not read \"at byte N: reason\" for \"%.*s\"", err,
			 (int)(len > 200 ? 200 : len), text);
}

#define PARSE_ERROR(lit) check_parse_error_n(lit, sizeof(lit) - 1)

static void assert_str_value(const struct mj_value *v, const char *want, size_t wantlen)
{
	assert_non_null(v);
	assert_int_equal(v->type, MJ_STRING);
	assert_non_null(v->str);
	assert_int_equal(v->len, wantlen);
	if (wantlen > 0)
		assert_memory_equal(v->str, want, wantlen);
	assert_int_equal(v->str[v->len], '\0');
}

/* Parse one JSON string literal (given as its JSON text) and compare the
 * decoded bytes. */
static void check_string_n(const char *json, size_t jsonlen, const char *want, size_t wantlen)
{
	struct parsed p = parse_ok_n(json, jsonlen);

	if (p.root->type != MJ_STRING)
		fail_msg("%.*s: type %d, not a string", (int)jsonlen, json, p.root->type);
	if (p.root->len != wantlen || memcmp(p.root->str, want, wantlen) != 0) {
		char got[256] = "", exp[256] = "";
		for (size_t i = 0; i < p.root->len && i < 60; i++)
			snprintf(got + strlen(got), sizeof(got) - strlen(got), "%02X ", (unsigned char)p.root->str[i]);
		for (size_t i = 0; i < wantlen && i < 60; i++)
			snprintf(exp + strlen(exp), sizeof(exp) - strlen(exp), "%02X ", (unsigned char)want[i]);
		fail_msg("%.*s: decoded to [%s] (%zu bytes), expected [%s] (%zu bytes)",
			 (int)jsonlen, json, got, p.root->len, exp, wantlen);
	}
	assert_int_equal(p.root->str[p.root->len], '\0');
	parsed_free(&p);
}

#define STRING(json, want) check_string_n(json, sizeof(json) - 1, want, sizeof(want) - 1)

/* Finish the writer and compare with the exact expected text. */
static void check_finish(struct mj_writer *w, const char *want)
{
	size_t len = (size_t)-1;
	char *out = mjw_finish(w, &len);

	if (out == NULL)
		fail_msg("mjw_finish returned NULL, expected %s", want);
	if (len != strlen(want) || memcmp(out, want, len) != 0)
		fail_msg("writer produced \"%.*s\" (%zu bytes), expected \"%s\" (%zu bytes)",
			 (int)len, out, len, want, strlen(want));
	assert_int_equal(out[len], '\0');
	free(out);
}

/* ------------------------------------------------------------ reader tests */

static void test_parse_typical_request(void **state)
{
	static const char req[] =
		"{\"op\":\"exec\",\"room\":\"r1\",\"cmd\":\"echo hi\",\"timeout_ms\":500,"
		"\"env\":{\"A\":\"1\",\"B\":\"x y\"},\"cwd\":\"/tmp\",\"stdin\":\"a\\u0000b\","
		"\"encoding\":\"base64\"}";
	static const char *const keys[] = { "op", "room", "cmd", "timeout_ms", "env", "cwd", "stdin", "encoding" };
	struct parsed p = parse_ok(req);
	const struct mj_value *v, *env;

	(void)state;
	assert_int_equal(p.root->type, MJ_OBJECT);
	assert_int_equal(p.root->len, 8);
	assert_non_null(p.root->members);
	for (size_t i = 0; i < 8; i++) {	/* document order */
		assert_non_null(p.root->members[i].key);
		assert_string_equal(p.root->members[i].key, keys[i]);
		assert_int_equal(p.root->members[i].key_len, strlen(keys[i]));
	}

	assert_string_equal(mj_get_str(p.root, "op"), "exec");
	assert_string_equal(mj_get_str(p.root, "room"), "r1");
	assert_string_equal(mj_get_str(p.root, "cmd"), "echo hi");
	assert_string_equal(mj_get_str(p.root, "cwd"), "/tmp");
	assert_string_equal(mj_get_str(p.root, "encoding"), "base64");
	assert_str_value(mj_get(p.root, "op"), "exec", 4);
	assert_str_value(mj_get(p.root, "cmd"), "echo hi", 7);

	v = mj_get(p.root, "timeout_ms");
	assert_non_null(v);
	assert_int_equal(v->type, MJ_NUMBER);
	assert_true(v->is_int);
	assert_int_equal(v->integer, 500);
	assert_true(v->number == 500.0);
	assert_null(mj_get_str(p.root, "timeout_ms"));

	v = mj_get(p.root, "stdin");
	assert_str_value(v, "a\0b", 3);
	assert_int_equal(v->str[1], '\0');

	env = mj_get(p.root, "env");
	assert_non_null(env);
	assert_int_equal(env->type, MJ_OBJECT);
	assert_int_equal(env->len, 2);
	assert_string_equal(env->members[0].key, "A");
	assert_int_equal(env->members[0].key_len, 1);
	assert_str_value(&env->members[0].value, "1", 1);
	assert_string_equal(env->members[1].key, "B");
	assert_str_value(&env->members[1].value, "x y", 3);
	assert_string_equal(mj_get_str(env, "B"), "x y");
	assert_null(mj_get_str(p.root, "env"));

	assert_null(mj_get(p.root, "missing"));
	assert_null(mj_get_str(p.root, "missing"));
	assert_null(mj_get(p.root, "A"));	/* not searched recursively */
	assert_null(mj_get(p.root, "o"));	/* no prefix match */
	assert_null(mj_get(p.root, "opx"));
	parsed_free(&p);
}

static void test_parse_literals(void **state)
{
	struct parsed p;

	(void)state;
	p = parse_ok("true");
	assert_int_equal(p.root->type, MJ_BOOL);
	assert_true(p.root->boolean);
	parsed_free(&p);

	p = parse_ok("false");
	assert_int_equal(p.root->type, MJ_BOOL);
	assert_false(p.root->boolean);
	parsed_free(&p);

	p = parse_ok("null");
	assert_int_equal(p.root->type, MJ_NULL);
	parsed_free(&p);

	p = parse_ok("[true,false,null]");
	assert_int_equal(p.root->type, MJ_ARRAY);
	assert_int_equal(p.root->len, 3);
	assert_null(p.root->members[0].key);
	assert_null(p.root->members[1].key);
	assert_null(p.root->members[2].key);
	assert_int_equal(p.root->members[0].value.type, MJ_BOOL);
	assert_true(p.root->members[0].value.boolean);
	assert_int_equal(p.root->members[1].value.type, MJ_BOOL);
	assert_false(p.root->members[1].value.boolean);
	assert_int_equal(p.root->members[2].value.type, MJ_NULL);
	parsed_free(&p);
}

static void test_parse_numbers(void **state)
{
	static const struct {
		const char *text;
		bool is_int;
		int64_t integer;	/* when is_int */
		double number;
	} cases[] = {
		{ "0", true, 0, 0.0 },
		{ "-0", true, 0, -0.0 },
		{ "123", true, 123, 123.0 },
		{ "-45", true, -45, -45.0 },
		{ "1.5", false, 0, 1.5 },
		{ "1e3", false, 0, 1000.0 },
		{ "2E-2", false, 0, 2E-2 },
		{ "1E+2", false, 0, 100.0 },
		{ "-0.5", false, 0, -0.5 },
		{ "1.0", false, 0, 1.0 },
		{ "0e0", false, 0, 0.0 },
		{ "10", true, 10, 10.0 },
		{ "9223372036854775807", true, INT64_MAX, 9223372036854775807.0 },
		{ "9223372036854775808", false, 0, 9223372036854775808.0 },
		{ "-9223372036854775808", true, INT64_MIN, -9223372036854775808.0 },
		{ "-9223372036854775809", false, 0, -9223372036854775809.0 },
		{ "18446744073709551616", false, 0, 18446744073709551616.0 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct parsed p = parse_ok(cases[i].text);

		if (p.root->type != MJ_NUMBER)
			fail_msg("%s: type %d, not a number", cases[i].text, p.root->type);
		if (p.root->is_int != cases[i].is_int)
			fail_msg("%s: is_int %d, expected %d", cases[i].text, p.root->is_int, cases[i].is_int);
		if (cases[i].is_int && p.root->integer != cases[i].integer)
			fail_msg("%s: integer %lld, expected %lld", cases[i].text,
				 (long long)p.root->integer, (long long)cases[i].integer);
		if (p.root->number != cases[i].number)
			fail_msg("%s: number %.17g, expected %.17g", cases[i].text, p.root->number, cases[i].number);
		parsed_free(&p);
	}
}

/* Numbers longer than any fixed buffer: RFC 8259 lets a reader limit
 * precision, but the value must stay the nearest double (as strtod of the
 * whole text gives), not lose its magnitude or its exponent. */
static void test_parse_long_numbers(void **state)
{
	char text[256];
	struct {
		const char *what;
		char text[256];
	} cases[5];
	size_t n = 0;

	(void)state;
	/* 1 followed by 70 zeros = 1e70 */
	snprintf(cases[n].text, sizeof(cases[n].text), "1%070d", 0);
	cases[n++].what = "1 and 70 zeros";
	/* 1.000...000e5 with 70 fraction digits = 1e5 */
	snprintf(cases[n].text, sizeof(cases[n].text), "1.%070de5", 0);
	cases[n++].what = "1.(70 zeros)e5";
	/* 0.000...0001 with 70 zeros then 1 = 1e-71 */
	snprintf(cases[n].text, sizeof(cases[n].text), "0.%070d1", 0);
	cases[n++].what = "0.(70 zeros)1";
	/* a 100-digit integer */
	memset(text, '7', 100);
	text[100] = '\0';
	snprintf(cases[n].text, sizeof(cases[n].text), "-%s", text);
	cases[n++].what = "-(100 sevens)";
	/* 3.14159... with 80 digits */
	snprintf(cases[n].text, sizeof(cases[n].text),
		 "3.1415926535897932384626433832795028841971693993751058209749445923078164062862089");
	cases[n++].what = "pi, 80 digits";

	int bad = 0;
	for (size_t i = 0; i < n; i++) {
		struct parsed p = parse_ok(cases[i].text);
		double want = strtod(cases[i].text, NULL);

		assert_int_equal(p.root->type, MJ_NUMBER);
		assert_false(p.root->is_int);
		if (p.root->number != want) {
			print_error("%s (%zu chars): number %.17g, expected %.17g\n", cases[i].what,
				    strlen(cases[i].text), p.root->number, want);
			bad++;
		}
		parsed_free(&p);
	}
	if (bad)
		fail_msg("%d of %zu long numbers read wrongly", bad, n);
}

static void test_parse_number_in_containers(void **state)
{
	/* Numbers end at ',', ']', '}' and whitespace. */
	struct parsed p = parse_ok("{\"a\":[1,-2,3.25e1 ,4],\"b\":-7}");

	(void)state;
	const struct mj_value *a = mj_get(p.root, "a"), *b = mj_get(p.root, "b");
	assert_non_null(a);
	assert_int_equal(a->type, MJ_ARRAY);
	assert_int_equal(a->len, 4);
	assert_int_equal(a->members[0].value.integer, 1);
	assert_int_equal(a->members[1].value.integer, -2);
	assert_false(a->members[2].value.is_int);
	assert_true(a->members[2].value.number == 32.5);
	assert_int_equal(a->members[3].value.integer, 4);
	assert_non_null(b);
	assert_true(b->is_int);
	assert_int_equal(b->integer, -7);
	parsed_free(&p);
}

static void test_parse_string_escapes(void **state)
{
	(void)state;
	STRING("\"\"", "");
	STRING("\"plain\"", "plain");
	STRING("\"\\\"\"", "\"");
	STRING("\"\\\\\"", "\\");
	STRING("\"\\/\"", "/");
	STRING("\"/\"", "/");
	STRING("\"\\b\"", "\b");
	STRING("\"\\f\"", "\f");
	STRING("\"\\n\"", "\n");
	STRING("\"\\r\"", "\r");
	STRING("\"\\t\"", "\t");
	STRING("\"a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti\"", "a\"b\\c/d\be\ff\ng\rh\ti");
	STRING("\"\\u0041\\u0062\"", "Ab");
	STRING("\"\\u0000\"", "\0");
	STRING("\"\\u001f\\u007f\"", "\x1f\x7f");
	STRING("\"\\u00e9\"", "\xC3\xA9");
	STRING("\"\\u00E9\"", "\xC3\xA9");		/* upper-case hex */
	STRING("\"\\u0080\"", "\xC2\x80");
	STRING("\"\\u07ff\"", "\xDF\xBF");
	STRING("\"\\u0800\"", "\xE0\xA0\x80");
	STRING("\"\\u20ac\"", "\xE2\x82\xAC");
	STRING("\"\\uFFFF\"", "\xEF\xBF\xBF");
	STRING("\"caf\\u00e9 \\u20AC5\"", "caf\xC3\xA9 \xE2\x82\xAC" "5");
}

static void test_parse_string_surrogates(void **state)
{
	(void)state;
	STRING("\"\\ud83d\\ude00\"", "\xF0\x9F\x98\x80");
	STRING("\"\\uD83D\\uDE00\"", "\xF0\x9F\x98\x80");
	STRING("\"\\ud800\\udc00\"", "\xF0\x90\x80\x80");	/* U+10000 */
	STRING("\"\\udbff\\udfff\"", "\xF4\x8F\xBF\xBF");	/* U+10FFFF */
	STRING("\"x\\ud83d\\ude00y\"", "x\xF0\x9F\x98\x80y");
	/* lone surrogates become U+FFFD */
	STRING("\"\\ud800\"", FFFD);
	STRING("\"\\udc00\"", FFFD);
	STRING("\"\\udfff\"", FFFD);
	STRING("\"\\ud800x\"", FFFD "x");
	STRING("\"a\\udc00b\"", "a" FFFD "b");
	STRING("\"\\ud83d\\u0041\"", FFFD "A");		/* high, then not a low */
	STRING("\"\\ud83d\\n\"", FFFD "\n");
	STRING("\"\\ud800\\ud800\"", FFFD FFFD);		/* two highs */
	STRING("\"\\udc00\\ud800\"", FFFD FFFD);		/* low then high: not a pair */
	STRING("\"\\ud800\\ud83d\\ude00\"", FFFD "\xF0\x9F\x98\x80");
}

static void test_parse_string_raw_utf8(void **state)
{
	(void)state;
	STRING("\"\xC3\xA9\"", "\xC3\xA9");
	STRING("\"\xE2\x82\xAC\"", "\xE2\x82\xAC");
	STRING("\"\xF0\x9F\x98\x80\"", "\xF0\x9F\x98\x80");
	STRING("\"caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC\"", "caf\xC3\xA9 \xE6\x97\xA5\xE6\x9C\xAC");
	STRING("\"\x7f\"", "\x7f");	/* DEL is not a control character for JSON */
}

static void test_parse_keys_are_decoded(void **state)
{
	struct parsed p = parse_ok("{\"a\\u0062\":1,\"\\u00e9\":2,\"q\\\"\":3,\"n\\u0000m\":4,\"\":5}");

	(void)state;
	assert_int_equal(p.root->len, 5);
	assert_string_equal(p.root->members[0].key, "ab");
	assert_int_equal(p.root->members[0].key_len, 2);
	assert_string_equal(p.root->members[1].key, "\xC3\xA9");
	assert_int_equal(p.root->members[1].key_len, 2);
	assert_string_equal(p.root->members[2].key, "q\"");
	assert_int_equal(p.root->members[3].key_len, 3);
	assert_memory_equal(p.root->members[3].key, "n\0m", 4);
	assert_string_equal(p.root->members[4].key, "");
	assert_int_equal(p.root->members[4].key_len, 0);
	assert_int_equal(mj_get(p.root, "ab")->integer, 1);
	assert_int_equal(mj_get(p.root, "\xC3\xA9")->integer, 2);
	assert_int_equal(mj_get(p.root, "q\"")->integer, 3);
	assert_int_equal(mj_get(p.root, "")->integer, 5);
	assert_null(mj_get(p.root, "n"));	/* "n\0m" is not "n" */
	parsed_free(&p);
}

/* n nested arrays or objects, optionally unclosed. */
static char *nest(size_t n, bool object, bool closed, size_t *len)
{
	const char *open = object ? "{\"k\":" : "[";
	size_t olen = strlen(open);
	size_t cap = n * olen + (object ? 2 : 0) + n + 1;
	char *s = malloc(cap), *q = s;

	assert_non_null(s);
	for (size_t i = 0; i < n; i++) {
		memcpy(q, open, olen);
		q += olen;
	}
	if (object) {	/* innermost value */
		*q++ = '{';
		*q++ = '}';
	}
	if (closed)
		for (size_t i = 0; i < n; i++)
			*q++ = object ? '}' : ']';
	*len = (size_t)(q - s);
	return s;
}

static void test_parse_nesting_limit(void **state)
{
	size_t len;
	char *s;
	struct parsed p;

	(void)state;
	/* arrays: MJ_MAX_DEPTH levels accepted */
	s = nest(MJ_MAX_DEPTH, false, true, &len);
	p = parse_ok_n(s, len);
	{
		const struct mj_value *v = p.root;
		for (int i = 1; i < MJ_MAX_DEPTH; i++) {
			assert_int_equal(v->type, MJ_ARRAY);
			assert_int_equal(v->len, 1);
			v = &v->members[0].value;
		}
		assert_int_equal(v->type, MJ_ARRAY);
		assert_int_equal(v->len, 0);
	}
	parsed_free(&p);
	free(s);

	/* ... with a scalar at the bottom: still MJ_MAX_DEPTH levels */
	{
		char buf[3 * MJ_MAX_DEPTH];
		memset(buf, '[', MJ_MAX_DEPTH);
		buf[MJ_MAX_DEPTH] = '1';
		memset(buf + MJ_MAX_DEPTH + 1, ']', MJ_MAX_DEPTH);
		p = parse_ok_n(buf, 2 * MJ_MAX_DEPTH + 1);
		parsed_free(&p);
	}

	/* MJ_MAX_DEPTH + 1 arrays rejected */
	s = nest(MJ_MAX_DEPTH + 1, false, true, &len);
	check_parse_error_n(s, len);
	free(s);

	/* objects: {"k":{"k":...{}}} -- the innermost {} is a level too */
	s = nest(MJ_MAX_DEPTH - 1, true, true, &len);
	p = parse_ok_n(s, len);
	{
		const struct mj_value *v = p.root;
		for (int i = 1; i < MJ_MAX_DEPTH; i++) {
			assert_int_equal(v->type, MJ_OBJECT);
			v = mj_get(v, "k");
			assert_non_null(v);
		}
		assert_int_equal(v->type, MJ_OBJECT);
		assert_int_equal(v->len, 0);
	}
	parsed_free(&p);
	free(s);

	s = nest(MJ_MAX_DEPTH, true, true, &len);	/* MJ_MAX_DEPTH + 1 objects */
	check_parse_error_n(s, len);
	free(s);

	/* mixed: [{"k":[{"k":... */
	{
		char buf[16 * (MJ_MAX_DEPTH + 2)], *q;
		for (int levels = MJ_MAX_DEPTH; levels <= MJ_MAX_DEPTH + 1; levels++) {
			q = buf;
			for (int i = 0; i < levels; i++)
				q += sprintf(q, (i % 2) ? "{\"k\":" : "[");
			q += sprintf(q, "0");
			for (int i = levels - 1; i >= 0; i--)
				*q++ = (i % 2) ? '}' : ']';
			if (levels == MJ_MAX_DEPTH) {
				p = parse_ok_n(buf, (size_t)(q - buf));
				parsed_free(&p);
			} else {
				check_parse_error_n(buf, (size_t)(q - buf));
			}
		}
	}

	/* Width is not depth: many siblings at depth 2 are fine. */
	{
		size_t n = 10000;
		char *w = malloc(3 * n + 2), *q = w;
		assert_non_null(w);
		*q++ = '[';
		for (size_t i = 0; i < n; i++) {
			if (i)
				*q++ = ',';
			*q++ = '[';
			*q++ = ']';
		}
		*q++ = ']';
		p = parse_ok_n(w, (size_t)(q - w));
		assert_int_equal(p.root->len, n);
		parsed_free(&p);
		free(w);
	}
}

static void test_parse_very_deep_is_rejected(void **state)
{
	size_t n = 100000, len;
	char *s;

	(void)state;
	s = malloc(n);
	assert_non_null(s);
	memset(s, '[', n);
	check_parse_error_n(s, n);
	free(s);

	s = nest(n, false, true, &len);		/* balanced */
	check_parse_error_n(s, len);
	free(s);

	s = nest(n, true, false, &len);		/* {"k":{"k":... */
	check_parse_error_n(s, len);
	free(s);
}

static void test_parse_repeated_key_last_wins(void **state)
{
	struct parsed p;

	(void)state;
	p = parse_ok("{\"a\":1,\"b\":2,\"a\":3}");
	assert_int_equal(mj_get(p.root, "a")->integer, 3);
	assert_int_equal(mj_get(p.root, "b")->integer, 2);
	parsed_free(&p);

	p = parse_ok("{\"a\":\"first\",\"a\":\"second\",\"a\":\"third\"}");
	assert_string_equal(mj_get_str(p.root, "a"), "third");
	parsed_free(&p);

	/* The last one counts even when its type differs. */
	p = parse_ok("{\"a\":\"x\",\"a\":1}");
	assert_int_equal(mj_get(p.root, "a")->type, MJ_NUMBER);
	assert_null(mj_get_str(p.root, "a"));
	parsed_free(&p);

	p = parse_ok("{\"a\":1,\"a\":\"y\"}");
	assert_string_equal(mj_get_str(p.root, "a"), "y");
	parsed_free(&p);

	/* A key spelt with an escape is the same key. */
	p = parse_ok("{\"ab\":1,\"a\\u0062\":2}");
	assert_int_equal(mj_get(p.root, "ab")->integer, 2);
	parsed_free(&p);
}

static void test_parse_empty_containers_and_whitespace(void **state)
{
	static const struct {
		const char *text;
		enum mj_type type;
	} cases[] = {
		{ "{}", MJ_OBJECT },
		{ "[]", MJ_ARRAY },
		{ "{ }", MJ_OBJECT },
		{ "[ ]", MJ_ARRAY },
		{ "{\t\n\r }", MJ_OBJECT },
		{ "[\t\n\r ]", MJ_ARRAY },
		{ " {}", MJ_OBJECT },
		{ "{} ", MJ_OBJECT },
		{ " \t\n\r{}\r\n\t ", MJ_OBJECT },
		{ "\n[]\n", MJ_ARRAY },
		{ "\t1\t", MJ_NUMBER },
		{ "\r\"s\"\r", MJ_STRING },
		{ " true ", MJ_BOOL },
		{ "\nnull\n", MJ_NULL },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct parsed p = parse_ok(cases[i].text);
		if (p.root->type != cases[i].type)
			fail_msg("case %zu: type %d, expected %d", i, p.root->type, cases[i].type);
		if (cases[i].type == MJ_OBJECT || cases[i].type == MJ_ARRAY)
			assert_int_equal(p.root->len, 0);
		parsed_free(&p);
	}

	/* whitespace everywhere a token may be separated */
	{
		struct parsed p = parse_ok(" { \"a\" \t: \n [ 1 \r, \"x\" ] , \"b\" : { } } ");
		const struct mj_value *a = mj_get(p.root, "a");
		assert_int_equal(p.root->len, 2);
		assert_non_null(a);
		assert_int_equal(a->len, 2);
		assert_int_equal(a->members[0].value.integer, 1);
		assert_str_value(&a->members[1].value, "x", 1);
		assert_int_equal(mj_get(p.root, "b")->type, MJ_OBJECT);
		assert_int_equal(mj_get(p.root, "b")->len, 0);
		parsed_free(&p);
	}
}

static void test_parse_errors(void **state)
{
	(void)state;
	PARSE_ERROR("");
	PARSE_ERROR(" ");
	PARSE_ERROR(" \t\n\r ");
	PARSE_ERROR("{");
	PARSE_ERROR("[");
	PARSE_ERROR("}");
	PARSE_ERROR("]");
	PARSE_ERROR("[1,2");
	PARSE_ERROR("{\"a\":1");
	PARSE_ERROR("{\"a\":");
	PARSE_ERROR("{\"a\"");
	PARSE_ERROR("[1}");
	PARSE_ERROR("{\"a\":1]");
	PARSE_ERROR("[1,]");
	PARSE_ERROR("{\"a\":1,}");
	PARSE_ERROR("[,]");
	PARSE_ERROR("[,1]");
	PARSE_ERROR("[1,,2]");
	PARSE_ERROR("{,}");
	PARSE_ERROR("{\"a\":}");
	PARSE_ERROR("{\"a\"}");
	PARSE_ERROR("{a:1}");
	PARSE_ERROR("{1:2}");
	PARSE_ERROR("{null:2}");
	PARSE_ERROR("{'a':1}");
	PARSE_ERROR("'x'");
	PARSE_ERROR("01");
	PARSE_ERROR("-01");
	PARSE_ERROR("00");
	PARSE_ERROR("[01]");
	PARSE_ERROR("+1");
	PARSE_ERROR(".5");
	PARSE_ERROR("-.5");
	PARSE_ERROR("1.");
	PARSE_ERROR("1.e3");
	PARSE_ERROR("1e");
	PARSE_ERROR("1e+");
	PARSE_ERROR("1E-");
	PARSE_ERROR("-");
	PARSE_ERROR("--1");
	PARSE_ERROR("0x10");
	PARSE_ERROR("NaN");
	PARSE_ERROR("-NaN");
	PARSE_ERROR("Infinity");
	PARSE_ERROR("-Infinity");
	PARSE_ERROR("tru");
	PARSE_ERROR("t");
	PARSE_ERROR("nul");
	PARSE_ERROR("fals");
	PARSE_ERROR("nulll");
	PARSE_ERROR("truex");
	PARSE_ERROR("TRUE");
	PARSE_ERROR("None");
	PARSE_ERROR("\"abc");
	PARSE_ERROR("\"");
	PARSE_ERROR("\"abc\\\"");		/* the closing quote is escaped */
	PARSE_ERROR("\"a\nb\"");		/* raw newline in a string */
	PARSE_ERROR("\"a\tb\"");		/* raw tab */
	PARSE_ERROR("\"a\rb\"");
	PARSE_ERROR("\"a\x01" "b\"");
	PARSE_ERROR("\"a\x1f" "b\"");
	PARSE_ERROR("\"a\0b\"");		/* raw NUL in a string */
	PARSE_ERROR("{\"a\nb\":1}");		/* raw control in a key */
	PARSE_ERROR("\"\\x\"");
	PARSE_ERROR("\"\\a\"");
	PARSE_ERROR("\"\\'\"");
	PARSE_ERROR("\"\\0\"");
	PARSE_ERROR("\"\\U0041\"");
	PARSE_ERROR("\"\\\"");
	PARSE_ERROR("\"\\u\"");
	PARSE_ERROR("\"\\u12\"");
	PARSE_ERROR("\"\\u123\"");
	PARSE_ERROR("\"\\u12G4\"");
	PARSE_ERROR("\"\\u-123\"");
	PARSE_ERROR("\"\\u 123\"");
	PARSE_ERROR("\"\\ud83d\\u12\"");	/* bad escape after a high surrogate */
	PARSE_ERROR("\"\\ud83d\\x\"");
	PARSE_ERROR("\"\\ud83d\\");		/* input ends inside the escape */
	PARSE_ERROR("\"\\u00");
	PARSE_ERROR("{} x");
	PARSE_ERROR("{}x");
	PARSE_ERROR("{}}");
	PARSE_ERROR("[]]");
	PARSE_ERROR("1 2");
	PARSE_ERROR("{} {}");
	PARSE_ERROR("\"a\" \"b\"");
	PARSE_ERROR("1,2");
	PARSE_ERROR("[1,\0 2]");		/* NUL outside a string */
	PARSE_ERROR("{\"a\":\0 1}");
	PARSE_ERROR("\0");
	PARSE_ERROR("1\0");
	PARSE_ERROR("{}\0");
	PARSE_ERROR("{\"a\" 1}");
	PARSE_ERROR("{\"a\"=1}");
	PARSE_ERROR("{\"a\"::1}");
	PARSE_ERROR("{\"a\":1 \"b\":2}");
	PARSE_ERROR("[1 2]");
	PARSE_ERROR("[1;2]");
	/* only space, tab, LF and CR are whitespace */
	PARSE_ERROR("\v1");
	PARSE_ERROR("\f1");
	PARSE_ERROR("1\f");
	PARSE_ERROR("[1,\v2]");
	PARSE_ERROR("\xC2\xA0" "1");		/* NBSP */
	PARSE_ERROR("\xEF\xBB\xBF{}");		/* a BOM is not whitespace */
	/* comments are not JSON */
	PARSE_ERROR("[1]//c");
	PARSE_ERROR("/*c*/[1]");
}

static void test_parse_respects_len(void **state)
{
	static const char text[] = "[1,2]xyz";
	struct parsed p;

	(void)state;
	p = parse_ok_n(text, 5);
	assert_int_equal(p.root->type, MJ_ARRAY);
	assert_int_equal(p.root->len, 2);
	assert_int_equal(p.root->members[0].value.integer, 1);
	assert_int_equal(p.root->members[1].value.integer, 2);
	parsed_free(&p);

	/* the whole buffer has trailing garbage */
	check_parse_error_n(text, sizeof(text) - 1);
	/* a prefix that stops inside the value */
	check_parse_error_n(text, 4);
	check_parse_error_n(text, 0);
	/* a number cut short: "12" of "123" */
	p = parse_ok_n("123", 2);
	assert_int_equal(p.root->integer, 12);
	parsed_free(&p);
	/* a string cut before its closing quote */
	check_parse_error_n("\"abc\"", 4);
	/* a literal cut short */
	check_parse_error_n("true", 3);
}

static void test_parse_documents_are_independent(void **state)
{
	/* Two documents alive at once; freeing one leaves the other intact,
	 * and nothing of a document depends on the input staying alive. */
	struct parsed a = parse_ok("{\"k\":\"one\"}");
	struct parsed b = parse_ok("{\"k\":\"two\"}");
	char err[64];
	char *text = strdup("{\"k\":\"three\",\"n\":3}");
	struct mj_doc *c;

	(void)state;
	assert_string_equal(mj_get_str(a.root, "k"), "one");
	assert_string_equal(mj_get_str(b.root, "k"), "two");
	parsed_free(&a);
	assert_string_equal(mj_get_str(b.root, "k"), "two");
	parsed_free(&b);

	assert_non_null(text);
	c = mj_parse(text, strlen(text), err, sizeof(err));
	assert_non_null(c);
	memset(text, 'Z', strlen(text));
	free(text);
	assert_string_equal(mj_get_str(mj_root(c), "k"), "three");
	assert_int_equal(mj_get(mj_root(c), "n")->integer, 3);
	mj_free(c);
}

static void test_get_on_non_objects(void **state)
{
	struct parsed p = parse_ok("{\"n\":5,\"s\":\"str\",\"a\":[\"x\",{\"y\":1}],\"t\":true,\"z\":null,\"o\":{\"s\":2}}");
	const struct mj_value *n, *s, *a, *t, *z, *o;

	(void)state;
	n = mj_get(p.root, "n");
	s = mj_get(p.root, "s");
	a = mj_get(p.root, "a");
	t = mj_get(p.root, "t");
	z = mj_get(p.root, "z");
	o = mj_get(p.root, "o");
	assert_non_null(n);
	assert_non_null(s);
	assert_non_null(a);
	assert_non_null(t);
	assert_non_null(z);
	assert_non_null(o);

	/* mj_get on a non-object */
	assert_null(mj_get(n, "n"));
	assert_null(mj_get(s, "s"));
	assert_null(mj_get(a, "y"));
	assert_null(mj_get(a, "x"));
	assert_null(mj_get(t, "t"));
	assert_null(mj_get(z, "z"));
	assert_null(mj_get_str(a, "x"));
	assert_null(mj_get_str(s, "s"));

	/* mj_get_str on members that are not strings */
	assert_null(mj_get_str(p.root, "n"));
	assert_null(mj_get_str(p.root, "a"));
	assert_null(mj_get_str(p.root, "t"));
	assert_null(mj_get_str(p.root, "z"));
	assert_null(mj_get_str(p.root, "o"));
	assert_null(mj_get_str(o, "s"));
	assert_string_equal(mj_get_str(p.root, "s"), "str");
	parsed_free(&p);

	/* a root that is not an object */
	p = parse_ok("[\"a\",1]");
	assert_null(mj_get(p.root, "a"));
	assert_null(mj_get(p.root, "0"));
	assert_null(mj_get_str(p.root, "a"));
	parsed_free(&p);

	p = parse_ok("\"a\"");
	assert_null(mj_get(p.root, "a"));
	assert_null(mj_get_str(p.root, "a"));
	parsed_free(&p);
}

/* ------------------------------------------------------------ writer tests */

static void test_write_object_all_types(void **state)
{
	struct mj_writer w;

	(void)state;
	mjw_init(&w);
	mjw_object_begin(&w);
	mjw_key(&w, "a");
	mjw_cstring(&w, "x");
	mjw_key(&w, "n");
	mjw_int(&w, -5);
	mjw_key(&w, "t");
	mjw_bool(&w, true);
	mjw_key(&w, "f");
	mjw_bool(&w, false);
	mjw_key(&w, "z");
	mjw_null(&w);
	mjw_key(&w, "o");
	mjw_object_begin(&w);
	mjw_key(&w, "k");
	mjw_array_begin(&w);
	mjw_int(&w, 1);
	mjw_int(&w, 2);
	mjw_cstring(&w, "s");
	mjw_array_end(&w);
	mjw_object_end(&w);
	mjw_key(&w, "d");
	mjw_number_text(&w, "1.250");
	mjw_key(&w, "min");
	mjw_int(&w, INT64_MIN);
	mjw_key(&w, "max");
	mjw_int(&w, INT64_MAX);
	mjw_key(&w, "zero");
	mjw_int(&w, 0);
	mjw_key(&w, "s2");
	mjw_string(&w, "hello", 3);
	mjw_object_end(&w);
	check_finish(&w,
		     "{\"a\":\"x\",\"n\":-5,\"t\":true,\"f\":false,\"z\":null,\"o\":{\"k\":[1,2,\"s\"]},"
		     "\"d\":1.250,\"min\":-9223372036854775808,\"max\":9223372036854775807,"
		     "\"zero\":0,\"s2\":\"hel\"}");
	mjw_free(&w);
}

static void test_write_top_level_array(void **state)
{
	struct mj_writer w;

	(void)state;
	mjw_init(&w);
	mjw_array_begin(&w);
	mjw_object_begin(&w);
	mjw_key(&w, "a");
	mjw_int(&w, 1);
	mjw_object_end(&w);
	mjw_object_begin(&w);
	mjw_object_end(&w);
	mjw_null(&w);
	mjw_bool(&w, false);
	mjw_number_text(&w, "-0.5e3");
	mjw_array_end(&w);
	check_finish(&w, "[{\"a\":1},{},null,false,-0.5e3]");
	mjw_free(&w);
}

static void test_write_escaping(void **state)
{
	static const struct {
		const char *in;
		size_t n;
		const char *want;
	} cases[] = {
#define C(in, want) { in, sizeof(in) - 1, want }
		C("", "\"\""),
		C("\"", "\"\\\"\""),
		C("\\", "\"\\\\\""),
		C("a\"b\\c", "\"a\\\"b\\\\c\""),
		C("\n", "\"\\n\""),
		C("\t", "\"\\t\""),
		C("\x01", "\"\\u0001\""),
		C("\x1f", "\"\\u001f\""),
		C("/", "\"/\""),
		C("a/b", "\"a/b\""),
		C("\x7f", "\"\x7f\""),
		C("caf\xC3\xA9", "\"caf\xC3\xA9\""),
		C("\xE2\x82\xAC\xF0\x9F\x98\x80", "\"\xE2\x82\xAC\xF0\x9F\x98\x80\""),
		C("a\0b", "\"a\\u0000b\""),
		C("\0", "\"\\u0000\""),
		C("\0\0", "\"\\u0000\\u0000\""),
#undef C
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct mj_writer w;
		mjw_init(&w);
		mjw_array_begin(&w);
		mjw_string(&w, cases[i].in, cases[i].n);
		mjw_array_end(&w);
		{
			char want[64];
			snprintf(want, sizeof(want), "[%s]", cases[i].want);
			check_finish(&w, want);
		}
		mjw_free(&w);
	}

	/* mjw_cstring escapes the same way */
	{
		struct mj_writer w;
		mjw_init(&w);
		mjw_array_begin(&w);
		mjw_cstring(&w, "q\"b\\s/n\nt\t\x01");
		mjw_array_end(&w);
		check_finish(&w, "[\"q\\\"b\\\\s/n\\nt\\t\\u0001\"]");
		mjw_free(&w);
	}

	/* keys are escaped too */
	{
		struct mj_writer w;
		mjw_init(&w);
		mjw_object_begin(&w);
		mjw_key(&w, "k\"\\\n\x01/\xC3\xA9");
		mjw_int(&w, 1);
		mjw_object_end(&w);
		check_finish(&w, "{\"k\\\"\\\\\\n\\u0001/\xC3\xA9\":1}");
		mjw_free(&w);
	}
}

static void test_write_all_control_bytes_round_trip(void **state)
{
	/* Every byte below 0x20 comes out escaped (in whatever form) and
	 * reads back as itself. */
	char in[0x20 + 4];
	struct mj_writer w;
	size_t len;
	char *out;

	(void)state;
	for (int i = 0; i < 0x20; i++)
		in[i] = (char)i;
	memcpy(in + 0x20, "\"\\/\x7f", 4);
	mjw_init(&w);
	mjw_array_begin(&w);
	mjw_string(&w, in, sizeof(in));
	mjw_array_end(&w);
	out = mjw_finish(&w, &len);
	assert_non_null(out);
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)out[i] < 0x20)
			fail_msg("raw byte 0x%02x at %zu in writer output", (unsigned char)out[i], i);
	{
		struct parsed p = parse_ok_n(out, len);
		assert_int_equal(p.root->len, 1);
		assert_str_value(&p.root->members[0].value, in, sizeof(in));
		parsed_free(&p);
	}
	free(out);
	mjw_free(&w);
}

static void test_write_cstring_null(void **state)
{
	struct mj_writer w;

	(void)state;
	mjw_init(&w);
	mjw_object_begin(&w);
	mjw_key(&w, "a");
	mjw_cstring(&w, NULL);
	mjw_key(&w, "b");
	mjw_cstring(&w, "");
	mjw_object_end(&w);
	check_finish(&w, "{\"a\":null,\"b\":\"\"}");
	mjw_free(&w);
}

static void test_write_empty_containers(void **state)
{
	struct mj_writer w;

	(void)state;
	mjw_init(&w);
	mjw_object_begin(&w);
	mjw_object_end(&w);
	check_finish(&w, "{}");
	mjw_free(&w);

	mjw_init(&w);
	mjw_array_begin(&w);
	mjw_array_end(&w);
	check_finish(&w, "[]");
	mjw_free(&w);

	mjw_init(&w);
	mjw_object_begin(&w);
	mjw_key(&w, "a");
	mjw_object_begin(&w);
	mjw_object_end(&w);
	mjw_key(&w, "b");
	mjw_array_begin(&w);
	mjw_array_end(&w);
	mjw_key(&w, "c");
	mjw_array_begin(&w);
	mjw_array_begin(&w);
	mjw_array_end(&w);
	mjw_object_begin(&w);
	mjw_object_end(&w);
	mjw_array_begin(&w);
	mjw_array_begin(&w);
	mjw_array_end(&w);
	mjw_array_end(&w);
	mjw_array_end(&w);
	mjw_key(&w, "d");
	mjw_int(&w, 1);
	mjw_object_end(&w);
	check_finish(&w, "{\"a\":{},\"b\":[],\"c\":[[],{},[[]]],\"d\":1}");
	mjw_free(&w);
}

static void test_write_max_depth(void **state)
{
	/* The writer keeps state for MJ_MAX_DEPTH levels: a document as deep as
	 * the reader accepts can be written: [0,[1,[2,...[31]...]]] */
	struct mj_writer w;
	char want[8 * MJ_MAX_DEPTH], *q = want;

	(void)state;
	mjw_init(&w);
	for (int i = 0; i < MJ_MAX_DEPTH; i++) {
		mjw_array_begin(&w);
		mjw_int(&w, i);
		q += sprintf(q, i < MJ_MAX_DEPTH - 1 ? "[%d," : "[%d", i);
	}
	for (int i = 0; i < MJ_MAX_DEPTH; i++) {
		mjw_array_end(&w);
		*q++ = ']';
	}
	*q = '\0';
	check_finish(&w, want);
	mjw_free(&w);
}

static void test_write_beyond_max_depth(void **state)
{
	/* The contract does not say what one level more than the writer keeps
	 * state for gives; either a failure (NULL) or the exact text is fine,
	 * but the writer must not be corrupted and must be usable afterwards. */
	struct mj_writer w;
	char want[8 * MJ_MAX_DEPTH + 16], *q = want;
	size_t len;
	char *out;

	(void)state;
	mjw_init(&w);
	for (int i = 0; i <= MJ_MAX_DEPTH; i++) {
		mjw_array_begin(&w);
		mjw_int(&w, i);
		q += sprintf(q, i < MJ_MAX_DEPTH ? "[%d," : "[%d", i);
	}
	for (int i = 0; i <= MJ_MAX_DEPTH; i++) {
		mjw_array_end(&w);
		*q++ = ']';
	}
	*q = '\0';
	out = mjw_finish(&w, &len);
	if (out != NULL) {
		assert_int_equal(len, strlen(want));
		assert_string_equal(out, want);
		free(out);
	}
	mjw_array_begin(&w);
	mjw_int(&w, 7);
	mjw_array_end(&w);
	check_finish(&w, "[7]");
	mjw_free(&w);
}

static void test_write_unbalanced(void **state)
{
	struct mj_writer w;
	size_t len = 12345;

	(void)state;
	mjw_init(&w);
	mjw_object_begin(&w);
	mjw_key(&w, "a");
	mjw_int(&w, 1);
	assert_null(mjw_finish(&w, &len));
	mjw_free(&w);

	mjw_init(&w);
	mjw_array_begin(&w);
	mjw_array_begin(&w);
	mjw_array_end(&w);
	assert_null(mjw_finish(&w, &len));
	mjw_free(&w);

	mjw_init(&w);
	mjw_object_begin(&w);
	mjw_key(&w, "a");
	mjw_array_begin(&w);
	mjw_object_end(&w);
	assert_null(mjw_finish(&w, &len));
	mjw_free(&w);

	/* one end too many */
	mjw_init(&w);
	mjw_array_begin(&w);
	mjw_array_end(&w);
	mjw_array_end(&w);
	assert_null(mjw_finish(&w, &len));
	mjw_free(&w);

	mjw_init(&w);
	mjw_object_end(&w);
	assert_null(mjw_finish(&w, &len));
	mjw_free(&w);
}

/* A deterministic string of `n` bytes with escapes, controls, UTF-8 and NULs. */
static void fill_value(char *s, size_t n, unsigned seed)
{
	static const char alphabet[] = "abcXYZ019 \"\\/\n\t\r\b\f\x01\x1f\x7f";
	size_t alen = sizeof(alphabet) - 1;
	size_t i = 0;

	while (i < n) {
		unsigned r = (seed = seed * 1103515245u + 12345u) >> 16;
		if (r % 17 == 0 && i + 2 <= n) {		/* é */
			s[i++] = '\xC3';
			s[i++] = '\xA9';
		} else if (r % 29 == 0 && i + 4 <= n) {	/* 😀 */
			memcpy(s + i, "\xF0\x9F\x98\x80", 4);
			i += 4;
		} else if (r % 31 == 0) {
			s[i++] = '\0';
		} else {
			s[i++] = alphabet[r % alen];
		}
	}
}

static void test_write_parse_round_trip_large(void **state)
{
	enum { NKEYS = 1000, VLEN = 1049 };	/* ~1 MiB of string values */
	const size_t big_len = 1u << 20;
	struct mj_writer w;
	char *vals = malloc((size_t)NKEYS * VLEN), *big = malloc(big_len);
	char key[32];
	size_t len;
	char *out;

	(void)state;
	assert_non_null(vals);
	assert_non_null(big);
	for (int i = 0; i < NKEYS; i++)
		fill_value(vals + (size_t)i * VLEN, VLEN, (unsigned)i + 1);
	fill_value(big, big_len, 4242);

	mjw_init(&w);
	mjw_object_begin(&w);
	for (int i = 0; i < NKEYS; i++) {
		snprintf(key, sizeof(key), "key%04d", i);
		mjw_key(&w, key);
		switch (i % 4) {
		case 0:
		case 1:
			mjw_string(&w, vals + (size_t)i * VLEN, VLEN);
			break;
		case 2:
			mjw_int(&w, (int64_t)i * -1000003);
			break;
		default:
			mjw_array_begin(&w);
			mjw_string(&w, vals + (size_t)i * VLEN, VLEN);
			mjw_bool(&w, i & 1);
			mjw_null(&w);
			mjw_array_end(&w);
			break;
		}
	}
	mjw_key(&w, "big");
	mjw_string(&w, big, big_len);
	mjw_object_end(&w);
	out = mjw_finish(&w, &len);
	assert_non_null(out);
	assert_int_equal(strlen(out), len);	/* every NUL was escaped */
	assert_true(len > big_len + (size_t)NKEYS * VLEN / 2);

	{
		struct parsed p = parse_ok_n(out, len);
		const struct mj_value *v;

		assert_int_equal(p.root->type, MJ_OBJECT);
		assert_int_equal(p.root->len, NKEYS + 1);
		for (int i = 0; i < NKEYS; i++) {
			const struct mj_member *m = &p.root->members[i];
			const char *want = vals + (size_t)i * VLEN;

			snprintf(key, sizeof(key), "key%04d", i);
			assert_string_equal(m->key, key);
			assert_int_equal(m->key_len, strlen(key));
			v = mj_get(p.root, key);
			assert_ptr_equal(v, &m->value);
			switch (i % 4) {
			case 0:
			case 1:
				assert_str_value(v, want, VLEN);
				break;
			case 2:
				assert_int_equal(v->type, MJ_NUMBER);
				assert_true(v->is_int);
				assert_int_equal(v->integer, (int64_t)i * -1000003);
				break;
			default:
				assert_int_equal(v->type, MJ_ARRAY);
				assert_int_equal(v->len, 3);
				assert_str_value(&v->members[0].value, want, VLEN);
				assert_int_equal(v->members[1].value.type, MJ_BOOL);
				assert_int_equal(v->members[1].value.boolean, (bool)(i & 1));
				assert_int_equal(v->members[2].value.type, MJ_NULL);
				break;
			}
		}
		v = mj_get(p.root, "big");
		assert_str_value(v, big, big_len);
		parsed_free(&p);
	}
	free(out);
	mjw_free(&w);
	free(vals);
	free(big);
}

static void test_write_reuse_after_finish(void **state)
{
	struct mj_writer w;

	(void)state;
	mjw_init(&w);
	mjw_object_begin(&w);
	mjw_key(&w, "first");
	mjw_int(&w, 1);
	mjw_object_end(&w);
	check_finish(&w, "{\"first\":1}");

	/* emptied: the next document starts afresh (no leading comma) */
	mjw_object_begin(&w);
	mjw_key(&w, "second");
	mjw_cstring(&w, "2");
	mjw_object_end(&w);
	check_finish(&w, "{\"second\":\"2\"}");

	mjw_array_begin(&w);
	mjw_array_end(&w);
	check_finish(&w, "[]");
	mjw_free(&w);

	/* mjw_free right after mjw_init, and after a finished document */
	mjw_init(&w);
	mjw_free(&w);

	/* mjw_free with a document left half-written frees its buffer */
	mjw_init(&w);
	mjw_object_begin(&w);
	mjw_key(&w, "k");
	mjw_string(&w, "abcdefghijklmnopqrstuvwxyz", 26);
	mjw_free(&w);
}

static void test_write_two_writers_independent(void **state)
{
	/* Two writers in use at the same time do not interfere. */
	struct mj_writer a, b;

	(void)state;
	mjw_init(&a);
	mjw_init(&b);
	mjw_array_begin(&a);
	mjw_object_begin(&b);
	mjw_int(&a, 1);
	mjw_key(&b, "x");
	mjw_int(&a, 2);
	mjw_int(&b, 3);
	mjw_array_end(&a);
	mjw_object_end(&b);
	check_finish(&a, "[1,2]");
	check_finish(&b, "{\"x\":3}");
	mjw_free(&a);
	mjw_free(&b);
}

/* "[0,0,...]" with n values in all (the array counts as one). */
static char *array_of_values(size_t n, size_t *len)
{
	char *s = malloc(2 * n + 2), *q = s;
	assert_non_null(s);
	*q++ = '[';
	for (size_t i = 1; i < n; i++) {
		*q++ = '0';
		*q++ = i + 1 < n ? ',' : ']';
	}
	if (n == 1)
		*q++ = ']';
	*len = (size_t)(q - s);
	return s;
}

/* A document is capped at MJ_MAX_VALUES values: the helper's requests have
 * a few dozen, and each costs memory the setuid helper must bound. */
static void test_parse_value_limit(void **state)
{
	size_t len;
	char err[256];
	char *copy, *s;
	struct parsed p;

	(void)state;
	s = array_of_values(MJ_MAX_VALUES, &len);
	p = parse_ok_n(s, len);
	assert_int_equal(p.root->len, MJ_MAX_VALUES - 1);
	parsed_free(&p);
	free(s);

	s = array_of_values(MJ_MAX_VALUES + 1, &len);
	errno = 0;
	assert_null(parse_n(s, len, err, sizeof(err), &copy));
	assert_int_equal(errno, E2BIG);
	assert_string_equal(err, "at byte 199999: more than 100000 values");
	free(copy);
	free(s);

	/* members of objects count too, and a bad document is EINVAL */
	errno = 0;
	assert_null(parse_n("{\"a\":}", 6, err, sizeof(err), &copy));
	assert_int_equal(errno, EINVAL);
	free(copy);
}

/* Members of open containers share one stack: a big array read inside
 * another container moves that stack, and the outer members survive. */
static void test_parse_members_survive_a_growing_stack(void **state)
{
	enum { INNER = 5000 };
	char *s = malloc(INNER * 8 + 200), *q = s;
	struct parsed p;

	(void)state;
	assert_non_null(s);
	q += sprintf(q, "{\"a\":\"first\",\"b\":[1,{\"c\":[");
	for (int i = 0; i < INNER; i++)
		q += sprintf(q, "%s%d", i ? "," : "", i);
	q += sprintf(q, "],\"d\":true},3],\"e\":{}, \"f\":[[],[[]]]}");
	p = parse_ok_n(s, (size_t)(q - s));
	assert_int_equal(p.root->len, 4);
	assert_string_equal(mj_get_str(p.root, "a"), "first");
	const struct mj_value *b = mj_get(p.root, "b");
	assert_int_equal(b->type, MJ_ARRAY);
	assert_int_equal(b->len, 3);
	assert_int_equal(b->members[0].value.integer, 1);
	assert_int_equal(b->members[2].value.integer, 3);
	const struct mj_value *c = mj_get(&b->members[1].value, "c");
	assert_int_equal(c->len, INNER);
	for (int i = 0; i < INNER; i++)
		assert_int_equal(c->members[i].value.integer, i);
	assert_true(mj_get(&b->members[1].value, "d")->boolean);
	assert_int_equal(mj_get(p.root, "e")->type, MJ_OBJECT);
	assert_int_equal(mj_get(p.root, "e")->len, 0);
	const struct mj_value *f = mj_get(p.root, "f");
	assert_int_equal(f->len, 2);
	assert_int_equal(f->members[1].value.members[0].value.type, MJ_ARRAY);
	parsed_free(&p);
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_typical_request),
		cmocka_unit_test(test_parse_literals),
		cmocka_unit_test(test_parse_numbers),
		cmocka_unit_test(test_parse_long_numbers),
		cmocka_unit_test(test_parse_number_in_containers),
		cmocka_unit_test(test_parse_string_escapes),
		cmocka_unit_test(test_parse_string_surrogates),
		cmocka_unit_test(test_parse_string_raw_utf8),
		cmocka_unit_test(test_parse_keys_are_decoded),
		cmocka_unit_test(test_parse_nesting_limit),
		cmocka_unit_test(test_parse_very_deep_is_rejected),
		cmocka_unit_test(test_parse_repeated_key_last_wins),
		cmocka_unit_test(test_parse_empty_containers_and_whitespace),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_parse_respects_len),
		cmocka_unit_test(test_parse_documents_are_independent),
		cmocka_unit_test(test_get_on_non_objects),
		cmocka_unit_test(test_write_object_all_types),
		cmocka_unit_test(test_write_top_level_array),
		cmocka_unit_test(test_write_escaping),
		cmocka_unit_test(test_write_all_control_bytes_round_trip),
		cmocka_unit_test(test_write_cstring_null),
		cmocka_unit_test(test_write_empty_containers),
		cmocka_unit_test(test_write_max_depth),
		cmocka_unit_test(test_write_beyond_max_depth),
		cmocka_unit_test(test_write_unbalanced),
		cmocka_unit_test(test_write_parse_round_trip_large),
		cmocka_unit_test(test_write_reuse_after_finish),
		cmocka_unit_test(test_write_two_writers_independent),
		cmocka_unit_test(test_parse_value_limit),
		cmocka_unit_test(test_parse_members_survive_a_growing_stack),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
