/* Managed processes: long-running commands of a room that
 * outlive any request, their logs on disk, their stdin, their end.  Their
 * start for the rest of roombox-fcgi (the routes are in app.h; what a
 * room's stop, restart and cleanup ask of them is in process_store.h, the
 * module that holds them); how they are started and followed:
 * processes.c. */
#ifndef ROOMBOX_FCGI_PROCESSES_H
#define ROOMBOX_FCGI_PROCESSES_H

#include <stddef.h>

#include "app.h"

/* Keep records and logs under <state_dir>/processes/<room>/ (made 0700 when
 * missing) and load what is there: a process that was running when
 * roombox-fcgi stopped is `lost` now (its pipes ended with us).  Call once
 * before the worker threads start.  0, or -1 with err set. */
int procs_init(struct app *app, char *err, size_t errlen);

#endif
