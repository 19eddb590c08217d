/* Snapshots, restores and forks of a room: copies of its disk image and
 * sessions (room.h: <state>/snapshots/<sid>/), cut consistently from a
 * running room.  See snapshot.c for how the cut is made. */
#ifndef ROOMBOX_SNAPSHOT_H
#define ROOMBOX_SNAPSHOT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

#include "cgroup.h"
#include "protocol.h"
#include "room.h"

/* Each is called with the room locked exclusively and loaded, and returns
 * HELPER_E_OK or another HELPER_E_* code with err (a message naming the
 * room and the step; host paths go to stderr only). */

/* A new snapshot named name ("": none) of the room, in *out. */
int snap_take(struct room *r, const struct cgroup_sys *cg, const char *name,
	      struct helper_snapshot *out, char *err, size_t errlen);

/* The room's snapshots, oldest first: each passed to emit.  Their count,
 * or -1 with err. */
int snap_list(const struct room *r, void (*emit)(const struct helper_snapshot *s, void *ctx),
	      void *ctx, char *err, size_t errlen);

/* Remove the snapshot with id or name ref; the removed one in *out. */
int snap_delete(struct room *r, const char *ref, struct helper_snapshot *out,
		char *err, size_t errlen);

/* Stop the room, put the snapshot's disk and sessions in place of its
 * own, start it again. */
int snap_restore(struct room *r, const struct cgroup_sys *cg, const char *ref,
		 struct helper_snapshot *out, char *err, size_t errlen);

/* A new room `to` (unlocked, not existing: both rooms are locked here, in
 * id order) made from snapshot ref of r, or from r now (ref ""), not
 * started.  *out: the snapshot used, or the cut's times. */
int snap_fork(struct room *r, const struct cgroup_sys *cg, const char *ref, const char *to,
	      struct helper_snapshot *out, char *err, size_t errlen);

/* What an export reads (main.c): snapshot ref's image (copied: *temporary)
 * and sessions; with ref "", a running room's image cut now into
 * <state>/.cut.img (*temporary) -- no snapshot: never listed nor counted
 * -- or, for a stopped room or one without an image, img "" (the room's
 * own disk, as it lies).  A temporary copy may be a memfd instead (img_fd,
 * img ""; snapshot.c says when).  The caller unlinks a temporary img, or
 * closes img_fd, once the copy is mounted. */
struct snap_source {
	char img[PATH_MAX];          /* the image to walk; "": the room's own */
	int img_fd;                  /* or this one, in memory (when not -1) */
	char sessions[PATH_MAX];     /* the directory holding its sessions */
	char id[HELPER_ROOM_LEN];    /* the snapshot's id, or "" */
	bool temporary;
	bool was_running;
};
int snap_export_source(struct room *r, const struct cgroup_sys *cg, const char *ref,
		       struct snap_source *src, char *err, size_t errlen);

/* Before a room stops or goes: its cgroup and file system thawed if a cut
 * left them frozen -- the helper that froze them killed before it could
 * thaw them (SIGKILL: the OOM killer, a root roombox-fcgi's timeout).  The
 * kernel keeps a frozen file system, and so its loop device and image,
 * past its last mount, the keeper's end included: a room destroyed so
 * would leak both until the host reboots; a frozen cgroup holds every
 * process of the room, its keeper too.  Only where the cut's mark
 * (<run>/frozen, made before either freeze) is left: otherwise one
 * access(). */
void snap_thaw_left(const struct room *r, const struct cgroup_sys *cg);
/* With the room locked (a stop): what a helper killed in the middle of a
 * snapshot, its removal or a fork left in the room's state directory (a
 * whole image's copy, .cut.img; .part-* and .del-* snapshots) removed.
 * Each is made and removed under the room's lock, so none is in use. */
void snap_leftovers_sweep(const struct room *r);
/* Whether a cut's freeze mark is there (a cut under way, which holds the
 * room's lock, or one killed in its middle). */
bool snap_freeze_marked(const struct room *r);

#endif
