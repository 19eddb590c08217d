/* A room's exec channel: the records between roombox-fcgi and the room's
 * keeper, once the helper has handed roombox-fcgi a channel (common/
 * protocol.h, exec-channel).  A warm exec then costs no setuid process.
 *
 * A channel is one end of a SOCK_SEQPACKET socketpair the keeper made; it
 * is *restricted*: the only request on it is KC_EXEC, what roombox-fcgi
 * could already ask the helper's exec for -- a shell command as the room's
 * root or user, with the caller's own stdin, stdout and stderr, a timeout
 * no longer than the room's execTimeoutMax, the room's session read and
 * saved as the helper's exec does.  No tool, no detached start, nothing
 * else the keeper does for the helper is reachable on it.  One exec at a
 * time per channel:
 *
 *   fcgi -> keeper   struct kc_req, with exactly KC_REQ_FDS descriptors:
 *                    [text, stdin, stdout, stderr]; text is a memfd (or
 *                    any regular file) of exactly text_size bytes: the
 *                    command, NUL; with KC_CWD the one-off working
 *                    directory (absolute), NUL; then nenv "NAME=value"
 *                    strings, each NUL-terminated, filling it exactly.
 *                    With KC_INLINE the text (at most KC_INLINE_MAX
 *                    bytes) follows the struct in the same record instead,
 *                    and only [stdin, stdout, stderr] come: most requests
 *                    are a few bytes, and a memfd made, written, read and
 *                    freed per exec cost more than the exec's other system
 *                    calls on either side.
 *   keeper -> fcgi   one struct kc_ans when the shell ends (KC_EXITED) or
 *                    could not start (KC_FAILED: status is the errno of a
 *                    failed fork, EAGAIN = the room is at its pids_limit;
 *                    nothing ran, so the caller may take the exec to the
 *                    helper, which frees the room and says why), or at
 *                    once KC_ELSEWHERE (a timeout above the room's
 *                    execTimeoutMax: the helper gives that answer; nothing
 *                    ran).  The channel then takes the next request.
 *                    A request that breaks this shape (size, magic,
 *                    version, op, flags, descriptors, text) is answered
 *                    KC_BAD with the reason, nothing is done, and the
 *                    keeper closes the channel.
 *   The end of the channel (EOF) without an answer: the keeper is gone
 *   (the room stopped or restarted); the command may have run.  A channel
 *   roombox-fcgi closes while its exec runs kills that exec, as the
 *   helper's hang-up does.
 *
 * The parser (kc_parse) is the keeper's, pure, and fuzzed
 * (tests/fuzz/fuzz_exec_channel.c): every byte of a request is untrusted. */
#ifndef ROOMBOX_EXEC_CHANNEL_H
#define ROOMBOX_EXEC_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KC_MAGIC   0x7262636bu   /* "rbck" */
#define KC_VERSION 1u
#define KC_REQ_FDS 4
/* the most text a request may carry: a command and an environment, each
 * at most what one execve string takes, and the one-off directory */
#define KC_TEXT_MAX (512u * 1024u)
#define KC_ENV_MAX 4096u
/* the most text a record carries itself (KC_INLINE): well inside a
 * SOCK_SEQPACKET record's limit (the socket's send buffer) */
#define KC_INLINE_MAX (16u * 1024u)

enum kc_op { KC_EXEC = 1 };
enum kc_ans_type { KC_EXITED = 1, KC_FAILED, KC_ELSEWHERE, KC_BAD };

/* request flags */
#define KC_AS_USER     1u   /* the room's user (uid 1000), else its root */
#define KC_CWD         2u   /* a one-off working directory follows cmd */
#define KC_TIMEOUT_CAP 4u   /* timeout_ms is a bound: cut to execTimeoutMax */
#define KC_INLINE      8u   /* the text follows the struct; no text descriptor */
#define KC_ALL         15u

struct kc_req {
	uint32_t magic, version;
	uint32_t op;              /* enum kc_op */
	uint32_t flags;           /* KC_* */
	uint64_t timeout_ms;      /* > 0 */
	uint32_t nenv;            /* "NAME=value" strings after cmd (and cwd) */
	uint32_t text_size;       /* the text descriptor's exact size */
};

struct kc_ans {
	uint32_t magic, version;
	uint32_t type;            /* enum kc_ans_type */
	int32_t status;           /* KC_EXITED: wait status; KC_FAILED: errno */
	uint32_t timed_out;
	uint32_t reserved;
	uint64_t duration_us;
	int64_t started_ms;       /* wall clock, ms since the epoch */
	char text[160];           /* KC_FAILED, KC_ELSEWHERE, KC_BAD: why */
};

/* One request, checked: pointers into the text it was parsed from. */
struct kc_order {
	const char *cmd;
	const char *cwd;          /* NULL, or absolute */
	const char *env;          /* nenv consecutive strings, or NULL */
	uint32_t nenv;
	bool as_user, timeout_cap;
	uint64_t timeout_ms;
};

/* The record rec[0..rec_len) that came with nfds descriptors, and the
 * text (text_len bytes, as read from its descriptor, or with KC_INLINE what
 * followed the struct in the record, rec_len then being the struct's size;
 * NUL-terminated one past its end).  0 with *o filled, or -1 with why.
 * The text is looked at only once the record is right (text may be NULL
 * then). */
int kc_parse(const void *rec, size_t rec_len, int nfds, const char *text, size_t text_len,
	     struct kc_order *o, char *why, size_t whylen);

#endif
