/* Starting one exec's shell as the room's root or its user.
 *
 * fork() copies the keeper's address space, and that was most of what an
 * exec cost the keeper: the page tables are copied, every writable page is
 * write-protected (a TLB flush, on a VM an inter-processor interrupt to
 * each CPU that recently ran the keeper), each page either side then
 * writes is copied, and the child's execve throws the copy away.  So the
 * child is started with clone(CLONE_VM) on a stack of its own: it uses the
 * keeper's memory until its execve and copies nothing.  Unlike vfork, the
 * keeper does not wait for it: a room process may stop the child, which
 * must not stop the keeper (it kills the child at the deadline like any
 * shell).
 *
 * A child that shares the keeper's memory and turns into the room's user
 * (uid 1000 in the room's user namespace; the keeper is the room's root)
 * needs care:
 *  - it reads only its spawn_plan (which the keeper keeps unchanged until
 *    the child has exec'd or died) and writes only its own stack, and it
 *    makes raw system calls: libc's wrappers set errno, which lives in the
 *    keeper's thread area;
 *  - between its setresuid() and execve() a room process may signal it
 *    (harmless, see above) but must not trace it or open its
 *    /proc/<pid>/mem.  Changing uid sets the memory's "dumpable" mode to
 *    fs.suid_dumpable, and only 1 (debug) lets a process of the same uid
 *    attach; 0 and 2 need CAP_SYS_PTRACE.  So for the room's user the
 *    sysctl is read on every spawn, and with 1 (or unreadable, or on an
 *    architecture without raw calls here) the child is forked as before.
 *    A child for the room's root takes the ids the keeper already has: no
 *    credential changes, the shared memory stays as non-dumpable as the
 *    keeper made it, whatever the sysctl says, so it always shares (a
 *    fork costs a warm exec of `true` about a tenth of its time).
 *
 * In the child: every privileged step first (descriptors, not dumpable, no
 * new privileges, child subreaper, a new audit session), then the room's
 * root stays root (its execve gives it the keeper's permitted set, Docker's
 * default, caps.h) or the room's user is dropped to (no capabilities), and
 * at once execve; the bounding set and the seccomp filter are the keeper's,
 * inherited.  A shell whose session parsed (shell_env_direct: the keeper
 * reads what the room wrote, the helper never does) is started in the
 * saved directory, entered with the shell's own ids just before the
 * execve, and gets the session as its environment; a directory it cannot
 * enter leaves the shell its usual environment, whose wrapper finds the
 * fallback.  The keeper itself is non-dumpable, so a root child, which
 * changes no uid, is as closed to the room as the keeper.  Failures are written
 * on the error pipe (fd 10, close-on-exec: the keeper sees end-of-file once
 * the shell runs).
 *
 * A tool (KP_TOOL, tools.c) is done by the child itself, with the same
 * ids, root and confinement a shell would have, and no execve: the room's
 * root keeps the room's capabilities (ROOM_CAPS, made effective), its user
 * has none.  Running the keeper's libc code, such a child must not share
 * the keeper's memory: it is always forked.  So is a detached start
 * (KP_DETACH): the child forks once more and ends; the fork starts a
 * session of its own and execs the shell.
 */
#include "spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "caps.h"
#include "keeper_proto.h"
#include "tools.h"

#define STACK_SIZE (32 * 1024)
#define SLOT_KEEP_MAX (64 * 1024)   /* environment memory a slot keeps */
#define GUARD_SIZE 4096

#if defined(__x86_64__)
#define SPAWN_CAN_SHARE 1
static long ksys(long n, long a, long b, long c, long d, long e)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	long ret;
	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8)
			 : "rcx", "r11", "memory");
	return ret;
}
#elif defined(__aarch64__)
#define SPAWN_CAN_SHARE 1
static long ksys(long n, long a, long b, long c, long d, long e)
{
	register long x8 __asm__("x8") = n;
	register long x0 __asm__("x0") = a;
	register long x1 __asm__("x1") = b;
	register long x2 __asm__("x2") = c;
	register long x3 __asm__("x3") = d;
	register long x4 __asm__("x4") = e;
	__asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4) : "memory", "cc");
	return x0;
}
#else
#define SPAWN_CAN_SHARE 0   /* forked children only: errno is their own */
static long ksys(long n, long a, long b, long c, long d, long e)
{
	long r = syscall(n, a, b, c, d, e);
	return r < 0 ? -errno : r;
}
#endif

static int suid_dumpable = -1;   /* fd of /proc/sys/fs/suid_dumpable */
static bool keeper_is_root;      /* every uid and gid of the keeper is KP_ROOT_ID */
static struct rlimit room_nofile; /* the room's open-file limit, its processes' */
static bool nofile_raised;

void spawn_init(void)
{
	/* The keeper holds up to four descriptors for each running exec (its
	 * connection or channel, the start pipe, the shell's stdout and
	 * stderr) and one for each pending connection and channel: with many
	 * execs at once, more than the 1,024 a room is usually given.  So it
	 * takes its hard limit for itself (as the room's root may: no
	 * privilege), and every child gets the room's limit back before it
	 * runs anything of the room's. */
	if (getrlimit(RLIMIT_NOFILE, &room_nofile) == 0 && room_nofile.rlim_cur < room_nofile.rlim_max) {
		struct rlimit mine = { room_nofile.rlim_max, room_nofile.rlim_max };
		nofile_raised = setrlimit(RLIMIT_NOFILE, &mine) == 0;
	}
	uid_t r, e, s;
	gid_t gr, ge, gs;
	suid_dumpable = open("/proc/sys/fs/suid_dumpable", O_RDONLY | O_CLOEXEC);
	keeper_is_root = getresuid(&r, &e, &s) == 0 && getresgid(&gr, &ge, &gs) == 0 &&
		r == KP_ROOT_ID && e == KP_ROOT_ID && s == KP_ROOT_ID &&
		gr == KP_ROOT_ID && ge == KP_ROOT_ID && gs == KP_ROOT_ID;
}

/* A child that takes the keeper's own ids changes no credentials, so the
 * kernel never resets the shared memory's dumpable mode (set to 0 by the
 * keeper, confine_room); one that becomes the room's user does, to
 * fs.suid_dumpable. */
static bool may_share_memory(const struct spawn_plan *p)
{
	char c;
	if (!SPAWN_CAN_SHARE)
		return false;
	if (keeper_is_root && p->uid == KP_ROOT_ID && p->gid == KP_ROOT_ID)
		return true;
	return suid_dumpable >= 0 && pread(suid_dumpable, &c, 1, 0) == 1 && (c == '0' || c == '2');
}

/* "<step>: <error>" on fd, and exit. */
static void __attribute__((noreturn)) child_fail(int fd, const char *step, long rc)
{
	char msg[160];
	size_t n = 0;
	const char *parts[] = { step, ": ", strerror((int)-rc) };
	for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
		for (const char *s = parts[i]; *s && n < sizeof(msg); s++)
			msg[n++] = *s;
	ksys(SYS_write, fd, (long)msg, (long)n, 0, 0);
	for (;;)
		ksys(SYS_exit_group, 126, 0, 0, 0, 0);
}

/* What a tool's child does instead of the shell: the room's root gets
 * its capabilities in effect (a shell would at its execve), then the tool
 * runs and its status ends the child. */
static void __attribute__((noreturn)) run_tool(const struct spawn_plan *p)
{
	if (p->uid == KP_ROOT_ID) {
		struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
		struct __user_cap_data_struct data[2] = { 0 };
		for (int i = 0; i < 2; i++)
			data[i].permitted = data[i].effective = (uint32_t)(ROOM_CAPS >> (32 * i));
		if (syscall(SYS_capset, &hdr, data) < 0)
			child_fail(10, "the room's capabilities", -errno);
	}
	_exit(tool_main(p->argv));
}

/* A detached start: the child ends at once (the exec's answer); its fork,
 * no process group leader, makes a session of its own and goes on to the
 * shell.  The error pipe is the child's alone, so its end-of-file comes
 * with the child's end. */
static void detach(void)
{
	pid_t pid = fork();
	if (pid < 0)
		child_fail(10, "fork", -errno);
	if (pid > 0)
		_exit(0);
	close(10);
	setsid();
}

static int child_main(void *arg)
{
	const struct spawn_plan *p = arg;
	uint64_t none = 0;
	long rc;
	ksys(SYS_rt_sigprocmask, SIG_SETMASK, (long)&none, 0, sizeof(none), 0);
	/* its own process group, so `kill 0` in one exec reaches no other
	 * exec's shell; not setsid(), which with sched autogroups makes (and
	 * later frees) a scheduler task group per exec, ~0.1 ms */
	ksys(SYS_setpgid, 0, 0, 0, 0, 0);
	/* any of the descriptors may sit on 0-2, 9 or 10: then all are first
	 * moved out of the way, then into place (most often none does: the
	 * keeper's own descriptors hold the low numbers) */
	int src[5] = { p->report, p->out, p->err, p->session, p->in };
	const int to[5] = { 10, 1, 2, 9, 0 };
	/* the error pipe stays close-on-exec: its end-of-file says "started" */
	const int flags[5] = { O_CLOEXEC, 0, 0, 0, 0 };
	bool in_the_way = false;
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 5; j++)
			in_the_way |= src[i] == to[j];
	for (int i = 0; in_the_way && i < 5; i++)
		if (src[i] >= 0 && (src[i] = (int)(rc = ksys(SYS_fcntl, src[i], F_DUPFD_CLOEXEC, 20, 0, 0))) < 0)
			child_fail(p->report, "set up descriptors", rc);
	for (int i = 0; i < 5; i++)
		if (src[i] >= 0 && (rc = ksys(SYS_dup3, src[i], to[i], flags[i], 0, 0)) < 0)
			child_fail(src[0], "set up descriptors", rc);
	ksys(SYS_close_range, 3, 8, 0, 0, 0);
	ksys(SYS_close_range, 11, ~0U, 0, 0, 0);
	if (nofile_raised &&
	    (rc = ksys(SYS_prlimit64, 0, RLIMIT_NOFILE, (long)&room_nofile, 0, 0)) < 0)
		child_fail(10, "the room's open-file limit", rc);
	if ((rc = ksys(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0)) < 0)
		child_fail(10, "not dumpable", rc);
	if ((rc = ksys(SYS_prctl, PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) < 0)
		child_fail(10, "no_new_privs", rc);
	/* the shell adopts what its children orphan, so while it runs every
	 * process of the exec, daemonised or not, is in its subtree */
	if ((rc = ksys(SYS_prctl, PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) < 0)
		child_fail(10, "child subreaper", rc);
	if ((rc = ksys(SYS_chdir, (long)"/", 0, 0, 0, 0)) < 0)
		child_fail(10, "chdir /", rc);
	/* a new audit session tags every process the exec starts; the room
	 * cannot change it (CAP_AUDIT_CONTROL).  Without audit the keeper
	 * falls back to the whole room. */
	long lfd = ksys(SYS_openat, AT_FDCWD, (long)"/proc/self/loginuid", O_WRONLY | O_CLOEXEC, 0, 0);
	if (lfd >= 0) {
		char u[16];
		size_t k = sizeof(u);
		unsigned v = (unsigned)p->uid;
		do
			u[--k] = (char)('0' + v % 10);
		while ((v /= 10) && k > 0);
		ksys(SYS_write, lfd, (long)(u + k), (long)(sizeof(u) - k), 0, 0);
		ksys(SYS_close, lfd, 0, 0, 0, 0);
	}
	if ((rc = ksys(SYS_setgroups, 0, 0, 0, 0, 0)) < 0 ||
	    (rc = ksys(SYS_setresgid, p->gid, p->gid, p->gid, 0, 0)) < 0 ||
	    (rc = ksys(SYS_setresuid, p->uid, p->uid, p->uid, 0, 0)) < 0)
		child_fail(10, "become the room's root or user", rc);
	/* a change of uid set "dumpable" to fs.suid_dumpable again: with 1, a
	 * process of the room's user could trace a tool or a detached start,
	 * forked copies of the keeper's memory (every exec's plan) */
	if ((rc = ksys(SYS_prctl, PR_SET_DUMPABLE, 0, 0, 0, 0)) < 0)
		child_fail(10, "not dumpable", rc);
	if (p->detach)
		detach();
	if (p->tool)
		run_tool(p);
	/* the wrapper's cd, done here as the shell's user; a directory it
	 * cannot enter is left to the wrapper's own fallback (the room's root
	 * may enter more with the capabilities its execve gives it) */
	char **envp = p->envp;
	if (p->direct && ksys(SYS_chdir, (long)p->direct->dir, 0, 0, 0, 0) == 0)
		envp = p->direct->envp;
	rc = ksys(SYS_execve, (long)p->argv[0], (long)p->argv, (long)envp, 0, 0);
	child_fail(10, "exec the shell", rc);
}

void spawn_slot_done(struct spawn_slot *slot)
{
	if (slot->direct.buf_cap > SLOT_KEEP_MAX)
		shell_direct_free(&slot->direct);
}

pid_t spawn_shell(struct spawn_plan *p, struct spawn_slot *slot)
{
	void **stack = &slot->stack;
	p->direct = !p->tool && shell_env_direct(p->envp, &slot->direct) == 0 ? &slot->direct : NULL;
	if (!p->tool && !p->detach && may_share_memory(p)) {
		if (!*stack) {
			char *m = mmap(NULL, GUARD_SIZE + STACK_SIZE, PROT_READ | PROT_WRITE,
				       MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
			if (m != MAP_FAILED && mprotect(m, GUARD_SIZE, PROT_NONE) == 0)
				*stack = m;
			else if (m != MAP_FAILED)
				munmap(m, GUARD_SIZE + STACK_SIZE);
		}
		if (*stack) {
			pid_t pid = clone(child_main, (char *)*stack + GUARD_SIZE + STACK_SIZE,
					  CLONE_VM | SIGCHLD, (void *)p, NULL, NULL, NULL);
			return pid < 0 ? -errno : pid;
		}
	}
	pid_t pid = fork();
	if (pid == 0)
		child_main((void *)p);
	return pid < 0 ? -errno : pid;
}
