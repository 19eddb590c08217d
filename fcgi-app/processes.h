/* Managed processes (SPEC §8.3): long-running commands of a room that
 * outlive any request, their logs on disk, their stdin, their end.  See
 * processes.c for how they are started and followed. */
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
 * ids: the idle stop leaves them running (helper op stop-idle, HK_KEEP). */
json_object *procs_busy_rooms(void);

/* Cleanup: forget the room's processes (our ends of their pipes closed)
 * and delete their records and logs.  0, or -1 with err set. */
int procs_room_reset(const char *room, char *err, size_t errlen);

/* The control lines a managed process's wrapper writes on its stderr
 * ("<prefix><rest>\n", prefix = "\036rbx:<nonce> ") taken out of the
 * stream, a piece at a time: out gets the bytes that are output, ctl the
 * rest of each control line (without prefix and newline).  Bytes that may
 * begin a control line not complete yet wait in the scanner (at most
 * PROC_MARK_MAX) for the next piece; eof flushes them as output.  How the
 * stream is cut into pieces changes nothing of what comes out (fuzzed:
 * tests/fuzz/fuzz_proc_stderr.c). */
#define PROC_MARK_MAX 128
struct proc_scan {
	char hold[PROC_MARK_MAX];
	size_t nhold;
};
void proc_stderr_scan(struct proc_scan *st, const char *prefix, const char *data, size_t n,
		      bool eof, void (*out)(void *ctx, const char *d, size_t n),
		      void (*ctl)(void *ctx, const char *line, size_t n), void *ctx);

#endif
