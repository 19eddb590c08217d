/* An exec whose output is read by roombox-fcgi as the command writes it:
 * see exec_stream.c. */
#ifndef ROOMBOX_FCGI_EXEC_STREAM_H
#define ROOMBOX_FCGI_EXEC_STREAM_H

#include <sys/types.h>

#include "exec.h"

/* Where the pieces go.  event gets {"type":"stdout"|"stderr","data":...}
 * (text never splitting a UTF-8 character, or base64); keepalive (may be
 * NULL) is called after 15 s without output.  A sink that fails (client
 * gone) returns -1: the command runs on, its output is still collected. */
struct exec_sink {
	void *ctx;
	int (*event)(void *ctx, json_object *ev);
	void (*keepalive)(void *ctx);
	/* once the helper has the command (may be NULL); started says so */
	void (*start)(void *ctx, const struct exec_request *ex);
	bool started;
	/* When set: stdout's bytes go here as they come, kept nowhere and made
	 * no event (a file's contents), while it returns 0; once it returns 1,
	 * that piece and the rest are kept for the result as usual. */
	int (*stdout_raw)(void *ctx, const char *data, size_t n);
	/* When set: the command's stdin, read piece by piece (up to n bytes;
	 * 0 at the end, -1 on failure: either closes the stdin) instead of
	 * ex->stdin_data. */
	ssize_t (*input)(void *ctx, char *buf, size_t n);
	/* Set (a download): stdout is a unix socket, and a descriptor that
	 * comes with its first bytes (the get tool's open file, after its
	 * "F <size>\n", which goes to stdout_raw first) goes here, closed
	 * after it. */
	void (*stdout_file)(void *ctx, int fd);
	/* Set: not a command but the keeper's tool of that argv (NULL-ended,
	 * common/protocol.h), done in the room by the keeper's own code. */
	const char *const *tool;
	/* A request that only reads the room: one that does not exist is a
	 * 404 (err->http_status) and is not created. */
	bool existing;
};

/* Bytes at the end of p[0..n) that begin a UTF-8 character not complete
 * yet (0 to 3): what a text event keeps back for the next piece. */
size_t utf8_incomplete_tail(const unsigned char *p, size_t n);

/* Run ex in room like exec_in_room, telling sink about the output as it
 * comes; returns SPEC §2.1's result (its stdout/stderr as far as
 * output_limit), or NULL with err set. */
json_object *exec_stream_in_room(struct app *app, const char *room, const struct exec_request *ex,
				 struct exec_sink *sink, struct helper_error *err);

/* SPEC §8.1: does the client ask for an event stream (and can we write
 * one)?  exec_sse then runs ex and answers as a stream. */
bool exec_wants_stream(const struct request *rq);
void exec_sse(struct request *rq, struct response *rs, const struct exec_request *ex);

#endif
