/* Walks a directory tree into a tree stream (treestream.h): what the
 * keeper's export runs inside the room, as the room's root.
 *
 * libc only, like the stream itself.  The walk never follows a symlink
 * (every open is relative to its directory's fd, with O_NOFOLLOW) and never
 * crosses a mount (an entry on another device is left out, with what is
 * below it).  Regular files are read with SEEK_DATA/SEEK_HOLE, so a sparse
 * file's holes are neither read nor sent.  A file with more than one link
 * is sent once; its later names are hard links to the first.  Sockets and
 * device nodes are left out: they cannot be imported; a character
 * device 0/0 is an overlay whiteout, sent as TS_WHITEOUT.  Of the host's
 * xattrs only TS_XATTR_OPAQUE "y" is sent (overlay origins, redirects and
 * the like name host inodes and are left out).  Names in a
 * directory are sent sorted, so the same tree gives the same stream. */
#ifndef ROOMBOX_TREEWALK_H
#define ROOMBOX_TREEWALK_H

#include <stddef.h>
#include "treestream.h"

#define TREEWALK_DEPTH_MAX 512   /* directories deep: one fd each while walking */

struct treewalk_stats {
	unsigned long long entries, data_bytes, skipped;
};

/* Walks the tree at dirfd (itself the stream's "."), writing its records
 * to w and then TS_END.  Owners above 65535 are refused: inside a room they
 * cannot happen.  0, or -1 with err naming the path. */
int tree_walk(int dirfd, struct ts_writer *w, struct treewalk_stats *st, char *err, size_t errlen);

#endif
