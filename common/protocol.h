/* The one interface between roombox-fcgi and roombox-helper: every
 * operation, record, error code and limit is defined here once, and both
 * programs use these definitions (no operation or field is spelled twice).
 *
 * roombox-fcgi runs `roombox-helper [-c CONFIG]` once per operation, writes
 * one request record on its stdin, closes it, and reads one answer record
 * from its stdout.  Exit status 0 = success; non-zero = an answer whose
 * status is an error code (HELPER_E_*) and whose text names the room and
 * the step.  `-c` is honoured only when the real uid is 0 or when it names
 * the compiled-in configuration path (ROOMBOX_CONF).  (Shell scripts use
 * the helper's command line instead: roombox-helper(8).)
 *
 * Records, not a text format: the setuid helper runs no general parser
 * and no allocator of its own over its caller's bytes.  Every integer is
 * in the host's byte order (both ends are on one machine); every size is
 * checked exactly.
 *
 * A request:  struct helper_req (magic, version, op, total size, the room
 *             where the op takes one, the count of strings), then the op's
 *             argument record (its exact size is the op's: see the table
 *             below), then nstrings NUL-terminated strings filling the rest
 *             of the request exactly.  All of it at most
 *             helper_request_max(max_body) bytes.  The helper refuses, and
 *             does nothing for, a request that is short or long, of another
 *             magic or version, of an unknown op, with a room id that breaks
 *             the room-id rule (or a room where the op takes none), with
 *             strings that are not exactly nstrings NUL-terminated ones, or
 *             with counts that do not add up to nstrings.
 * An answer:  struct helper_ans (magic, version, op, total size, status),
 *             then, on success, the op's answer record; on an error, the
 *             error text (NUL-terminated) instead.
 *
 * The helper hands back raw facts only: a wait status, whether the deadline
 * passed, times as integers, addresses as numbers.  Everything a client sees
 * -- exit codes and signal names, UTF-8 repair, base64, ISO-8601 times,
 * "sandbox-<id>" -- is made by roombox-fcgi (fcgi-app/exec/exec.c, rooms.c), so
 * none of that code runs as root over a room's (hostile) output.
 *
 * The operations (HOP_*), each: argument record -> answer record.
 *
 *   exec     struct helper_exec_args, then the strings: cmd (or, with
 *            HX_TOOL, ntool tool arguments), cwd (with HX_CWD), nenv
 *            "NAME=value" pairs.  -> struct helper_exec_ans.
 *            timeout_ms: 0 = exec_timeout (fcgi has checked it against
 *            exec_timeout_max); env and cwd: a one-off scope, the session is
 *            not saved; HX_USER_SET with HX_AS_USER or not: who runs it in
 *            the room (default: exec_user).  The room is created, or its
 *            jail restarted, when needed.
 *            Passed I/O: the helper's fds 3, 4 and 5 are pipes the caller
 *            made (read end; write end; write end; stdin may be /dev/null
 *            read-only, stdout a unix stream socket; anything else is
 *            closed), given to the command as its stdin, stdout and
 *            stderr; the caller writes the input and reads the output as
 *            the command runs.  A room's output never passes through the
 *            helper.
 *            wait_status is waitpid()'s status of the shell (meaningless
 *            when timed_out: the tree was killed); started_ms is wall-clock
 *            ms since the epoch.
 *            HX_EXISTING: the room must exist already: a room that does not
 *            is not_found, and nothing is created (a request that only
 *            reads a room).
 *            HX_RUNNING: only a room that runs: a stopped one is not
 *            started for it (conflict, nothing ran): a signal to what may
 *            have ended with the room.
 *            HX_DETACH (with cmd): the shell is started in a session of its
 *            own and the exec answers at once (wait_status 0): a managed
 *            process (fcgi-app/processes/processes.c).
 *            HX_TOOL: tool arguments [op, args...] instead of cmd (with
 *            HX_DETACH: started detached, as above: the pty tool): one of
 *            the keeper's own operations (below), done in the room as
 *            `user` by the keeper's own code, never by a program of the
 *            room: no cwd, env or session then.  Its answer text comes on
 *            stdout like a command's, its exit status in wait_status.
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
 *   watch PATH RECURSIVE  PATH (absolute, a directory) and, with "1",
 *            every directory below it followed with inotify: "ok\n", then
 *            one record per change, "<type><dir><path>\0" (type one of
 *            TOOL_WATCH_*, dir '1' for a directory else '0', path
 *            absolute), a move followed by its new path and "\0"; an
 *            overflow record's path is empty.  Until its stdin ends
 *            (keeper/watch.c).
 *   pty SIZE MODE CMD    detached (HX_TOOL|HX_DETACH), stdout a unix
 *            socket: a terminal in the room's devpts, SIZE "COLSxROWS"
 *            (1-TERM_SIZE_MAX each), running a login shell (MODE "shell")
 *            or `sh -c CMD` (MODE "cmd") in a session of its own; "ok
 *            <pid>\n" with the terminal's master side attached
 *            (SCM_RIGHTS), then "exit <code>\n" when the shell ends
 *            (keeper/pty.c).
 *   signal SID SIG       every process of session SID but SID itself gets
 *            SIG (a number); for SIGKILL they are stopped first, round after
 *            round, so nothing forks away: "ok <count>".
 *
 *   create   room, no args  -> struct helper_status (room made and started)
 *   status   room, no args  -> struct helper_status, or not_found
 *   list     no args        -> struct helper_list_ans, then count
 *            struct helper_status: every room, however many
 *   destroy  room, no args  -> nothing (also if absent)
 *   stop     room, no args  -> nothing (files kept)
 *   stop-idle struct helper_keep_args, then nkeep room ids (rooms
 *            roombox-fcgi runs managed processes in: they are not idle)
 *            -> struct helper_stopped_ans, then count room ids (char
 *            [HELPER_ROOM_LEN] each): the rooms idle longer than
 *            idle_timeout it stopped
 *   stop-all no args        -> struct helper_stopped_ans, as stop-idle
 *   kill-all room, struct helper_kill_args -> struct helper_killed_ans:
 *            every process of the room but its keeper; files, session, jail
 *            stay.  With HELPER_KILL_AT_LIMIT, only if the room's pids
 *            cgroup shows a fork refused for its limit (else 0, nothing
 *            done): what a room's output says never decides it alone.
 *   restart  room, no args  -> nothing: the jail stopped and started again
 *     (both: not_found for a room that does not exist)
 *
 *   An exec that cannot start because the room is at pids_limit (the
 *   keeper cannot fork the shell) kills the room's processes as kill-all
 *   does, logs one line on the helper's stderr, and runs once more.  A
 *   shell that started but could not fork is seen by roombox-fcgi, which
 *   has its output: it asks kill-all with HELPER_KILL_AT_LIMIT and, when
 *   the helper found the room at its limit and killed, runs the command
 *   again.
 *   port-connect room, struct helper_port_args -> nothing  (preview ports)
 *            port: the helper's fd 3 is a unix socket the caller made; the
 *            helper joins the network namespace of the room's keeper,
 *            connects a TCP socket to 127.0.0.1:port there and sends it
 *            back over fd 3 (SCM_RIGHTS), then answers.  A room that does
 *            not run is not started (refused: nothing can listen in
 *            it); nothing listening is refused too.  Counts as the
 *            room's activity (idle_timeout).
 *            serve (port 0): the same, many times, for one room: after
 *            joining the namespace the helper reads requests from fd 3,
 *            each a struct port_request, and answers each with one byte,
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
 *            request counts as the room's activity.  It ends when fd 3 is
 *            closed, when the room's keeper exits (a restarted room has a
 *            new namespace), or after PORT_SERVE_IDLE_MS without a
 *            request; a room not running ends it at once (refused).
 *   set-limits room, struct helper_limits_args -> struct helper_status:
 *            the limits named in set become the room's own (0: back to
 *            the configuration's), kept in its state directory; each at
 *            most room_limits_max's (or the configuration's when that is
 *            not set), else invalid.  memory, pids and cpu reach a running
 *            room's cgroup at once; a disk raised grows the room's image
 *            at its next start (jail.c; it never shrinks); the timeouts
 *            are read by exec (exec_timeout_max: a command's, not a tool's
 *            nor a detached start's) and stop-idle.
 *   export   room, struct helper_snap_args (snapshot = id, name or "": the
 *            room now; to = "") -> struct helper_export_ans, then the
 *            root's and the user's session texts.  fd 4 (a pipe's write
 *            end the caller made) gets the files as a tree stream
 *            (common/treestream.h) ending in its end record; an export
 *            that fails leaves the stream without one.  With a snapshot:
 *            its image and sessions (not_found when the room has none of
 *            that id or name); its id in the answer.  Without: a running
 *            room is cut as snapshot cuts it, into a temporary copy that
 *            is no snapshot (never listed nor counted; its name removed
 *            once it is mounted, and the room's lock released then: the
 *            room's other calls do not wait for the walk), and keeps
 *            running; a stopped room is read as it
 *            lies; a running room without a disk image (a plain
 *            directory, which cannot be cut) is stopped for the walk and
 *            started again.  The disk is walked by a child keeping only
 *            the reading capabilities (sandbox-helper/transfer.c).
 *   import   room, struct helper_import_args.  fd 3 (a pipe's read end)
 *            brings the room's files as a tree stream, which the helper
 *            checks again as it writes it into the new room's fresh disk
 *            (made from the template, never from the stream); then fd 5
 *            (another pipe's read end) the sessions: "<root bytes>
 *            <user bytes>\n", the root's text, the user's (each at most
 *            HELPER_SESSION_MAX, no NUL), then its end.  The sessions
 *            come last because the archive holds them after the files;
 *            a caller that found the archive wrong closes fd 5 at once. ->
 *            nothing; exists when the room does; the room exists only
 *            once the stream's end record came and all of it is written:
 *            any failure leaves no room (no state, slot or image).  Not
 *            started.
 *   exec-channel room, no args -> nothing.  The helper's fd 3 is a unix
 *            stream socket the caller made; a running room's keeper makes
 *            a new exec channel (common/exec_channel.h) and the helper
 *            sends it over fd 3 (SCM_RIGHTS, with one byte 'C'), then
 *            answers.  Over the channel the caller runs plain execs (no
 *            tool, no detached start, no more than exec allows) straight
 *            with the keeper, which reads and saves the room's session
 *            and marks it busy and active as exec does.  A room that does
 *            not run is not started (failed): its first exec goes through
 *            exec.
 *   touch    room, no args  -> nothing: the room's activity now (its
 *            lastActiveAt, for idle stop), as an exec marks it, without
 *            running anything; not_found when the room does not exist.
 *            For what reaches a room without the helper (a terminal's
 *            keystrokes).
 *   info     no args        -> struct helper_info_ans: cgroup mode, version,
 *            network, and (egress only) the name servers a room can use.
 *
 *   Snapshots (sandbox-helper/snapshot.c; a room with a disk image only,
 *   else conflict), each with struct helper_snap_args:
 *   snapshot room, snapshot = its name or "" -> struct helper_snapshot: the
 *            room cut with its sessions (its cgroup frozen; its ext4
 *            synced and the image reflinked, or its ext4 frozen with
 *            FIFREEZE and its used blocks copied: snapshot.c); a stopped
 *            room is copied as it lies.  At most snapshots_max (conflict beyond),
 *            names unique in the room (conflict); a reflinked one promises
 *            the bytes it shares (no_space when they do not fit: room.c).
 *   snapshots room -> struct helper_snapshots_ans, then count struct
 *            helper_snapshot, oldest first.
 *   snapshot-delete room, snapshot = id or name -> struct helper_snapshot
 *            (the one removed); not_found.
 *   restore  room, snapshot = id or name -> struct helper_snapshot: the
 *            room stopped, its disk image and sessions replaced by the
 *            snapshot's copies, started again.
 *   fork     room, to = the new room, snapshot = id, name or "" (the room
 *            now, cut as snapshot cuts) -> struct helper_snapshot (the cut's
 *            times): the new room made (max_rooms: limit; disk promise:
 *            no_space; it exists: conflict) with a copy of that disk and
 *            sessions, not started.  Both rooms are locked, in id order.
 *
 * Error codes (HELPER_E_*; their names, HELPER_ERR_*, are what roombox-fcgi
 * logs and counts) and the HTTP status roombox-fcgi gives them:
 *   invalid   400   bad request to the helper (should not happen via fcgi)
 *   not_found 404
 *   limit     429   max_rooms reached
 *   denied    500   caller or configuration refused
 *   failed    500   the sandbox could not do it
 *   refused   502   port-connect: nothing listens on that port in the room
 *   no_space  507   a new room's disk image would promise more than the
 *                   host has free; an import that does not fit its disk
 *   conflict  409   snapshot, fork: snapshots_max reached, a name taken, the
 *                   new room exists, or a room without a disk image
 *   exists    409   import: the room exists already
 */
#ifndef ROOMBOX_PROTOCOL_H
#define ROOMBOX_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ---- operations ---- */
enum helper_op {
	HOP_EXEC = 1, HOP_CREATE, HOP_STATUS, HOP_LIST, HOP_DESTROY, HOP_STOP,
	HOP_STOP_IDLE, HOP_STOP_ALL, HOP_INFO, HOP_KILL_ALL, HOP_RESTART,
	HOP_PORT_CONNECT, HOP_SET_LIMITS,
	HOP_SNAPSHOT, HOP_SNAPSHOTS, HOP_SNAPSHOT_DELETE, HOP_RESTORE, HOP_FORK,
	HOP_EXPORT, HOP_IMPORT, HOP_EXEC_CHANNEL, HOP_TOUCH,
	HOP_COUNT   /* one past the last */
};
/* their names: the helper's command line, roombox-fcgi's metrics and logs */
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
#define HELPER_OP_SET_LIMITS "set-limits" /* PATCH /api/rooms/{id} */
#define HELPER_OP_SNAPSHOT  "snapshot"        /* POST …/snapshots */
#define HELPER_OP_SNAPSHOTS "snapshots"       /* GET …/snapshots */
#define HELPER_OP_SNAPSHOT_DELETE "snapshot-delete"
#define HELPER_OP_RESTORE   "restore"
#define HELPER_OP_FORK      "fork"
#define HELPER_OP_EXPORT    "export"     /* GET /api/rooms/{id}/export */
#define HELPER_OP_IMPORT    "import"     /* PUT /api/rooms/{id}/import */
#define HELPER_OP_EXEC_CHANNEL "exec-channel" /* warm execs without the helper */
#define HELPER_OP_TOUCH     "touch"      /* a terminal's keystrokes */

static inline const char *helper_op_name(uint32_t op)
{
	static const char *const names[HOP_COUNT] = {
		[HOP_EXEC] = HELPER_OP_EXEC, [HOP_CREATE] = HELPER_OP_CREATE,
		[HOP_STATUS] = HELPER_OP_STATUS, [HOP_LIST] = HELPER_OP_LIST,
		[HOP_DESTROY] = HELPER_OP_DESTROY, [HOP_STOP] = HELPER_OP_STOP,
		[HOP_STOP_IDLE] = HELPER_OP_STOP_IDLE, [HOP_STOP_ALL] = HELPER_OP_STOP_ALL,
		[HOP_INFO] = HELPER_OP_INFO, [HOP_KILL_ALL] = HELPER_OP_KILL_ALL,
		[HOP_RESTART] = HELPER_OP_RESTART, [HOP_PORT_CONNECT] = HELPER_OP_PORT_CONNECT,
		[HOP_SET_LIMITS] = HELPER_OP_SET_LIMITS,
		[HOP_SNAPSHOT] = HELPER_OP_SNAPSHOT, [HOP_SNAPSHOTS] = HELPER_OP_SNAPSHOTS,
		[HOP_SNAPSHOT_DELETE] = HELPER_OP_SNAPSHOT_DELETE, [HOP_RESTORE] = HELPER_OP_RESTORE,
		[HOP_FORK] = HELPER_OP_FORK,
		[HOP_EXPORT] = HELPER_OP_EXPORT, [HOP_IMPORT] = HELPER_OP_IMPORT,
		[HOP_EXEC_CHANNEL] = HELPER_OP_EXEC_CHANNEL, [HOP_TOUCH] = HELPER_OP_TOUCH,
	};
	return op > 0 && op < HOP_COUNT ? names[op] : NULL;
}

/* the HTTP API's names for who runs a command (validate.c, files.c) */
#define HK_USER_ROOT  "root"
#define HK_USER_USER  "user"

/* ---- records ---- */
#define HELPER_MAGIC   0x72626870u   /* "rbhp" */
#define HELPER_VERSION 1u
/* a room id (common/roomid.h's rule) NUL-padded: "" where the op takes none */
#define HELPER_ROOM_LEN 72

struct helper_req {
	uint32_t magic;
	uint32_t version;
	uint32_t op;               /* enum helper_op */
	uint32_t size;             /* the whole request, this record included */
	uint32_t nstrings;         /* NUL-terminated strings after the args */
	uint32_t reserved;         /* 0 */
	char room[HELPER_ROOM_LEN];
};

/* exec's flags */
#define HX_TOOL     1u   /* ntool tool arguments instead of cmd */
#define HX_CWD      2u   /* a cwd string follows cmd */
#define HX_USER_SET 4u   /* HX_AS_USER says who runs it (else exec_user) */
#define HX_AS_USER  8u   /* the room's user (uid 1000), else its root */
#define HX_EXISTING 16u  /* never create the room (not_found instead) */
#define HX_DETACH   32u  /* start it in a session of its own, answer at once */
#define HX_TIMEOUT_CAP 64u /* timeout_ms is a bound: cut to the room's
                            * execTimeoutMax, not refused above it (a
                            * second run given what the first left) */
#define HX_RUNNING  128u /* never start the room (conflict instead) */
#define HX_ALL      255u

struct helper_exec_args {
	uint64_t timeout_ms;       /* 0: exec_timeout */
	uint32_t flags;            /* HX_* */
	uint32_t nenv;             /* "NAME=value" strings, after cmd and cwd */
	uint32_t ntool;            /* HX_TOOL: 1..TOOL_ARGS_MAX, else 0 */
	uint32_t reserved;         /* 0 */
};

struct helper_keep_args {      /* stop-idle */
	uint32_t nkeep;            /* room ids (strings) left running */
	uint32_t reserved;
};

struct helper_kill_args {      /* kill-all */
	uint32_t flags;            /* HELPER_KILL_* */
	uint32_t reserved;         /* 0 */
};
/* only when the room's pids cgroup has refused a fork for its limit (the
 * caller saw its shell fail to fork); otherwise nothing is killed and the
 * answer's count is 0 */
#define HELPER_KILL_AT_LIMIT 1u

struct helper_port_args {      /* port-connect */
	uint32_t port;             /* 1..65535, or 0 with serve */
	uint32_t serve;            /* 1: many connections over fd 3 */
};

/* A room's own limits: each 0 = the configuration's.  memory and disk in
 * bytes, cpu in thousandths of a CPU, the timeouts in ms. */
struct helper_limits {
	uint64_t memory;
	uint64_t pids;
	uint64_t cpu_milli;
	uint64_t disk;
	uint64_t idle_timeout_ms;
	uint64_t exec_timeout_max_ms;
};

struct helper_limits_args {    /* set-limits */
	struct helper_limits limits;  /* the fields named in set */
	uint32_t set;              /* HL_* */
	uint32_t reserved;         /* 0 */
};
#define HL_MEMORY   1u
#define HL_PIDS     2u
#define HL_CPU      4u
#define HL_DISK     8u
#define HL_IDLE    16u
#define HL_EXECMAX 32u
#define HL_ALL     63u

/* snapshot, snapshots, snapshot-delete, restore, fork, export: ids and names
 * NUL-padded, each "" or following the room-id rule */
struct helper_snap_args {
	char snapshot[HELPER_ROOM_LEN];  /* snapshot: its name ("": none);
	                                  * delete, restore, fork, export: its
	                                  * id or name (fork, export: "" = the
	                                  * room now) */
	char to[HELPER_ROOM_LEN];        /* fork: the new room; else "" */
};

struct helper_import_args {    /* import */
	uint32_t flags;            /* 0 */
	uint32_t reserved;         /* 0 */
};

struct helper_ans {
	uint32_t magic;
	uint32_t version;
	uint32_t op;               /* the request's (0 when it had none) */
	uint32_t size;             /* the whole answer, this record included */
	uint32_t status;           /* HELPER_E_OK, or an error code */
	uint32_t reserved;
};

struct helper_exec_ans {
	int32_t wait_status;
	uint32_t timed_out;
	uint64_t duration_us;
	int64_t started_ms;
};

/* <status> of a room: facts only (roombox-fcgi names the sandbox, formats
 * the times and nests the usage) */
struct helper_status {
	char room[HELPER_ROOM_LEN];
	char created_at[32];       /* as stored at creation, NUL-terminated */
	uint32_t running;
	uint32_t reserved;
	int64_t last_active_ms;
	uint64_t disk_bytes, memory_bytes, processes;
	struct helper_limits limits;   /* the room's own (0: the configuration's) */
};

struct helper_list_ans {
	uint32_t count;            /* struct helper_status records that follow */
	uint32_t reserved;
};

struct helper_stopped_ans {
	uint32_t count;            /* char[HELPER_ROOM_LEN] room ids that follow */
	uint32_t reserved;
};

struct helper_export_ans {
	uint32_t root_len;         /* the root's session text, then */
	uint32_t user_len;         /* the user's, follow (no NULs) */
	uint32_t was_running;      /* the room ran at the cut */
	uint32_t reserved;
	char snapshot[HELPER_ROOM_LEN];  /* the snapshot exported ("": the room) */
};
#define HELPER_SESSION_MAX (1u << 20)  /* a session text exported or imported */

/* The helper's own bound (alarm) on an operation that copies a whole disk
 * image (snapshot, restore, fork, an export's cut), its wait for the
 * room's lock included: its handler thaws a file system frozen for the
 * copy before the helper goes.  roombox-fcgi waits longer
 * (HELPER_COPY_DEADLINE_MS), so it never gives up on -- nor, where it
 * may, kills -- a helper that would still answer. */
#define HELPER_COPY_ALARM_S 600u

struct helper_killed_ans {
	uint32_t killed;
	uint32_t reserved;
};

#define HELPER_DNS_MAX 32      /* CONFIG_LIST_MAX */
struct helper_info_ans {
	char cgroup[8];            /* "v1", "v2" or "none" */
	char version[32];
	char network[8];           /* "none" or "egress" */
	uint32_t ndns;
	uint32_t dns[HELPER_DNS_MAX];  /* IPv4, host byte order */
};

/* A snapshot of a room (sandbox-helper/snapshot.c). */
struct helper_snapshot {
	char id[HELPER_ROOM_LEN];
	char name[HELPER_ROOM_LEN];   /* "" = none */
	char created_at[32];          /* ISO-8601 UTC */
	char copy[16];                /* SNAP_COPY_*: how its disk was copied */
	uint64_t size;                /* bytes it holds (image blocks, sessions) */
	uint64_t frozen_us;           /* taking one: how long the room's
	                               * processes were frozen (0: it was stopped) */
	uint64_t fs_frozen_us;        /* and its file system (FIFREEZE .. FITHAW) */
};
#define SNAP_COPY_REFLINK "reflink"      /* blocks shared (FICLONE) */
#define SNAP_COPY_SPARSE  "sparse-copy"  /* only the used blocks copied */

struct helper_snapshots_ans {
	uint32_t count;            /* struct helper_snapshot records that follow */
	uint32_t reserved;
};

/* ---- error codes ---- */
enum helper_status_code {
	HELPER_E_OK = 0, HELPER_E_INVALID, HELPER_E_NOT_FOUND, HELPER_E_LIMIT,
	HELPER_E_DENIED, HELPER_E_FAILED, HELPER_E_REFUSED, HELPER_E_NO_SPACE,
	HELPER_E_CONFLICT,
	HELPER_E_EXISTS,
	HELPER_E_COUNT
};
#define HELPER_ERR_INVALID   "invalid"
#define HELPER_ERR_NOT_FOUND "not_found"
#define HELPER_ERR_LIMIT     "limit"
#define HELPER_ERR_DENIED    "denied"
#define HELPER_ERR_FAILED    "failed"
#define HELPER_ERR_REFUSED   "refused"
#define HELPER_ERR_NO_SPACE  "no_space"
#define HELPER_ERR_CONFLICT  "conflict"
#define HELPER_ERR_EXISTS    "exists"

static inline const char *helper_err_name(uint32_t code)
{
	static const char *const names[HELPER_E_COUNT] = {
		[HELPER_E_OK] = "ok", [HELPER_E_INVALID] = HELPER_ERR_INVALID,
		[HELPER_E_NOT_FOUND] = HELPER_ERR_NOT_FOUND, [HELPER_E_LIMIT] = HELPER_ERR_LIMIT,
		[HELPER_E_DENIED] = HELPER_ERR_DENIED, [HELPER_E_FAILED] = HELPER_ERR_FAILED,
		[HELPER_E_REFUSED] = HELPER_ERR_REFUSED, [HELPER_E_NO_SPACE] = HELPER_ERR_NO_SPACE,
		[HELPER_E_CONFLICT] = HELPER_ERR_CONFLICT,
		[HELPER_E_EXISTS] = HELPER_ERR_EXISTS,
	};
	return code < HELPER_E_COUNT ? names[code] : HELPER_ERR_FAILED;
}

/* An error's text is at most this long (its NUL included). */
#define HELPER_ERROR_MAX 1024

/* ---- limits ---- */
/* A request carries at most one HTTP body (max_body: cmd, stdin, env) and
 * what roombox-fcgi adds around it (records, NUL terminators); the slack
 * is that addition, generously.  Both sides apply the same limit:
 * roombox-fcgi answers 413 before spawning, the helper refuses more. */
#define HELPER_REQUEST_SLACK (64u << 10)

static inline uint64_t helper_request_max(uint64_t max_body)
{
	return max_body + HELPER_REQUEST_SLACK;
}

/* Everything the helper may use (heap, code, stack), whatever the
 * request: a request is read whole into one buffer of at most
 * helper_request_max(max_body) bytes, and nothing else grows with it (its
 * strings are used where they lie; a command's output never passes
 * through the helper).  max_body is at most MAX_BODY_LIMIT
 * (common/config.c), so that no request takes the helper past
 * HELPER_MEMORY_MAX (tests/security/test_helper_memory.py). */
#define HELPER_MEMORY_MAX (64u << 20)
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
#define TOOL_PTY    "pty"
#define TERM_SIZE_MAX 1000       /* a terminal's columns or rows */
#define TOOL_WATCH  "watch"
#define TOOL_WATCH_CREATE   'c'
#define TOOL_WATCH_MODIFY   'm'
#define TOOL_WATCH_DELETE   'd'
#define TOOL_WATCH_MOVE     'v'
#define TOOL_WATCH_OVERFLOW 'o'   /* events were lost: list again */
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
