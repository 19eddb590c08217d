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
