/* The keeper's exec channels (common/exec_channel.h): see channel.c. */
#ifndef ROOMBOX_KEEPER_CHANNEL_H
#define ROOMBOX_KEEPER_CHANNEL_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shell_env.h"

#define MAX_CHANNELS 64

/* One exec that came on a channel, from its request to its answer. */
struct chan_job {
	int channel;              /* its slot, -1 once the channel is closed */
	struct shell_env env;     /* argv and envp the shell runs with */
	char *text;               /* the request's strings (env points in) */
	int session_out;          /* a memfd: the shell's fd 9 */
	bool save, as_user;
	int64_t t0_us;            /* monotonic, at the spawn */
	int64_t started_ms;       /* wall clock */
};

/* KP_CHANNEL on a helper's connection conn (msg[0..len), fds[0..nfds)):
 * a channel made and sent back, or KP_FAILED; conn closed.  The
 * descriptors kept are set to -1 in fds (the caller closes the rest). */
void channel_open(int conn, const void *msg, size_t len, int *fds, int nfds);

/* KP_CLOSE on a helper's connection conn: every channel shut, what was
 * sent on them answered KC_ELSEWHERE, closed, and KP_CLOSED answered with
 * that count; or KP_FAILED while a channel exec runs.  conn closed. */
void channel_close_all(int conn);

/* The channels for poll: added at p[0..), their count. */
int channel_poll_add(struct pollfd *p, int room);
/* After poll: each of p[0..n) that channel_poll_add gave (and still is
 * that channel) looked at -- a request taken, an end seen. */
void channel_poll_check(const struct pollfd *p, int n);

/* From keeper.c, when a channel's exec ends: its session kept, the
 * room's marks updated, the exec's held stdout and stderr closed
 * (exec_held_close), answered (KC_EXITED, or KC_FAILED when failed is
 * set, errno and text); job freed. */
void channel_exec_done(struct chan_job *job, int status, bool timed_out, bool failed, int err,
		       const char *text, int held[2]);

/* In keeper.c: start job's shell with in, *out and *err as its stdin,
 * stdout and stderr, deadline timeout_ms; once it started, *out and *err
 * are the exec's (set to -1: kept until the answer).  0, or -errno of a
 * failed fork (-EAGAIN: the room is at its process limit) / -1 with why. */
int exec_spawn_job(struct chan_job *job, int in, int *out, int *err, uint64_t timeout_ms,
		   uint32_t pids, char *why, size_t whylen);
/* In keeper.c: the two descriptors an exec holds until its answer (its
 * shell's stdout and stderr, keeper.c says why) closed, each set to -1. */
void exec_held_close(int held[2]);
/* In keeper.c: the channel of job went away while its shell runs: the
 * exec is killed, as a helper's hang-up kills its exec. */
void exec_cancel_job(struct chan_job *job);

#endif
