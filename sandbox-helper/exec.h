#ifndef ROOMBOX_EXEC_H
#define ROOMBOX_EXEC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "protocol.h"
#include "room.h"
#include "cgroup.h"

/* One exec as the helper was asked for it (common/protocol.h's exec op),
 * checked by request.c; roombox-fcgi's struct exec_request is the HTTP
 * request it came from. */
struct exec_order {
	const char *cmd;
	uint64_t timeout_ms;
	const char *env;         /* nenv consecutive "NAME=value" strings, or NULL */
	uint32_t nenv;
	const char *cwd;         /* absolute path, or NULL */
	const char *stdin_data;  /* HX_COLLECT's input; NULL = /dev/null */
	size_t stdin_len;
	const int *io;           /* passed I/O: the caller's stdin, stdout and
				  * stderr pipes (fds 3-5), or NULL */
	/* Set for a first attempt: asked once the shell could not start
	 * because of the room's process limit, or exited 2 (dash's status
	 * when it cannot fork; said_cannot_fork: its message is in the
	 * output, wherever the command sent its stderr); true makes exec_run
	 * answer EXEC_AT_LIMIT
	 * instead of a result, so the caller can free the room and run the
	 * command again.  NULL: every outcome is the answer. */
	bool (*at_pids_limit)(void *ctx, const struct room *r, bool said_cannot_fork);
	void *ctx;
	bool as_user;            /* run as the room's user (1000), else its root */
	/* A keeper tool instead of cmd (KP_TOOL): its argv, NULL-terminated,
	 * pointing into the request; or NULL. */
	const char *tool[TOOL_ARGS_MAX + 1];
	bool is_tool;
	bool existing;           /* never create the room (not_found instead) */
	bool detach;             /* KP_DETACH: start it, answer at once */
};

/* What an exec comes back with: raw facts, shaped for clients by
 * roombox-fcgi (common/protocol.h). */
struct exec_outcome {
	int wait_status;
	bool timed_out;
	char *out, *err;          /* malloc'd (or NULL when empty) */
	size_t out_len, err_len;
	bool out_truncated, err_truncated;
	uint64_t duration_us;
	int64_t started_ms;       /* wall clock */
};
void exec_outcome_free(struct exec_outcome *o);

/* Connect to the room's keeper: the socket, or -1 when no keeper listens
 * (none was started, or it died). */
int exec_connect(const struct room *r);

/* One exec's argv, environment (with the room's session), memfds and
 * pipes, made before the keeper is connected; NULL with err set. */
struct exec_job;
struct exec_job *exec_prepare(const struct room *r, const struct exec_order *q,
			      char *err, size_t errlen);
void exec_job_free(struct exec_job *j);

/* Run the prepared command in the room whose keeper is connected on conn
 * (closed here); what came of it in *o.  0, or -1
 * with err when the sandbox could not run it at all, or EXEC_KEEPER_GONE
 * when the request could not be sent (it never reached a keeper: the
 * caller restarts the jail and runs the same job again). */
#define EXEC_KEEPER_GONE (-2)
#define EXEC_AT_LIMIT (-3)     /* see exec_order.at_pids_limit; err says which */
int exec_run(const struct room *r, int conn, struct exec_job *j, const struct exec_order *q,
	     struct exec_outcome *o, char *err, size_t errlen);

#endif
