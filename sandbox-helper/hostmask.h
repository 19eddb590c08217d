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
 * so those entries do not exist in the room.  A tree whose root, or a
 * directory above it (/var, /var/lib), others may not list and search is
 * hidden whole.
 *
 * Building it means reading the mode of every file of the trees (about a
 * second for a Debian /usr with a warm cache), so it is built once and
 * kept in <run_dir>/mask-<key>-<sum>, named by <run_dir>/mask.current.
 * The key sums the boot's id and the trees' top two levels: the status
 * of the directories above each tree, of its root and of each entry
 * directly in it; a room's start checks only that (a fraction of a
 * millisecond).  Adding, removing or renaming an entry there or in one of
 * those directories (/usr/share, /usr/lib, /var/lib/dpkg, whose status
 * file dpkg rewrites on every change) makes a new key, and the next
 * helper that looks (the service's idle sweep or a room's start) builds
 * the mask anew.  The sum covers every entry the build reads (inode,
 * mode, owner, ctime): the idle sweep walks the trees in full when the
 * last full walk (mask.current's mtime) is HOSTMASK_SWEEP_WALK_S old, and
 * builds a new mask if the sum differs, so a change deeper down (a
 * chmod 600 in /usr/share/doc/foo/) reaches new rooms within that plus
 * one sweep period (3.5 minutes); with no sweep (idle_timeout = 0) a
 * room's start does that walk once the last one is HOSTMASK_START_WALK_S
 * old.  A running room keeps the mask it started with, and sees host
 * files made owner-only after its start until it restarts.  A mask is
 * never changed once made (a running room may use it): a new one gets a
 * new name, and old ones stay until reboot (a helper cannot tell whether
 * a room still has one as a layer).  Builds a killed helper left
 * (mask-*.tmp.*) are removed by the next helper that takes mask.lock. */
#ifndef ROOMBOX_HOSTMASK_H
#define ROOMBOX_HOSTMASK_H

#include <stddef.h>
#include <stdint.h>
#include "config.h"

#define HOSTMASK_SWEEP_WALK_S (3 * 60)
#define HOSTMASK_START_WALK_S (15 * 60)

/* One shared tree: its host path without the leading slash ("usr",
 * "var/lib/dpkg") and its name in the mask ("usr", "var-lib-dpkg"). */
struct hostmask_tree {
	const char *path, *name;
};

/* The mask for the trees as they are now: its path in out (built first if
 * none matches the key, or if a full walk is due and finds them changed).
 * Trees that are not directories on this host are left out.  Runs as host
 * root.  0, or -1 with err. */
int hostmask_prepare(const struct config *cfg, const struct hostmask_tree *trees, size_t n,
		     char *out, size_t outlen, char *err, size_t errlen);

/* This helper runs the idle sweep (or the service's start): its
 * hostmask_prepare walks the trees in full once the last full walk is
 * HOSTMASK_SWEEP_WALK_S old (a room's start: HOSTMASK_START_WALK_S). */
void hostmask_sweeping(void);

/* Whether a host entry of this mode stays out of rooms: a file others may
 * not read, a directory others may not both list and search. */
int hostmask_hides(unsigned mode);

/* The parts of hostmask_prepare, for trees under host_root ("" for the
 * host's own): hostmask_prepare with the mask in run_dir and a full walk
 * once the last is max_age seconds old; the key of the trees as they are
 * now (0, or -1 with errno); their mask built into path, which must not
 * exist yet, and the sum of what it read (0, or -1 with err); and that
 * sum alone, read as if building into path (0, or -1 with err). */
int hostmask_current(const char *host_root, const char *run_dir, const struct hostmask_tree *trees,
		     size_t n, unsigned max_age, char *out, size_t outlen, char *err, size_t errlen);
int hostmask_key(const char *host_root, const struct hostmask_tree *trees, size_t n, uint64_t *key);
int hostmask_build(const char *host_root, const struct hostmask_tree *trees, size_t n,
		   const char *path, uint64_t *sum, char *err, size_t errlen);
int hostmask_sum(const char *host_root, const struct hostmask_tree *trees, size_t n,
		 const char *path, uint64_t *sum, char *err, size_t errlen);

#endif
