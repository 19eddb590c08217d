/* The environment a room's shell starts with, and the session it leaves:
 * the one place both are made, for the helper's exec path (sandbox-helper/
 * exec.c) and the keeper's exec channel (sandbox-helper/keeper/channel.c),
 * so a command runs the same whichever way it came.  libc only: linked
 * into the helper and the keeper (musl) and roombox-fcgi's tests alike.
 *
 * The session is the text of the shell's last `export -p` (exported
 * variables and __RB_CWD, its working directory).  The shell evaluates it,
 * runs the command and, when asked to save, writes the new `export -p` on
 * fd 9 ended by SHELL_SESSION_END: a session is kept only when that marker
 * came (the shell ended by itself), and written only when it changed. */
#ifndef ROOMBOX_SHELL_ENV_H
#define ROOMBOX_SHELL_ENV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SHELL_SESSION_MAX (120 * 1024)   /* one environment string (MAX_ARG_STRLEN) */
#define SHELL_SESSION_END "#roombox-session-end\n"
/* execve takes no single argument or environment string longer than this
 * (MAX_ARG_STRLEN, 32 pages): the command and the session travel as one. */
#define SHELL_ARG_STRLEN_MAX (32 * 4096 - 1)

/* A name dash takes as a variable (and from the environment):
 * [A-Za-z_][A-Za-z0-9_]*, s[0..n).  The one rule, for the session's
 * variables (session_vars.c) and a request's env (shell_env.c). */
static inline bool shell_var_name(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (i > 0 && c >= '0' && c <= '9')))
			return false;
	}
	return n > 0;
}

/* The environment of the shell: fixed defaults, the session text and, for
 * a one-off scope, the request's variables appended as export lines (so
 * they win over the session's).  Every string is owned by envp. */
struct shell_env {
	char **envp;
	size_t n;
	size_t old_len;          /* the saved session's bytes, after "__RB_SESSION=" */
	const char *session;     /* "__RB_SESSION=..." (one of envp) */
	const char *argv[6];     /* /bin/sh -c <wrapper> sh <cmd> */
};

/* For cmd as the room's user (as_user) or root, its session text old (""
 * for none), a one-off cwd (NULL) and nenv consecutive "NAME=value" env
 * strings (names a shell cannot take are dropped); save: the shell writes
 * its session on fd 9 at the end.  0, or -1 with err (naming room). */
int shell_env_build(struct shell_env *e, const char *room, const char *cmd, bool as_user, bool save,
		    const char *cwd, const char *old, const char *env, uint32_t nenv,
		    char *err, size_t errlen);
void shell_env_free(struct shell_env *e);

/* What the shell wrote on fd 9 (buf[0..len)): true when it is a whole
 * session that differs from the one it started with, *n its bytes (the
 * marker left off) to keep. */
bool shell_env_session_new(const struct shell_env *e, const char *buf, size_t len, size_t *n);

/* The wrapper the shell evaluates (the value of __RB_WRAPPER, "__RB_WRAPPER="
 * and the script), and the shorter one of a shell started with its session
 * as its environment (shell_direct.h). */
extern const char shell_wrapper[];
extern const char shell_wrapper_direct[];

#endif
