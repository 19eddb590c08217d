/* Managed processes (SPEC §8.3): long-running commands of a room that
 * outlive any request, their logs on disk, their stdin, their end.  What
 * the rest of roombox-fcgi uses of them (the routes are in app.h); how
 * they are started and followed: processes.c. */
#ifndef ROOMBOX_FCGI_PROCESSES_H
#define ROOMBOX_FCGI_PROCESSES_H

#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>

#include "app.h"

/* Keep records and logs under <state_dir>/processes/<room>/ (made 0700 when
 * missing) and load what is there: a process that was running when
 * roombox-fcgi stopped is `lost` now (its pipes ended with us).  Call once
 * before the worker threads start.  0, or -1 with err set. */
int procs_init(struct app *app, char *err, size_t errlen);

/* The rooms with a running managed process, as a new JSON array of room
 * ids: the idle stop leaves them running (helper op stop-idle, HK_KEEP).
 * (process_store.c) */
json_object *procs_busy_rooms(void);

/* The room's stop or restart is asked for (true, before the helper's
 * call) or has failed (false): a running process whose pipes end
 * meanwhile is `lost`, though the room may run again by the time that is
 * seen; not `killed` as by the room's kill-all.  (process_store.c) */
void procs_room_stopping(const char *room, bool stopping);

/* Cleanup: forget the room's processes (our ends of their pipes closed)
 * and delete their records and logs.  0, or -1 with err set.
 * (process_store.c) */
int procs_room_reset(const char *room, char *err, size_t errlen);

#endif
