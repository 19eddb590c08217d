/* The request log: one line per answered request on stderr (the service
 * log), in the format `log_format` names, and the request id that ties the
 * line to the answer's X-Request-Id header.
 *
 * text:  roombox-fcgi: request id=<id> method=<m> route=<pattern> room=<r|->
 *        status=<n> duration_ms=<f> helper_ms=<f> path=<path>
 * json:  {"time":"<ISO-8601 UTC>","level":"info","msg":"request","id":..,
 *         "method":..,"route":..,"room":..|null,"status":..,"duration_ms":..,
 *         "helper_ms":..,"path":..}
 *
 * The route is the route table's pattern ("-" when no pattern matched); the
 * path and method are the client's bytes, so anything outside printable
 * ASCII (and space, quote, backslash) becomes '?' and they are cut at 200
 * bytes: a line is always one line, and always valid JSON. */
#ifndef ROOMBOX_FCGI_REQLOG_H
#define ROOMBOX_FCGI_REQLOG_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define REQUEST_ID_LEN 16   /* hex digits */

struct reqlog {
	const char *id;
	const char *method;
	const char *route;   /* pattern, or NULL */
	const char *room;    /* "" or NULL: none */
	const char *path;
	int status;
	uint64_t duration_ns;
	uint64_t helper_ns;
};

/* A new request id: REQUEST_ID_LEN hex digits and a NUL into buf (at least
 * REQUEST_ID_LEN + 1 bytes).  Unique within the process, random across
 * restarts. */
void reqlog_new_id(char *buf);

/* The line for r, NUL-terminated, into buf; returns its length (cut at
 * len - 1).  Exposed for tests. */
size_t reqlog_format(enum log_format fmt, const struct reqlog *r, char *buf, size_t len);

/* Write the line for r to stderr in one write. */
void reqlog_write(enum log_format fmt, const struct reqlog *r);

#endif
