/* Starting one exec's shell as the room's user: see spawn.c. */
#ifndef ROOMBOX_KEEPER_SPAWN_H
#define ROOMBOX_KEEPER_SPAWN_H

#include <stdbool.h>
#include <sys/types.h>

#include "shell_direct.h"

/* What the child needs, in memory that stays put (and unchanged) until the
 * child has exec'd or died: with a shared address space it reads this
 * while the keeper goes on. */
struct spawn_plan {
	char **argv, **envp;
	int out, err, session;    /* placed on 1, 2 and 9 */
	int in;                   /* placed on 0, or -1: the keeper's fd 0 stays */
	int report;               /* error pipe (write end), placed on 10 */
	uid_t uid;
	gid_t gid;
	bool tool;                /* KP_TOOL: argv names a tool, done by the child */
	bool detach;              /* KP_DETACH: the shell in a new session, the child ends */
	/* set by spawn_shell: the session as the shell's environment, when
	 * it can be (shell_env_direct), made in the exec slot's memory */
	const struct shell_direct *direct;
};

/* What an exec slot keeps from one exec to the next: the child's stack
 * (mapped on first use) and the memory of the shell's environment.  The
 * next exec in the slot uses them only once the child has exec'd or died;
 * keeping them maps and unmaps nothing per exec (musl returns an empty
 * heap group at once, a TLB flush on each CPU the keeper's child ran on). */
struct spawn_slot {
	void *stack;
	struct shell_direct direct;
};

/* Once, before any spawn: whether sharing memory with a child is safe is
 * read from /proc/sys/fs/suid_dumpable on every spawn; the keeper's own
 * open-file limit is raised to its hard one (each child gets the room's
 * back). */
void spawn_init(void);

/* Starts the shell, with its session as its environment when envp's
 * session parses (see shell_env_direct: the keeper's parse of what the
 * room wrote, never the helper's), in slot's memory.  Returns the pid, or
 * -errno. */
pid_t spawn_shell(struct spawn_plan *p, struct spawn_slot *slot);

/* The slot's exec is over (its child exec'd or died): an environment's
 * memory larger than a usual session's is given back, so a burst of execs
 * with large sessions does not keep it. */
void spawn_slot_done(struct spawn_slot *slot);

#endif
