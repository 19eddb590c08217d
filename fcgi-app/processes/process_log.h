/* Following managed processes: the logger thread, their logs
 * on disk, live log readers, their end.  See process_log.c. */
#ifndef ROOMBOX_FCGI_PROCESS_LOG_H
#define ROOMBOX_FCGI_PROCESS_LOG_H

#include <stddef.h>
#include <stdint.h>

#include "app.h"

struct proc;

/* Start the logger thread; logs keep the last log_max bytes of a stream;
 * an end no wrapper reported is decided by asking app's helper whether
 * the room runs.  0, or -1 with err set. */
int proc_logger_start(struct app *app, char *err, size_t errlen);

/* Under procs_lock: the logger follows p's pipes (fd[], made non-blocking)
 * from now on.  0, or -1 (errno set). */
int proc_logger_watch(struct proc *p);

/* Under procs_lock: p ended (its status set): live readers hear the end,
 * the record is saved, the room's oldest ended records past the cap go. */
void proc_end(struct proc *p);

/* GET …/processes/{id}/logs: what is kept, as JSON or (Accept:
 * text/event-stream) followed live to the end. */
void proc_logs_answer(struct request *rq, struct response *rs, const char *id);

#endif
