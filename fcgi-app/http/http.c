/* Request bodies in, JSON answers out: see http.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http.h"

/* ---- answers ---------------------------------------------------------- */

void response_json(struct response *rs, int status, json_object *body)
{
	if (rs->body && rs->body != body)
		json_object_put(rs->body);
	rs->status = status;
	rs->body = body;
}

void response_error(struct response *rs, int status, const char *fmt, ...)
{
	char *msg = NULL;
	va_list ap;
	json_object *o;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	o = json_object_new_object();
	json_object_object_add(o, "error",
			       json_object_new_string(msg ? msg : "out of memory"));
	free(msg);
	response_json(rs, status, o);
}

void response_invalid(struct response *rs, json_object *details)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "error", json_object_new_string("invalid request"));
	json_object_object_add(o, "details", details);
	response_json(rs, 400, o);
}

const char *json_write(json_object *obj, size_t *len)
{
	size_t n = 0;
	const char *s = json_object_to_json_string_length(obj,
		JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);

	if (len)
		*len = s ? n : 0;
	return s;
}

char http_host_header[48];

const char *http_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 207: return "Multi-Status";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 408: return "Request Timeout";
	case 413: return "Content Too Large";
	case 421: return "Misdirected Request";
	case 429: return "Too Many Requests";
	case 431: return "Request Header Fields Too Large";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	case 507: return "Insufficient Storage";
	default:  return "Unknown";
	}
}

char *http_render(const struct response *rs, size_t *len)
{
	static const char fallback[] = "{\"error\":\"internal error: no answer\"}";
	const char *body = fallback;
	size_t blen = sizeof(fallback) - 1;
	int status = rs->status;
	char extra[288] = "";
	const char *ctype = "application/json", *nl = "\n";
	size_t used = 0;
	char *out = NULL;
	int n;

	if (rs->text) {
		body = rs->text;
		blen = rs->text_len;
		ctype = rs->content_type ? rs->content_type : "text/plain; charset=utf-8";
		nl = "";
	} else if (rs->body) {
		body = json_write(rs->body, &blen);
		if (!body) {
			body = fallback;
			blen = sizeof(fallback) - 1;
			status = 500;
		}
	} else {
		status = 500;
	}
	if (rs->allow[0])
		used += snprintf(extra + used, sizeof(extra) - used,
				 "Allow: %s\r\n", rs->allow);
	if (rs->www_authenticate && used < sizeof(extra))
		used += snprintf(extra + used, sizeof(extra) - used,
				 "WWW-Authenticate: Bearer\r\n");
	if (rs->retry_after > 0 && used < sizeof(extra))
		used += snprintf(extra + used, sizeof(extra) - used,
				 "Retry-After: %d\r\n", rs->retry_after);
	if (rs->request_id[0] && used < sizeof(extra))
		used += snprintf(extra + used, sizeof(extra) - used,
				 "X-Request-Id: %s\r\n", rs->request_id);
	if (used < sizeof(extra))
		snprintf(extra + used, sizeof(extra) - used, "%s", http_host_header);

	n = asprintf(&out, "Status: %d %s\r\n"
		     "Content-Type: %s\r\n"
		     "Content-Length: %zu\r\n"
		     "%s\r\n"
		     "%.*s%s",
		     status, http_reason(status), ctype, blen + strlen(nl), extra,
		     (int)blen, body, nl);
	if (n < 0)
		return NULL;
	*len = (size_t)n;
	return out;
}

/* ---- request bodies --------------------------------------------------- */

/* CONTENT_LENGTH: decimal digits only (no sign, no spaces), no overflow. */
static int parse_content_length(const char *s, uint64_t *out)
{
	uint64_t v = 0;

	if (!*s)
		return -1;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -1;
		if (v > (UINT64_MAX - 9) / 10)
			return -1;
		v = v * 10 + (uint64_t)(*s - '0');
	}
	*out = v;
	return 0;
}

void http_discard_body(const struct http_input *in)
{
	char buf[16384];
	size_t total = 0;
	int n;

	while (total < HTTP_DISCARD_MAX) {
		size_t want = HTTP_DISCARD_MAX - total;

		n = in->read(in->ctx, buf, want < sizeof(buf) ? (int)want : (int)sizeof(buf));
		if (n <= 0)
			break;
		total += (size_t)n;
	}
}

int http_read_body(const struct http_input *in, uint64_t max, char **out,
		   size_t *outlen, struct response *rs)
{
	const char *cl = in->param(in->ctx, "CONTENT_LENGTH");
	bool known = cl && *cl;
	uint64_t want = 0;
	size_t cap, len = 0;
	char *buf;

	if (known && parse_content_length(cl, &want) < 0) {
		response_error(rs, 400, "invalid Content-Length");
		return -1;
	}
	if (known && want > max) {
		http_discard_body(in);
		response_error(rs, 413, "request body too large");
		return -1;
	}
	/* Without Content-Length read to the end of the FastCGI stream, one
	 * byte past max to notice a body that is too large. */
	cap = known ? (size_t)want : 65536;
	buf = malloc(cap + 1);
	if (!buf) {
		response_error(rs, 500, "out of memory reading the request body");
		return -1;
	}
	for (;;) {
		int n, chunk;

		if (known && len == want)
			break;
		if (len == cap) {
			size_t ncap = cap * 2;
			char *nb;

			if (ncap > max + 1)
				ncap = (size_t)max + 1;
			if (ncap <= cap)
				ncap = cap + 1;
			nb = realloc(buf, ncap + 1);
			if (!nb) {
				free(buf);
				response_error(rs, 500, "out of memory reading the request body");
				return -1;
			}
			buf = nb;
			cap = ncap;
		}
		chunk = cap - len > (1u << 30) ? (1 << 30) : (int)(cap - len);
		n = in->read(in->ctx, buf + len, chunk);
		if (n < 0) {
			free(buf);
			response_error(rs, 400, "could not read the request body");
			return -1;
		}
		if (n == 0) {
			if (known) {
				free(buf);
				response_error(rs, 400, "request body shorter than its Content-Length (%zu of %" PRIu64 " bytes)",
					       len, want);
				return -1;
			}
			break;
		}
		len += (size_t)n;
		if (!known && len > max) {
			free(buf);
			http_discard_body(in);
			response_error(rs, 413, "request body too large");
			return -1;
		}
	}
	buf[len] = '\0';
	*out = buf;
	*outlen = len;
	return 0;
}

/* ---- strict JSON ------------------------------------------------------ */

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
 * "\u0000" escape becomes JSON_KEY_NUL_MARK (see http.h). */
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

bool http_query_value(const struct request *rq, const char *name, char *val, size_t vlen)
{
	const char *q = rq->in ? rq->in->param(rq->in->ctx, "QUERY_STRING") : NULL;
	size_t n = strlen(name);

	for (; q && *q; q += strcspn(q, "&"), q += *q == '&') {
		if (strncmp(q, name, n) == 0 && (q[n] == '=' || q[n] == '&' || !q[n])) {
			const char *v = q[n] == '=' ? q + n + 1 : "";
			size_t len = strcspn(v, "&");

			if (val && vlen)
				snprintf(val, vlen, "%.*s", (int)(len < vlen ? len : vlen - 1), v);
			return true;
		}
	}
	return false;
}
