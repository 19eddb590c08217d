/* A room's files out of and into its disk, as a tree stream
 * (common/treestream.h): the privileged half of export and import.
 *
 * The room's state is the tree under its disk's upper/ (the overlays'
 * upper directories: root, usr, ...), with room-relative owners and the
 * raw xattrs a host-root process sees on the image.  Export walks it;
 * import writes a stream into a new room's fresh image, made from the
 * template as a room's creation makes it.  Neither ever mounts an image
 * that came from outside, nor attaches the disk anywhere: the image's
 * mount is a detached one (fsmount), reached only through its descriptor
 * by the child that does the work, so nothing else on the host sees it
 * and it is gone when the child ends.  Each child keeps only the
 * capabilities its work takes (confine). */
#ifndef ROOMBOX_TRANSFER_H
#define ROOMBOX_TRANSFER_H

#include <stddef.h>
#include <stdint.h>

#include "room.h"

/* Keeps only the capabilities in keep (a mask of CAP_*), for good. */
typedef int transfer_confine_fn(uint64_t keep, char *err, size_t errlen);

/* A room's disk open for a transfer: its upper/, and the loop device its
 * image (or copy) is mounted from, "" for a plain directory, which is
 * removed when the mount goes (disk_loop_remove: but for the host's one
 * spare). */
struct transfer_disk {
	int upper;
	char dev[32];
};

/* Export in two steps.  Open: the disk of image (a copy of the room's disk
 * cut from it running, or of a snapshot's: snapshot.h), or of image_fd
 * (such a copy in memory) when not -1, or, image NULL or "", its own
 * disk, which is then mounted nowhere else (its jail stopped), mounted
 * read-only, into d.  The room's lock is held.  Once open, a copy is the
 * mount's alone: its name (or descriptor) may go, and the lock with it
 * (the walk reads nothing of the room's state).  Walk: the files under
 * d's upper/ to out_fd as a tree stream ending in TS_END, then d closed
 * (the mount gone, its device removed).  Each 0, or -1 with err. */
int transfer_export_open(const struct room *r, const char *image, int image_fd, struct transfer_disk *d,
			 char *err, size_t errlen);
int transfer_export_walk(const struct room *r, struct transfer_disk *d, int out_fd,
			 transfer_confine_fn *confine, char *err, size_t errlen);

/* Reads a tree stream from in_fd (checked as it comes: treestream.h) and
 * writes it into the new room's disk (its files made: room_create_files),
 * at most budget bytes.  Entries the fresh disk already holds (the
 * skeleton) are replaced.  0 once the stream's end came, or -1 with err
 * (what was written is then the caller's to remove with the room). */
int transfer_import(const struct room *r, int in_fd, uint64_t budget, transfer_confine_fn *confine,
		    char *err, size_t errlen);

#endif
