/* Strict JSON in (see json_strict.h): a pass over the text first, for what
 * json-c takes even in its strict mode and RFC 8259 does not (NaN, -01,
 * single quotes, raw control characters, invalid UTF-8), which also marks
 * NULs in keys; then json-c in strict mode, depth-bounded. */
#include "json_strict.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (n bytes available), 0 if invalid
 * (overlong forms, surrogates and code points past U+10FFFF included). */
static size_t utf8_seq_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0];
	unsigned char lo = 0x80, hi = 0xbf;
	size_t need, i;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		need = 1;
	else if (c >= 0xe0 && c <= 0xef) {
		need = 2;
		if (c == 0xe0)
			lo = 0xa0;
		else if (c == 0xed)
			hi = 0x9f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		need = 3;
		if (c == 0xf0)
			lo = 0x90;
		else if (c == 0xf4)
			hi = 0x8f;
	} else
		return 0;
	if (n < need + 1)
		return 0;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (i = 2; i <= need; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return need + 1;
}

static bool is_nul_escape(const char *s, size_t n)
{
	return n >= 6 && memcmp(s, "\\u0000", 6) == 0;
}

/* Rewrite one just-copied object key (out[start..*olen)) so that each
 * "\u0000" escape becomes JSON_KEY_NUL_MARK (see json_strict.h). */
static void mark_key_nuls(char *out, size_t start, size_t *olen)
{
	size_t r = start, w = start;

	while (r < *olen) {
		if (out[r] == '\\' && is_nul_escape(out + r, *olen - r)) {
			out[w++] = JSON_KEY_NUL_MARK;
			r += 6;
		} else if (out[r] == '\\' && r + 1 < *olen) {
			out[w++] = out[r++];
			out[w++] = out[r++];
		} else {
			out[w++] = out[r++];
		}
	}
	*olen = w;
}

/* RFC 8259 number: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)? */
static bool json_number_ok(const char *s, size_t n)
{
	size_t i = 0, d;

	if (i < n && s[i] == '-')
		i++;
	if (i < n && s[i] == '0')
		i++;
	else if (i < n && s[i] >= '1' && s[i] <= '9')
		while (i < n && s[i] >= '0' && s[i] <= '9')
			i++;
	else
		return false;
	if (i < n && s[i] == '.') {
		for (d = ++i; i < n && s[i] >= '0' && s[i] <= '9'; i++)
			;
		if (i == d)
			return false;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		for (d = i; i < n && s[i] >= '0' && s[i] <= '9'; i++)
			;
		if (i == d)
			return false;
	}
	return i == n;
}

static bool is_alpha(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* Outside strings: numbers must follow the JSON grammar, words must be one
 * of the three literals.  Returns the token's length, 0 if invalid. */
static size_t json_bare_token(const char *s, size_t n, enum json_tokener_error *why)
{
	size_t j = 0;

	if (s[0] == '-' || (s[0] >= '0' && s[0] <= '9')) {
		while (j < n && s[j] && strchr("+-.eE0123456789", s[j]))
			j++;
		if (json_number_ok(s, j))
			return j;
		*why = json_tokener_error_parse_number;
		return 0;
	}
	while (j < n && is_alpha(s[j]))
		j++;
	if ((j == 4 && (!memcmp(s, "true", 4) || !memcmp(s, "null", 4))) ||
	    (j == 5 && !memcmp(s, "false", 5)))
		return j;
	*why = json_tokener_error_parse_unexpected;  /* NaN, Infinity, 'x' */
	return 0;
}

/* What json-c (even with JSON_TOKENER_STRICT) lets through and JSON does not:
 * NaN, Infinity, -01, 1., single-quoted strings, raw control characters in
 * strings, invalid UTF-8.  Copies text to out (same size or smaller),
 * marking NULs in keys. */
static int json_precheck(const char *text, size_t len, char *out, size_t *outlen,
			 enum json_tokener_error *why)
{
	size_t i = 0, o = 0;

	while (i < len) {
		unsigned char c = (unsigned char)text[i];
		size_t start, j;
		bool has_nul = false;

		if (c == '\'' || c == '\0') {
			*why = json_tokener_error_parse_unexpected;
			return -1;
		}
		if (c == '-' || (c >= '0' && c <= '9') || is_alpha((char)c)) {
			size_t n = json_bare_token(text + i, len - i, why);

			if (n == 0)
				return -1;
			memcpy(out + o, text + i, n);
			o += n;
			i += n;
			continue;
		}
		if (c != '"') {
			out[o++] = text[i++];
			continue;
		}
		/* a string: copy it up to and with its closing quote */
		start = o;
		out[o++] = text[i++];
		for (;;) {
			size_t n;

			if (i >= len)
				goto done;  /* unterminated: json-c says so */
			c = (unsigned char)text[i];
			if (c == '"') {
				out[o++] = text[i++];
				break;
			}
			if (c < 0x20) {
				*why = json_tokener_error_parse_string;
				return -1;
			}
			if (c == '\\') {
				if (is_nul_escape(text + i, len - i))
					has_nul = true;
				out[o++] = text[i++];
				if (i < len)
					out[o++] = text[i++];
				continue;
			}
			n = utf8_seq_len((const unsigned char *)text + i, len - i);
			if (n == 0) {
				*why = json_tokener_error_parse_utf8_string;
				return -1;
			}
			memcpy(out + o, text + i, n);
			o += n;
			i += n;
		}
		if (!has_nul)
			continue;
		for (j = i; j < len && strchr(" \t\r\n", text[j]); j++)
			;
		if (j < len && text[j] == ':')
			mark_key_nuls(out, start, &o);
	}
done:
	*outlen = o;
	return 0;
}

int json_parse_strict(const char *text, size_t len, json_object **out,
		      char *err, size_t errlen)
{
	enum json_tokener_error why = json_tokener_success;
	json_tokener *tok;
	json_object *obj = NULL;
	char *copy;
	size_t clen = 0;

	*out = NULL;
	if (len > INT32_MAX) {
		snprintf(err, errlen, "%s", json_tokener_error_desc(json_tokener_error_size));
		return -1;
	}
	copy = malloc(len + 1);
	if (!copy) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (json_precheck(text, len, copy, &clen, &why) < 0) {
		free(copy);
		snprintf(err, errlen, "%s", json_tokener_error_desc(why));
		return -1;
	}
	tok = json_tokener_new_ex(512);
	if (!tok) {
		free(copy);
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
	obj = json_tokener_parse_ex(tok, copy, (int)clen);
	why = json_tokener_get_error(tok);
	if (why == json_tokener_continue) {
		/* a bare number ("5") or an incomplete text: feed the end */
		obj = json_tokener_parse_ex(tok, "", 1);
		why = json_tokener_get_error(tok);
	} else if (why == json_tokener_success &&
		   json_tokener_get_parse_end(tok) != clen) {
		json_object_put(obj);
		obj = NULL;
		why = json_tokener_error_parse_unexpected;
	}
	json_tokener_free(tok);
	free(copy);
	if (why != json_tokener_success) {
		json_object_put(obj);
		if (why == json_tokener_continue)
			why = json_tokener_error_parse_eof;
		snprintf(err, errlen, "%s", json_tokener_error_desc(why));
		return -1;
	}
	/* 1e400 parses as Infinity, as in JSON.parse; zod then reports it. */
	*out = obj;
	return 0;
}
