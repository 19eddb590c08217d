/* The keeper's watch tool: a room's file changes as they happen, for
 * GET …/sandbox/watch (fcgi-app/files/watch.c), which keeps one per watched path
 * and fans its records out to every client.
 *
 * It runs as every tool does (tools.c: in the room's namespaces, cgroup
 * and seccomp filter, as the request's user), so inotify sees the room's
 * files with the room's permissions: a directory its user cannot read is
 * simply not watched.  One watch per directory (inotify is not recursive):
 * the tree is walked at the start, and every directory that appears later
 * is watched and its entries reported as created -- and each regular file
 * among them as modified too, unless a writer still has it open (then its
 * close, which the watch now sees, says it): it may have been written and
 * closed before the watch came, and a client waiting for its "modify"
 * would wait for ever.  A file moved in from outside the tree likewise.
 * A rename inside the tree is one "move" record
 * (IN_MOVED_FROM and IN_MOVED_TO paired by their cookie); a rename out of
 * it is a delete, into it a create.  A file's "modify" is its
 * IN_CLOSE_WRITE: one record per writer that is done, not one per write.
 *
 * It ends when its stdin reaches its end (roombox-fcgi closes it when the
 * last client has gone), when the watched directory goes, or with the room.
 * What it holds is bounded by the directories watched (the kernel's
 * max_user_watches, counted for the room's own user); what it writes waits
 * on nothing but its stdout, which roombox-fcgi reads at once. */
#include "watch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "protocol.h"
#include "tool_text.h"

#define WATCH_MASK (IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_CLOSE_WRITE | \
		    IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR | IN_DONT_FOLLOW | IN_EXCL_UNLINK)
#define PAIR_WAIT_MS 10   /* how long a rename's second half may lag its first */

static int ifd = -1;
static bool recursive;
static bool said_limit;
static char **paths;      /* by watch descriptor: its directory's path, or NULL */
static size_t npaths;

static char obuf[65536];
static size_t on;

static int flush_out(void)
{
	size_t off = 0;
	while (off < on) {
		ssize_t k = write(1, obuf + off, on - off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		off += (size_t)k;
	}
	on = 0;
	return 0;
}

static int put(const char *p, size_t n)
{
	if (on + n > sizeof(obuf) && flush_out() < 0)
		return -1;
	if (n > sizeof(obuf))
		return -1;   /* cannot happen: a record is two paths at most */
	memcpy(obuf + on, p, n);
	on += n;
	return 0;
}

/* One record: type, '0' or '1' for a directory, the path and NUL; a move
 * adds its new path and NUL. */
static int record(char type, bool dir, const char *path, const char *to)
{
	char head[2] = { type, dir ? '1' : '0' };
	if (put(head, 2) < 0 || put(path, strlen(path) + 1) < 0)
		return -1;
	return to ? put(to, strlen(to) + 1) : 0;
}

static char *join(const char *dir, const char *name)
{
	size_t dl = strlen(dir), nl = strlen(name);
	if (dl + 1 + nl >= PATH_MAX)
		return NULL;
	char *p = malloc(dl + nl + 2);
	if (!p)
		return NULL;
	memcpy(p, dir, dl);
	size_t at = dl;
	if (!(dl == 1 && dir[0] == '/'))
		p[at++] = '/';
	memcpy(p + at, name, nl + 1);
	return p;
}

/* A regular file (st: its lstat) found where the watch has only just come:
 * reported modified, as written before the watch -- unless a writer still
 * has it open, which a read lease tells (EAGAIN: its close will come as an
 * event).  Where that cannot be asked (not readable, not the file's owner)
 * the file counts as written. */
static void found_written(const char *path, const struct stat *st)
{
	if (!S_ISREG(st->st_mode))
		return;
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	bool open_for_writing = false;
	if (fd >= 0) {
		struct stat now;
		if (fstat(fd, &now) < 0 || !S_ISREG(now.st_mode) || now.st_ino != st->st_ino) {
			close(fd);   /* replaced meanwhile: the new entry's events say it */
			return;
		}
		if (fcntl(fd, F_SETLEASE, F_RDLCK) == 0)
			fcntl(fd, F_SETLEASE, F_UNLCK);
		else
			open_for_writing = errno == EAGAIN;
		close(fd);
	}
	if (!open_for_writing)
		record(TOOL_WATCH_MODIFY, false, path, NULL);
}

/* Watch dir (its path given) and, when recursive, every directory below
 * it to depth; announce (created) the entries found when asked. */
static int add_tree(const char *path, int depth, bool announce)
{
	int wd = inotify_add_watch(ifd, path, WATCH_MASK);
	if (wd < 0) {
		int e = errno;
		if (e == ENOSPC && !said_limit) {   /* the kernel's watch limit */
			said_limit = true;
			record(TOOL_WATCH_OVERFLOW, false, "", NULL);
		}
		errno = e;
		return -1;
	}
	if ((size_t)wd >= npaths) {
		size_t n = npaths ? npaths : 64;
		while (n <= (size_t)wd)
			n *= 2;
		char **p = realloc(paths, n * sizeof(*p));
		if (!p)
			return wd;
		memset(p + npaths, 0, (n - npaths) * sizeof(*p));
		paths = p;
		npaths = n;
	}
	if (!paths[wd] || strcmp(paths[wd], path)) {
		free(paths[wd]);
		paths[wd] = strdup(path);
	}
	if ((!recursive && !announce) || depth >= TOOL_DEPTH_MAX)
		return wd;
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return wd;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		char *child = join(path, e->d_name);
		if (!child)
			continue;
		if (announce) {
			record(TOOL_WATCH_CREATE, S_ISDIR(st.st_mode), child, NULL);
			found_written(child, &st);
		}
		if (recursive && S_ISDIR(st.st_mode))
			add_tree(child, depth + 1, announce);
		free(child);
	}
	closedir(d);
	return wd;
}

/* A directory moved inside the tree: its watch and every watch below it
 * now have paths under to. */
static void rename_tree(const char *from, const char *to)
{
	size_t fl = strlen(from);
	for (size_t i = 0; i < npaths; i++) {
		char *p = paths[i];
		if (!p || strncmp(p, from, fl) || (p[fl] != '\0' && p[fl] != '/'))
			continue;
		char *np = malloc(strlen(to) + strlen(p + fl) + 1);
		if (!np)
			continue;
		strcpy(np, to);
		strcat(np, p + fl);
		free(p);
		paths[i] = np;
	}
}

static const char *dir_of(int wd)
{
	return wd >= 0 && (size_t)wd < npaths ? paths[wd] : NULL;
}

struct pending {           /* a rename's first half */
	bool set, dir;
	uint32_t cookie;
	char *path;
};

static void pending_flush(struct pending *pm)
{
	if (pm->set)
		record(TOOL_WATCH_DELETE, pm->dir, pm->path, NULL);   /* moved out */
	free(pm->path);
	memset(pm, 0, sizeof(*pm));
}

static void event(const struct inotify_event *ev, struct pending *pm)
{
	bool dir = ev->mask & IN_ISDIR;

	if (ev->mask & IN_Q_OVERFLOW) {
		pending_flush(pm);
		record(TOOL_WATCH_OVERFLOW, false, "", NULL);
		return;
	}
	if (ev->mask & IN_IGNORED) {
		if (ev->wd >= 0 && (size_t)ev->wd < npaths) {
			free(paths[ev->wd]);
			paths[ev->wd] = NULL;
		}
		return;
	}
	const char *base = dir_of(ev->wd);
	if (!base || !ev->len)
		return;   /* IN_DELETE_SELF / IN_MOVE_SELF: the parent's event says it */
	char *path = join(base, ev->name);
	if (!path)
		return;
	if (pm->set && !((ev->mask & IN_MOVED_TO) && ev->cookie == pm->cookie))
		pending_flush(pm);
	if (ev->mask & IN_MOVED_FROM) {
		*pm = (struct pending){ true, dir, ev->cookie, path };
		return;
	}
	if (ev->mask & IN_MOVED_TO) {
		if (pm->set) {   /* a rename inside the tree: its watches follow it */
			record(TOOL_WATCH_MOVE, dir, pm->path, path);
			if (dir)
				rename_tree(pm->path, path);
			free(pm->path);
			memset(pm, 0, sizeof(*pm));
		} else {         /* moved in from outside */
			struct stat st;
			record(TOOL_WATCH_CREATE, dir, path, NULL);
			if (dir && recursive)
				add_tree(path, 1, true);
			else if (!dir && lstat(path, &st) == 0)
				found_written(path, &st);
		}
	} else if (ev->mask & IN_CREATE) {
		record(TOOL_WATCH_CREATE, dir, path, NULL);
		if (dir && recursive)
			add_tree(path, 1, true);
	} else if (ev->mask & IN_DELETE) {
		record(TOOL_WATCH_DELETE, dir, path, NULL);
	} else if (ev->mask & IN_CLOSE_WRITE) {
		record(TOOL_WATCH_MODIFY, false, path, NULL);
	}
	free(path);
}

/* "E <kind>" for what a client is told apart, else the C library's words
 * on stderr (status 1), as every tool answers. */
static int watch_fail(int err)
{
	const char *kind = tool_errno_kind(err);
	if (kind) {
		on = 0;
		return put("E ", 2) < 0 || put(kind, strlen(kind)) < 0 || put("\n", 1) < 0 || flush_out() < 0;
	}
	const char *msg = strerror(err);
	if (write(2, "watch: ", 7) < 0 || write(2, msg, strlen(msg)) < 0 || write(2, "\n", 1) < 0)
		return 1;
	return 1;
}

int tool_watch(const char *path, const char *recursive_flag, const char *unused)
{
	struct stat st;
	(void)unused;

	recursive = !strcmp(recursive_flag, "1");
	if (path[0] != '/')
		return watch_fail(EINVAL);
	if (stat(path, &st) < 0)
		return watch_fail(errno == ENOTDIR ? ENOENT : errno);
	if (!S_ISDIR(st.st_mode))
		return watch_fail(ENOTDIR);
	/* a lease (found_written) held when a writer opens the file is
	 * broken with SIGIO, whose default would end the watch */
	signal(SIGIO, SIG_IGN);
	ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
	if (ifd < 0)
		return watch_fail(errno);
	if (add_tree(path, 0, false) < 0)
		return watch_fail(errno == ENOSPC ? ENOSPC : errno);
	if (put("ok\n", 3) < 0 || flush_out() < 0)
		return 1;

	static char buf[65536] __attribute__((aligned(__alignof__(struct inotify_event))));
	struct pending pm = { 0 };
	for (;;) {
		struct pollfd pf[2] = { { ifd, POLLIN, 0 }, { 0, POLLIN, 0 } };
		int n = poll(pf, 2, pm.set ? PAIR_WAIT_MS : -1);
		if (n < 0 && errno != EINTR)
			return 1;
		if (n == 0) {   /* a rename's second half did not come: moved out */
			pending_flush(&pm);
			if (flush_out() < 0)
				return 0;
			continue;
		}
		if (pf[1].revents) {   /* roombox-fcgi is done with it */
			char c[64];
			ssize_t k = read(0, c, sizeof(c));
			if (k <= 0 && !(k < 0 && errno == EINTR))
				break;
		}
		if (!(pf[0].revents & POLLIN))
			continue;
		ssize_t len = read(ifd, buf, sizeof(buf));
		if (len <= 0)
			continue;
		for (char *p = buf; p < buf + len;) {
			const struct inotify_event *ev = (const struct inotify_event *)p;
			event(ev, &pm);
			p += sizeof(*ev) + ev->len;
		}
		if (flush_out() < 0)
			return 0;   /* nobody reads any more */
		bool any = false;
		for (size_t i = 0; i < npaths && !any; i++)
			any = paths[i] != NULL;
		if (!any)
			break;   /* the watched directory itself is gone */
	}
	pending_flush(&pm);
	flush_out();
	return 0;
}
