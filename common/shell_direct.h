/* A room's shell started with its saved session as its environment, in
 * its saved directory, instead of evaluating the session: for the keeper
 * alone.  The session is bytes the room wrote, so this and its parser
 * (session_vars.h) are linked into the keeper, which runs as the room's own
 * root in the room's user namespace, and never into the setuid helper
 * (the Makefile leaves COMMON_KEEPER_SRC out of it; a security test checks
 * the helper's symbols).  libc only. */
#ifndef ROOMBOX_SHELL_DIRECT_H
#define ROOMBOX_SHELL_DIRECT_H

#include <stddef.h>

/* From envp as shell_env_build (shell_env.h) made it: when its session parses (session_vars_parse),
 * names nothing an environment cannot say the same way, no one-off cwd is
 * given and the wrapper is this build's, the shell can get the exported
 * variables directly (HOME, USER and LOGNAME still the fixed ones), a
 * wrapper with only the trap and the command, and dir, the directory the
 * wrapper's cd would try first (the saved __RB_CWD, or /workspace).  The
 * child enters dir as the shell's user and execs with d->envp (PWD names
 * dir); when it cannot enter dir, it execs with envp as it was, and the
 * wrapper finds the fallback as it always has.  0, or -1: start the shell
 * with envp as it is (d->dir NULL, d->envp meaning nothing). */
struct shell_direct {
	const char *dir;
	char **envp;
	char *buf;                /* the strings */
	size_t buf_cap, envp_cap; /* what buf and envp hold room for */
};
/* d starts all zero; its memory is kept from call to call (a keeper's
 * exec slot makes one per exec: no heap mapped and unmapped each time),
 * and is released by shell_direct_free. */
int shell_env_direct(char *const *envp, struct shell_direct *d);
void shell_direct_free(struct shell_direct *d);

#endif
