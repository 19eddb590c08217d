/* The model's answer: see llm_stream.h.
 *
 * Why it reads the way it does:
 * - Server-sent events are split into lines on LF, CR LF or a lone CR (the
 *   WHATWG rules); a CR that ends a feed may be the first half of a CR LF,
 *   so after_cr remembers to drop the LF that may open the next feed.
 *   "data:" lines (one optional space after the colon) of one event are
 *   joined with LF; a blank line dispatches the event; comments (":...")
 *   and the other fields (event, id, retry) are ignored.
 * - "[DONE]" ends the reply; so does a choice's finish_reason, because not
 *   every server sends [DONE].  An answer that ends with neither was cut
 *   off, and a cut-off reply is not run: its commands may be half written.
 * - Everything the model sends is untrusted: every buffer has a bound, each
 *   JSON text goes through json-c with a bounded depth, and every field is
 *   type-checked before use. */
#include "llm_stream.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>

void llm_parser_init(struct llm_parser *p, enum llm_format format,
		     llm_token_fn *on_token, void *ctx)
{
	memset(p, 0, sizeof(*p));
	p->format = format;
	p->on_token = on_token;
	p->ctx = ctx;
}

void llm_parser_free(struct llm_parser *p)
{
	free(p->line);
	free(p->data);
	free(p->text);
	p->line = p->data = p->text = NULL;
}

static int parser_fail(struct llm_parser *p, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int parser_fail(struct llm_parser *p, const char *fmt, ...)
{
	va_list ap;

	if (!p->failed) {
		va_start(ap, fmt);
		vsnprintf(p->error, sizeof(p->error), fmt, ap);
		va_end(ap);
	}
	p->failed = true;
	return -1;
}

/* Append n bytes to a buffer of at most max bytes (plus a NUL). */
static int buf_add(char **buf, size_t *len, size_t *cap, size_t max,
		   const char *s, size_t n)
{
	if (n > max - *len)
		return -1;
	if (*len + n + 1 > *cap) {
		size_t ncap = *cap ? *cap : 256;
		char *nb;

		while (ncap < *len + n + 1)
			ncap *= 2;
		nb = realloc(*buf, ncap);
		if (!nb)
			return -1;
		*buf = nb;
		*cap = ncap;
	}
	if (n)
		memcpy(*buf + *len, s, n);
	*len += n;
	(*buf)[*len] = '\0';
	return 0;
}

/* ---- one JSON text ---- */

static json_object *json_parse_bounded(struct llm_parser *p, const char *s, size_t n)
{
	json_tokener *tok;
	json_object *obj;
	enum json_tokener_error why;

	if (n > INT32_MAX)
		return parser_fail(p, "%s", "answer too large"), NULL;
	tok = json_tokener_new_ex(LLM_JSON_DEPTH);
	if (!tok)
		return parser_fail(p, "%s", "out of memory"), NULL;
	obj = json_tokener_parse_ex(tok, s, (int)n);
	why = json_tokener_get_error(tok);
	if (why == json_tokener_continue) {
		obj = json_tokener_parse_ex(tok, "", 1);
		why = json_tokener_get_error(tok);
	} else if (why == json_tokener_success) {
		size_t end = json_tokener_get_parse_end(tok);

		while (end < n && s[end] && strchr(" \t\r\n", s[end]))
			end++;
		if (end != n)
			why = json_tokener_error_parse_unexpected;
	}
	json_tokener_free(tok);
	if (why != json_tokener_success) {
		json_object_put(obj);
		return parser_fail(p, "answer is not JSON: %s", json_tokener_error_desc(why)), NULL;
	}
	if (!json_object_is_type(obj, json_type_object)) {
		json_object_put(obj);
		return parser_fail(p, "%s", "answer is not a JSON object"), NULL;
	}
	return obj;
}

/* An {"error": ...} answer, in the stream or whole: the server's reason. */
static bool answer_is_error(struct llm_parser *p, json_object *obj)
{
	json_object *err;
	char text[200];
	const char *s;

	if (!json_object_object_get_ex(obj, "error", &err) || json_object_is_type(err, json_type_null))
		return false;
	s = json_object_to_json_string_ext(err, JSON_C_TO_STRING_PLAIN);
	llm_error_text(s, s ? strlen(s) : 0, text, sizeof(text));
	parser_fail(p, "the model answered an error: %s", text);
	return true;
}

static int text_add(struct llm_parser *p, const char *s, size_t n)
{
	if (buf_add(&p->text, &p->text_len, &p->text_cap, LLM_REPLY_MAX, s, n) < 0)
		return parser_fail(p, "%s", "reply longer than 1 MiB, or out of memory");
	if (n && p->on_token)
		p->on_token(p->ctx, s, n);
	return 0;
}

/* choices[0] of an answer or chunk; NULL (with the failure set) when absent. */
static json_object *first_choice(struct llm_parser *p, json_object *obj, bool may_be_empty)
{
	json_object *choices, *c;

	if (!json_object_object_get_ex(obj, "choices", &choices) ||
	    !json_object_is_type(choices, json_type_array))
		return parser_fail(p, "%s", "answer is malformed: no \"choices\" array"), NULL;
	if (json_object_array_length(choices) == 0) {
		if (!may_be_empty)
			parser_fail(p, "%s", "answer is malformed: \"choices\" is empty");
		return NULL;
	}
	c = json_object_array_get_idx(choices, 0);
	if (!json_object_is_type(c, json_type_object))
		return parser_fail(p, "%s", "answer is malformed: choices[0] is not an object"), NULL;
	return c;
}

/* content of a message or delta: a string, or absent/null (nothing). */
static int content_take(struct llm_parser *p, json_object *holder, const char *what)
{
	json_object *content;

	if (!json_object_is_type(holder, json_type_object))
		return parser_fail(p, "answer is malformed: %s is not an object", what);
	if (!json_object_object_get_ex(holder, "content", &content) ||
	    json_object_is_type(content, json_type_null))
		return 0;
	if (!json_object_is_type(content, json_type_string))
		return parser_fail(p, "answer is malformed: %s.content is not a string", what);
	return text_add(p, json_object_get_string(content),
			(size_t)json_object_get_string_len(content));
}

/* ---- a whole answer ---- */

static int json_answer(struct llm_parser *p)
{
	json_object *obj = json_parse_bounded(p, p->line ? p->line : "", p->line_len);
	json_object *choice, *message;
	int rc = -1;

	if (!obj)
		return -1;
	if (answer_is_error(p, obj))
		goto out;
	choice = first_choice(p, obj, false);
	if (!choice)
		goto out;
	if (!json_object_object_get_ex(choice, "message", &message)) {
		parser_fail(p, "%s", "answer is malformed: no choices[0].message");
		goto out;
	}
	if (content_take(p, message, "choices[0].message") < 0)
		goto out;
	if (!p->text) {
		parser_fail(p, "%s", "answer is malformed: choices[0].message has no content");
		goto out;
	}
	p->done = true;
	rc = 0;
out:
	json_object_put(obj);
	return rc;
}

/* ---- server-sent events ---- */

static int sse_chunk(struct llm_parser *p, const char *s, size_t n)
{
	json_object *obj, *choice, *delta, *finish;
	int rc = -1;

	if (n == 6 && memcmp(s, "[DONE]", 6) == 0) {
		p->done = true;
		return 0;
	}
	obj = json_parse_bounded(p, s, n);
	if (!obj)
		return -1;
	if (answer_is_error(p, obj))
		goto out;
	choice = first_choice(p, obj, true);
	if (!choice) {
		rc = p->failed ? -1 : 0;   /* e.g. a usage-only chunk */
		goto out;
	}
	if (json_object_object_get_ex(choice, "delta", &delta) &&
	    content_take(p, delta, "choices[0].delta") < 0)
		goto out;
	if (json_object_object_get_ex(choice, "finish_reason", &finish) &&
	    json_object_is_type(finish, json_type_string))
		p->finish_seen = true;
	rc = 0;
out:
	json_object_put(obj);
	return rc;
}

static int sse_dispatch(struct llm_parser *p)
{
	int rc = 0;

	if (p->have_data && !p->done)
		rc = sse_chunk(p, p->data ? p->data : "", p->data_len);
	p->data_len = 0;
	p->have_data = false;
	return rc;
}

static int sse_line(struct llm_parser *p, const char *s, size_t n)
{
	const char *value;
	size_t vlen;

	if (n == 0)
		return sse_dispatch(p);
	if (s[0] == ':')
		return 0;   /* a comment, e.g. ": keep-alive" */
	if (n < 5 || memcmp(s, "data", 4) != 0 || (n > 4 && s[4] != ':'))
		return 0;   /* event:, id:, retry: or an unknown field */
	value = s + 5;
	vlen = n - 5;
	if (vlen && value[0] == ' ') {
		value++;
		vlen--;
	}
	if (p->have_data &&
	    buf_add(&p->data, &p->data_len, &p->data_cap, LLM_LINE_MAX, "\n", 1) < 0)
		return parser_fail(p, "%s", "stream event larger than 256 KiB");
	if (buf_add(&p->data, &p->data_len, &p->data_cap, LLM_LINE_MAX, value, vlen) < 0)
		return parser_fail(p, "%s", "stream event larger than 256 KiB");
	p->have_data = true;
	return 0;
}

static int sse_feed(struct llm_parser *p, const char *buf, size_t n)
{
	size_t i = 0;

	while (i < n) {
		const char *nl;
		size_t take;

		if (p->after_cr) {
			p->after_cr = false;
			if (buf[i] == '\n') {
				i++;
				continue;
			}
		}
		nl = memchr(buf + i, '\n', n - i);
		take = nl ? (size_t)(nl - (buf + i)) : n - i;
		const char *cr = memchr(buf + i, '\r', take);
		if (cr)
			take = (size_t)(cr - (buf + i));
		if (buf_add(&p->line, &p->line_len, &p->line_cap, LLM_LINE_MAX, buf + i, take) < 0)
			return parser_fail(p, "%s", "stream line longer than 256 KiB");
		i += take;
		if (i == n)
			break;   /* the line goes on in the next feed */
		p->after_cr = buf[i] == '\r';
		i++;
		if (sse_line(p, p->line ? p->line : "", p->line_len) < 0)
			return -1;
		p->line_len = 0;
	}
	return 0;
}

/* ---- entry points ---- */

int llm_parser_feed(struct llm_parser *p, const char *buf, size_t n)
{
	if (p->failed)
		return -1;
	if (p->format == LLM_SSE)
		return sse_feed(p, buf, n);
	if (buf_add(&p->line, &p->line_len, &p->line_cap, LLM_BODY_MAX, buf, n) < 0)
		return parser_fail(p, "%s", "answer larger than 4 MiB");
	return 0;
}

int llm_parser_finish(struct llm_parser *p)
{
	if (p->failed)
		return -1;
	if (p->format == LLM_JSON)
		return json_answer(p);
	/* a last line without its line break, then a last event without its
	 * blank line: both count, as in a browser's EventSource */
	if (p->line_len && (sse_line(p, p->line, p->line_len) < 0))
		return -1;
	p->line_len = 0;
	if (sse_dispatch(p) < 0)
		return -1;
	if (!p->done && !p->finish_seen)
		return parser_fail(p, "%s", "the stream ended before [DONE]");
	if (!p->text && text_add(p, "", 0) < 0)
		return -1;
	return 0;
}

void llm_error_text(const char *body, size_t len, char *out, size_t outlen)
{
	json_object *obj = NULL, *err, *msg;
	const char *s = body;
	size_t n = len, i, o = 0;
	json_tokener *tok;

	if (outlen == 0)
		return;
	tok = len <= 65536 ? json_tokener_new_ex(LLM_JSON_DEPTH) : NULL;
	if (tok) {
		obj = json_tokener_parse_ex(tok, body, (int)len);
		json_tokener_free(tok);
	}
	if (obj && json_object_is_type(obj, json_type_object) &&
	    json_object_object_get_ex(obj, "error", &err)) {
		json_object_get(err);
		json_object_put(obj);
		obj = err;
	}
	if (obj && json_object_is_type(obj, json_type_object) &&
	    json_object_object_get_ex(obj, "message", &msg) &&
	    json_object_is_type(msg, json_type_string)) {
		s = json_object_get_string(msg);
		n = (size_t)json_object_get_string_len(msg);
	} else if (obj && json_object_is_type(obj, json_type_string)) {
		s = json_object_get_string(obj);
		n = (size_t)json_object_get_string_len(obj);
	}
	for (i = 0; i < n && o + 1 < outlen; i++) {
		unsigned char c = (unsigned char)s[i];

		out[o++] = (c >= 0x20 && c < 0x7f) ? (char)c : (c == '\n' || c == '\t') ? ' ' : '?';
	}
	while (o > 0 && out[o - 1] == ' ')
		o--;
	out[o] = '\0';
	json_object_put(obj);
}
