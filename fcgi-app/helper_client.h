/* The one way roombox-fcgi touches a sandbox: run roombox-helper once per
 * operation, JSON request on its stdin, JSON reply on its stdout (see
 * common/protocol.h).  Thread-safe: every call has its own pipes and child. */
#ifndef ROOMBOX_FCGI_HELPER_CLIENT_H
#define ROOMBOX_FCGI_HELPER_CLIENT_H

#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

/* A reply bigger than this is cut off and the call fails (two streams of
 * output_limit bytes, raw, fit many times over). */
#define HELPER_REPLY_MAX (64u << 20)

/* Wall-clock bound on operations other than exec (creating a room may have
 * to make a file system); exec gets its own timeout plus HELPER_EXEC_GRACE_MS. */
#define HELPER_DEFAULT_DEADLINE_MS (5 * 60 * 1000)
#define HELPER_EXEC_GRACE_MS (60 * 1000)

struct helper_error {
	int http_status;     /* 400 invalid, 404 not_found, 429 limit, 500 else */
	char code[16];       /* the helper's code, or "spawn"/"reply"/"timeout" */
	char message[1024];  /* the helper's "error", or what went wrong here */
};

struct helper_target {
	const char *helper;       /* path of roombox-helper */
	const char *config_path;  /* passed as -c */
	uint64_t max_body;        /* requests over helper_request_max(max_body) are 413 */
};

/* Run one operation.  Returns the reply object (the caller puts it), or
 * NULL with *err filled.  deadline_ms bounds the whole call; past it the
 * helper is killed. */
json_object *helper_call(const struct helper_target *target, json_object *request,
			 long deadline_ms, struct helper_error *err);

/* A call whose command I/O the caller handles itself (common/protocol.h's
 * passed I/O): helper_start spawns the helper with pass[0..2] on its fds
 * 3, 4, 5 (NULL: none) and returns once the whole request is written; the
 * caller then reads and writes its pipes, polling helper_run_pidfd (readable
 * once the helper has exited), and ends with helper_finish, which waits for
 * the exit (up to the deadline) and decodes the answer like helper_call.
 * The caller closes its copies of the passed descriptors. */
struct helper_run;
struct helper_run *helper_start(const struct helper_target *target, json_object *request,
				long deadline_ms, const int *pass, struct helper_error *err);
int helper_run_pidfd(const struct helper_run *run);
json_object *helper_finish(struct helper_run *run, struct helper_error *err);

/* The HTTP status for a helper error code ("limit" -> 429, ...). */
int helper_code_status(const char *code);

#endif
