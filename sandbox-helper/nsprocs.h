/* A room's processes found by its pid namespace, for hosts without cgroups.
 *
 * Where the room has a cgroup, cgroup_kill_others (cgroup.c) is the way:
 * it freezes the room while it kills.  Without cgroups there is no pids
 * limit either (no fork bomb can hold the room full), and the room's
 * processes are those whose /proc/<pid>/ns/pid is its keeper's: a room
 * cannot make a pid namespace of its own (the seccomp filter refuses it). */
#ifndef ROOMBOX_NSPROCS_H
#define ROOMBOX_NSPROCS_H

#include <stddef.h>
#include <sys/types.h>

/* SIGKILL every process in keeper's pid namespace but the keeper, again
 * until none is left (at most 2 s).  *killed = how many distinct processes
 * were killed.  0, or -1 with err naming the step. */
int nsprocs_kill_others(pid_t keeper, int *killed, char *err, size_t errlen);

/* The same for every process whose real or effective uid is one of the
 * count host ids from lo: a room's ids, whatever holds the process (its
 * cgroup, its keeper's pid namespace, or neither: a keeper the room never
 * recorded, or anything else of those ids) -- but one whose effective uid
 * is another user's than root's is judged by that alone (nsprocs.c,
 * may_match, says when a real uid of the ids comes with one).  The caller
 * is spared. */
int nsprocs_kill_uids(uid_t lo, uid_t count, int *killed, char *err, size_t errlen);

#endif
