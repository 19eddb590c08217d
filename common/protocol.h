/* The one interface between roombox-fcgi and roombox-helper.
 *
 * roombox-fcgi runs `roombox-helper [-c CONFIG]` once per operation, writes
 * one JSON object (at most HELPER_REQUEST_MAX bytes) on its stdin, closes it,
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
 *   {"op":"kill-all","room":R}      -> {"killed":N}  HELPER_OP_KILL_ALL
 *   {"op":"restart","room":R}       -> {"restarted":true}  HELPER_OP_RESTART
 *     both: code "not_found" for a room that does not exist
 *
 *   An exec that cannot start because the room is at pids_limit (the
 *   keeper cannot fork the shell, or the shell exits 2 while the room's
 *   pids cgroup is full) kills the room's processes as kill-all does,
 *   logs one line on the helper's stderr, and runs once more.
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

#define HELPER_REQUEST_MAX (8u << 20)  /* cmd + stdin + env, bounded */

/* Kill every process of a room but its PID 1 (the keeper); files, session
 * and the jail stay (DELETE /api/rooms/{id}/sandbox/processes). */
#define HELPER_OP_KILL_ALL "kill-all"
/* Stop a room's jail and start it again; files and session stay
 * (POST /api/rooms/{id}/sandbox/restart). */
#define HELPER_OP_RESTART "restart"

#endif
