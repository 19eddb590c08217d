#ifndef ROOMBOX_EXEC_H
#define ROOMBOX_EXEC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include "minijson.h"
#include "room.h"
#include "cgroup.h"

struct exec_request {
	const char *cmd;
	uint64_t timeout_ms;
	const struct mj_value *env;  /* object of string -> string, or NULL */
	const char *cwd;         /* absolute path, or NULL */
	const char *stdin_data;  /* NULL = /dev/null */
	size_t stdin_len;
	bool as_user;            /* run as the room's user (1000), else its root */
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
struct exec_job *exec_prepare(const struct room *r, const struct exec_request *q,
			      char *err, size_t errlen);
void exec_job_free(struct exec_job *j);

/* Run the prepared command in the room whose keeper is connected on conn
 * (closed here); what came of it in *o.  0, or -1
 * with err when the sandbox could not run it at all, or EXEC_KEEPER_GONE
 * when the request could not be sent (it never reached a keeper: the
 * caller restarts the jail and runs the same job again). */
#define EXEC_KEEPER_GONE (-2)
int exec_run(const struct room *r, int conn, struct exec_job *j, const struct exec_request *q,
	     struct exec_outcome *o, char *err, size_t errlen);

/* Single-quote s for /bin/sh; appended to buf (malloc'd, grown). */
int shell_quote_append(char **buf, size_t *len, size_t *cap, const char *s, size_t n);

#endif
