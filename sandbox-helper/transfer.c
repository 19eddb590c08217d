/* Export and import of a room's files: see transfer.h.
 *
 * Each side works in a child of the helper that keeps only the
 * capabilities it needs, over a detached mount of the room's own image,
 * on a loop device of the transfer's own that goes with the mount (or,
 * for a room made while disk_limit was 0, its plain disk directory).
 * Import writes every entry relative to its parent directory, opened with
 * openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV) from
 * upper/: the stream's validator already refuses a path through anything
 * but an earlier directory, and the kernel refuses it again here. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <linux/openat2.h>
#include <unistd.h>

#include "disk.h"
#include "errbuf.h"
#include "transfer.h"
#include "treestream.h"
#include "treewalk.h"

#define CAP(c) (1ull << (c))

/* A transfer's loop device goes once its mount has: autoclear only
 * unbinds it (disk.h).  Its last user was this process's own close (the
 * child that worked in the mount reaped before it), and the release of a
 * mount and of the device under it runs as the closing task's work,
 * before the close returns: disk_loop_remove has nothing to wait for. */
static void loop_remove(char *dev)
{
	if (dev[0])
		disk_loop_remove(dev, NULL);
	dev[0] = '\0';
}

static void disk_close(struct transfer_disk *d)
{
	if (d->upper >= 0)
		close(d->upper);   /* the mount's last descriptor */
	d->upper = -1;
	loop_remove(d->dev);
}

/* The room's disk: a detached mount of its image (read-only for an
 * export), or of the copy of one at image or in image_fd (an export's
 * cut), or its plain directory; its upper/ opened in d->upper, the loop
 * device in d->dev. */
static int disk_open(const struct room *r, const char *image, int image_fd, bool rdonly,
		     struct transfer_disk *d, char *err, size_t errlen)
{
	char img[PATH_MAX];
	char *dev = d->dev;
	struct stat st;
	int root;
	d->upper = -1;
	dev[0] = '\0';
	if (image && image[0])
		snprintf(img, sizeof(img), "%s", image);
	else
		snprintf(img, sizeof(img), "%s/disk.img", r->state);
	if (image_fd >= 0 || lstat(img, &st) == 0) {
		/* an import's writes go past the host's page cache (see
		 * WRITEBACK_PIECE) */
		int fd = image_fd >= 0 ? fcntl(image_fd, F_DUPFD_CLOEXEC, 0)
			: open(img, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return errorf(err, errlen, "room %s: open its disk image: %s", r->id, strerror(errno));
		int loop = disk_image_attach_fd(fd, !rdonly, dev, sizeof(d->dev), err, errlen);
		close(fd);
		if (loop < 0)
			return -1;
		int fs = (int)syscall(SYS_fsopen, "ext4", FSOPEN_CLOEXEC);
		root = -1;
		if (fs >= 0 && syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", dev, 0) == 0 &&
		    (!rdonly || syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) == 0) &&
		    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
			root = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
					    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC |
					    MOUNT_ATTR_NOATIME | (rdonly ? MOUNT_ATTR_RDONLY : 0));
		int e = errno;
		if (fs >= 0)
			close(fs);
		close(loop);   /* the mount holds the device; unbound with it */
		if (root < 0) {
			loop_remove(dev);
			return errorf(err, errlen, "room %s: mount its disk image: %s", r->id, strerror(e));
		}
	} else {
		snprintf(img, sizeof(img), "%s/disk", r->state);
		root = open(img, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (root < 0)
			return errorf(err, errlen, "room %s: open its disk: %s", r->id, strerror(errno));
	}
	if (!rdonly && mkdirat(root, "upper", 0755) < 0 && errno != EEXIST) {
		int e = errno;
		close(root);
		loop_remove(dev);
		return errorf(err, errlen, "room %s: make upper/: %s", r->id, strerror(e));
	}
	d->upper = openat(root, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int e = errno;
	close(root);   /* a detached mount lives as long as a descriptor into it */
	if (d->upper < 0) {
		loop_remove(dev);
		return errorf(err, errlen, "room %s: open upper/: %s", r->id, strerror(e));
	}
	return 0;
}

/* Runs fn(arg, upper, fd) in a child that kept only keep; its error comes
 * back on a pipe.  0, or -1 with err. */
static int in_child(int (*fn)(void *, int, int, char *, size_t), void *arg, int upper, int fd,
		    uint64_t keep, transfer_confine_fn *confine, char *err, size_t errlen)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return errorf(err, errlen, "pipe: %s", strerror(errno));
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return errorf(err, errlen, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		char e[1024] = "";
		close(p[0]);
		signal(SIGPIPE, SIG_IGN);   /* a reader gone is a write error */
		int rc = prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0
			? errorf(e, sizeof(e), "no_new_privs: %s", strerror(errno))
			: confine(keep, e, sizeof(e));
		if (rc == 0)
			rc = fn(arg, upper, fd, e, sizeof(e));
		if (rc < 0 && write(p[1], e, strlen(e)) < 0)
			_exit(3);
		_exit(rc < 0 ? 1 : 0);
	}
	close(p[1]);
	size_t n = 0;
	ssize_t k;
	err[0] = '\0';
	while (n + 1 < errlen && ((k = read(p[0], err + n, errlen - 1 - n)) > 0 || (k < 0 && errno == EINTR)))
		if (k > 0)
			n += (size_t)k;
	err[n] = '\0';
	close(p[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
		return 0;
	if (!err[0])
		snprintf(err, errlen, "the worker ended with status %#x", (unsigned)st);
	return -1;
}

/* ---- export ---- */

static int walk_child(void *arg, int upper, int out_fd, char *err, size_t errlen)
{
	struct ts_writer w;
	struct treewalk_stats st;
	(void)arg;
	if (ts_writer_init(&w, out_fd) < 0)
		return errorf(err, errlen, "out of memory");
	int rc = tree_walk(upper, &w, &st, err, errlen);
	ts_writer_free(&w);
	return rc;
}

int transfer_export_open(const struct room *r, const char *image, int image_fd, struct transfer_disk *d,
			 char *err, size_t errlen)
{
	return disk_open(r, image, image_fd, true, d, err, errlen);
}

int transfer_export_walk(const struct room *r, struct transfer_disk *d, int out_fd,
			 transfer_confine_fn *confine, char *err, size_t errlen)
{
	/* reading every file whoever owns it, and the overlay's trusted.*
	 * mark (CAP_SYS_ADMIN) on a read-only mount */
	int rc = in_child(walk_child, NULL, d->upper, out_fd,
			  CAP(CAP_DAC_READ_SEARCH) | CAP(CAP_DAC_OVERRIDE) | CAP(CAP_SYS_ADMIN),
			  confine, err, errlen);
	disk_close(d);
	if (rc < 0) {
		char why[768];
		snprintf(why, sizeof(why), "%s", err);
		return errorf(err, errlen, "room %s: export: %s", r->id, why);
	}
	return 0;
}

/* ---- import ---- */

struct dir_time {
	char *path;
	struct timespec t;
};

struct applier {
	int upper;
	struct ts_reader rd;
	char parent[TS_PATH_MAX + 1];   /* the path pfd is open on */
	int pfd;
	struct dir_time *dirs;         /* set last: their entries change them */
	size_t ndirs, capdirs;
	uint64_t budget;
};

/* dir (a path of the stream, "" for the root) opened beneath upper/. */
static int open_beneath(struct applier *a, const char *dir, int flags)
{
	struct open_how how = {
		.flags = (uint64_t)(flags | O_CLOEXEC),
		.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
	};
	return (int)syscall(SYS_openat2, a->upper, *dir ? dir : ".", &how, sizeof(how));
}

/* The parent directory of path into a->pfd, *base its last name. */
static int parent_of(struct applier *a, const char *path, const char **base, char *err, size_t errlen)
{
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	*base = slash ? slash + 1 : path;
	if (a->pfd >= 0 && strlen(a->parent) == n && memcmp(a->parent, path, n) == 0)
		return 0;
	if (a->pfd >= 0)
		close(a->pfd);
	memcpy(a->parent, path, n);
	a->parent[n] = '\0';
	a->pfd = open_beneath(a, a->parent, O_PATH | O_DIRECTORY);
	if (a->pfd < 0)
		return errorf(err, errlen, "%s: open its directory: %s", path, strerror(errno));
	return 0;
}

/* Whatever the fresh disk holds at base (its skeleton) makes way, but a
 * directory for a directory, which is kept (its attributes set anew). */
static int make_way(int pfd, const char *base, bool dir, const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (fstatat(pfd, base, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return errno == ENOENT ? 0 : errorf(err, errlen, "%s: stat: %s", path, strerror(errno));
	if (S_ISDIR(st.st_mode) && dir)
		return 1;
	if (unlinkat(pfd, base, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) < 0)
		return errorf(err, errlen, "%s: replace what the new disk held: %s", path, strerror(errno));
	return 0;
}

/* How much of a file an import writes before that part's writeback is
 * started (sync_file_range): the room's ext4 writes it to the image as the
 * rest streams in, through a loop device doing direct I/O (disk_open), so
 * the syncfs before the import's answer waits for the last pieces rather
 * than for every byte (written twice over through two page caches: the
 * room's file system's, then the image file's). */
#define WRITEBACK_PIECE (8u << 20)

static bool all_zero(const unsigned char *p, size_t n)
{
	while (n && *p == 0) {
		p++;
		n--;
	}
	return n == 0;
}

/* The file's frames into fd: only data is written, zeros left holes (an
 * all-hole file's one stored zero byte included), then its size. */
static int file_data(struct applier *a, int fd, const struct ts_record *rec, char *err, size_t errlen)
{
	uint64_t off, len, unsent = 0, end = 0;
	int k;
	while ((k = ts_read_extent(&a->rd, &off, &len, err, errlen)) > 0) {
		const void *p;
		ssize_t n;
		while ((n = ts_read_data_ptr(&a->rd, &p, err, errlen)) > 0) {
			if (!all_zero(p, (size_t)n)) {
				size_t done = 0;
				while (done < (size_t)n) {
					ssize_t w = pwrite(fd, (const char *)p + done, (size_t)n - done,
							   (off_t)(off + done));
					if (w < 0 && errno == EINTR)
						continue;
					if (w <= 0)
						return errorf(err, errlen, "%s: write: %s", rec->path,
							      w < 0 ? strerror(errno) : "short");
					done += (size_t)w;
				}
			}
			off += (uint64_t)n;
			if (off > end)
				end = off;
			if (end - unsent >= WRITEBACK_PIECE) {
				sync_file_range(fd, (off_t)unsent, (off_t)(end - unsent), SYNC_FILE_RANGE_WRITE);
				unsent = end;
			}
		}
		if (n < 0)
			return -1;
	}
	if (k < 0)
		return -1;
	if (ftruncate(fd, (off_t)rec->size) < 0)
		return errorf(err, errlen, "%s: set its size: %s", rec->path, strerror(errno));
	return 0;
}

/* Owners, then the mode, then xattrs (a chown drops file capabilities
 * and setuid bits), on fd, an open file or directory. */
static int attrs_fd(int fd, const struct ts_record *rec, char *err, size_t errlen)
{
	if (fchown(fd, rec->uid, rec->gid) < 0)
		return errorf(err, errlen, "%s: chown: %s", rec->path, strerror(errno));
	if (fchmod(fd, rec->mode) < 0)
		return errorf(err, errlen, "%s: chmod: %s", rec->path, strerror(errno));
	for (unsigned i = 0; i < rec->xattr_count; i++) {
		const struct ts_xattr *x = &rec->xattrs[i];
		if (fsetxattr(fd, x->name, x->value, x->len, 0) < 0)
			return errorf(err, errlen, "%s: set xattr %s: %s", rec->path, x->name, strerror(errno));
	}
	return 0;
}

static int dir_time_add(struct applier *a, const struct ts_record *rec)
{
	if (a->ndirs == a->capdirs) {
		size_t cap = a->capdirs ? a->capdirs * 2 : 256;
		struct dir_time *d = realloc(a->dirs, cap * sizeof(*d));
		if (!d)
			return -1;
		a->dirs = d;
		a->capdirs = cap;
	}
	char *p = strdup(rec->path);
	if (!p)
		return -1;
	a->dirs[a->ndirs++] = (struct dir_time){ p, { rec->mtime_sec, rec->mtime_nsec } };
	return 0;
}

static int apply_record(struct applier *a, const struct ts_record *rec, char *err, size_t errlen)
{
	const char *base;
	struct timespec t[2] = { { 0, UTIME_OMIT }, { rec->mtime_sec, rec->mtime_nsec } };
	int fd = -1, rc = -1;

	if (strcmp(rec->path, ".") == 0) {
		if (attrs_fd(a->upper, rec, err, errlen) < 0)
			return -1;
		return dir_time_add(a, rec) < 0 ? errorf(err, errlen, "out of memory") : 0;
	}
	if (parent_of(a, rec->path, &base, err, errlen) < 0)
		return -1;
	int kept = make_way(a->pfd, base, rec->type == TS_DIR, rec->path, err, errlen);
	if (kept < 0)
		return -1;
	switch (rec->type) {
	case TS_DIR:
		if (!kept && mkdirat(a->pfd, base, 0700) < 0)
			return errorf(err, errlen, "%s: mkdir: %s", rec->path, strerror(errno));
		fd = openat(a->pfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (fd < 0)
			return errorf(err, errlen, "%s: open: %s", rec->path, strerror(errno));
		rc = attrs_fd(fd, rec, err, errlen);
		if (rc == 0 && dir_time_add(a, rec) < 0)
			rc = errorf(err, errlen, "out of memory");
		break;
	case TS_FILE:
		fd = openat(a->pfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0)
			return errorf(err, errlen, "%s: create: %s", rec->path, strerror(errno));
		rc = file_data(a, fd, rec, err, errlen);
		if (rc == 0)
			rc = attrs_fd(fd, rec, err, errlen);
		if (rc == 0 && futimens(fd, t) < 0)
			rc = errorf(err, errlen, "%s: set its time: %s", rec->path, strerror(errno));
		break;
	case TS_HARDLINK: {
		/* the target: an earlier file of the stream (the validator saw
		 * it), opened beneath upper/ like any path */
		int tfd = open_beneath(a, rec->link, O_PATH);
		if (tfd < 0)
			return errorf(err, errlen, "%s: open its target: %s", rec->path, strerror(errno));
		rc = linkat(tfd, "", a->pfd, base, AT_EMPTY_PATH);
		int e = errno;
		close(tfd);
		if (rc < 0)
			return errorf(err, errlen, "%s: link: %s", rec->path, strerror(e));
		return 0;
	}
	case TS_SYMLINK:
	case TS_FIFO:
	case TS_WHITEOUT:
		if (rec->type == TS_SYMLINK ? symlinkat(rec->link, a->pfd, base)
		    : mknodat(a->pfd, base, rec->type == TS_FIFO ? S_IFIFO | 0600 : S_IFCHR, makedev(0, 0)) < 0)
			return errorf(err, errlen, "%s: make: %s", rec->path, strerror(errno));
		/* no xattrs: the kernel takes user.* on none of these */
		if (fchownat(a->pfd, base, rec->uid, rec->gid, AT_SYMLINK_NOFOLLOW) < 0)
			return errorf(err, errlen, "%s: chown: %s", rec->path, strerror(errno));
		if (rec->type != TS_SYMLINK && fchmodat(a->pfd, base, rec->mode, 0) < 0)
			return errorf(err, errlen, "%s: chmod: %s", rec->path, strerror(errno));
		if (utimensat(a->pfd, base, t, AT_SYMLINK_NOFOLLOW) < 0)
			return errorf(err, errlen, "%s: set its time: %s", rec->path, strerror(errno));
		return 0;
	default:
		return errorf(err, errlen, "%s: unknown type", rec->path);
	}
	if (fd >= 0)
		close(fd);
	return rc;
}

static int apply_child(void *arg, int upper, int in_fd, char *err, size_t errlen)
{
	struct applier *a = arg;
	struct ts_limits lim = ts_limits_for_disk(a->budget);
	int k, rc = -1;
	a->upper = upper;
	a->pfd = -1;
	if (ts_reader_init(&a->rd, in_fd, &lim) < 0)
		return errorf(err, errlen, "out of memory");
	while ((k = ts_read_record(&a->rd, err, errlen)) > 0)
		if (apply_record(a, &a->rd.rec, err, errlen) < 0)
			goto out;
	if (k < 0)
		goto out;
	/* directories last, deepest first: writing in them moved their times */
	for (size_t i = a->ndirs; i-- > 0;) {
		struct timespec t[2] = { { 0, UTIME_OMIT }, a->dirs[i].t };
		int fd = open_beneath(a, strcmp(a->dirs[i].path, ".") == 0 ? "" : a->dirs[i].path,
				      O_RDONLY | O_DIRECTORY);
		if (fd < 0 || futimens(fd, t) < 0) {
			errorf(err, errlen, "%s: set its time: %s", a->dirs[i].path, strerror(errno));
			if (fd >= 0)
				close(fd);
			goto out;
		}
		close(fd);
	}
	if (syncfs(upper) < 0) {
		errorf(err, errlen, "sync the new disk: %s", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	ts_reader_free(&a->rd);
	return rc;
}

int transfer_import(const struct room *r, int in_fd, uint64_t budget, transfer_confine_fn *confine,
		    char *err, size_t errlen)
{
	struct transfer_disk d;
	if (!budget) {
		/* no disk limit: what the state directory's file system has */
		struct statvfs vs;
		if (statvfs(r->cfg->state_dir, &vs) < 0)
			return errorf(err, errlen, "room %s: import: free space: %s", r->id, strerror(errno));
		budget = (uint64_t)vs.f_bavail * vs.f_frsize;
	}
	if (disk_open(r, NULL, -1, false, &d, err, errlen) < 0)
		return -1;
	struct applier a = { .budget = budget };
	/* making entries of any owner (chown, fowner, dac), fifos and the
	 * overlay's whiteouts (mknod), the overlay's trusted.* mark
	 * (sys_admin) and file capabilities (setfcap), setuid bits kept
	 * through the chmod that follows the chown (fsetid) */
	int rc = in_child(apply_child, &a, d.upper, in_fd,
			  CAP(CAP_CHOWN) | CAP(CAP_FOWNER) | CAP(CAP_DAC_OVERRIDE) | CAP(CAP_DAC_READ_SEARCH) |
			  CAP(CAP_MKNOD) | CAP(CAP_SYS_ADMIN) | CAP(CAP_SETFCAP) | CAP(CAP_FSETID),
			  confine, err, errlen);
	disk_close(&d);
	if (rc < 0) {
		char why[768];
		snprintf(why, sizeof(why), "%s", err);
		return errorf(err, errlen, "import: %s", why);
	}
	return 0;
}
