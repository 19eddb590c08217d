/* The HTTP side of roombox-fcgi that does not depend on FastCGI: reading a
 * bounded request body (json_strict.c then parses it), and writing the
 * answer.
 * main.c plugs libfcgi's streams in through struct http_input, so the whole
 * request pipeline (router_serve) runs in unit tests without a web server. */
#ifndef ROOMBOX_FCGI_HTTP_H
#define ROOMBOX_FCGI_HTTP_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "app.h"

struct http_output;

/* Where a request comes from: CGI-style parameters and the body stream. */
struct http_input {
	/* The value of a parameter (REQUEST_METHOD, CONTENT_LENGTH, ...) or NULL. */
	const char *(*param)(void *ctx, const char *name);
	/* Up to n body bytes into buf; 0 at the end of the body, -1 on error. */
	int (*read)(void *ctx, char *buf, int n);
	void *ctx;
	/* The connection itself, for a handler that writes its answer as it
	 * goes (an event stream) on the worker's own thread and then sets
	 * rs->streamed; end is NULL here.  NULL where there is none (units). */
	const struct http_output *out;
	/* From now on, each read of the body waits at most ms for the peer
	 * (the connection's default is 10 s).  NULL where there is none. */
	int (*read_wait)(void *ctx, int ms);
	/* Has the web server closed the connection (its client went away)?
	 * For a handler that waits long between writes (an event stream);
	 * false when it cannot tell.  NULL where there is none. */
	bool (*gone)(void *ctx);
};

/* Where an answer written from another thread goes (main.c wraps the
 * FastCGI request): write and flush give 0, or -1 once the client is gone;
 * end finishes the request and frees ctx (no call after it). */
struct http_output {
	int (*write)(void *ctx, const char *buf, size_t n);
	int (*flush)(void *ctx);
	void (*end)(void *ctx);
	void *ctx;
	/* The first n bytes of the regular file fd (no more than it holds
	 * when this starts), written by the kernel from the file to the
	 * connection (a download); 0, or -1 once the client is gone, the file
	 * ended early or deadline_ms (CLOCK_MONOTONIC) has passed: the answer
	 * is then short of its Content-Length (the handler sets
	 * rs->streamed_short), which the web server takes for a failure.
	 * NULL: not offered. */
	int (*sendfile)(void *ctx, int fd, uint64_t n, long deadline_ms);
};

/* At most this much of an unwanted or oversized body is read and thrown away
 * (so the web server is not cut off mid-write); past it the connection is
 * simply closed when the request ends. */
#define HTTP_DISCARD_MAX (64u << 20)

/* Set the answer; both take ownership of / replace any previous body. */
void response_json(struct response *rs, int status, json_object *body);
/* 400 {"error":"invalid request","details":details}: a body that failed its
 * schema (zod's shape); takes details. */
void response_invalid(struct response *rs, json_object *details);
void response_error(struct response *rs, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The one JSON writer: compact, "/" not escaped.  The string belongs to obj. */
const char *json_write(json_object *obj, size_t *len);

/* "X-Roombox-Host: <cluster_host>\r\n" in cluster mode (set once at start,
 * before the workers), "" otherwise: every answer's headers carry it, the
 * ones a handler writes itself included. */
extern char http_host_header[48];

/* "404 Not Found" style reason phrase. */
const char *http_reason(int status);

/* The full FastCGI/CGI answer: Status, Content-Type, Content-Length, the
 * optional Allow / WWW-Authenticate / Retry-After / X-Request-Id headers, a
 * blank line and the JSON body followed by "\n" (or rs->text as it is, with
 * rs->content_type).  malloc'd; NULL on allocation failure. */
char *http_render(const struct response *rs, size_t *len);

/* Read the body announced by CONTENT_LENGTH (or, without it, up to the end
 * of the stream), at most max bytes.  Returns 0 with a malloc'd,
 * NUL-terminated *buf, or -1 with rs set (413 too large, 400 bad or short
 * Content-Length, 500 read error). */
int http_read_body(const struct http_input *in, uint64_t max, char **buf,
		   size_t *len, struct response *rs);
/* The value of name in the request's query string (QUERY_STRING, as
 * sent: no decoding), cut to vlen - 1 bytes ("" for a bare `name`); false
 * when the query has no such parameter.  val may be NULL. */
bool http_query_value(const struct request *rq, const char *name, char *val, size_t vlen);

/* Read and throw away what is left of the body, at most HTTP_DISCARD_MAX. */
void http_discard_body(const struct http_input *in);


#endif
