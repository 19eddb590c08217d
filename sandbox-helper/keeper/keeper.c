/* roombox-keeper — PID 1 of a room.
 *
 * The helper builds the room's namespaces and root, then execs this program
 * in them (from a descriptor opened before pivot_root, so the binary need not
 * be inside the room).  It is a separate, static, libc-only program so that
 * an idle room costs only a few pages and `ps` in the room shows nothing of
 * the host.  It tells the helper it is running by writing "ok" on fd 3,
 * then reaps orphans until SIGTERM/SIGINT/SIGHUP (signals from inside the
 * room cannot reach it: it is root and the room is not).
 *
 * Run as "roombox-drain" it is instead the drainer of an exec whose
 * background processes still hold its stdout/stderr (fds 3 and 4): it reads
 * and discards until both close, so those processes never die of SIGPIPE.
 */
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int drain(void)
{
	struct pollfd p[2] = { { 3, POLLIN, 0 }, { 4, POLLIN, 0 } };
	char buf[65536];
	while (p[0].fd >= 0 || p[1].fd >= 0) {
		if (poll(p, 2, -1) < 0)
			continue;
		for (int i = 0; i < 2; i++)
			if (p[i].fd >= 0 && p[i].revents && read(p[i].fd, buf, sizeof(buf)) <= 0)
				p[i].fd = -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	if (argc > 0 && strcmp(argv[0], "roombox-drain") == 0)
		return drain();

	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if (write(3, "ok", 2) != 2)
		return 2;
	close(3);
	for (;;) {
		int sig = sigwaitinfo(&set, NULL);
		if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP)
			return 0;
		while (waitpid(-1, NULL, WNOHANG) > 0)
			;
	}
}
