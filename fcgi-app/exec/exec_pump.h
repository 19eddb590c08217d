/* Running something in a room with roombox-fcgi's own pipes as its I/O:
 * the one exec path (exec_pump.c), under the exec endpoint, its event
 * stream, files and processes. */
#ifndef ROOMBOX_FCGI_EXEC_PUMP_H
#define ROOMBOX_FCGI_EXEC_PUMP_H

#include <sys/types.h>

#include "app.h"
#include "exec_result.h"
#include "validate.h"

/* Where the output goes besides the result.  Every member may be unset
 * (zero): a sink of nothing but the result is the plain exec's. */
struct exec_sink {
	void *ctx;
	/* {"type":"stdout"|"stderr","data":...} for each piece as it comes
	 * (text never splitting a UTF-8 character, or base64).  A sink that
	 * fails (client gone) returns -1: the command runs on, its output is
	 * still collected. */
	int (*event)(void *ctx, json_object *ev);
	/* called after 15 s without output */
	void (*keepalive)(void *ctx);
	/* once the helper has the command; started says so */
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
	/* Set: the command's stdin stays open with nothing written to it
	 * until this returns true (asked every STDIN_UNTIL_POLL_MS at most),
	 * then reads end of file: a long-lived tool (watch) ends that way. */
	bool (*stdin_until)(void *ctx);
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
	/* Only a room that runs: a stopped one is not started (409). */
	bool running_only;
};

#define STDIN_UNTIL_POLL_MS 250

/* Run ex in room's sandbox (the helper creates or restarts the room when
 * needed), telling sink about the output as it comes.  Returns the exec's
 * `result` (its stdout/stderr as far as output_limit), or NULL with err
 * set: 503 when max_concurrent_execs are already running, else the
 * helper's error. */
json_object *exec_pump_in_room(struct app *app, const char *room, const struct exec_request *ex,
			       struct exec_sink *sink, struct helper_error *err);

/* Bytes at the end of p[0..n) that begin a UTF-8 character not complete
 * yet (0 to 3): what a text event keeps back for the next piece. */
size_t utf8_incomplete_tail(const unsigned char *p, size_t n);

/* The helper's exec (helper_client.h) for ex: its command, env, cwd,
 * timeout and user; the caller's pipes become the helper's fds 3-5. */
struct helper_exec exec_helper_exec(const struct exec_request *ex);

/* Slot accounting for max_concurrent_execs (processes.c too). */
bool exec_slot_take(struct app *app);
void exec_slot_give(struct app *app);

/* A failed exec's JSON answer (503 with Retry-After, 429, 413, 500). */
void exec_answer_error(struct response *rs, const struct helper_error *err);

#endif
