/* The one interface between roombox-fcgi and roombox-helper: every
 * operation, key, error code and limit is named here once, and both
 * programs use these names (no operation or key is spelled twice).
 *
 * roombox-fcgi runs `roombox-helper [-c CONFIG]` once per operation, writes
 * one JSON object (at most helper_request_max(max_body) bytes) on its
 * stdin, closes it, and reads the answer from its stdout.  Exit status 0 =
 * success; non-zero = {"error":"<reason naming room and step>","code":C}.
 * `-c` is honoured only when the real uid is 0 or when it names the
 * compiled-in configuration path (ROOMBOX_CONF).
 *
 * The helper hands back raw facts only: a wait status, whether the deadline
 * passed, the output's bytes, times as integers.  Everything a client sees
 * -- exit codes and signal names, UTF-8 repair, base64, ISO-8601 times,
 * "sandbox-<id>" -- is made by roombox-fcgi (fcgi-app/exec.c, rooms.c), so
 * none of that code runs as root over a room's (hostile) output.
 *
 * An answer is one JSON object on one line (its strings escape every
 * control byte, so the first "\n" ends it).  Only the exec answer has a
 * tail: after that newline come HK_STDOUT_BYTES bytes of stdout, then
 * HK_STDERR_BYTES bytes of stderr, exactly as the command wrote them.
 *
 * Requests (HK_OP selects the operation; HK_ROOM is checked against the
 * room-id rule):
 *
 *   exec     {room, cmd, timeout_ms?, env?, cwd?, stdin?}
 *            timeout_ms: default exec_timeout (fcgi has checked it against
 *            exec_timeout_max); env {S:S} and cwd: a one-off scope, the
 *            session is not saved; stdin: bytes on standard input (default
 *            /dev/null).  The room is created, or its jail restarted, when
 *            needed.
 *         -> {wait_status, timed_out, stdout_bytes, stderr_bytes,
 *             stdout_truncated, stderr_truncated, duration_us, started_ms}
 *            + the two streams' bytes.  wait_status is waitpid()'s status
 *            of the shell (meaningless when timed_out: the tree was
 *            killed); started_ms is wall-clock ms since the epoch.
 *   create   {room}  -> <status>   (room made and started)
 *   status   {room}  -> <status>   or code not_found
 *   list     {}      -> {rooms:[<status>...]}
 *   destroy  {room}  -> {destroyed:true}  (also if absent)
 *   stop     {room}  -> {stopped:true}    (files kept)
 *   stop-idle {}     -> {stopped:[R...]}  rooms idle longer than idle_timeout
 *   stop-all {}      -> {stopped:[R...]}
 *   info     {}      -> {cgroup:"v1"|"v2"|"none", version:S, network:"none"|"egress",
 *                        dns:[S...] (egress only: the name servers a room can use)}
 *
 *   <status> = {room, running:B, created_at:S (as stored at creation),
 *               last_active_ms:N, disk_bytes:N, memory_bytes:N, processes:N}
 *
 * Error codes and the HTTP status roombox-fcgi gives them:
 *   invalid   400   bad request to the helper (should not happen via fcgi)
 *   not_found 404
 *   limit     429   max_rooms reached
 *   denied    500   caller or configuration refused
 *   failed    500   the sandbox could not do it
 */
#ifndef ROOMBOX_PROTOCOL_H
#define ROOMBOX_PROTOCOL_H

#include <stddef.h>

/* ---- operations ---- */
#define HELPER_OP_EXEC      "exec"
#define HELPER_OP_CREATE    "create"
#define HELPER_OP_STATUS    "status"
#define HELPER_OP_LIST      "list"
#define HELPER_OP_DESTROY   "destroy"
#define HELPER_OP_STOP      "stop"
#define HELPER_OP_STOP_IDLE "stop-idle"
#define HELPER_OP_STOP_ALL  "stop-all"
#define HELPER_OP_INFO      "info"

/* ---- request keys ---- */
#define HK_OP         "op"
#define HK_ROOM       "room"
#define HK_CMD        "cmd"
#define HK_TIMEOUT_MS "timeout_ms"
#define HK_ENV        "env"
#define HK_CWD        "cwd"
#define HK_STDIN      "stdin"

/* ---- answer keys ---- */
#define HK_ERROR            "error"
#define HK_CODE             "code"
/* exec */
#define HK_WAIT_STATUS      "wait_status"
#define HK_TIMED_OUT        "timed_out"
#define HK_STDOUT_BYTES     "stdout_bytes"
#define HK_STDERR_BYTES     "stderr_bytes"
#define HK_STDOUT_TRUNCATED "stdout_truncated"
#define HK_STDERR_TRUNCATED "stderr_truncated"
#define HK_DURATION_US      "duration_us"
#define HK_STARTED_MS       "started_ms"
/* <status> (and HK_ROOM) */
#define HK_RUNNING          "running"
#define HK_CREATED_AT       "created_at"
#define HK_LAST_ACTIVE_MS   "last_active_ms"
#define HK_DISK_BYTES       "disk_bytes"
#define HK_MEMORY_BYTES     "memory_bytes"
#define HK_PROCESSES        "processes"
/* list, destroy, stop, stop-idle, stop-all, info */
#define HK_ROOMS            "rooms"
#define HK_DESTROYED        "destroyed"
#define HK_STOPPED          "stopped"
#define HK_CGROUP           "cgroup"
#define HK_VERSION          "version"
#define HK_NETWORK          "network"
#define HK_DNS              "dns"

/* ---- error codes ---- */
#define HELPER_ERR_INVALID   "invalid"
#define HELPER_ERR_NOT_FOUND "not_found"
#define HELPER_ERR_LIMIT     "limit"
#define HELPER_ERR_DENIED    "denied"
#define HELPER_ERR_FAILED    "failed"

/* ---- limits ---- */
#define HELPER_REQUEST_MAX (8u << 20)  /* cmd + stdin + env, bounded */

#endif
