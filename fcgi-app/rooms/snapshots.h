/* Snapshots, restores and forks of rooms (snapshots.c). */
#ifndef ROOMBOX_FCGI_SNAPSHOTS_H
#define ROOMBOX_FCGI_SNAPSHOTS_H

#include "app.h"

route_handler api_snapshots_post, api_snapshots_list, api_snapshots_delete;
route_handler api_rooms_restore, api_rooms_fork;

/* How a snapshot or a fork copies a room's disk image on the state
 * directory's file system: SNAP_COPY_REFLINK (blocks shared: no data
 * copied) or SNAP_COPY_SPARSE (only the used blocks copied); probed once. */
const char *snapshot_copy_method(const char *state_dir);

#endif
