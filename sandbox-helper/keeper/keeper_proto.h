/* Between roombox-helper and a room's roombox-keeper.
 *
 * The keeper listens on <run_dir>/rooms/<id>/sock (SOCK_SEQPACKET, in a
 * root-only directory; it also checks the peer is uid 0).  One connection is
 * one exec:
 *
 *   helper -> keeper   KP_EXEC, with descriptors [blob, stdout, stderr,
 *                      session] and, when the exec has input, [stdin]
 *                      (else the shell reads the keeper's /dev/null); blob
 *                      is a memfd holding a struct kp_blob followed by argc
 *                      then envc NUL-terminated strings; session is where
 *                      the shell writes its `export -p` as it ends (the
 *                      helper passes the blob's memfd again, its offset at
 *                      the blob's end).
 *                      The shell runs as the room's root (uid 0 in the
 *                      room's user namespace) or, with KP_AS_USER, as its
 *                      user (uid 1000): ids of that namespace, which is all
 *                      the keeper can name -- never a host id.
 *   keeper -> helper   one answer, when the shell ends: KP_EXITED (wait
 *                      status, timed_out), or KP_FAILED (text, and in
 *                      status the errno of a failed fork: EAGAIN = the
 *                      room is at its pids_limit) if it could not start;
 *                      then the keeper closes the connection.
 *                      At the deadline the keeper first stops and kills the
 *                      shell's whole tree (the shell is a child subreaper,
 *                      so daemonised processes stay in it).  A connection
 *                      that ends without an answer means the keeper is
 *                      gone: the command may have run, so it is not tried
 *                      again.  A connection the helper closes before the
 *                      answer kills the exec.
 *                      KP_TOOL: argv is not a command line but one of
 *                      the keeper's own tools (tools.c; the operations in
 *                      common/protocol.h), envc 0: the child does it
 *                      itself, as the request's user, in the room, and
 *                      its exit status is the answer's.  No program of the
 *                      room runs.
 *                      KP_DETACH: the child forks, and the fork starts a
 *                      session of its own and runs the shell; the child
 *                      itself ends at once (status 0), so the answer comes
 *                      at once and the shell is no longer the exec's: its
 *                      deadline never reaches it (a managed process).
 *   helper -> keeper   KP_CHANNEL (struct kp_channel, not kp_msg): a new
 *                      exec channel for roombox-fcgi (common/
 *                      exec_channel.h), with descriptors [root's session,
 *                      the user's session, busy, active] (room.h's files,
 *                      opened by the helper: the keeper cannot reach the
 *                      state directory) and the room's pids_limit and
 *                      execTimeoutMax.  The room's latest descriptors and
 *                      limits serve all its channels.
 *   keeper -> helper   KP_CHANNEL_OK with the channel (SCM_RIGHTS), or
 *                      KP_FAILED; then the keeper closes the connection.
 *   helper -> keeper   KP_CLOSE (a kp_msg), from the idle sweep, with the
 *                      room locked: close every exec channel, unless one
 *                      of their execs runs.
 *   keeper -> helper   KP_CLOSED, every channel shut first (roombox-fcgi's
 *                      next request on one fails to send) and each request
 *                      already sent on one answered KC_ELSEWHERE (nothing
 *                      ran: roombox-fcgi hands it to the helper, which
 *                      waits for the room's lock), status = how many were
 *                      (a room wanted: not idle); or KP_FAILED, a channel
 *                      exec runs, nothing changed.  A channel exec takes no
 *                      room lock, so this is how the sweep knows none is
 *                      under way, nor can start, when it stops the room.
 *   What the exec leaves running becomes the keeper's; if at the exec's
 *   deadline the room is at its process limit, that is a background fork
 *   bomb, and every process outside running execs is killed.
 */
#ifndef ROOMBOX_KEEPER_PROTO_H
#define ROOMBOX_KEEPER_PROTO_H

#include <stdint.h>

#define KP_MAGIC 0x72626b36u  /* "rbk6" */

enum kp_type { KP_EXEC = 1, KP_FAILED, KP_EXITED, KP_CHANNEL, KP_CHANNEL_OK, KP_CLOSE,
	       KP_CLOSED };

struct kp_msg {
	uint32_t type;
	int32_t status;
	int32_t timed_out;
	char text[200];
};

#define KP_CHANNEL_FDS 4   /* session root, session user, busy, active */
struct kp_channel {
	uint32_t type;            /* KP_CHANNEL */
	uint32_t pids_limit;
	uint64_t exec_timeout_max_ms;
};

struct kp_blob {
	uint32_t magic;
	uint32_t argc, envc;
	uint32_t pids_limit;      /* to tell a fork bomb from a background job */
	uint64_t timeout_ms;
	uint32_t who;             /* KP_AS_ROOT or KP_AS_USER */
	uint32_t flags;           /* KP_TOOL, KP_DETACH, both or 0 */
};

/* (1 was a download's "open first", done by the get tool now) */
#define KP_TOOL   2u
#define KP_DETACH 4u

enum kp_who { KP_AS_ROOT = 0, KP_AS_USER = 1 };
/* the room's ids, inside its user namespace */
#define KP_ROOT_ID 0u
#define KP_USER_ID 1000u

#endif
