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
 * passed, times as integers; a command's output never passes through it.  Everything a client sees
 * -- exit codes and signal names, UTF-8 repair, base64, ISO-8601 times,
 * "sandbox-<id>" -- is made by roombox-fcgi (fcgi-app/exec.c, rooms.c), so
 * none of that code runs as root over a room's (hostile) output.
 *
 * An answer is one JSON object on one line (its strings escape every
 * control byte, so the first "\n" ends it).
 *
 * Requests (HK_OP selects the operation; HK_ROOM is checked against the
 * room-id rule):
 *
 *   exec     {room, cmd, io, timeout_ms?, env?, cwd?, user?}
 *            io: true, always (passed I/O): the helper's fds 3, 4 and 5 are
 *            pipes the caller made (read end; write end; write end), given
 *            to the command as its stdin, stdout and stderr; the caller
 *            writes the input and reads the output as the command runs.
 *            timeout_ms: default exec_timeout (fcgi has checked it against
 *            exec_timeout_max); env {S:S} and cwd: a one-off scope, the
 *            session is not saved; user: HK_USER_ROOT or HK_USER_USER, who
 *            runs it in the room (default: exec_user).  The room is
 *            created, or its jail restarted, when needed.
 *         -> {wait_status, timed_out, duration_us, started_ms}
 *            wait_status is waitpid()'s status of the shell (meaningless
 *            when timed_out: the tree was killed); started_ms is wall-clock
 *            ms since the epoch.
 *            existing: true = the room must exist already: a room that
 *            does not is code not_found, and nothing is created (a request
 *            that only reads a room).
 *            detach: true (with cmd) the shell is started in a session of
 *            its own and the exec answers at once (wait_status 0): a
 *            managed process (fcgi-app/processes.c).
 *            tool: [op, args...] instead of cmd: one of the keeper's own
 *            operations (below), done in the room as `user` by the keeper's
 *            own code, never by a program of the room: no cmd, env, cwd or
 *            session then.  Its answer text comes on stdout like a
 *            command's, its exit status in wait_status.
 *
 * The keeper's tools (sandbox-helper/keeper/tools.c), each answering on its
 * first stdout line: "E <kind>" (TOOL_KIND_*) for what a client is told
 * apart, "ok ..." when done; what it did not foresee goes to stderr as
 * "<step>: <C library's words>" with exit status 1.
 *   get PATH RECURSIVE   a directory: "D\n", then one record per entry,
 *            "<type>\t<size>\t<mode, octal>\t<mtime s.ns>\t<relative path>\0"
 *            (type as find's %y: f d l p s c b), depth first, symlinks not
 *            followed, at most TOOL_LIST_MAX + 1 records; a record
 *            TOOL_LIST_CUT says a directory more than TOOL_DEPTH_MAX levels
 *            down was not entered.  A regular file:
 *            "F <size>\n" and, when stdout is a unix socket, the open file
 *            itself attached (SCM_RIGHTS), else its bytes follow.
 *   put PATH MODE NONCE  stdin: the bytes, then the end mark (TOOL_PUT_END)
 *            with this request's NONCE;
 *            made as a nameless file beside PATH (parents created), named
 *            PATH only once the mark came: "ok created" or "ok replaced".
 *            MODE: octal, or "" to keep the replaced file's (or umask's).
 *   mkdir PATH MODE      with parents: "ok created" or "ok replaced".
 *   delete PATH RECURSIVE  never following a symlink nor crossing a mount: "ok".
 *            Never the room's root nor /workspace, whatever the spelling
 *            (E refused); a tree deeper than TOOL_DEPTH_MAX: E toodeep.
 *   move PATH TO         a rename, TO's parents created: "ok".
 *   signal SID SIG       every process of session SID but SID itself gets
 *            SIG (a number); for SIGKILL they are stopped first, round after
 *            round, so nothing forks away: "ok <count>".
 *
 *   create   {room}  -> <status>   (room made and started)
 *   status   {room}  -> <status>   or code not_found
 *   list     {}      -> {rooms:[<status>...]}
 *   destroy  {room}  -> {destroyed:true}  (also if absent)
 *   stop     {room}  -> {stopped:true}    (files kept)
 *   stop-idle {keep?:[R...]} -> {stopped:[R...]}  rooms idle longer than
 *            idle_timeout, except those in keep (rooms roombox-fcgi runs
 *            managed processes in: they are not idle)
 *   stop-all {}      -> {stopped:[R...]}
 *   kill-all {room}  -> {killed:N}       every process of the room but its
 *                                        keeper; files, session, jail stay
 *   restart  {room}  -> {restarted:true} the jail stopped and started again
 *     (both: code not_found for a room that does not exist)
 *
 *   An exec that cannot start because the room is at pids_limit (the
 *   keeper cannot fork the shell) kills the room's processes as kill-all
 *   does, logs one line on the helper's stderr, and runs once more.  A
 *   shell that started but could not fork is seen by roombox-fcgi, which
 *   has its output: it asks kill-all and runs the command again.
 *   port-connect {room, port}  -> {connected:true}   (preview ports, §8.5)
 *            the helper's fd 3 is a unix socket the caller made; the
 *            helper joins the network namespace of the room's keeper,
 *            connects a TCP socket to 127.0.0.1:port there and sends it
 *            back over fd 3 (SCM_RIGHTS), then answers.  A room that does
 *            not run is not started (code refused: nothing can listen in
 *            it); nothing listening is code refused too.  Counts as the
 *            room's activity (idle_timeout).
 *   port-connect {room, serve:true}  -> {connected:true}  (at its end)
 *            the same, many times, for one room: after joining the
 *            namespace the helper reads requests from fd 3, each a
 *            struct port_request, and answers each with one byte,
 *            PORT_REPLY_*, carrying the socket (SCM_RIGHTS) with
 *            PORT_REPLY_CONNECTED: non-blocking, its connect possibly
 *            still under way (the caller waits for it, and reads a refusal
 *            from SO_ERROR).  A request for port 0 with a count asks
 *            instead for that many TCP sockets made in the room's
 *            namespace, not connected (PORT_REPLY_SOCKETS carries them):
 *            the caller connects them itself, to the room's loopback,
 *            without a round trip here per connection (they reach what
 *            the room reaches, which the caller -- roombox-fcgi, which
 *            runs anything in any room -- can reach anyway).  Every
 *            request counts as the room's activity.  It ends when fd 3 is closed, when the
 *            room's keeper exits (a restarted room has a new namespace),
 *            or after PORT_SERVE_IDLE_MS without a request; a room not
 *            running ends it at once (code refused).
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
 *   refused   502   port-connect: nothing listens on that port in the room
 */
#ifndef ROOMBOX_PROTOCOL_H
#define ROOMBOX_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
#define HELPER_OP_KILL_ALL  "kill-all"   /* DELETE …/sandbox/processes */
#define HELPER_OP_RESTART   "restart"    /* POST …/sandbox/restart */
#define HELPER_OP_PORT_CONNECT "port-connect"

/* ---- request keys ---- */
#define HK_OP         "op"
#define HK_ROOM       "room"
#define HK_CMD        "cmd"
#define HK_TIMEOUT_MS "timeout_ms"
#define HK_ENV        "env"
#define HK_CWD        "cwd"
#define HK_IO         "io"   /* true: passed I/O, see exec */
#define HK_USER       "user"
#define HK_TOOL       "tool" /* exec: a keeper tool instead of cmd */
#define HK_EXISTING   "existing" /* exec: never create the room */
#define HK_DETACH     "detach" /* exec: start in a new session, answer at once */
/* values of HK_USER: the room's root (uid 0) or its user (uid 1000) */
#define HK_USER_ROOT  "root"
#define HK_USER_USER  "user"
#define HK_KEEP       "keep" /* stop-idle: rooms to leave running */
#define HK_PORT       "port" /* port-connect: 1..65535 */
#define HK_SERVE      "serve" /* port-connect: true = many, see above */

/* ---- answer keys ---- */
#define HK_ERROR            "error"
#define HK_CODE             "code"
/* exec */
#define HK_WAIT_STATUS      "wait_status"
#define HK_TIMED_OUT        "timed_out"
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
#define HK_KILLED           "killed"
#define HK_RESTARTED        "restarted"
/* port-connect */
#define HK_CONNECTED        "connected"
#define HK_NETWORK          "network"
#define HK_DNS              "dns"

/* ---- error codes ---- */
#define HELPER_ERR_INVALID   "invalid"
#define HELPER_ERR_NOT_FOUND "not_found"
#define HELPER_ERR_LIMIT     "limit"
#define HELPER_ERR_DENIED    "denied"
#define HELPER_ERR_FAILED    "failed"
#define HELPER_ERR_REFUSED   "refused"
/* a new room's disk image would promise more than the host has free (507) */
#define HELPER_ERR_NO_SPACE  "no_space"

/* ---- limits ---- */
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
/* output_limit: roombox-fcgi (never the helper: the output goes to its own
 * pipes) holds both streams of every running exec, each up to this. */
#define OUTPUT_LIMIT_MAX (16u << 20)

/* port-connect: how long the connect inside the room may take (loopback
 * answers at once; a full backlog is the only wait). */
#define PORT_CONNECT_TIMEOUT_MS 5000
#define PORT_SERVE_IDLE_MS 30000

/* port-connect serve: one request on fd 3, in the host's byte order (both
 * ends are on one machine), and the one-byte replies. */
struct port_request {
	uint16_t port;   /* 1..65535: connect there; 0: sockets */
	uint16_t count;  /* port 0: sockets wanted, 1..PORT_SOCKETS_MAX; else 0 */
};
#define PORT_SOCKETS_MAX 32
#define PORT_REPLY_CONNECTED 'c'
#define PORT_REPLY_SOCKETS   's'   /* with count sockets, not connected */
#define PORT_REPLY_REFUSED   'r'   /* nothing listens there */
#define PORT_REPLY_INVALID   'i'   /* port out of 1..65535, or a bad count */
#define PORT_REPLY_FAILED    'f'

/* ---- the keeper's tools (see the exec op) ---- */
#define TOOL_GET    "get"
#define TOOL_PUT    "put"
#define TOOL_MKDIR  "mkdir"
#define TOOL_DELETE "delete"
#define TOOL_MOVE   "move"
#define TOOL_SIGNAL "signal"
#define TOOL_ARGS_MAX 4          /* op and at most 3 arguments */
#define TOOL_LIST_MAX 10000      /* entries a listing answers; one more says "cut" */
/* what "E <kind>" names */
#define TOOL_KIND_NOTFOUND "notfound"
#define TOOL_KIND_DENIED   "denied"
#define TOOL_KIND_NOSPACE  "nospace"
#define TOOL_KIND_ISDIR    "isdir"
#define TOOL_KIND_NOTDIR   "notdir"
#define TOOL_KIND_NOTFILE  "notfile"
#define TOOL_KIND_NOTEMPTY "notempty"
#define TOOL_KIND_EXISTS   "exists"
#define TOOL_KIND_SHORT    "short"
#define TOOL_KIND_REFUSED  "refused"
#define TOOL_KIND_TOODEEP  "toodeep"
#define TOOL_DEPTH_MAX 256       /* directory levels a listing or a delete enters */
#define TOOL_LIST_CUT "!cut"     /* a listing record: something was not entered */

/* An upload ends with this mark, written by roombox-fcgi once every byte
 * of the body came: "#rbput:", the request's nonce (TOOL_NONCE_LEN hex
 * digits, random, given to the put tool as an argument, which the room
 * cannot read: the tool is a non-dumpable fork of the keeper), the body's
 * length in 16 hex digits, then "\n".  Without it (the client or
 * roombox-fcgi went away) nothing is named in the room; a body cut short
 * cannot end with a mark of its own making, not knowing the nonce.
 * tool_put_end() writes one into buf (TOOL_PUT_END_LEN + 1 bytes). */
#define TOOL_PUT_END "#rbput:"
#define TOOL_NONCE_LEN 32
#define TOOL_PUT_END_LEN (7 + TOOL_NONCE_LEN + 16 + 1)

static inline void tool_put_end(char *buf, const char *nonce, uint64_t len)
{
	static const char hex[] = "0123456789abcdef";

	memcpy(buf, TOOL_PUT_END, 7);
	memcpy(buf + 7, nonce, TOOL_NONCE_LEN);
	for (int i = 0; i < 16; i++)
		buf[7 + TOOL_NONCE_LEN + i] = hex[(len >> (4 * (15 - i))) & 15];
	buf[TOOL_PUT_END_LEN - 1] = '\n';
	buf[TOOL_PUT_END_LEN] = '\0';
}

#endif
