#ifndef ROOMBOX_REQUEST_H
#define ROOMBOX_REQUEST_H
/* The helper's request reader: the first code to see the caller's bytes.
 *
 * Three steps, so that a fuzz target can run the checks on any buffer:
 * request_read takes one request record (common/protocol.h) from a
 * descriptor, at most helper_request_max(max_body) bytes; request_decode
 * checks its shape against the operation's (header, sizes, room, strings,
 * counts); request_exec_order then checks an exec's values against the
 * configuration.  Every error is a message for the caller's answer with
 * code "invalid" (or "failed": see request_exec_order), and nothing has
 * been done when it comes.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "exec.h"
#include "protocol.h"

/* What an operation's request must look like: main.c's table of operations
 * gives one per op. */
struct request_shape {
	uint32_t args_size;       /* the argument record's exact size */
	bool room;                /* it names a room (else its room is "") */
	bool known;               /* the op exists */
};

/* A decoded request: pointers into the caller's buffer. */
struct request {
	uint32_t op;
	const char *room;         /* a valid room id, or NULL */
	const void *args;         /* the argument record (args_size bytes) */
	const char *strings;      /* nstrings NUL-terminated strings */
	uint32_t nstrings;
};

/* One request record from fd: its header first, then exactly the size it
 * declares, then end of file.  *buf is malloc'd (*len bytes).  -1 with err
 * for a short, oversized or longer-than-declared request, or a failed read. */
int request_read(int fd, uint64_t max_body, char **buf, size_t *len, char *err, size_t errlen);

/* buf[0..len) checked as one request: magic, version, op (known in
 * shapes[HOP_COUNT]), exact size, room id, strings (exactly nstrings, each
 * NUL-terminated, filling the rest), and the op's counts.  0, or -1 with
 * err. */
int request_decode(const char *buf, size_t len, const struct request_shape *shapes,
		   struct request *rq, char *err, size_t errlen);

/* The next string after s (strings are consecutive). */
static inline const char *request_next(const char *s)
{
	return s + strlen(s) + 1;
}

/* An exec's values checked and gathered into q (pointing into rq);
 * defaults and bounds from cfg.  NULL, or the protocol's error code with
 * err: HELPER_E_INVALID for a bad value, HELPER_E_FAILED for an env no
 * shell can take (as exec.c answers one it finds while building the
 * environment: refused here before anything is built). */
int request_exec_order(const struct request *rq, const struct config *cfg,
		       struct exec_order *q, char *err, size_t errlen);

#endif
