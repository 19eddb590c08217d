/* The one way roombox-fcgi touches a sandbox: run roombox-helper once per
 * operation, a request record on its stdin, an answer record on its stdout
 * (see common/protocol.h).  One typed function per operation: each encodes
 * its request (common/helper_rec.c) and decodes and checks its answer
 * here; no request is made anywhere else.  Thread-safe: every call has its
 * own pipes and child. */
#ifndef ROOMBOX_FCGI_HELPER_CLIENT_H
#define ROOMBOX_FCGI_HELPER_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/resource.h>
#include <json-c/json.h>

#include "protocol.h"

/* An answer bigger than this is cut off and the call fails (a list of
 * every room fits many times over). */
#define HELPER_REPLY_MAX (64u << 20)

/* Wall-clock bound on operations other than exec (creating a room may have
 * to make a file system); exec gets its own timeout plus HELPER_EXEC_GRACE_MS. */
#define HELPER_DEFAULT_DEADLINE_MS (5 * 60 * 1000)
/* ... and on snapshot, restore and fork: the helper's own bound on a copy
 * of a whole image and a margin (nginx waits 660 s: nginx-roombox.conf) */
#define HELPER_COPY_DEADLINE_MS ((HELPER_COPY_ALARM_S + 30) * 1000L)
#define HELPER_EXEC_GRACE_MS (60 * 1000)

struct helper_error {
	int http_status;     /* 400 invalid, 404 not_found, 429 limit, 500 else */
	char code[16];       /* the helper's code, or "spawn"/"reply"/"timeout" */
	char message[1024];  /* the helper's error text, or what went wrong here */
};

struct helper_target {
	const char *helper;       /* path of roombox-helper */
	const char *config_path;  /* passed as -c */
	uint64_t max_body;        /* requests over helper_request_max(max_body) are 413 */
};

/* The descriptor limit every helper starts with from now on (roombox-fcgi
 * raises its own, and hands the helper, and the rooms it starts, the one
 * it was given). */
void helper_child_nofile(const struct rlimit *lim);

/* Each returns 0 with its answer filled in, or -1 with *err filled.
 * Operations other than exec are bounded by deadline_ms (past it the
 * helper is killed). */
int helper_create(const struct helper_target *t, const char *room, struct helper_status *st,
		  struct helper_error *err);
int helper_status(const struct helper_target *t, const char *room, struct helper_status *st,
		  struct helper_error *err);
/* every room: *rooms malloc'd (free()), *n of them */
int helper_list(const struct helper_target *t, long deadline_ms, struct helper_status **rooms,
		size_t *n, struct helper_error *err);
int helper_destroy(const struct helper_target *t, const char *room, struct helper_error *err);
int helper_stop(const struct helper_target *t, const char *room, struct helper_error *err);
/* the room's own limits (those named in args->set): its status after */
int helper_set_limits(const struct helper_target *t, const char *room,
		      const struct helper_limits_args *args, struct helper_status *st,
		      struct helper_error *err);
int helper_kill_all(const struct helper_target *t, const char *room, uint32_t flags,
		    uint32_t *killed, struct helper_error *err);
int helper_restart(const struct helper_target *t, const char *room, struct helper_error *err);
int helper_info(const struct helper_target *t, long deadline_ms, struct helper_info_ans *info,
		struct helper_error *err);

/* Snapshots (fcgi-app/rooms/snapshots.c): ref is a snapshot's id or name, name
 * a new one's ("" or NULL: none), to a fork's new room.  The list is
 * malloc'd (free()), oldest first. */
int helper_snapshot(const struct helper_target *t, const char *room, const char *name,
		    struct helper_snapshot *out, struct helper_error *err);
int helper_snapshots(const struct helper_target *t, const char *room, struct helper_snapshot **list,
		     size_t *n, struct helper_error *err);
int helper_snapshot_delete(const struct helper_target *t, const char *room, const char *ref,
			   struct helper_snapshot *out, struct helper_error *err);
int helper_restore(const struct helper_target *t, const char *room, const char *ref,
		   struct helper_snapshot *out, struct helper_error *err);
int helper_fork(const struct helper_target *t, const char *room, const char *ref, const char *to,
		struct helper_snapshot *out, struct helper_error *err);

/* The rooms stop-idle or stop-all stopped: ids, count of them (free ids). */
struct helper_stopped {
	char (*ids)[HELPER_ROOM_LEN];
	size_t count;
};
int helper_stop_idle(const struct helper_target *t, long deadline_ms, const char *const *keep,
		     size_t nkeep, struct helper_stopped *out, struct helper_error *err);
int helper_stop_all(const struct helper_target *t, long deadline_ms, struct helper_stopped *out,
		    struct helper_error *err);

/* An exec as the helper takes it (common/protocol.h's exec op). */
struct helper_exec {
	const char *cmd;          /* NUL-free; or tool */
	size_t cmd_len;
	const char *const *tool;  /* a keeper tool's argv, NULL-terminated, or NULL */
	const char *cwd;          /* NULL or absolute */
	json_object *env;         /* NULL or an object of NUL-free strings */
	uint64_t timeout_ms;      /* 0: exec_timeout */
	const char *user;         /* NULL (exec_user), HK_USER_ROOT or HK_USER_USER */
	bool existing;            /* never create the room */
	bool running_only;        /* never start it: a stopped room is a 409 */
	bool detach;              /* a managed process: answer once started */
	bool timeout_cap;         /* timeout_ms a bound, cut to the room's maximum */
};

/* A call whose command I/O the caller handles itself (passed I/O):
 * helper_exec_start spawns the helper with pass[0..2] on its fds 3, 4, 5
 * and returns once the whole request is written; the caller then reads and
 * writes its pipes, polling helper_run_pidfd (readable once the helper has
 * exited), and ends with helper_exec_finish, which waits for the exit (up
 * to the deadline) and decodes the answer.  The caller closes its copies
 * of the passed descriptors. */
struct helper_run;
struct helper_run *helper_exec_start(const struct helper_target *t, const char *room,
				     const struct helper_exec *x, long deadline_ms, const int pass[3],
				     struct helper_error *err);
int helper_run_pidfd(const struct helper_run *run);
int helper_exec_finish(struct helper_run *run, struct helper_exec_ans *ans, struct helper_error *err);

/* port-connect: one connection to the room's 127.0.0.1:port sent over sock
 * (helper_port_connect), or many on request (helper_port_serve_start: the
 * caller talks over sock, polls helper_run_pidfd, and ends with
 * helper_port_serve_finish). */
int helper_port_connect(const struct helper_target *t, const char *room, uint16_t port, int sock,
			struct helper_error *err);
struct helper_run *helper_port_serve_start(const struct helper_target *t, const char *room,
					   long deadline_ms, int sock, struct helper_error *err);
int helper_port_serve_finish(struct helper_run *run, struct helper_error *err);

/* exec-channel: a running room's exec channel (common/exec_channel.h) in
 * *channel; a stopped room is not started (the call fails). */
int helper_exec_channel(const struct helper_target *t, const char *room, int *channel,
			struct helper_error *err);

/* touch: the room's activity now (lastActiveAt, idle stop); starts
 * nothing.  0, or -1 with err (not_found for a room that does not exist). */
int helper_touch(const struct helper_target *t, const char *room, struct helper_error *err);

/* export: the files of the room's snapshot (its id or name; NULL or "":
 * the room now) as a tree stream written to tree_fd (a pipe's write end;
 * the caller closes its copy and reads the other end), the sessions in
 * the answer (*root, *user malloc'd) and the snapshot's id in sid ("":
 * none).  import: the tree
 * stream read from tree_fd (a pipe's read end) into a new room, then the
 * sessions from sessions_fd (another's; protocol.h says how).  The
 * stream lasts as long as its client sends or reads; deadline_ms
 * (HELPER_TRANSFER_DEADLINE_MS) bounds the helper's work after its end,
 * counted from the call to _finish. */
#define HELPER_TRANSFER_DEADLINE_MS (60 * 60 * 1000)
struct helper_run *helper_export_start(const struct helper_target *t, const char *room,
				       const char *snapshot, int tree_fd, long deadline_ms,
				       struct helper_error *err);
int helper_export_finish(struct helper_run *run, char **root, char **user,
			 char sid[HELPER_ROOM_LEN], struct helper_error *err);
struct helper_run *helper_import_start(const struct helper_target *t, const char *room, int tree_fd,
				       int sessions_fd, long deadline_ms, struct helper_error *err);
int helper_import_finish(struct helper_run *run, struct helper_error *err);

/* The answer to op in buf[0..len), the helper having exited with status
 * exit_status (waitpid's): 0 with *rec (the op's record, *rec_len bytes,
 * every count checked against its size), or -1 with err (the helper's
 * error, or what is wrong with the answer).  For tests and the fuzz target
 * too. */
int helper_answer_decode(uint32_t op, int exit_status, const char *buf, size_t len,
			 const char **rec, size_t *rec_len, struct helper_error *err);

/* The HTTP status for a helper error code ("limit" -> 429, ...). */
int helper_code_status(const char *code);

#endif
