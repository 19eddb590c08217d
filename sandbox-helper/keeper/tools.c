/* The keeper's own tools: what the files and processes APIs do in a room,
 * done by the keeper's code, never by a program of the room.
 *
 * Why.  A room's root owns every file of the room, its /usr/bin and its
 * PATH: a `find` or `cat` there may be anything, `sleep 600` included.  A
 * request that ran them would wait on the room, and many such requests
 * would hold every worker of roombox-fcgi.  The keeper was opened on the
 * host before the room's root was built (jail.c execs it from a descriptor)
 * and is static, so nothing of it lies in the room's files.
 *
 * Where.  A tool runs in a child of the keeper (spawn.c), forked, not
 * sharing its memory, started exactly as an exec's shell is: in every
 * namespace of the room, in its cgroup, with its seccomp filter,
 * non-dumpable, as the request's user (the room's root, with the room's
 * capabilities, or its user, with none).  So every path is resolved in the
 * room's mount namespace with the ids of the room, and a symlink, `..` or a
 * path swapped meanwhile still ends inside the room: the kernel confines,
 * not a check here.  The keeper's deadline and kill apply as to a shell.
 *
 * What.  The operations and their answers are listed in common/protocol.h;
 * the answer's text comes from tool_text.c.  An upload is a nameless
 * file (O_TMPFILE) in the target's directory, linked under its name only
 * once the end mark came: a cut upload, a full disk or a killed tool
 * leaves nothing behind (where a filesystem has no O_TMPFILE, a temporary
 * name is used and removed on failure).  A file to download goes back as
 * its open descriptor on a socket; nothing here blocks on what a room
 * process controls: FIFOs and devices are opened non-blocking or not at
 * all, symlinks below a listed or deleted directory are never followed. */
#include "tools.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "protocol.h"
#include "pty.h"
#include "tool_text.h"
#include "watch.h"

#define DEPTH_MAX TOOL_DEPTH_MAX
#define COPY_BUF 65536

/* ---- the answer ---- */

static struct {
	char buf[COPY_BUF];
	size_t n;
	int fd;
} out = { .fd = 1 };

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = write(fd, p, n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

static int out_flush(void)
{
	int rc = write_all(out.fd, out.buf, out.n);
	out.n = 0;
	return rc;
}

static int out_put(const char *p, size_t n)
{
	if (out.n + n > sizeof(out.buf) && out_flush() < 0)
		return -1;
	if (n > sizeof(out.buf))
		return write_all(out.fd, p, n);
	memcpy(out.buf + out.n, p, n);
	out.n += n;
	return 0;
}

static int say(const char *text)
{
	return out_put(text, strlen(text)) < 0 || out_flush() < 0 ? 1 : 0;
}

/* A failure: its kind when a client is told it apart ("E <kind>", status
 * 0), else the C library's words on stderr (status 1). */
static int fail(const char *step, int err)
{
	const char *kind = tool_errno_kind(err);
	char line[320];

	if (kind) {
		snprintf(line, sizeof(line), "E %s\n", kind);
		return say(line);
	}
	snprintf(line, sizeof(line), "%s: %s\n", step, strerror(err));
	write_all(2, line, strlen(line));
	return 1;
}

/* A path that does not lead to anything is "not found", whichever part
 * of it is missing or not a directory. */
static int fail_lookup(const char *step, int err)
{
	return fail(step, err == ENOTDIR ? ENOENT : err);
}

/* ---- paths ---- */

/* dir of path into buf ("/" for a top-level name); the last part, or
 * NULL when path has none. */
static const char *split(const char *path, char *dir, size_t len)
{
	const char *slash = strrchr(path, '/');
	size_t dl;

	if (!slash || !slash[1] || (size_t)(slash - path) >= len)
		return NULL;
	dl = slash == path ? 1 : (size_t)(slash - path);
	memcpy(dir, path, dl);
	dir[dl] = '\0';
	return slash + 1;
}

/* mkdir -p: every missing directory of path (symlinks followed, as the
 * room's own mkdir -p would), 0777 less the umask. */
static int mkdir_parents(const char *path)
{
	char p[PATH_MAX];
	size_t n = strlen(path);
	struct stat st;

	if (n >= sizeof(p))
		return errno = ENAMETOOLONG, -1;
	memcpy(p, path, n + 1);
	for (char *s = p + 1;; s++) {
		if (*s != '/' && *s)
			continue;
		char c = *s;
		*s = '\0';
		int rc = mkdir(p, 0777);
		if (rc < 0 && errno != EEXIST)
			return -1;
		if (rc < 0 && (stat(p, &st) < 0 || !S_ISDIR(st.st_mode)))
			return errno = ENOTDIR, -1;
		*s = c;
		if (!c)
			return 0;
	}
}

/* ---- get: a directory's entries or a file ---- */

static int list_dir(int dfd, char *rel, size_t rel_len, bool recursive, int depth, long *count,
		    bool *cut)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;
	char rec[PATH_MAX + 128];

	if (!d) {
		close(dfd);
		return 0;
	}
	while (*count <= TOOL_LIST_MAX && (e = readdir(d))) {
		struct stat st;
		size_t nl = strlen(e->d_name), n;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || rel_len + nl + 2 > PATH_MAX)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;   /* gone meanwhile, or not ours to see */
		memcpy(rel + rel_len, e->d_name, nl + 1);
		n = tool_entry_record(rec, sizeof(rec), &st, rel);
		if (n && out_put(rec, n) < 0)
			break;
		(*count)++;
		if (!recursive || !S_ISDIR(st.st_mode))
			continue;
		if (depth >= DEPTH_MAX) {   /* said once, at the end of the listing */
			*cut = true;
			continue;
		}
		int sub = openat(dirfd(d), e->d_name,
				 O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (sub < 0)
			continue;
		rel[rel_len + nl] = '/';
		rel[rel_len + nl + 1] = '\0';
		list_dir(sub, rel, rel_len + nl + 1, recursive, depth + 1, count, cut);
		rel[rel_len] = '\0';
	}
	closedir(d);
	return 0;
}

/* "F <size>\n" with the open file attached, or (stdout not a socket) its
 * bytes after the line. */
static int send_file(int fd, uint64_t size)
{
	char text[32], buf[COPY_BUF];
	int n = snprintf(text, sizeof(text), "F %llu\n", (unsigned long long)size);
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(sizeof(int))];
	} c = { 0 };
	struct iovec iov = { text, (size_t)n };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = c.buf,
			    .msg_controllen = sizeof(c.buf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);

	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	if (sendmsg(1, &m, MSG_NOSIGNAL) == n)
		return 0;
	if (errno != ENOTSOCK || write_all(1, text, (size_t)n) < 0)
		return 1;
	fcntl(fd, F_SETFL, 0);
	for (uint64_t left = size; left;) {
		ssize_t k = read(fd, buf, left < sizeof(buf) ? (size_t)left : sizeof(buf));
		if (k <= 0 || write_all(1, buf, (size_t)k) < 0)
			return 1;
		left -= (uint64_t)k;
	}
	return 0;
}

static int tool_get(const char *path, const char *recursive_flag, const char *unused)
{
	bool recursive = !strcmp(recursive_flag, "1");
	struct stat st;

	if (stat(path, &st) < 0)
		return fail_lookup("stat", errno);
	if (S_ISDIR(st.st_mode)) {
		char rel[PATH_MAX] = "";
		long count = 0;
		bool cut = false;
		int fd;

		if (access(path, R_OK | X_OK) < 0)
			return fail("open the directory", errno);
		fd = open(path, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			return fail("open the directory", errno);
		out_put("D\n", 2);
		list_dir(fd, rel, 0, recursive, 0, &count, &cut);
		if (cut)
			out_put(TOOL_LIST_CUT, sizeof(TOOL_LIST_CUT));   /* with its NUL */
		return out_flush() < 0;
	}
	if (!S_ISREG(st.st_mode))
		return say("E " TOOL_KIND_NOTFILE "\n");
	/* non-blocking: what is a file now may be a FIFO by the open */
	int fd = open(path, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return fail("open", errno);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return say("E " TOOL_KIND_NOTFILE "\n");
	}
	int rc = send_file(fd, (uint64_t)st.st_size);
	close(fd);
	return rc;
}

/* ---- put: an upload, named only once complete ---- */

/* The body from stdin into fd; the count stored (body and end mark), or
 * -1 with errno (a failed write: a full disk).  stdin is the pipe that
 * roombox-fcgi feeds: its pages go into the file with splice, no copy
 * through this process, and the pipe is made larger first, so the feeder
 * and this tool take turns once per PUT_PIPE bytes, not per 64 KiB (each
 * turn a wake-up, the dear part on this kind of host).  Where stdin is
 * not a pipe, or splice is refused, read and write do the same. */
#define PUT_PIPE (1 << 20)
static int64_t take_body(int fd)
{
	char buf[COPY_BUF];
	int64_t stored = 0;

	fcntl(0, F_SETPIPE_SZ, PUT_PIPE);   /* best effort: the default works */
	for (;;) {
		ssize_t k = splice(0, NULL, fd, NULL, PUT_PIPE, SPLICE_F_MOVE);
		if (k < 0 && errno == EINTR)
			continue;
		if (k == 0)
			return stored;
		if (k < 0 && (errno == EINVAL || errno == EBADF))
			break;         /* not a pipe, or a file system without splice */
		if (k < 0)
			return -1;     /* a pipe's read does not fail: the file's write did */
		stored += k;
	}
	for (;;) {
		ssize_t k = read(0, buf, sizeof(buf));
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return stored;   /* a failed read is a cut upload */
		if (write_all(fd, buf, (size_t)k) < 0)
			return -1;
		stored += k;
	}
}

/* A fresh name for a link made only to be renamed over the target. */
static void temp_name(char *buf, size_t len)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	snprintf(buf, len, ".roombox-upload.%d.%lx", (int)getpid(), (unsigned long)ts.tv_nsec);
}

/* The nameless file fd becomes name in dfd: linked at once when nothing is
 * there, else linked under a temporary name and renamed over it. */
static int commit(int dfd, int fd, const char *named, const char *name, bool replace)
{
	char proc[64], tmp[64];

	if (named)
		return renameat(dfd, named, dfd, name);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	if (!replace) {
		if (linkat(AT_FDCWD, proc, dfd, name, AT_SYMLINK_FOLLOW) == 0)
			return 0;
		if (errno != EEXIST)
			return -1;
	}
	for (int tries = 0;; tries++) {
		temp_name(tmp, sizeof(tmp));
		if (linkat(AT_FDCWD, proc, dfd, tmp, AT_SYMLINK_FOLLOW) == 0)
			break;
		if (errno != EEXIST || tries == 8)
			return -1;
	}
	if (renameat(dfd, tmp, dfd, name) == 0)
		return 0;
	int e = errno;
	unlinkat(dfd, tmp, 0);
	errno = e;
	return -1;
}

/* The new file's mode: the request's, else the replaced file's (the
 * umask's for a new one, set at its creation). */
static int set_mode(int fd, const char *mode_text, const char *path)
{
	mode_t mode;
	struct stat st;

	if (*mode_text)
		return tool_mode_parse(mode_text, &mode) < 0 ? (errno = EINVAL, -1) : fchmod(fd, mode);
	if (stat(path, &st) == 0)
		return fchmod(fd, st.st_mode & 07777);
	return 0;
}

static int put_into(int dfd, int fd, const char *named, const char *path, const char *name,
		    const char *mode_text, const char *nonce, bool *done)
{
	int64_t stored = take_body(fd);
	char mark[TOOL_PUT_END_LEN];
	uint64_t len;
	struct stat st;
	bool replace;

	if (stored < 0)
		return fail("write", errno);
	if (pread(fd, mark, sizeof(mark), stored - TOOL_PUT_END_LEN) != (ssize_t)sizeof(mark) ||
	    tool_put_end_check(mark, nonce, (uint64_t)stored, &len) < 0)
		return say("E " TOOL_KIND_SHORT "\n");
	if (ftruncate(fd, (off_t)len) < 0)
		return fail("truncate", errno);
	if (set_mode(fd, mode_text, path) < 0)
		return fail("chmod", errno);
	replace = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
	if (replace && S_ISDIR(st.st_mode))
		return say("E " TOOL_KIND_ISDIR "\n");
	if (commit(dfd, fd, named, name, replace) < 0)
		return fail("rename", errno);
	*done = true;
	return say(replace ? "ok replaced\n" : "ok created\n");
}

static int tool_put(const char *path, const char *mode_text, const char *nonce)
{
	char dir[PATH_MAX], named[64] = "";
	const char *name = split(path, dir, sizeof(dir));
	struct stat st;
	mode_t unused;
	int dfd, fd, rc;
	bool done = false;

	if (!name || (*mode_text && tool_mode_parse(mode_text, &unused) < 0) ||
	    strlen(nonce) != TOOL_NONCE_LEN)
		return fail("put", EINVAL);
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return say("E " TOOL_KIND_ISDIR "\n");
	if (mkdir_parents(dir) < 0)
		return fail("mkdir", errno);
	/* every later step works in this one directory, whatever happens to
	 * the path meanwhile */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return fail("open the directory", errno);
	fd = openat(dfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0666);
	if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
		temp_name(named, sizeof(named));
		fd = openat(dfd, named, O_CREAT | O_EXCL | O_RDWR | O_NOFOLLOW | O_CLOEXEC, 0666);
	}
	if (fd < 0) {
		rc = fail("create the file", errno);
		close(dfd);
		return rc;
	}
	rc = put_into(dfd, fd, *named ? named : NULL, path, name, mode_text, nonce, &done);
	if (*named && !done)
		unlinkat(dfd, named, 0);   /* not made: nothing of it stays */
	close(fd);
	close(dfd);
	return rc;
}

/* ---- mkdir, delete, move ---- */

static int tool_mkdir(const char *path, const char *mode_text, const char *unused)
{
	char dir[PATH_MAX];
	const char *name = split(path, dir, sizeof(dir));
	struct stat st;
	mode_t mode = 0;
	int dfd, fd, rc;

	if (!name || (*mode_text && tool_mode_parse(mode_text, &mode) < 0))
		return fail("mkdir", EINVAL);
	if (stat(path, &st) == 0)
		return say(S_ISDIR(st.st_mode) ? "ok replaced\n" : "E " TOOL_KIND_EXISTS "\n");
	if (mkdir_parents(dir) < 0)
		return fail("mkdir", errno);
	/* the mode goes to the directory made here, whatever the path names
	 * by the time of the chmod */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return fail("open the directory", errno);
	if (mkdirat(dfd, name, 0777) < 0) {
		rc = errno == EEXIST ? say("E " TOOL_KIND_EXISTS "\n") : fail("mkdir", errno);
		close(dfd);
		return rc;
	}
	fd = *mode_text ? openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
	close(dfd);
	if (*mode_text && (fd < 0 || fchmod(fd, mode) < 0)) {
		rc = fail("chmod", errno);
		if (fd >= 0)
			close(fd);
		return rc;
	}
	if (fd >= 0)
		close(fd);
	return say("ok created\n");
}

#define TOO_DEEP (-1)   /* a first_err: more than DEPTH_MAX levels */

/* Everything in the directory dfd (closed here), depth first, never
 * following a symlink nor entering another filesystem (a mount point is
 * left, and reported busy).  The first error is kept; the rest goes on. */
static void remove_inside(int dfd, dev_t dev, int depth, int *first_err)
{
	DIR *d = fdopendir(dfd);
	struct dirent *e;

	if (!d) {
		close(dfd);
		return;
	}
	while ((e = readdir(d))) {
		struct stat st;
		int flags = 0;

		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISDIR(st.st_mode)) {
			int sub = st.st_dev != dev ? (errno = EBUSY, -1)
				: depth >= DEPTH_MAX ? (errno = TOO_DEEP, -1)
				: openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub < 0) {
				if (!*first_err)
					*first_err = errno;
				continue;
			}
			remove_inside(sub, dev, depth + 1, first_err);
			flags = AT_REMOVEDIR;
		}
		if (unlinkat(dirfd(d), e->d_name, flags) < 0 && !*first_err)
			*first_err = errno;
	}
	closedir(d);
}

/* Is st the room's root or /workspace (however the path was spelt, as
 * rm's --preserve-root)? */
static bool precious(const struct stat *st)
{
	const char *keep[] = { "/", "/workspace" };
	struct stat k;

	for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
		if (stat(keep[i], &k) == 0 && k.st_dev == st->st_dev && k.st_ino == st->st_ino)
			return true;
	return false;
}

static int tool_delete(const char *path, const char *recursive_flag, const char *unused)
{
	bool recursive = !strcmp(recursive_flag, "1");
	const char *last = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
	struct stat st;

	if (!strcmp(last, ".") || !strcmp(last, ".."))
		return say("E " TOOL_KIND_REFUSED "\n");
	if (lstat(path, &st) < 0)
		return fail_lookup("stat", errno);
	if (precious(&st))
		return say("E " TOOL_KIND_REFUSED "\n");
	if (!S_ISDIR(st.st_mode)) {
		if (unlink(path) < 0)
			return fail("unlink", errno);
		return say("ok\n");
	}
	if (recursive) {
		int err = 0, fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return fail("open the directory", errno);
		remove_inside(fd, st.st_dev, 0, &err);
		if (err == TOO_DEEP)
			return say("E " TOOL_KIND_TOODEEP "\n");
		if (err)
			return fail("remove", err);
	}
	if (rmdir(path) < 0)
		return fail("rmdir", errno == EEXIST ? ENOTEMPTY : errno);
	return say("ok\n");
}

static int tool_move(const char *path, const char *to, const char *unused)
{
	char dir[PATH_MAX];
	struct stat st;

	if (lstat(path, &st) < 0)
		return fail_lookup("stat", errno);
	if (!split(to, dir, sizeof(dir)))
		return fail("move", EINVAL);
	if (mkdir_parents(dir) < 0)
		return fail("mkdir", errno);
	if (rename(path, to) < 0)
		return fail("rename", errno);
	return say("ok\n");
}

/* ---- signal: a managed process's session ---- */

/* Processes of session sid but sid, from the room's /proc; signalled with
 * sig (and SIGCONT after it, so a stopped one takes it, unless sig is
 * SIGSTOP).  How many. */
static int signal_round(long sid, int sig)
{
	DIR *d = opendir("/proc");
	struct dirent *e;
	int n = 0;

	while (d && (e = readdir(d))) {
		char path[64], buf[512];
		long pid = strtol(e->d_name, NULL, 10), session = 0;
		char state = 0;

		if (pid <= 1 || pid == sid)
			continue;
		snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		ssize_t k = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
		if (fd >= 0)
			close(fd);
		if (k <= 0)
			continue;
		buf[k] = '\0';
		char *s = strrchr(buf, ')');
		/* ") state ppid pgrp session"; a zombie is dead already */
		if (!s || sscanf(s + 1, " %c %*d %*d %ld", &state, &session) != 2 || session != sid ||
		    state == 'Z')
			continue;
		if (sig == SIGKILL)
			kill((pid_t)pid, SIGSTOP);
		kill((pid_t)pid, sig);
		if (sig != SIGKILL && sig != SIGSTOP)
			kill((pid_t)pid, SIGCONT);
		n++;
	}
	if (d)
		closedir(d);
	return n;
}

static int tool_signal(const char *sid_text, const char *sig_text, const char *unused)
{
	char *end;
	long sid = strtol(sid_text, &end, 10), sig = strtol(sig_text, NULL, 10);
	int n = 0, total = 0;
	char line[32];

	if (*end || sid <= 1 || sig < 1 || sig > 64)
		return fail("signal", EINVAL);
	/* KILL: round after round, so that nothing forks away meanwhile */
	for (int round = 0; round < (sig == SIGKILL ? 50 : 1); round++) {
		if (!(n = signal_round(sid, (int)sig)))
			break;
		total += n;
	}
	snprintf(line, sizeof(line), "ok %d\n", total);
	return say(line);
}

/* ---- the entry ---- */

/* Every tool takes two arguments, put a third (common/protocol.h). */
static const struct {
	const char *name;
	int (*run)(const char *a, const char *b, const char *c);
} tools[] = {
	{ TOOL_GET, tool_get },
	{ TOOL_PUT, tool_put },
	{ TOOL_MKDIR, tool_mkdir },
	{ TOOL_DELETE, tool_delete },
	{ TOOL_MOVE, tool_move },
	{ TOOL_SIGNAL, tool_signal },
	{ TOOL_PTY, tool_pty },
	{ TOOL_WATCH, tool_watch },
};

int tool_main(char *const *argv)
{
	int argc = 0;

	while (argv[argc])
		argc++;
	for (size_t i = 0; (argc == 3 || argc == 4) && i < sizeof(tools) / sizeof(tools[0]); i++)
		if (!strcmp(argv[0], tools[i].name))
			return tools[i].run(argv[1], argv[2], argc == 4 ? argv[3] : "");
	return fail(argc ? argv[0] : "tool", EINVAL);
}
