/* Managed processes' shared state: every process of this
 * roombox-fcgi in one list behind procs_lock, and its record on disk.
 * processes.c starts and signals them, process_log.c follows their output
 * and their end; both find them here.  See process_store.c. */
#ifndef ROOMBOX_FCGI_PROCESS_STORE_H
#define ROOMBOX_FCGI_PROCESS_STORE_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "process_scan.h"
#include "roomid.h"

/* A room keeps the records of its last PROCS_ENDED_MAX ended processes. */
#define PROCS_ENDED_MAX 100

enum { PROC_OUT, PROC_ERR };
extern const char *const proc_stream_name[2];   /* "stdout", "stderr" */

enum pstatus { P_RUNNING, P_EXITED, P_KILLED, P_LOST };
extern const char *const proc_status_name[];      /* "running", ... */

struct proc_reader;   /* a live log reader: process_log.c's */

struct proc {
	struct proc *next;
	unsigned long serial;      /* creation order; the logger's handle */
	char room[ROOM_ID_MAX + 1];
	char id[ROOM_ID_MAX + 1];
	char *command;
	long pid, sid;             /* 0 until known */
	enum pstatus status;
	int exit_code;             /* when exited or killed */
	char signal[24];           /* "" = none */
	char start[40], end[40];   /* ISO-8601; end "" while running */
	bool cut[2];               /* a log lost bytes (its older half was replaced) */
	/* live only */
	bool room_stopping;        /* its room's stop or restart was asked for */
	bool ending;               /* pipes ended with no exit line: lost or killed? */
	int fd[2], in_fd;          /* our pipe ends, -1 once closed */
	uint64_t log_size[2];      /* of the newer half */
	char nonce[33];
	struct proc_scan scan;     /* of stderr */
	struct proc_reader *readers;
};

/* Held for every look at the list or a process in it.  procs_changed is
 * broadcast whenever a process gets output, its pid or its end. */
extern pthread_mutex_t procs_lock;
extern pthread_cond_t procs_changed;

/* Make <state_dir>/processes (0700) and load the records there: a process
 * that was running when roombox-fcgi stopped is `lost` now (its pipes
 * ended with us).  Before any other call.  0, or -1 with err set. */
int proc_store_load(const char *state_dir, char *err, size_t errlen);

/* For the rest of roombox-fcgi (the idle stop; a room's stop, restart and
 * cleanup, rooms.c); each takes procs_lock itself. */

/* The rooms with a running managed process, as a new JSON array of room
 * ids: the idle stop leaves them running (helper op stop-idle, its keep list). */
json_object *procs_busy_rooms(void);

/* The room's stop or restart is asked for (true, before the helper's
 * call) or has failed (false): a running process whose pipes end
 * meanwhile is `lost`, though the room may run again by the time that is
 * seen; not `killed` as by the room's kill-all. */
void procs_room_stopping(const char *room, bool stopping);

/* Cleanup: forget the room's processes (our ends of their pipes closed)
 * and delete their records and logs.  0, or -1 with err set. */
int procs_room_reset(const char *room, char *err, size_t errlen);

/* Snapshots (snapshots.c): the room's records (and their logs) kept as
 * part of snapshot sid, put back (to_room's own records replaced: the
 * room itself on a restore, a new room on a fork; one that was running at
 * the cut reads `lost`), and removed (sid NULL: every snapshot's of the
 * room).  Each takes procs_lock; 0, or -1 with err set. */
int procs_snapshot_save(const char *room, const char *sid, char *err, size_t errlen);
int procs_snapshot_restore(const char *room, const char *sid, const char *to_room,
			   char *err, size_t errlen);
void procs_snapshot_remove(const char *room, const char *sid);

/* Import (room_transfer.c): an archive's process files ("<id>.json",
 * "<id>.stdout", ...: the names as kept here) made the records of room, a
 * room just made by that import; one that was running at the export
 * reads `lost`.  A name of another form, or a record whose id is not its
 * file's, refuses the lot (nothing kept).  Takes procs_lock itself for
 * the list only; 0, or -1 with err set. */
struct proc_file {
	const char *name;
	const void *data;
	size_t len;
};
int procs_room_import(const char *room, const struct proc_file *files, size_t n,
		      char *err, size_t errlen);

/* The rest under procs_lock. */

struct proc *proc_find(const char *room, const char *id);
struct proc *proc_find_serial(unsigned long serial);   /* NULL: forgotten */

/* List p (its serial given now). */
void proc_add(struct proc *p);

/* Forget p: unlisted, our pipe ends closed, record and logs deleted. */
void proc_drop(struct proc *p);

/* The room's processes, oldest first, as a malloc'd array of *n. */
struct proc **procs_of_room(const char *room, size_t *n);

/* The room's oldest ended records past PROCS_ENDED_MAX go (records and
 * logs), but for those still followed (pipes open, live readers). */
void procs_prune_ended(const char *room);

/* The end as a status: code is $? of the command (128+signo: killed). */
void proc_set_exit(struct proc *p, int code);

/* The process object of the API (docs/api.md, "Managed processes"). */
json_object *proc_json(const struct proc *p);

/* Write the record durably (temporary file, fsync, rename, directory
 * fsync); a failure is logged. */
void proc_record_save(struct proc *p);

/* <state_dir>/processes/<room>/<id><suffix> */
void proc_file_path(char *buf, size_t len, const char *room, const char *id, const char *suffix);

/* Wait (releasing procs_lock) for procs_changed, at most ms. */
void procs_wait_changed(int ms);

void proc_close_fd(int *fd);
void proc_now_iso(char *buf, size_t len);

#endif
