/* A room's user namespace, and the idmapped mounts that show the room its
 * files with the room's own ids.
 *
 * Each room's ids 0-65535 map onto host ids room_host_id(r, 0) ...
 * room_host_id(r, 65535), the range of the room's uid slot (room.h).
 *
 * Files keep room-relative ids on disk: the room's disk (its upper layers)
 * and the lower trees are mounted through an idmapped mount of the room's
 * namespace, so a file the room's root writes is stored as owner 0 and one
 * of its user as 1000, whatever slot the room has; moving a room to another
 * slot or host is a copy.  The host's lower tree (owned by host root)
 * appears owned by the room's root. */
#ifndef ROOMBOX_USERNS_H
#define ROOMBOX_USERNS_H

#include <stddef.h>
#include <sys/types.h>
#include "room.h"

/* Make the room's user namespace (a child creates it, this process writes
 * its maps) and return a descriptor for it, or -1 with err.  Runs as host
 * root, single-threaded; the child is reaped before this returns. */
int userns_make(const struct room *r, char *err, size_t errlen);

/* Mount `src` (a directory) on `dst` (created) through an idmapped clone
 * for the user namespace userns_fd: host id N shows as room id N.  0, or
 * -1 with errno. */
int idmap_bind(const char *src, const char *dst, int userns_fd);

/* Mount overlays as the room's root would see them: overlayfs does its own
 * work on the layers (copy-up, whiteouts) with the credentials of whoever
 * mounted it, and through an idmapped layer a host-root fsuid has no id:
 * so, while mounting, the fsuid/fsgid are the room root's host id, with
 * every capability still effective.  Call with on = true before, false
 * after.  0, or -1 with errno. */
int overlay_creds(const struct room *r, bool on);

/* A room made before user namespaces stored its files under one host id
 * (uid_base + slot, the old scheme): give them to the room's user (1000),
 * and the room's /etc/passwd and /etc/group their new ids.  Runs where
 * <state>/disk is the room's disk.  0, or -1 with err. */
int userns_migrate_upper(const struct room *r, char *err, size_t errlen);

#endif
