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
	const int *io;           /* the caller's stdin, stdout and stderr pipes
				  * (passed I/O: fds 3-5) */
	/* A first attempt: a shell the keeper could not fork for the room's
	 * process limit makes exec_run answer EXEC_AT_LIMIT instead of a
	 * result, so the caller can free the room and run the command again
	 * (nothing ran, nothing was written). */
	bool limit_retry;
	bool as_user;            /* run as the room's user (1000), else its root */
	/* A keeper tool instead of cmd (KP_TOOL): its argv, NULL-terminated,
	 * pointing into the request; or NULL. */
	const char *tool[TOOL_ARGS_MAX + 1];
	bool is_tool;
	bool existing;           /* never create the room (not_found instead) */
	bool running_only;       /* never start it (conflict instead) */
	bool detach;             /* KP_DETACH: start it, answer at once */
	int pids_limit;          /* the room's (its own, or pids_limit); 0: none */
};

/* What an exec comes back with: raw facts, shaped for clients by
 * roombox-fcgi (common/protocol.h).  The output went to the caller's own
 * pipes. */
struct exec_outcome {
	int wait_status;
	bool timed_out;
	uint64_t duration_us;
	int64_t started_ms;       /* wall clock */
};

/* Connect to the room's keeper: the socket, or -1 when no keeper listens
 * (none was started, or it died). */
int exec_connect(const struct room *r);

/* One exec's argv, environment (with the room's session), memfd and the
 * caller's descriptors, made before the keeper is connected; NULL with err set. */
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
#define EXEC_AT_LIMIT (-3)     /* see exec_order.limit_retry */
int exec_run(const struct room *r, int conn, struct exec_job *j, const struct exec_order *q,
	     struct exec_outcome *o, char *err, size_t errlen);

/* A new exec channel of the room's running keeper (common/exec_channel.h)
 * for roombox-fcgi: the helper opens the room's sessions and busy and
 * active files for the keeper and gives it the room's limits.  The
 * channel's descriptor, or -1 with err (the room not running, or its
 * keeper refused). */
int exec_channel_open(const struct room *r, uint32_t pids_limit, uint64_t exec_timeout_max_ms,
		      char *err, size_t errlen);

/* Before the idle sweep stops a room (locked): its keeper closes its exec
 * channels unless one of their execs runs, sending back what was sent on
 * them (keeper_proto.h, KP_CLOSE).  1 closed, 0 not idle (an exec runs, or
 * one was sent back), -1 no answer within 5 s (the keeper is gone, hung,
 * or older than this: the sweep stops the room as before). */
int exec_channels_close(const struct room *r);

#endif
