/* A room's jail: the keeper process that holds its namespaces and root. */
#ifndef ROOMBOX_JAIL_H
#define ROOMBOX_JAIL_H

#include <limits.h>
#include <stddef.h>
#include <sys/types.h>
#include "room.h"
#include "cgroup.h"

/* The namespaces every room has, held by its keeper. */
#define JAIL_NS_FLAGS (CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWNET | \
		       CLONE_NEWPID | CLONE_NEWCGROUP)

/* The host-made lower trees of rootfs = host: <run_dir>/base-3 (the root,
 * with an /etc drawn from an allowlist) and the mask over the shared host
 * trees (hostmask.h).  Both empty for a prepared rootfs. */
struct jail_lower {
	char base[PATH_MAX];
	char mask[PATH_MAX];
};

/* Make them if they are missing or (the mask) stale; jail_start does this
 * itself, and the service's start (info) does it first, so that no room's
 * start pays for building them.  0, or -1 with err. */
int jail_lower_prepare(const struct config *cfg, struct jail_lower *lower, char *err, size_t errlen);

/* Start the room's keeper (caller holds the room lock exclusively and has
 * checked that none runs).  Returns the keeper's host pid, or -1 with err. */
pid_t jail_start(struct room *r, const struct cgroup_sys *cg, char *err, size_t errlen);

/* Wait for the next new room's disk image, if a creation's jail_start
 * began one (a thread); the helper calls it once its call is done. */
void jail_spare_wait(void);

/* Kill the keeper (and with it the whole pid namespace) and wait until it
 * is gone.  0, or -1 with err. */
int jail_stop(const struct room *r, const struct cgroup_sys *cg, pid_t keeper, char *err, size_t errlen);

/* Open roombox-keeper (beside the helper) for execveat; -1 with err. */
int jail_keeper_exe_open(char *err, size_t errlen);

#endif
