/* The one place that knows the state directory layout.
 *
 *   <state_dir>/rooms/<id>/meta        {"slot":N,"createdAt":"...","ids":"room"}
 *                                      (root, 0600); "ids":"room": the disk
 *                                      holds room-relative ids (a room made
 *                                      before user namespaces has no "ids"
 *                                      and is converted at its next start)
 *   <state_dir>/rooms/<id>/session     the room root's shell session (exported
 *                                      variables and working directory),
 *                                      written in place by the helper or the
 *                                      keeper (common/session_file.h), never
 *                                      inside the room's tree
 *   <state_dir>/rooms/<id>/session.user  the room user's, kept apart: nothing
 *                                      a command of one writes reaches the
 *                                      other's (a room made before has only
 *                                      "session", which is root's)
 *   <state_dir>/rooms/<id>/active      its mtime is lastActiveAt
 *   <state_dir>/rooms/<id>/limits      the room's own limits: one struct
 *                                      helper_limits (0: the configuration's),
 *                                      absent when it has none
 *   <state_dir>/rooms/<id>/disk.img    the room's ext4 image (disk_limit > 0)
 *   <state_dir>/rooms/<id>/snapshots/<sid>/  a snapshot (snapshot.c):
 *                                      disk.img, session, session.user and
 *                                      info (name, createdAt, copy method);
 *                                      made as .part-<sid> and renamed, so
 *                                      whole or absent; goes with the room
 *   <state_dir>/rooms/<id>/.cut.img    a copy being made (restore, fork),
 *                                      renamed into place when whole
 *   <state_dir>/rooms/<id>/disk/       where the image is mounted, in the
 *                                      keeper's namespace only; holds
 *                                      upper/<dir> and work/<dir> for each
 *                                      overlay (root, usr, ...) and .ready
 *   <state_dir>/lock                   serialises room creation (slots, max_rooms,
 *                                      the disk images' promises)
 *   <state_dir>/disk-commit.json       the rooms' images: their number and total
 *                                      size, and the bytes they held when last
 *                                      counted (0644: /api/health reads it)
 *   <state_dir>/slots/<n>              symlink to the id of the room whose ids
 *                                      0-65535 are host ids uid_base + n * 65536
 *                                      onwards (room_host_id)
 *   <state_dir>/.disk-<bytes>.img      empty ext4 image each room disk is copied from
 *   <run_dir>/rooms/<id>/lock          serialises start/stop/destroy of a room
 *   <run_dir>/rooms/<id>/busy          shared-locked by every running exec
 *   <run_dir>/rooms/<id>/keeper        "<pid> <starttime>" of the keeper
 *   <run_dir>/base-3/                  generated lower root for rootfs = host
 *   <run_dir>/mask-<key>-<sum>/        whiteouts over the shared host trees
 *                                      (hostmask.h); mask.current names the
 *                                      current one, mask.lock serialises
 *                                      their building
 *   <run_dir>/mnt/                     mount point used inside each keeper's
 *                                      own mount namespace
 * Every path under the state and run directories is opened without following
 * symlinks; both directories are root's and 0700/0711.
 */
#ifndef ROOMBOX_ROOM_H
#define ROOMBOX_ROOM_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <limits.h>
#include "config.h"
#include "protocol.h"
#include "roomid.h"

struct room {
	const struct config *cfg;
	char id[ROOM_ID_MAX + 1];
	char state[PATH_MAX];     /* <state_dir>/rooms/<id> */
	char run[PATH_MAX];       /* <run_dir>/rooms/<id> */
	int slot;                 /* -1 until loaded */
	uid_t uid;                /* host ids of the room's root (room_host_id) */
	gid_t gid;
	bool ids_room;            /* its disk holds room-relative ids (meta) */
	char created_at[32];
	int lock_fd;              /* -1 when not locked */
	int create_lock;          /* the state lock while being created, or -1 */
};

/* A room's ids 0-65535 are host ids uid_base + slot * 65536 upwards, a
 * range of that room alone (config.c checks that every range stays below
 * 2^31; uid_base is at least 1000, so no room id is ever host id 0).  The
 * room's user namespace maps them (userns.h). */
#define ROOM_ID_COUNT 65536u
#define ROOM_USER_ID 1000u       /* the room's `user` */

/* The host id of room id `id` (0-65535); the room's slot must be set. */
uid_t room_host_id(const struct room *r, unsigned id);

/* err, a message naming host paths, goes whole to stderr (the service
 * log); what is left for the client is "room <id>: <step>: <cause>", the
 * cause being err's last ": " part.  Returns -1. */
int room_error_relative(const struct room *r, const char *step, char *err, size_t errlen);

/* Fill paths; the id must already be valid.  0 or -1 (path too long). */
int room_init(struct room *r, const struct config *cfg, const char *id);

/* Create the top-level state and run directories if missing and check that
 * they are root's directories, not symlinks. */
int room_dirs_prepare(const struct config *cfg, char *err, size_t errlen);

/* flock the room's lock file (creating <run>/ as needed). */
int room_lock(struct room *r, bool exclusive, char *err, size_t errlen);
/* ... exclusively, only if nobody holds it now: true when locked. */
bool room_lock_if_free(struct room *r);
void room_unlock(struct room *r);

/* Take the state lock (room creation, the instance's cgroup directory):
 * an fd to close, or -1. */
int room_state_lock(const struct config *cfg);

/* The room's state directory, if it exists, is a real root-owned
 * directory (not a symlink): 0, or -1 with err. */
int room_state_check(const struct room *r, char *err, size_t errlen);

/* Load meta; 1 if the room exists, 0 if not, -1 on error. */
int room_load(struct room *r, char *err, size_t errlen);
/* Creating a room takes three steps, the last two while its first start
 * makes the keeper (jail.c), all under the state lock (r->create_lock):
 * room_create claims a uid slot (fails with ROOM_ELIMIT when max_rooms
 * rooms exist) and the room's disk image's promise (ROOM_ENOSPACE);
 * room_create_files makes the state directory and the disk image (the
 * spare one made ahead, or a copy of the template);
 * room_create_finish writes meta -- from then on
 * the room exists -- and releases the lock.  room_create_abort (a no-op
 * once finished) gives the slot back and releases the lock.  Caller holds
 * the room lock. */
#define ROOM_ELIMIT (-2)
/* its disk image would promise more than the state directory's file
 * system has free (room.c) */
#define ROOM_ENOSPACE (-3)
int room_create(struct room *r, char *err, size_t errlen);
int room_create_files(const struct room *r, char *err, size_t errlen);
/* room_create_files' first part: the state directory (leftovers of a
 * room without meta removed) and disk/, no image (a fork brings its own). */
int room_create_dirs(const struct room *r, char *err, size_t errlen);

int room_create_finish(struct room *r, char *err, size_t errlen);
void room_create_abort(struct room *r);

/* A reflinked snapshot of the room promises the bytes its image holds
 * (bytes > 0: refused with ROOM_ENOSPACE and err, as a new room's image,
 * when that does not fit) or, deleted, gives them back (bytes < 0).
 * Under the state lock; 0 or ROOM_ENOSPACE (or -1). */
int room_disk_commit_share(const struct room *r, int64_t bytes, char *err, size_t errlen);

/* Count what the rooms' disk images promise and hold, and record it in
 * <state_dir>/disk-commit.json (room.c); takes the state lock.  First
 * removes what helpers killed mid-write left there: an old record under
 * its temporary name, a half-made spare image. */
void room_disk_commit_count(const struct config *cfg);

/* Make the next new room's disk image ahead, if there is none (disk.h:
 * disk_image_spare_make), for room_create_files to take.  Best effort. */
void room_disk_spare_make(const struct config *cfg);

/* The slot a name in <state_dir>/slots stands for (decimal, no leading
 * zero, below max), or -1. */
int room_slot_parse(const char *name, int max);

/* Free the room's uid slot (its files are gone or going). */
void room_slot_release(const struct room *r);

/* Make the writable layer's skeleton on the mounted disk (once). */
int room_upper_prepare(const struct room *r, char *err, size_t errlen);
/* (Re)write the room's /etc/passwd and /etc/group under <disk>/upper;
 * 0 or -1 with errno. */
int room_etc_ids_write(const struct room *r, const char *disk);
/* Record in meta that the room's disk holds room-relative ids. */
int room_meta_mark_ids(const struct room *r, char *err, size_t errlen);

/* The keeper's pid if it is alive and is the one recorded, else 0. */
pid_t room_keeper_pid(const struct room *r);

/* The loop device ("/dev/loopN") the room's start put its disk image on,
 * noted in its run directory: a hint only (a cut checks it against the
 * image, and a stopped room's is stale), which spares reading every
 * /sys/block/loop* of a host that has thousands.  The hint: malloc'd, or
 * NULL. */
void room_loop_note(const struct room *r, const char *dev);
char *room_loop_hint(const struct room *r);
int room_keeper_record(const struct room *r, pid_t pid, char *err, size_t errlen);
void room_keeper_forget(const struct room *r);

/* Exec bookkeeping: shared lock on busy (fd returned, -1 on error), the
 * activity stamp, and whether any exec is running. */
int room_busy_enter(const struct room *r);
bool room_is_busy(const struct room *r);
/* The busy file (read-write, unlocked) and the active file (write-only),
 * created when missing, for a keeper that marks them itself (its exec
 * channels): each -1 on failure. */
void room_marks_open(const struct room *r, int *busy, int *active);
void room_touch_active(const struct room *r);
/* The same, only when the file is there (false else): nothing made, for
 * a caller that holds no lock (a destroy may be removing the room). */
bool room_touch_active_existing(const struct room *r);
int64_t room_last_active_ms(const struct room *r);

/* The session text of the room's user (as_user) or of its root (may be
 * empty).  Reads at most max bytes; malloc'd. */
char *room_session_read(const struct room *r, bool as_user, size_t max);
int room_session_write(const struct room *r, bool as_user, const char *text, size_t len);
/* The session file opened (flags as open's; O_NOFOLLOW added): for the
 * keeper's exec channel, which reads and writes it in place. */
int room_session_open(const struct room *r, bool as_user, int flags);

/* The room's own limits (all 0 when it has none or the file is not one
 * record), and their writing (durably): 0, or -1 with err. */
void room_limits_read(const struct room *r, struct helper_limits *l);
int room_limits_write(const struct room *r, const struct helper_limits *l, char *err, size_t errlen);

/* The limits the room runs under: its own where it has them, else the
 * configuration's. */
struct config_room_limits room_limits_effective(const struct room *r);

/* Bytes used by the room's files. */
uint64_t room_disk_usage(const struct room *r);

/* Remove the room's meta: from then on it is no longer a room (list,
 * status and slot reuse go by meta), whatever of its files is left. */
int room_forget(const struct room *r, char *err, size_t errlen);

/* Remove every file of the room (state and run dirs), meta first; never
 * follows a symlink nor crosses a mount point.  What is left after a
 * failure is no room, and the next call removes it.  The message names
 * the room, never a host path (that goes to stderr). */
int room_remove_files(const struct room *r, char *err, size_t errlen);

/* Call fn for each room id in the state directory. */
int room_foreach(const struct config *cfg, int (*fn)(const char *id, void *arg), void *arg);

#endif
