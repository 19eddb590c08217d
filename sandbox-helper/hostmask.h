/* The mask over the host trees a room shares (rootfs = host): whiteouts
 * for what the host lets only an owner or group read.
 *
 * A room sees the host's /usr (and the other shared trees) through an
 * idmapped mount on which host root is the room's root, who owns every
 * file there and so could read a 0600 root file.  The mask is a tree of
 * overlay whiteouts, one for each file not readable by others and each
 * directory not both readable and searchable by others, with copies of
 * the host directories that lead to them (same owner, mode and times); it
 * sits in each room's overlay as a lower layer right above the host's,
 * so those entries do not exist in the room.
 *
 * Building it means reading the mode of every file of the trees (about a
 * second for a Debian /usr with a warm cache), so it is built once and
 * kept in <run_dir>/mask-<key>, where the key sums the trees' top two
 * levels: the status (device, inode, mtime, ctime) of each tree's root and
 * of each entry directly in it.  Adding, removing or renaming an entry
 * there or in one of those directories (/usr/share, /usr/lib,
 * /var/lib/dpkg, whose status file dpkg rewrites on every change) makes a
 * new key, and the service's idle sweep or the next room that starts,
 * whichever comes first, builds the mask anew.  A change
 * deeper down alone (a chmod in /usr/share/foo) is seen once the key
 * changes, or after a reboot (run_dir is a tmpfs).  A mask in use by a
 * running room is never changed: a new one gets a new name. */
#ifndef ROOMBOX_HOSTMASK_H
#define ROOMBOX_HOSTMASK_H

#include <stddef.h>
#include <stdint.h>
#include "config.h"

/* One shared tree: its host path without the leading slash ("usr",
 * "var/lib/dpkg") and its name in the mask ("usr", "var-lib-dpkg"). */
struct hostmask_tree {
	const char *path, *name;
};

/* The mask for the trees as they are now: its path in out (built first if
 * none matches the key).  Trees that are not directories on this host are
 * left out.  Runs as host root.  0, or -1 with err. */
int hostmask_prepare(const struct config *cfg, const struct hostmask_tree *trees, size_t n,
		     char *out, size_t outlen, char *err, size_t errlen);

/* Whether a host entry of this mode stays out of rooms: a file others may
 * not read, a directory others may not both list and search. */
int hostmask_hides(unsigned mode);

/* The parts of hostmask_prepare, for trees under host_root ("" for the
 * host's own): the key of the trees as they are now (0, or -1 with
 * errno), and their mask built into path, which must not exist yet (0, or
 * -1 with err). */
int hostmask_key(const char *host_root, const struct hostmask_tree *trees, size_t n, uint64_t *key);
int hostmask_build(const char *host_root, const struct hostmask_tree *trees, size_t n,
		   const char *path, char *err, size_t errlen);

#endif
