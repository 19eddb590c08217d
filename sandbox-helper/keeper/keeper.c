/* roombox-keeper — PID 1 of a room, and the room's exec server.
 *
 * Theory of operation.  The helper builds the room's namespaces and root,
 * then execs this program in them (from a descriptor opened before
 * pivot_root, so the binary need not be inside the room) with:
 *   fd 3  a pipe on which it says "ok" once it runs,
 *   fd 4  a listening SOCK_SEQPACKET socket (<run_dir>/rooms/<id>/sock on
 *         the host, in a root-only directory),
 *   fd 5  the room's seccomp filter as raw BPF, built at build time with
 *         libseccomp.
 * It is static (musl) and libc-only, so an idle room costs a few pages and
 * `ps` in the room shows nothing of the host.
 *
 * The keeper runs as root of the room's user namespace (the helper made it,
 * mapping the room's ids 0-65535 onto host ids of that room alone, and
 * entered it last, after building the room's root).  It loads the filter
 * and lowers the capability bounding set to Docker's default set once, for
 * itself and so for every process of the room (caps.h).  Then it is one event
 * loop (poll) over: the listening socket, a signalfd (SIGCHLD: reap),
 * connections whose request has not come yet (2 s at most; the loop never
 * blocks on one), and per running exec its connection to the helper.  An exec (protocol in keeper_proto.h) is one
 * child (spawn.c: sharing the keeper's memory until its execve, not a copy
 * of it): already in all of the room's namespaces and its cgroup, it
 * becomes non-dumpable, a child subreaper and the leader of a new audit
 * session, sets no_new_privs, stays the room's root (and so gets ROOM_CAPS
 * at its execve) or drops to the room's user (1000, no capabilities), and
 * execs the shell.  Being a subreaper, the shell adopts whatever its
 * descendants orphan; the audit session follows every process the exec
 * starts and the room cannot change it.  At the deadline the keeper stops
 * the shell's tree and session (SIGSTOP, round after round until the set
 * stops growing), kills them, and looks again until none is left.  What
 * an exec leaves running when its shell ends moves to the keeper and
 * stays, unless at the exec's deadline the room is at its process limit (a
 * fork bomb run in the background): then that exec's session is stopped
 * and killed.  (An exec's output pipes are roombox-fcgi's: it reads them,
 * and drains those background processes still hold.)  A tool's child or a
 * detached start's first process that the room stops is killed at once
 * (the keeper hears of the stop as their parent), so the room cannot hold
 * a files request until its deadline.
 *
 * After confining the room the keeper lowers its own capabilities to the
 * few it uses, named in caps.h, and makes itself non-dumpable: the room's
 * root has the keeper's uid, but may not trace it (no CAP_SYS_PTRACE).  A
 * signal from inside the room that would end the keeper is ignored (as PID 1
 * it cannot get SIGKILL or SIGSTOP from there); SIGTERM from the host ends
 * the room.  Exec connections are taken from outside the room only.
 *
 * Exec channels (channel.c): on the helper's word the keeper also serves
 * roombox-fcgi's warm execs over restricted socketpairs -- plain commands
 * only, each request checked as untrusted, run by the same spawn and
 * deadline code as the helper's, the room's session and marks kept on
 * files the helper opened for it.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "caps.h"
#include "channel.h"
#include "clock.h"
#include "keeper_proto.h"
#include "plan.h"
#include "spawn.h"

#define FD_REPORT 3
#define FD_LISTEN 4
#define FD_FILTER 5
#define EXEC_FDS 5   /* blob, stdout, stderr, session, [stdin] */

/* From here on the keeper uses KEEPER_CAPS (caps.h) and nothing else; it
 * keeps ROOM_CAPS permitted only so that the room's root gets them at each
 * exec (no_new_privs grants nothing more).  The inheritable set is empty. */
static void keep_only_keeper_caps(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2] = { 0 };
	for (int i = 0; i < 2; i++) {
		data[i].permitted = (uint32_t)(ROOM_CAPS >> (32 * i));
		data[i].effective = (uint32_t)(KEEPER_CAPS >> (32 * i));
	}
	if (syscall(SYS_capset, &hdr, data) < 0)
		_exit(2);
}

/* What every exec would otherwise repeat, done once for the whole room:
 * the seccomp filter (the kernel converts and JIT-compiles a classic BPF
 * program on every load) and the capability bounding set are inherited by
 * every shell, and the keeper itself needs none of what they
 * forbid.  Signal dispositions go back to default (an ignored signal stays
 * ignored across execve), so a shell only has to clear its mask. */
static void confine_room(void)
{
	struct stat st;
	if (fstat(FD_FILTER, &st) < 0 || st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) ||
	    st.st_size > 65535 * (off_t)sizeof(struct sock_filter))
		_exit(2);
	struct sock_fprog filter = { (unsigned short)(st.st_size / sizeof(struct sock_filter)),
				     malloc((size_t)st.st_size) };
	if (!filter.filter || pread(FD_FILTER, filter.filter, (size_t)st.st_size, 0) != st.st_size)
		_exit(2);
	close(FD_FILTER);
	/* the room's root shares the keeper's uid: only CAP_SYS_PTRACE (which
	 * no one in the room has) would let it look into a non-dumpable keeper */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		_exit(2);
	for (int cap = 0; cap <= 63; cap++)
		if (!(ROOM_CAPS & KEEPER_CAP_BIT(cap)) && prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 &&
		    errno != EINVAL)
			_exit(2);
	struct { void *handler; unsigned long flags; void *restorer; unsigned long mask; } dfl = { 0 };
	for (int s = 1; s <= 64; s++)
		if (s != SIGKILL && s != SIGSTOP)
			syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof(dfl.mask));
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter) < 0)
		_exit(2);
	free(filter.filter);
	keep_only_keeper_caps();
}

static int signal_fd(void)
{
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGPIPE);
	sigprocmask(SIG_BLOCK, &set, NULL);
	return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

static int send_msg(int conn, uint32_t type, int status, int timed_out, const char *text)
{
	struct kp_msg m = { type, status, timed_out, "" };
	if (text)
		snprintf(m.text, sizeof(m.text), "%s", text);
	return send(conn, &m, sizeof(m), MSG_NOSIGNAL) == sizeof(m) ? 0 : -1;
}

/* Receive one message and up to nfds descriptors; returns bytes (0 = EOF). */
static ssize_t recv_msg(int conn, struct kp_msg *m, int *fds, int nfds, int *got)
{
	char cbuf[CMSG_SPACE(sizeof(int) * 8)];
	struct iovec iov = { m, sizeof(*m) };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1,
			     .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
	ssize_t n = recvmsg(conn, &mh, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
	*got = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); n > 0 && c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		int *in = (int *)CMSG_DATA(c);
		for (int i = 0; i < k; i++) {
			if (*got < nfds)
				fds[(*got)++] = in[i];
			else
				close(in[i]);
		}
	}
	return n;
}

/* ---- the shell ---------------------------------------------------------- */

/* (its plan: plan.c) */

/* ---- stopping and killing sets of processes ------------------------------- */

#define MAX_PROCS 32768
#define NO_SESSION 0xffffffffu   /* audit session unknown or unset */

struct proc_table {
	int n;
	int pid[MAX_PROCS], ppid[MAX_PROCS];
	bool pick[MAX_PROCS];
};

/* /proc/<pid>/<name> as text in buf; its length, or -1. */
static ssize_t proc_read(int pid, const char *name, char *buf, size_t len)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	/* openat: musl's open() adds an fcntl for O_CLOEXEC */
	int fd = openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, len - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return n;
}

/* ppid of pid from /proc/<pid>/stat; -1 if gone or a zombie. */
static int parent_of(int pid)
{
	char buf[512];
	if (proc_read(pid, "stat", buf, sizeof(buf)) < 0)
		return -1;
	char *s = strrchr(buf, ')');
	if (!s || s[1] != ' ' || s[2] == 'Z' || s[2] == 'X')
		return -1;
	return atoi(s + 4);
}

/* The audit session of pid (see shell_main), NO_SESSION if unknown. */
static uint32_t session_of(int pid)
{
	char buf[32];
	return proc_read(pid, "sessionid", buf, sizeof(buf)) < 0 ? NO_SESSION
		: (uint32_t)strtoul(buf, NULL, 10);
}

static void proc_snapshot(struct proc_table *t)
{
	t->n = 0;
	DIR *d = opendir("/proc");
	struct dirent *e;
	while (d && (e = readdir(d)) && t->n < MAX_PROCS) {
		int pid = atoi(e->d_name);
		int pp = pid > 1 ? parent_of(pid) : -1;
		if (pp > 0) {
			t->pid[t->n] = pid;
			t->ppid[t->n] = pp;
			t->pick[t->n++] = false;
		}
	}
	if (d)
		closedir(d);
}

/* Is pid `root` or below it (following ppid)? */
static bool below(const struct proc_table *t, int i, pid_t root)
{
	int p = t->pid[i];
	for (int depth = 0; depth < 4096 && p > 1; depth++) {
		if (p == root)
			return true;
		int j = 0;
		while (j < t->n && t->pid[j] != p)
			j++;
		if (j == t->n)
			return false;
		p = t->ppid[j];
	}
	return false;
}

static bool in_running_exec(const struct proc_table *t, int i);

/* Which processes kill_set takes: the tree below `root` and/or the audit
 * session `session` -- or, with neither, every process of the room outside
 * running execs. */
struct victims {
	pid_t root;
	uint32_t session;
};

static bool picked(const struct proc_table *t, int i, const struct victims *v)
{
	if (v->root <= 0 && v->session == NO_SESSION)
		return !in_running_exec(t, i);
	return (v->root > 0 && below(t, i, v->root)) ||
		(v->session != NO_SESSION && session_of(t->pid[i]) == v->session);
}

/* Stop the chosen processes round after round until the set stops growing
 * (a stopped process neither forks nor orphans anything), kill them all,
 * and start over until none is left alive. */
static void kill_set(struct victims v)
{
	/* allocated for the occasion (and given back: musl unmaps a block
	 * this large), so an idle room does not keep it */
	struct proc_table *t = malloc(sizeof(*t));
	if (!t) {
		if (v.root > 0)
			kill(v.root, SIGKILL);
		return;
	}
	int last = -1;
	for (int round = 0; round < 200; round++) {
		proc_snapshot(t);
		int count = 0;
		for (int i = 0; i < t->n; i++)
			if ((t->pick[i] = picked(t, i, &v))) {
				kill(t->pid[i], SIGSTOP);
				count++;
			}
		if (count == 0)
			break;
		if (count == last) {
			for (int i = 0; i < t->n; i++)
				if (t->pick[i])
					kill(t->pid[i], SIGKILL);
			last = -1;
			continue;
		}
		last = count;
	}
	free(t);
}

/* Live processes in the room (its /proc), up to `stop`. */
static int room_processes(int stop)
{
	DIR *d = opendir("/proc");
	int n = 0;
	struct dirent *e;
	while (d && (e = readdir(d)) && n < stop)
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
			n++;
	if (d)
		closedir(d);
	return n;
}

/* ---- execs ------------------------------------------------------------------ */

#define MAX_EXECS 256
#define MAX_LINGER 1024

struct exec {
	bool used;
	int conn;                 /* -1 once answered, or the helper hung up */
	int start;                /* the child's error pipe until it has exec'd, else -1 */
	pid_t shell;              /* 0 once reaped */
	uint32_t session;         /* its audit session, NO_SESSION if unknown */
	int status;
	bool timed_out, reported;
	bool left_nothing;        /* at its shell's end the keeper had no other child */
	int held[2];              /* the keeper's copies of the shell's stdout and stderr */
	int64_t deadline;
	struct exec_plan plan;    /* the child reads it until it has exec'd */
	struct chan_job *job;     /* an exec channel's (channel.c), else NULL */
	struct spawn_plan spawn;
};

static struct exec execs[MAX_EXECS];
static struct spawn_slot slots[MAX_EXECS];   /* kept from exec to exec */
/* One past the highest slot in use: the loops over the execs stop there
 * (a slot is a few hundred bytes, the table 256 of them; one exec at a
 * time uses slot 0 alone). */
static int n_slots;
/* Execs that left processes behind: at the deadline, if the room is at its
 * process limit, those processes are a background fork bomb. */
static struct { int64_t deadline; uint32_t session; } linger[MAX_LINGER];
static int n_linger;
/* Connections whose request has not come yet: the helper connects first
 * and sends once it has prepared the exec.  Waited for in the loop, never
 * blocking it, for at most PENDING_MS. */
#define MAX_PENDING MAX_EXECS
#define PENDING_MS 2000
static struct { int fd; int64_t deadline; } pending[MAX_PENDING];
static int n_pending;

static uint32_t pids_limit;

static bool in_running_exec(const struct proc_table *t, int i)
{
	for (int k = 0; k < n_slots; k++)
		if (execs[k].used && execs[k].shell > 0 && below(t, i, execs[k].shell))
			return true;
	return false;
}

/* The exec whose shell is pid, NULL if none. */
static struct exec *exec_of(pid_t pid)
{
	for (int k = 0; k < n_slots; k++)
		if (execs[k].used && execs[k].shell == pid)
			return &execs[k];
	return NULL;
}

/* Could the exec whose shell has just ended (a zombie, not yet reaped)
 * have left processes behind?  Its orphans became the keeper's children when the shell ended
 * (the shell was the subreaper of everything it started), so if every
 * child of the keeper is the shell of an exec (this one included), it
 * left nothing: then its audit session need not be read (an open of the
 * zombie's /proc directory, whose dentries die at the close -- a few
 * percent of a warm exec's CPU) and no deadline need linger for it.  The
 * keeper's children are its /proc `children` file, read again from the
 * start each time on a descriptor kept open (a seq_file: pread at 0 lists
 * them afresh).  True (so: read the session, as before) whenever that
 * cannot be told: no such file, a list too long, a child the keeper
 * does not know (a detached start's daemon, a terminal's shell, what an
 * earlier exec left). */
static bool may_have_left_processes(void)
{
	static int fd = -2;
	if (fd == -2) {
		char path[64];
		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)getpid(), (int)getpid());
		fd = openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
	}
	char buf[4096];
	ssize_t n = fd >= 0 ? pread(fd, buf, sizeof(buf) - 1, 0) : -1;
	if (n < 0 || n == (ssize_t)sizeof(buf) - 1)
		return true;
	buf[n] = '\0';
	for (char *q = buf, *e; *q; q = e) {
		long pid = strtol(q, &e, 10);
		if (e == q)
			break;
		if (!exec_of((pid_t)pid))
			return true;
	}
	return false;
}

/* The keeper keeps a copy of the shell's stdout and stderr (the write
 * ends of roombox-fcgi's pipes) until it answers, and lets them go just
 * before the answer (here, or in channel_exec_done): so roombox-fcgi sees
 * the end of the output and the answer in one wake-up.  Without the
 * copies the shell's end closes the pipes first (stdout even earlier: the
 * session's `exec >&9`), and roombox-fcgi wakes for each only to wait
 * again for the answer: wake-ups that cost more of a busy host's CPU than
 * two descriptors cost the keeper (docs/benchmarks.md).  What background
 * processes hold is still theirs: roombox-fcgi drains that as before. */
void exec_held_close(int held[2])
{
	for (int i = 0; i < 2; i++)
		if (held[i] >= 0) {
			close(held[i]);
			held[i] = -1;
		}
}

/* The slot is free once its shell is reaped (so the child no longer reads
 * the plan or uses the slot's stack) and the helper has hung up. */
static void exec_maybe_done(struct exec *x)
{
	if (x->used && !x->shell && x->conn < 0 && x->start < 0 && !x->job) {
		exec_held_close(x->held);
		spawn_slot_done(&slots[x - execs]);
		plan_free(&x->plan);
		x->used = false;
		while (n_slots > 0 && !execs[n_slots - 1].used)
			n_slots--;
	}
}

/* A channel's exec answered (channel.c), once. */
static void exec_job_end(struct exec *x, bool failed, const char *text)
{
	struct chan_job *job = x->job;
	x->job = NULL;
	x->reported = true;
	channel_exec_done(job, x->status, x->timed_out, failed, 0, text, x->held);
}

/* What the child said on its error pipe: nothing (it exec'd, so its audit
 * session is set) or why it could not (FAILED, and the helper hears nothing
 * more).  Not polled: the pipe is read when the answer depends on it -- at
 * the reap, or before the exec's processes are killed -- so a running exec
 * costs no wake-up.  Returns with x->start still open while the child has
 * not got as far as execve.  True when the shell ran: its audit session is
 * then the caller's to read (session_of), while it lives or is a zombie. */
static bool exec_started(struct exec *x, bool dead)
{
	char text[160] = "";
	ssize_t n = read(x->start, text, sizeof(text) - 1);
	/* a dead child whose pipe is still open elsewhere: a detached start
	 * whose fork has not closed its copy yet -- started all the same (no
	 * one else will read the pipe, and the slot must be freed) */
	bool open_elsewhere = n < 0 && errno == EAGAIN;
	if (open_elsewhere && !dead)
		return false;
	close(x->start);
	x->start = -1;
	if (n == 0 || open_elsewhere)
		return true;
	if (x->job) {
		exec_job_end(x, true, n > 0 ? text : "the shell did not start");
	} else {
		exec_held_close(x->held);
		if (x->conn >= 0)
			send_msg(x->conn, KP_FAILED, 0, 0, n > 0 ? text : "the shell did not start");
		x->reported = true;
		if (x->conn >= 0)
			close(x->conn);
		x->conn = -1;
	}
	return false;
}

/* The answer, once the shell has ended, and the end of the connection:
 * closed here, so the keeper need not wake up for the helper's hang-up. */
static void exec_report(struct exec *x)
{
	if (!x->reported && x->job)
		exec_job_end(x, false, NULL);
	if (!x->reported && x->conn >= 0) {
		exec_held_close(x->held);
		send_msg(x->conn, KP_EXITED, x->status, x->timed_out, NULL);
		x->reported = true;
		close(x->conn);
		x->conn = -1;
	}
}

/* The shell ended (reap() has already read its error pipe): its orphans are
 * now the keeper's children.  Remember the deadline (and the audit session)
 * if anything of the exec may still run. */
static void exec_reaped(struct exec *x, int status)
{
	x->shell = 0;
	x->status = status;
	/* children left: orphans of this exec, or other execs' shells (then
	 * they may be orphans too: remember the deadline to be safe) */
	siginfo_t si = { 0 };
	bool children = !x->left_nothing && waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) == 0;
	if (children && !x->timed_out && x->deadline > monotonic_ms()) {
		if (n_linger == MAX_LINGER)   /* keep the latest deadlines */
			linger[0] = linger[--n_linger];
		linger[n_linger].deadline = x->deadline;
		linger[n_linger++].session = x->session;
	}
	exec_report(x);
	exec_maybe_done(x);
}

/* A tool's child or a detached start's first process runs as the room's
 * root or user, in the room's pid namespace: the room may stop it, and a
 * stopped one would hold its request until the deadline.  The keeper, its
 * parent, hears of each stop (SIGCHLD) and kills it at once: the request
 * is answered then (killed by a signal, not timed out: roombox-fcgi says
 * the room stopped it).  A shell the room stops is the room's business. */
static void kill_stopped_tools(void)
{
	bool any = false;   /* no such child: no waitid to hear so */
	for (int k = 0; k < n_slots && !any; k++)
		any = execs[k].used && execs[k].shell > 0 && (execs[k].spawn.tool || execs[k].spawn.detach);
	while (any) {
		siginfo_t si = { 0 };
		if (waitid(P_ALL, 0, &si, WSTOPPED | WNOHANG) < 0 || si.si_pid <= 0)
			return;
		struct exec *x = exec_of(si.si_pid);
		if (x && (x->spawn.tool || x->spawn.detach) && !x->timed_out)
			kill(si.si_pid, SIGKILL);
	}
}

/* A wait status (as waitpid gives it) from what waitid said. */
static int wait_status(const siginfo_t *si)
{
	if (si->si_code == CLD_EXITED)
		return (si->si_status & 0xff) << 8;
	return (si->si_status & 0x7f) | (si->si_code == CLD_DUMPED ? 0x80 : 0);
}

/* Each exited child is looked at before it is reaped: its error pipe is
 * read there (a shell that failed to start says why; one that ran has its
 * audit session readable while it is a zombie, and what it left running is
 * found by that session).  An exec is answered first, from the zombie's
 * status: its caller waits for nothing else, and the session's /proc file,
 * the reaping and the count of what is left are the keeper's own
 * business, done while the caller already answers. */
static void reap(void)
{
	kill_stopped_tools();
	for (;;) {
		siginfo_t si = { 0 };
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid <= 0)
			return;
		struct exec *x = exec_of(si.si_pid);
		if (x && x->start >= 0 && exec_started(x, true)) {
			x->status = wait_status(&si);
			exec_report(x);
			x->left_nothing = !may_have_left_processes();
			if (!x->left_nothing)
				x->session = session_of(x->shell);
		}
		int st;
		if (waitpid(si.si_pid, &st, WNOHANG) != si.si_pid)
			return;
		if (x)
			exec_reaped(x, st);
	}
}

/* Stop and kill a running exec's tree and audit session.  The error pipe
 * is read first: that is where the session becomes known (a child that has
 * not reached execve yet has no processes of its own); it may also answer
 * FAILED and close the connection. */
static void exec_kill(struct exec *x)
{
	if (x->start >= 0 && exec_started(x, false))
		x->session = session_of(x->shell);
	kill_set((struct victims){ x->shell, x->session });
}

/* Nothing more comes on an exec's connection once the request is in: it
 * turning readable means the helper hung up (or broke the protocol), and
 * an unfinished exec dies with it. */
static void exec_message(struct exec *x)
{
	if (x->shell > 0)
		exec_kill(x);
	if (x->conn >= 0)
		close(x->conn);
	x->conn = -1;
	exec_maybe_done(x);
}

/* Deadlines due now: running shells are killed with their tree; a passed
 * lingering deadline checks the room for a background fork bomb and kills
 * what that exec left (all the room outside running execs when the exec
 * has no audit session). */
static void deadlines(int64_t now)
{
	for (int k = 0; k < n_slots; k++) {
		struct exec *x = &execs[k];
		if (x->used && x->shell > 0 && !x->timed_out && now >= x->deadline) {
			x->timed_out = true;
			exec_kill(x);
		}
	}
	for (int i = 0; i < n_linger;) {
		if (now < linger[i].deadline) {
			i++;
			continue;
		}
		uint32_t session = linger[i].session;
		linger[i] = linger[--n_linger];
		if (pids_limit && room_processes((int)pids_limit) >= (int)pids_limit * 9 / 10)
			kill_set((struct victims){ 0, session });
	}
}

static int next_timeout(int64_t now)
{
	int64_t next = -1;
	for (int k = 0; k < n_slots; k++)
		if (execs[k].used && execs[k].shell > 0 && !execs[k].timed_out &&
		    (next < 0 || execs[k].deadline < next))
			next = execs[k].deadline;
	for (int i = 0; i < n_linger; i++)
		if (next < 0 || linger[i].deadline < next)
			next = linger[i].deadline;
	for (int i = 0; i < n_pending; i++)
		if (next < 0 || pending[i].deadline < next)
			next = pending[i].deadline;
	if (next < 0)
		return -1;
	return next <= now ? 0 : (int)(next - now > 60000 ? 60000 : next - now);
}

/* A started shell's slot, field by field: the child still reads
 * x->plan and x->spawn.  *out and *err become the slot's (set to -1). */
static void exec_begin(struct exec *x, int conn, int start, pid_t shell, uint64_t timeout_ms,
		       int *out, int *err)
{
	fcntl(start, F_SETFL, O_NONBLOCK);
	x->used = true;
	if (x - execs >= n_slots)
		n_slots = (int)(x - execs) + 1;
	x->conn = conn;
	x->start = start;
	x->shell = shell;
	x->session = NO_SESSION;
	x->status = 0;
	x->timed_out = x->reported = x->left_nothing = false;
	x->deadline = monotonic_ms() + (int64_t)timeout_ms;
	x->held[0] = *out;
	x->held[1] = *err;
	*out = *err = -1;
}

/* One exec: read the plan, start the shell (spawn.c).  The helper hears
 * back once, when the shell has ended (EXITED) or could not start
 * (FAILED). */
static void exec_start(int conn, int *fds, int nfds)
{
	int k = 0;
	while (k < MAX_EXECS && execs[k].used)
		k++;
	struct exec *x = k < MAX_EXECS ? &execs[k] : NULL;
	struct exec_plan plan = { 0 };
	int ep[2] = { -1, -1 };
	const char *why = NULL;
	if (!x)
		why = "too many execs at once in this room";
	else if (plan_read(fds[0], &plan) < 0)
		why = "bad exec request";
	else if (pipe2(ep, O_CLOEXEC) < 0)
		why = "pipe failed";
	pid_t shell = -1;
	if (!why) {
		pids_limit = plan.hdr.pids_limit;
		x->plan = plan;
		uid_t id = plan.hdr.who == KP_AS_USER ? KP_USER_ID : KP_ROOT_ID;
		x->spawn = (struct spawn_plan){ plan.argv, plan.envp, fds[1], fds[2], fds[3],
						nfds > 4 ? fds[4] : -1, ep[1], id, id,
						(plan.hdr.flags & KP_TOOL) != 0,
						(plan.hdr.flags & KP_DETACH) != 0, NULL };
		shell = spawn_shell(&x->spawn, &slots[k]);
		close(ep[1]);
	}
	char text[160];
	if (!why && shell < 0) {
		close(ep[0]);
		x->plan = (struct exec_plan){ 0 };
		snprintf(text, sizeof(text), "fork: %s", shell == -EAGAIN
			 ? "the room is at its process limit (pids_limit)" : strerror((int)-shell));
		why = text;
	}
	if (why) {
		plan_free(&plan);
		/* the errno tells the helper a full room (EAGAIN) from the rest */
		send_msg(conn, KP_FAILED, shell < 0 ? (int)-shell : 0, 0, why);
		close(conn);
		return;
	}
	exec_begin(x, conn, ep[0], shell, plan.hdr.timeout_ms, &fds[1], &fds[2]);
}

/* A channel's exec (channel.c): its shell started as a helper's exec's
 * is, from the plan the channel made. */
int exec_spawn_job(struct chan_job *job, int in, int *out, int *err, uint64_t timeout_ms,
		   uint32_t pids, char *why, size_t whylen)
{
	int k = 0, ep[2];
	while (k < MAX_EXECS && execs[k].used)
		k++;
	if (k == MAX_EXECS) {
		snprintf(why, whylen, "too many execs at once in this room");
		return -EBUSY;
	}
	if (pipe2(ep, O_CLOEXEC) < 0) {
		snprintf(why, whylen, "pipe failed");
		return -errno;
	}
	struct exec *x = &execs[k];
	uid_t id = job->as_user ? KP_USER_ID : KP_ROOT_ID;
	pids_limit = pids;
	x->plan = (struct exec_plan){ 0 };
	x->spawn = (struct spawn_plan){ (char **)job->env.argv, job->env.envp, *out, *err, job->session_out,
					in, ep[1], id, id, false, false, NULL };
	pid_t shell = spawn_shell(&x->spawn, &slots[k]);
	close(ep[1]);
	if (shell < 0) {
		close(ep[0]);
		snprintf(why, whylen, "fork: %s", shell == -EAGAIN
			 ? "the room is at its process limit (pids_limit)" : strerror((int)-shell));
		return (int)shell;
	}
	exec_begin(x, -1, ep[0], shell, timeout_ms, out, err);
	x->job = job;
	return 0;
}

void exec_cancel_job(struct chan_job *job)
{
	for (int k = 0; k < n_slots; k++)
		if (execs[k].used && execs[k].job == job) {
			if (execs[k].shell > 0)
				exec_kill(&execs[k]);
			exec_maybe_done(&execs[k]);
			return;
		}
}

/* Read the request on conn (an exec): 1 taken (or refused and closed), 0
 * not there yet. */
static int take_request(int conn)
{
	struct kp_msg m;
	int fds[EXEC_FDS], got = 0;
	ssize_t n = recv_msg(conn, &m, fds, EXEC_FDS, &got);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (n > 0 && m.type == KP_EXEC && got >= EXEC_FDS - 1)
		exec_start(conn, fds, got);
	else if (n > 0 && m.type == KP_CHANNEL)
		channel_open(conn, &m, (size_t)n, fds, got);
	else if (n == (ssize_t)sizeof(m) && m.type == KP_CLOSE)
		channel_close_all(conn);
	else
		close(conn);
	for (int i = 0; i < got; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	return 1;
}

static void accept_exec(void)
{
	int conn = accept4(FD_LISTEN, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (conn < 0)
		return;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	/* the helper is outside the room's pid namespace, so its pid here is
	 * 0; any process of the room has one.  (Its uid tells nothing now:
	 * here the room's root is uid 0, and host root has no id at all.) */
	if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid != 0 ||
	    n_pending == MAX_PENDING) {
		close(conn);
		return;
	}
	if (!take_request(conn)) {
		pending[n_pending].fd = conn;
		pending[n_pending++].deadline = monotonic_ms() + PENDING_MS;
	}
}

/* A pending connection leaves the list once its request is taken, or
 * closed at its deadline. */
static void pending_check(int i, bool readable, int64_t now)
{
	if (readable && take_request(pending[i].fd)) {
		pending[i] = pending[--n_pending];
	} else if (now >= pending[i].deadline) {
		close(pending[i].fd);
		pending[i] = pending[--n_pending];
	}
}

/* ---- the keeper ------------------------------------------------------------- */

/* Run by hand (`--help`, or anything else on its command line), it says
 * what it is and touches nothing: the helper starts it with no argument. */
static int by_hand(const char *arg)
{
	static const char text[] =
		"usage: roombox-keeper (started by roombox-helper, never by hand)\n"
		"PID 1 of a roombox room and the room's exec server: it runs only as the\n"
		"helper starts it, inside the room's namespaces, with its descriptors 3-6\n"
		"set up (see roombox-helper(8)).\n";
	bool help = !strcmp(arg, "--help") || !strcmp(arg, "-h");
	int fd = help ? 1 : 2;
	if (write(fd, text, sizeof(text) - 1) < 0)
		return 2;
	return help ? 0 : 2;
}

int main(int argc, char **argv)
{
	if (argc > 1)
		return by_hand(argv[1]);
	confine_room();
	spawn_init();
	int sigfd = signal_fd();
	if (sigfd < 0 || write(FD_REPORT, "ok", 2) != 2)
		return 2;
	close(FD_REPORT);
	static struct pollfd p[2 + MAX_EXECS + MAX_CHANNELS + MAX_PENDING];
	static struct exec *owner[2 + MAX_EXECS + MAX_CHANNELS + MAX_PENDING];
	for (;;) {
		int n = 0;
		p[n++] = (struct pollfd){ FD_LISTEN, POLLIN, 0 };
		p[n++] = (struct pollfd){ sigfd, POLLIN, 0 };
		for (int k = 0; k < n_slots; k++) {
			struct exec *x = &execs[k];
			if (x->used && x->conn >= 0) {
				owner[n] = x;
				p[n++] = (struct pollfd){ x->conn, POLLIN, 0 };
			}
		}
		int first_chan = n, n_chan = channel_poll_add(p + n, MAX_CHANNELS);
		n += n_chan;
		int first_pending = n;
		for (int i = 0; i < n_pending; i++)
			p[n++] = (struct pollfd){ pending[i].fd, POLLIN, 0 };
		int timeout = next_timeout(monotonic_ms());
		if (poll(p, (nfds_t)n, timeout) < 0)
			continue;
		if (p[1].revents) {
			struct signalfd_siginfo si[8];
			ssize_t got;
			/* a sender outside the room's pid namespace has pid 0
			 * here; the room's root may signal the keeper (same
			 * uid), but not end it.  A read that does not fill the
			 * array took all there was (one SIGCHLD, usually): no
			 * second read to hear EAGAIN. */
			do {
				got = read(sigfd, si, sizeof(si));
				for (ssize_t i = 0; i < got / (ssize_t)sizeof(si[0]); i++)
					if ((si[i].ssi_signo == SIGTERM || si[i].ssi_signo == SIGINT ||
					     si[i].ssi_signo == SIGHUP) && si[i].ssi_pid == 0)
						return 0;
			} while (got == (ssize_t)sizeof(si));
			reap();
		}
		for (int i = 2; i < first_chan; i++) {
			struct exec *x = owner[i];
			if (!p[i].revents || !x->used)
				continue;
			if (x->conn == p[i].fd)
				exec_message(x);
			exec_maybe_done(x);
		}
		/* the helper's connections before the channels: a KP_CLOSE
		 * that came in the same round as a channel's request sends it
		 * back (run by the helper) rather than being refused for it --
		 * either is right; one order, always, is what a test can hold
		 * the keeper to.  From the end: pending_check moves the last
		 * entry into a closed slot. */
		int64_t now = monotonic_ms();
		for (int i = n - 1; i >= first_pending; i--)
			if (i - first_pending < n_pending && pending[i - first_pending].fd == p[i].fd)
				pending_check(i - first_pending, p[i].revents != 0, now);
		if (p[0].revents)
			accept_exec();
		/* (a channel closed above is no longer used: its entry is passed
		 * over; a new one on its number finds nothing to read) */
		channel_poll_check(p + first_chan, n_chan);
		deadlines(now);
	}
}
