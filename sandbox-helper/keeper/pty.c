/* The keeper's pty tool: a room's terminal (fcgi-app/terminals/terminals.c).
 *
 * Started detached (a session of its own, the exec answered at once) as
 * the room's root or user, like every tool in the room's namespaces,
 * cgroup and seccomp filter.  It opens a pseudo-terminal in the room's own
 * devpts (/dev/ptmx there), starts the shell on its slave side -- a login
 * shell, or `sh -c CMD` -- in a session of its own with the terminal as
 * its controlling one, hands the master side to roombox-fcgi on its stdout
 * (a unix socket: SCM_RIGHTS, with "ok <pid>\n"), and waits: when the shell
 * ends it writes "exit <code>\n" (128 + the signal for a shell killed) and
 * ends too.  It keeps no copy of the master: roombox-fcgi alone reads and
 * writes the terminal, so closing it hangs the shell up; a byte from
 * roombox-fcgi on the socket (DELETE) hangs up the shell's process group
 * here too, and kills it if it ignored that.  The room stopping
 * kills the tool and the shell with it; its socket's end says so. */
#include "pty.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "protocol.h"
#include "tool_text.h"

#define HANGUP_GRACE_MS 2000

static long now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

static int say(const char *text, int fd_to_pass)
{
	struct iovec iov = { (void *)text, strlen(text) };
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} u;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	if (fd_to_pass >= 0) {
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = sizeof(u.buf);
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd_to_pass, sizeof(int));
	}
	ssize_t k;
	do
		k = sendmsg(1, &m, MSG_NOSIGNAL);
	while (k < 0 && errno == EINTR);
	if (k < 0 && errno == ENOTSOCK && fd_to_pass < 0)
		k = write(1, text, strlen(text));
	return k == (ssize_t)strlen(text) ? 0 : -1;
}

static int pty_fail(const char *step, int err)
{
	const char *kind = tool_errno_kind(err);
	char line[320];
	if (kind) {
		snprintf(line, sizeof(line), "E %s\n", kind);
		return say(line, -1) < 0;
	}
	snprintf(line, sizeof(line), "%s: %s\n", step, strerror(err));
	if (write(2, line, strlen(line)) < 0)
		return 1;
	return 1;
}

/* "COLSxROWS", each 1-1000 */
static int parse_size(const char *s, struct winsize *ws)
{
	char *end;
	long c = strtol(s, &end, 10);
	if (end == s || *end != 'x' || c < 1 || c > TERM_SIZE_MAX)
		return -1;
	const char *r0 = end + 1;
	long r = strtol(r0, &end, 10);
	if (end == r0 || *end || r < 1 || r > TERM_SIZE_MAX)
		return -1;
	memset(ws, 0, sizeof(*ws));
	ws->ws_col = (unsigned short)c;
	ws->ws_row = (unsigned short)r;
	return 0;
}

/* The shell's side: never returns. */
static void shell(const char *slave, const char *mode, const char *cmd, int started)
{
	struct passwd *pw = getpwuid(getuid());
	const char *home = pw && pw->pw_dir && pw->pw_dir[0] ? pw->pw_dir : "/";
	const char *sh = pw && pw->pw_shell && pw->pw_shell[0] ? pw->pw_shell : "/bin/sh";
	char e_home[PATH_MAX + 8], e_user[300], e_shell[PATH_MAX + 8];

	if (setsid() < 0)
		_exit(127);
	int fd = open(slave, O_RDWR);
	if (fd < 0 || ioctl(fd, TIOCSCTTY, 0) < 0)
		_exit(127);
	for (int i = 0; i < 3; i++)
		if (dup2(fd, i) < 0)
			_exit(127);
	if (fd > 2)
		close(fd);
	for (int i = 3; i < 64; i++)
		if (i != started)
			close(i);
	if (access(sh, X_OK) < 0)
		sh = "/bin/sh";
	struct stat st;
	const char *dir = stat("/workspace", &st) == 0 && S_ISDIR(st.st_mode) && access("/workspace", X_OK) == 0
			  ? "/workspace" : home;
	if (chdir(dir) < 0 && chdir("/") < 0)
		_exit(127);
	snprintf(e_home, sizeof(e_home), "HOME=%s", home);
	snprintf(e_user, sizeof(e_user), "USER=%s", pw ? pw->pw_name : "root");
	snprintf(e_shell, sizeof(e_shell), "SHELL=%s", sh);
	char *envp[] = { e_home, e_user, e_shell, "TERM=xterm-256color", "LANG=C.UTF-8",
			 "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", NULL };
	if (!strcmp(mode, "cmd")) {
		char *argv[] = { "sh", "-c", (char *)cmd, NULL };
		execve("/bin/sh", argv, envp);
	} else {
		/* a login shell: argv[0] "-name", as login(1) starts it */
		const char *base = strrchr(sh, '/') ? strrchr(sh, '/') + 1 : sh;
		char arg0[256];
		snprintf(arg0, sizeof(arg0), "-%s", base);
		char *argv[] = { arg0, NULL };
		execve(sh, argv, envp);
	}
	_exit(127);
}

int tool_pty(const char *size, const char *mode, const char *cmd)
{
	struct winsize ws;
	if (parse_size(size, &ws) < 0 || (strcmp(mode, "shell") && strcmp(mode, "cmd")) ||
	    (!strcmp(mode, "cmd") && !*cmd))
		return pty_fail("pty", EINVAL);
	int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (m < 0)
		return pty_fail("open /dev/ptmx", errno);
	char slave[64];
	if (grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, slave, sizeof(slave)) != 0)
		return pty_fail("set up the terminal", errno);
	if (ioctl(m, TIOCSWINSZ, &ws) < 0)
		return pty_fail("set the terminal's size", errno);
	/* its write end is the shell's until its exec: the end of file says
	 * the slave side is open, so the master reads no EIO before it */
	int started[2];
	if (pipe2(started, O_CLOEXEC) < 0)
		return pty_fail("pipe", errno);
	pid_t pid = fork();
	if (pid < 0)
		return pty_fail("fork", errno);
	if (pid == 0) {
		close(started[0]);
		shell(slave, mode, cmd, started[1]);
	}
	close(started[1]);
	char c;
	while (read(started[0], &c, 1) < 0 && errno == EINTR)
		;
	close(started[0]);
	char line[64];
	snprintf(line, sizeof(line), "ok %d\n", (int)pid);
	int rc = say(line, m);
	close(m);
	if (rc < 0) {   /* nobody to hand it to: hang the shell up */
		kill(pid, SIGHUP);
		kill(pid, SIGKILL);
	}
	/* Until the shell ends.  roombox-fcgi writes a byte on our stdout
	 * socket (or closes it) when the terminal is deleted: the shell's
	 * process group gets SIGHUP, and SIGKILL HANGUP_GRACE_MS later if it
	 * ignored that (a hung-up terminal's shell must not live on). */
	int status;
	long kill_at = -1;
	/* the shell's end wakes the poll through its pidfd (without one, a
	 * look every 200 ms) */
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
	for (;;) {
		pid_t w = waitpid(pid, &status, WNOHANG);
		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			return 1;
		struct pollfd pf[2] = { { kill_at < 0 ? 1 : -1, POLLIN, 0 }, { pidfd, POLLIN, 0 } };
		int n = poll(pf, 2, kill_at >= 0 ? 50 : pidfd >= 0 ? -1 : 200);
		if (n > 0 && pf[0].revents && kill_at < 0) {
			char b;
			if (recv(1, &b, 1, MSG_DONTWAIT) <= 0 || b) {
				kill(-pid, SIGHUP);
				kill(-pid, SIGCONT);
				kill_at = now_ms() + HANGUP_GRACE_MS;
			}
		}
		if (kill_at >= 0 && now_ms() >= kill_at)
			kill(-pid, SIGKILL);
	}
	int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
	snprintf(line, sizeof(line), "exit %d\n", code);
	say(line, -1);
	return 0;
}
