/* A room's saved session read as variables, without a shell: a strict
 * parser of the text dash's `export -p` writes (and of the export lines
 * shell_env.c appends for a request's env), so the keeper can hand the
 * shell its session as its environment instead of having the shell
 * evaluate it (shell_env_direct, shell_direct.h).
 *
 * Why the keeper parses it, not the setuid helper: the session is bytes
 * the room wrote (its shell's fd 9, or anything a room process put there),
 * and the helper runs as the host's root -- it must never parse room-
 * written bytes.  The helper only carries the session on as one string
 * (__RB_SESSION in the kp_blob); the keeper runs as the room's own root in
 * the room's user namespace, where a parser bug reaches nothing the room
 * does not already have.
 *
 * Accepted, line by line (and nothing else: any other byte, a NUL, a
 * quote left open, a name dash would not take, is a refusal, and the
 * caller lets the shell evaluate the text as before):
 *
 *   (empty line)
 *   export NAME
 *   export NAME=WORD
 *
 * NAME is [A-Za-z_][A-Za-z0-9_]*, WORD zero or more of: '...' (any bytes
 * but ', newlines included), "'..." (only single quotes inside double
 * quotes: dash's single_quote() writes a run of ' that way) and \' (how
 * shquote.c writes one).  Each is a form whose bytes dash takes as they
 * are: no expansion, no field splitting in an assignment.  A name given
 * twice takes its last value, as the shell's evaluation would.  libc only:
 * linked into the keeper (musl), the unit tests and the fuzz target. */
#ifndef ROOMBOX_SESSION_VARS_H
#define ROOMBOX_SESSION_VARS_H

#include <stdbool.h>
#include <stddef.h>

#define SESSION_VARS_MAX 1024    /* more is refused (the shell evaluates it) */

struct session_var {
	const char *name;
	const char *value;        /* NULL: `export NAME`, no value */
	size_t value_len;         /* a value holds no NUL: strlen(value) */
	size_t line;              /* its place in the text (the last one kept) */
};

/* The variables, sorted by name, each name once; the strings live in buf. */
struct session_vars {
	struct session_var *v;
	size_t n;
	char *buf;
};

/* s[0..len) into out.  0, or -1 (nothing to free) when it is not a session
 * of the form above or memory ran out. */
int session_vars_parse(const char *s, size_t len, struct session_vars *out);
void session_vars_free(struct session_vars *sv);


#endif
