/* roombox-keeper — PID 1 of a room, and the room's exec server.
 *
 * Theory of operation.  The helper builds the room's namespaces and root,
 * then execs this program in them (from a descriptor opened before
 * pivot_root, so the binary need not be inside the room) with:
 *   fd 3  a pipe on which it says "ok" once it runs,
 *   fd 4  a listening SOCK_SEQPACKET socket (<run_dir>/rooms/<id>/sock on
 *         the host, in a root-only directory),
 *   fd 5  the room's seccomp filter as raw BPF, built by the helper with
 *         libseccomp.
 * It is static and libc-only, so an idle room costs a few pages and `ps` in
 * the room shows nothing of the host.
 *
 * The keeper reaps orphans and accepts one connection per exec (protocol in
 * keeper_proto.h).  For each it forks a supervisor, which is already in all
 * of the room's namespaces and in its cgroup — so an exec costs no setns and
 * no cgroup migration.  The supervisor is a child subreaper: every process
 * the exec starts, daemonised or not, stays below it while it lives, so at
 * the deadline it can kill the whole tree.  It forks the shell, which drops
 * to the room's uid with no capabilities, no_new_privs and the filter, and
 * execs.  When the shell ends the supervisor reports its status; it then
 * either exits (what the exec left running moves to the keeper) or drains
 * output pipes still held by background processes, so they never die of
 * SIGPIPE.
 *
 * Signals from inside the room cannot reach the keeper or a supervisor:
 * both are root and the room is not.  SIGTERM from the host ends the room.
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

#include "keeper_proto.h"

#define FD_REPORT 3
#define FD_LISTEN 4
#define FD_FILTER 5
#define EXEC_FDS 5   /* blob, stdin, stdout, stderr, session */

/* What every exec would otherwise repeat, done once for the whole room:
 * the seccomp filter (the kernel converts and JIT-compiles a classic BPF
 * program on every load) and the capability bounding set are inherited by
 * every supervisor and shell, and the keeper itself needs none of what they
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
	for (int cap = 0; cap <= 63; cap++)
		if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
			_exit(2);
	struct { void *handler; unsigned long flags; void *restorer; unsigned long mask; } dfl = { 0 };
	for (int s = 1; s <= 64; s++)
		if (s != SIGKILL && s != SIGSTOP)
			syscall(SYS_rt_sigaction, s, &dfl, NULL, sizeof(dfl.mask));
	if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &filter) < 0)
		_exit(2);
	free(filter.filter);
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

static int send_msg(int conn, uint32_t type, int pid, int status, int timed_out, const char *text)
{
	struct kp_msg m = { type, pid, status, timed_out, "" };
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
	ssize_t n = recvmsg(conn, &mh, MSG_CMSG_CLOEXEC);
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

struct exec_plan {
	struct kp_blob hdr;
	char *data;
	char **argv, **envp;
};

static int plan_read(int blob_fd, struct exec_plan *p)
{
	struct stat st;
	if (fstat(blob_fd, &st) < 0 || (size_t)st.st_size < sizeof(p->hdr) || st.st_size > (64 << 20))
		return -1;
	p->data = malloc((size_t)st.st_size + 1);
	if (!p->data || pread(blob_fd, p->data, (size_t)st.st_size, 0) != st.st_size)
		return -1;
	p->data[st.st_size] = '\0';
	memcpy(&p->hdr, p->data, sizeof(p->hdr));
	if (p->hdr.magic != KP_MAGIC || p->hdr.argc < 1 || p->hdr.argc > 64 || p->hdr.envc > 4096)
		return -1;
	p->argv = calloc(p->hdr.argc + 1, sizeof(char *));
	p->envp = calloc(p->hdr.envc + 1, sizeof(char *));
	if (!p->argv || !p->envp)
		return -1;
	char *s = p->data + sizeof(p->hdr), *end = p->data + st.st_size;
	for (uint32_t i = 0; i < p->hdr.argc + p->hdr.envc; i++) {
		if (s >= end)
			return -1;
		if (i < p->hdr.argc)
			p->argv[i] = s;
		else
			p->envp[i - p->hdr.argc] = s;
		s += strlen(s) + 1;
	}
	return p->hdr.uid == 0 || p->hdr.gid == 0 ? -1 : 0;
}

static void __attribute__((noreturn)) shell_fail(int fd, const char *step)
{
	char msg[160];
	int n = snprintf(msg, sizeof(msg), "%s: %s", step, strerror(errno));
	if (write(fd, msg, (size_t)n) < 0)
		_exit(126);
	_exit(126);
}

/* In the vforked child: the room's uid, no capabilities (the bounding set
 * and the filter are the keeper's, inherited), a session of its own. */
static void __attribute__((noreturn)) shell_main(const struct exec_plan *p, const int *fds, int errpipe)
{
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	setsid();
	if (dup2(fds[1], 0) < 0 || dup2(fds[2], 1) < 0 || dup2(fds[3], 2) < 0 || dup2(fds[4], 9) < 0 ||
	    dup2(errpipe, 10) < 0)
		shell_fail(errpipe, "set up descriptors");
	for (int fd = 3; fd < 9; fd++)
		close(fd);
	syscall(SYS_close_range, 11, ~0U, 0);
	fcntl(10, F_SETFD, FD_CLOEXEC);
	if (setgroups(0, NULL) < 0 || setresgid(p->hdr.gid, p->hdr.gid, p->hdr.gid) < 0 ||
	    setresuid(p->hdr.uid, p->hdr.uid, p->hdr.uid) < 0)
		shell_fail(10, "drop to the room's uid");
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		shell_fail(10, "no_new_privs");
	if (chdir("/") < 0)
		shell_fail(10, "chdir /");
	execve(p->argv[0], p->argv, p->envp);
	shell_fail(10, "exec the shell");
}

/* ---- the supervisor ----------------------------------------------------- */

static pid_t shell_pid;
static int shell_status, shell_exited;

/* Reap every child that ended; remember the shell's status. */
static void reap(void)
{
	int st;
	pid_t w;
	while ((w = waitpid(-1, &st, WNOHANG)) > 0)
		if (w == shell_pid) {
			shell_status = st;
			shell_exited = 1;
		}
}

/* ppid of pid from /proc/<pid>/stat; -1 if gone or a zombie. */
static int parent_of(int pid)
{
	char path[64], buf[512];
	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *s = strrchr(buf, ')');
	if (!s || s[1] != ' ' || s[2] == 'Z' || s[2] == 'X')
		return -1;
	return atoi(s + 4);
}

/* Kill every live process below us, until none is left.  A process is
 * below us if following ppid from it reaches us; being a subreaper, we are
 * on that chain for everything the exec started. */
static void kill_descendants(void)
{
	int self = getpid();
	for (int round = 0; round < 200; round++) {
		static int pids[32768], ppids[32768];
		int n = 0;
		DIR *d = opendir("/proc");
		if (!d)
			return;
		struct dirent *e;
		while ((e = readdir(d)) && n < 32768) {
			int pid = atoi(e->d_name);
			if (pid <= 1 || pid == self)
				continue;
			int pp = parent_of(pid);
			if (pp > 0) {
				pids[n] = pid;
				ppids[n++] = pp;
			}
		}
		closedir(d);
		int killed = 0;
		for (int i = 0; i < n; i++) {
			int p = ppids[i];
			for (int depth = 0; depth < 4096 && p > 1 && p != self; depth++) {
				int j = 0;
				while (j < n && pids[j] != p)
					j++;
				p = j < n ? ppids[j] : -1;
			}
			if (p == self) {
				kill(pids[i], SIGKILL);
				killed++;
			}
		}
		reap();
		if (!killed)
			return;
	}
}

static int64_t now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
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

/* What a supervisor is doing; it exits when nothing is left to do. */
struct supervision {
	int conn;                 /* -1 once the helper has hung up */
	int drain[2];             /* output pipes handed back, -1 when closed */
	int64_t deadline;
	int timed_out, reported, lingering_done;
	uint32_t pids_limit;
};

static bool supervision_done(const struct supervision *sv)
{
	if (!shell_exited || sv->drain[0] >= 0 || sv->drain[1] >= 0 || sv->conn >= 0)
		return false;
	/* stay the subreaper of what the exec left running until its
	 * deadline, so a runaway background job can still be stopped */
	return sv->lingering_done || waitpid(-1, NULL, WNOHANG | __WNOTHREAD) < 0;
}

/* The deadline: a shell still running is killed with its whole tree
 * (timed out); after the shell, what it left behind keeps running — unless
 * it holds the room at its process limit (a fork bomb run in the
 * background), which would leave the room unusable. */
static void supervision_deadline(struct supervision *sv)
{
	if (!shell_exited) {
		sv->timed_out = 1;
		kill_descendants();
		return;
	}
	if (sv->pids_limit && room_processes((int)sv->pids_limit) >= (int)sv->pids_limit * 9 / 10)
		kill_descendants();
	sv->lingering_done = 1;
}

static void supervision_message(struct supervision *sv)
{
	struct kp_msg m;
	int got, dfd[2];
	ssize_t k = recv_msg(sv->conn, &m, dfd, 2, &got);
	if (k <= 0) {
		/* the helper is gone: an unfinished exec dies with it */
		if (!shell_exited)
			kill_descendants();
		close(sv->conn);
		sv->conn = -1;
		return;
	}
	if (m.type == KP_DRAIN && got == 2 && shell_exited) {
		sv->drain[0] = dfd[0];
		sv->drain[1] = dfd[1];
		close(sv->conn);
		sv->conn = -1;
		return;
	}
	for (int i = 0; i < got; i++)
		close(dfd[i]);
}

static void __attribute__((noreturn)) supervision_loop(struct supervision *sv, int sigfd, pid_t shell)
{
	char buf[65536];
	while (!supervision_done(sv)) {
		if (shell_exited && !sv->reported && sv->conn >= 0) {
			send_msg(sv->conn, KP_EXITED, shell, shell_status, sv->timed_out, NULL);
			sv->reported = 1;
		}
		int64_t left = sv->lingering_done ? -1 : sv->deadline - now_ms();
		if (!sv->lingering_done && left <= 0) {
			supervision_deadline(sv);
			continue;
		}
		struct pollfd p[4] = { { sigfd, POLLIN, 0 }, { sv->conn, POLLIN, 0 },
				       { sv->drain[0], POLLIN, 0 }, { sv->drain[1], POLLIN, 0 } };
		if (poll(p, 4, left < 0 ? -1 : (int)left) < 0)
			continue;
		if (p[0].revents) {
			struct signalfd_siginfo si;
			while (read(sigfd, &si, sizeof(si)) > 0)
				;
			reap();
		}
		if (sv->conn >= 0 && p[1].revents)
			supervision_message(sv);
		for (int i = 0; i < 2; i++)
			if (sv->drain[i] >= 0 && p[2 + i].revents && read(sv->drain[i], buf, sizeof(buf)) <= 0) {
				close(sv->drain[i]);
				sv->drain[i] = -1;
			}
	}
	_exit(0);
}

static void __attribute__((noreturn)) supervise(int conn, int *fds)
{
	struct exec_plan plan = { 0 };
	int sigfd = signal_fd();
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	if (plan_read(fds[0], &plan) < 0) {
		send_msg(conn, KP_FAILED, 0, 0, 0, "bad exec request");
		_exit(1);
	}
	int ep[2];
	if (pipe2(ep, O_CLOEXEC) < 0) {
		send_msg(conn, KP_FAILED, 0, 0, 0, "pipe failed");
		_exit(1);
	}
	struct supervision sv = { conn, { -1, -1 }, now_ms() + (int64_t)plan.hdr.timeout_ms,
				  0, 0, 0, plan.hdr.pids_limit };
	/* vfork: the shell borrows our memory until it execs (shell_main only
	 * makes system calls and never returns), which saves copying the
	 * supervisor's page tables on every exec */
	pid_t shell = vfork();
	if (shell == 0)
		shell_main(&plan, fds, ep[1]);
	int fork_errno = errno;
	shell_pid = shell;
	close(ep[1]);
	for (int i = 0; i < EXEC_FDS; i++)
		close(fds[i]);
	char why[160] = "";
	ssize_t n = shell < 0 ? -1 : read(ep[0], why, sizeof(why) - 1);
	close(ep[0]);
	if (n != 0) {
		if (n < 0)
			snprintf(why, sizeof(why), "fork the shell: %s%s", strerror(fork_errno),
				 fork_errno == EAGAIN ? " (the room is at its process limit)" : "");
		send_msg(conn, KP_FAILED, 0, 0, 0, why);
		_exit(1);
	}
	send_msg(conn, KP_STARTED, shell, 0, 0, NULL);
	supervision_loop(&sv, sigfd, shell);
}

/* ---- the keeper --------------------------------------------------------- */

static void accept_exec(int sigfd)
{
	int conn = accept4(FD_LISTEN, NULL, NULL, SOCK_CLOEXEC);
	if (conn < 0)
		return;
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct kp_msg m;
	int fds[EXEC_FDS], got = 0;
	if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && cred.uid == 0 &&
	    recv_msg(conn, &m, fds, EXEC_FDS, &got) > 0 && m.type == KP_EXEC && got == EXEC_FDS) {
		pid_t pid = fork();
		if (pid == 0) {
			close(FD_LISTEN);
			close(sigfd);
			supervise(conn, fds);
		}
		if (pid < 0)
			send_msg(conn, KP_FAILED, 0, 0, 0, errno == EAGAIN
				 ? "fork: the room is at its process limit (pids_limit)" : "fork failed");
	}
	for (int i = 0; i < got; i++)
		close(fds[i]);
	close(conn);
}

int main(void)
{
	confine_room();
	int sigfd = signal_fd();
	if (sigfd < 0 || write(FD_REPORT, "ok", 2) != 2)
		return 2;
	close(FD_REPORT);
	for (;;) {
		struct pollfd p[2] = { { FD_LISTEN, POLLIN, 0 }, { sigfd, POLLIN, 0 } };
		if (poll(p, 2, -1) < 0)
			continue;
		if (p[1].revents) {
			struct signalfd_siginfo si;
			while (read(sigfd, &si, sizeof(si)) == sizeof(si))
				if (si.ssi_signo == SIGTERM || si.ssi_signo == SIGINT || si.ssi_signo == SIGHUP)
					return 0;
			while (waitpid(-1, NULL, WNOHANG) > 0)
				;
		}
		if (p[0].revents)
			accept_exec(sigfd);
	}
}
