/* The one interface between roombox-fcgi and roombox-helper.
 *
 * roombox-fcgi runs `roombox-helper [-c CONFIG]` once per operation, writes
 * one JSON object (at most helper_request_max(max_body) bytes) on its stdin,
 * closes it,
 * and reads one JSON object from its stdout.  Exit status 0 = success object;
 * non-zero = {"error":"<reason naming room and step>","code":"<code>"}.
 * `-c` is honoured only when the real uid is 0 or when it names the
 * compiled-in configuration path (ROOMBOX_CONF).
 *
 * Requests ("op" selects the verb; "room" is checked against the room-id rule):
 *
 *   {"op":"exec","room":R,"cmd":S,
 *      "timeout_ms":N?,        default exec_timeout; fcgi has already checked
 *                              it against exec_timeout_max
 *      "env":{S:S}?, "cwd":S?, a one-off scope: the session is not saved
 *      "stdin":S?,             bytes on standard input (default /dev/null)
 *      "encoding":"utf8"|"base64"?}
 *     -> {"stdout":S,"stderr":S,"exitCode":N,"success":B,"signal":S|null,
 *         "timedOut":B,"truncated":{"stdout":B,"stderr":B},
 *         "duration":F,"timestamp":S}
 *     The room is created (or its stopped jail restarted) when needed.
 *
 *   {"op":"create","room":R}        -> <status>   (room made and started)
 *   {"op":"status","room":R}        -> <status>   or code "not_found"
 *   {"op":"list"}                   -> {"rooms":[<status>...]}
 *   {"op":"destroy","room":R}       -> {"destroyed":true}  (also if absent)
 *   {"op":"stop","room":R}          -> {"stopped":true}    (files kept)
 *   {"op":"stop-idle"}              -> {"stopped":[R...]}  rooms idle longer
 *                                      than idle_timeout
 *   {"op":"stop-all"}               -> {"stopped":[R...]}
 *   {"op":"info"}                   -> {"cgroup":"v1"|"v2"|"none",...}
 *
 *   <status> = {"roomId":R,"sandboxName":"sandbox-R","state":"running"|"stopped",
 *               "createdAt":S,"lastActiveAt":S,
 *               "usage":{"diskBytes":N,"memoryBytes":N,"processes":N}}
 *
 * Error codes and the HTTP status roombox-fcgi gives them:
 *   "invalid"   400   bad request to the helper (should not happen via fcgi)
 *   "not_found" 404
 *   "limit"     429   max_rooms reached
 *   "denied"    500   caller or configuration refused
 *   "failed"    500   the sandbox could not do it
 */
#ifndef ROOMBOX_PROTOCOL_H
#define ROOMBOX_PROTOCOL_H

#include <stdint.h>

/* A request carries at most one HTTP body (max_body: cmd, stdin, env) and
 * what roombox-fcgi adds around it (op, room, timeout_ms, encoding, JSON
 * quoting, which never grows a body json-c has parsed); the slack is
 * that addition, generously.  Both sides apply the same limit:
 * roombox-fcgi answers 413 before spawning, the helper refuses more. */
#define HELPER_REQUEST_SLACK (64u << 10)

static inline uint64_t helper_request_max(uint64_t max_body)
{
	return max_body + HELPER_REQUEST_SLACK;
}

/* Everything the helper may use (heap, code, stack), whatever the
 * request: its allocator refuses past HELPER_HEAP_BUDGET (see
 * sandbox-helper/alloc/bump_malloc.c), which leaves the rest for the
 * static binary, its stack and the kernel's view of both.  max_body is at
 * most MAX_BODY_LIMIT (common/config.c) so that a legitimate request of
 * that size (reading buffer, parsed document, answer) fits the budget. */
#define HELPER_MEMORY_MAX (64u << 20)
#define HELPER_HEAP_BUDGET (HELPER_MEMORY_MAX - (8u << 20))
#define MAX_BODY_LIMIT (8u << 20)

#endif
