/* Counters for GET /metrics, in the Prometheus text format.
 *
 * Every counter is a relaxed atomic in static storage: counting on the
 * request path is a few uncontended atomic adds, no lock, no allocation.
 * Label values come only from bounded sets the program itself defines (the
 * route table's patterns, HTTP status codes, helper op names, the outcome
 * enums below), never from a client's bytes.  The rooms gauge is read from
 * the helper (op "list") when /metrics is asked for, not kept here
 * (metrics_scrape.c answers GET /metrics).
 *
 * For code other than the request pipeline: each family below has one
 * obvious call (metrics_room_started, metrics_idle_stops_add,
 * metrics_processes_running_add, metrics_llm_request, ...). */
#ifndef ROOMBOX_FCGI_METRICS_H
#define ROOMBOX_FCGI_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "protocol.h"

/* Route slots (router.c hands them out: one per pattern and method, one per
 * pattern for "a method it does not serve", one for "no such path"). */
#define METRICS_ROUTE_SLOTS 128

enum exec_outcome { EXEC_OK, EXEC_NONZERO, EXEC_TIMEOUT, EXEC_ERROR, EXEC_OUTCOMES };
enum room_start_kind { ROOM_START_NEW, ROOM_START_RESTART, ROOM_START_KINDS };
enum llm_outcome { LLM_OK, LLM_ERROR, LLM_OUTCOMES };
enum snap_kind { SNAP_TAKE, SNAP_RESTORE, SNAP_FORK, SNAP_DELETE, SNAP_KINDS };

/* Monotonic nanoseconds, for durations. */
uint64_t metrics_now_ns(void);

/* One answered request: route slot, HTTP status, time from start to answer. */
void metrics_http_request(int slot, int status, uint64_t ns);

/* One exec that reached the helper, and how it ended. */
void metrics_exec_done(enum exec_outcome outcome, uint64_t ns);

/* A room's jail was started: a new room, or a stopped one again. */
void metrics_room_started(enum room_start_kind kind);

/* n rooms were stopped for being idle. */
void metrics_idle_stops_add(unsigned n);
/* An export or import answered with HTTP status (room_transfer.c). */
void metrics_transfer(bool import, int status);

/* The helper failed op (spawn, timeout, bad reply, or an error of its own
 * that is the service's fault: not "not found", "invalid" or "limit"). */
void metrics_helper_error(const char *op);

/* Managed processes (§8.3): +1 when one starts, -1 when it ends. */
void metrics_processes_running_add(int delta);

/* A snapshot taken, restored, forked or deleted (snapshots.c), or not
 * (ok false); frozen_us: how long the room's processes were frozen for
 * its cut (0: none). */
void metrics_snapshot_op(enum snap_kind kind, bool ok, uint64_t frozen_us);

/* One model call (§8.6), and how it ended. */
void metrics_llm_request(enum llm_outcome outcome);

/* Called by helper_client.c for every call: adds to this thread's helper
 * time, counts helper errors by op (HOP_*), and an exec's outcome and
 * duration.  ok false for a failed call, err_status then its HTTP status
 * (a helper_error's http_status); exec: a successful exec's answer. */
void metrics_helper_call_done(uint32_t op, bool ok, const struct helper_exec_ans *exec,
			      int err_status, uint64_t ns);

/* Time this thread spent in helper calls since the last take (the request
 * log's helper time); resets it. */
uint64_t metrics_helper_time_take(void);

/* The rooms gauge, as the helper's "list" gave it (known = false: the
 * helper could not say, the family is left out). */
struct metrics_rooms {
	bool known;
	long running, stopped;
};

/* The whole exposition.  slot_name gives a slot's route pattern and method
 * (false: the slot is not in use).  malloc'd, NUL-terminated; NULL on
 * allocation failure. */
typedef bool metrics_slot_name_fn(int slot, const char **route, const char **method);
char *metrics_render(const struct metrics_rooms *rooms, metrics_slot_name_fn *slot_name,
		     size_t *len);

/* Forget every count (unit tests only). */
void metrics_reset(void);

/* The exec outcome an exec answer of the helper stands for (NULL: error). */
enum exec_outcome metrics_exec_outcome(const struct helper_exec_ans *a);

#endif
