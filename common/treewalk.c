/* The directory walker behind export (treewalk.h).
 *
 * One directory at a time: its names are read whole and sorted, its stream
 * closed, and only its fd stays open while the walk is below it, so the fds
 * held are the depth (TREEWALK_DEPTH_MAX bounds it).  Files with several
 * links are remembered by (device, inode) with the path they were first
 * sent under, in an open-addressing table. */
#include "treewalk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "errbuf.h"

#define WALK_CHUNK (1u << 20)

struct inode_slot {
	dev_t dev;
	ino_t ino;
	char *path;   /* NULL: empty */
};

struct walk {
	struct ts_writer *w;
	struct treewalk_stats *st;
	dev_t dev;
	char path[TS_PATH_MAX + 1];
	unsigned char *chunk;
	struct ts_extent *map;
	struct inode_slot *inodes;
	size_t ninodes, nused;
	char *err;
	size_t errlen;
};

/* ---- files with several links ---- */

static struct inode_slot *inode_find(struct walk *k, dev_t dev, ino_t ino)
{
	size_t mask = k->ninodes - 1;
	size_t i = (size_t)((ino * 0x9e3779b97f4a7c15ull) ^ dev) & mask;
	for (;; i = (i + 1) & mask)
		if (!k->inodes[i].path || (k->inodes[i].dev == dev && k->inodes[i].ino == ino))
			return &k->inodes[i];
}

/* The path an inode was first sent under, or NULL after remembering path
 * for it. */
static const char *inode_seen(struct walk *k, const struct stat *sb, const char *path)
{
	if ((k->nused + 1) * 2 > k->ninodes) {
		size_t n = k->ninodes ? k->ninodes * 2 : 256;
		struct inode_slot *old = k->inodes, *ns = calloc(n, sizeof *ns);
		size_t oldn = k->ninodes;
		if (!ns)
			return NULL;
		k->inodes = ns;
		k->ninodes = n;
		for (size_t i = 0; i < oldn; i++)
			if (old[i].path)
				*inode_find(k, old[i].dev, old[i].ino) = old[i];
		free(old);
	}
	struct inode_slot *e = inode_find(k, sb->st_dev, sb->st_ino);
	if (e->path)
		return e->path;
	e->path = strdup(path);
	if (e->path) {
		e->dev = sb->st_dev;
		e->ino = sb->st_ino;
		k->nused++;
	}
	return NULL;
}

/* ---- one entry ---- */

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int xattr_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ts_xattr *)a)->name, ((const struct ts_xattr *)b)->name);
}

/* The allowed xattrs of fd into x (sorted), their storage in *store. */
static int read_xattrs(struct walk *k, int fd, struct ts_xattr *x, unsigned *count, char **store)
{
	char names[65536];
	ssize_t n = flistxattr(fd, names, sizeof names);
	*count = 0;
	*store = NULL;
	if (n < 0)
		return errno == ENOTSUP ? 0 : errorf(k->err, k->errlen, "%s: listxattr: %s",
						     k->path, strerror(errno));
	size_t used = 0, cap = 0;
	for (char *p = names; p < names + n; p += strlen(p) + 1) {
		if (ts_check_xattr_name(p) < 0)
			continue;
		if (*count == TS_XATTRS_MAX)
			return errorf(k->err, k->errlen, "%s: more than %d xattrs", k->path, TS_XATTRS_MAX);
		size_t need = used + strlen(p) + 1 + TS_XATTR_VALUE_MAX;
		if (need > cap) {
			/* offsets, not pointers, until the store stops moving */
			char *s = realloc(*store, cap = need * 2);
			if (!s)
				return errorf(k->err, k->errlen, "%s: out of memory", k->path);
			*store = s;
		}
		size_t nl = strlen(p) + 1;
		memcpy(*store + used, p, nl);
		ssize_t v = fgetxattr(fd, p, *store + used + nl, TS_XATTR_VALUE_MAX);
		if (v < 0) {
			if (errno == ENODATA)
				continue;
			return errorf(k->err, k->errlen, "%s: getxattr %s: %s", k->path, p, strerror(errno));
		}
		if (strcmp(p, TS_XATTR_OPAQUE) == 0 && (v != 1 || (*store)[used + nl] != 'y'))
			continue;   /* another meaning of the mark: not ours to carry */
		x[*count].name = (const char *)(uintptr_t)used;
		x[*count].len = (uint32_t)v;
		(*count)++;
		used += nl + (size_t)v;
	}
	for (unsigned i = 0; i < *count; i++) {
		size_t off = (size_t)(uintptr_t)x[i].name;
		x[i].name = *store + off;
		x[i].value = (const unsigned char *)*store + off + strlen(*store + off) + 1;
	}
	qsort(x, *count, sizeof *x, xattr_cmp);
	return 0;
}

/* A regular file's data extents (its holes left out) into k->map.  More
 * than TS_MAP_MAX of them become one extent from the first: the holes in
 * it are then sent as the zeros they read as. */
static int file_map(struct walk *k, int fd, off_t size, unsigned *count)
{
	off_t pos = 0;
	*count = 0;
	while (pos < size) {
		off_t data = lseek(fd, pos, SEEK_DATA), hole;
		if (data < 0 && errno == ENXIO)
			break;
		if (data < 0 && errno == EINVAL) {  /* no SEEK_DATA here: all is data */
			data = pos;
			hole = size;
		} else if (data < 0) {
			return errorf(k->err, k->errlen, "%s: seek data: %s", k->path, strerror(errno));
		} else if ((hole = lseek(fd, data, SEEK_HOLE)) < 0) {
			return errorf(k->err, k->errlen, "%s: seek hole: %s", k->path, strerror(errno));
		}
		if (data >= size)
			break;
		if (hole > size)
			hole = size;
		if (*count == TS_MAP_MAX) {
			k->map[0].len = (uint64_t)size - k->map[0].offset;
			*count = 1;
			return 0;
		}
		k->map[*count].offset = (uint64_t)data;
		k->map[*count].len = (uint64_t)(hole - data);
		(*count)++;
		pos = hole;
	}
	return 0;
}

/* The bytes of the mapped extents, from the file to the stream (spliced
 * when the stream is a pipe); a file that shrank meanwhile is sent with
 * zeros where its data was, so the frames still match the map. */
static int send_data(struct walk *k, int fd, unsigned count)
{
	for (unsigned i = 0; i < count; i++) {
		uint64_t pos = k->map[i].offset, end = pos + k->map[i].len;
		while (pos < end) {
			size_t want = end - pos < WALK_CHUNK ? (size_t)(end - pos) : WALK_CHUNK;
			if (ts_write_extent_from(k->w, pos, fd, want, k->err, k->errlen) < 0)
				return -1;
			k->st->data_bytes += (unsigned long long)want;
			pos += want;
		}
	}
	return 0;
}

static int walk_dir(struct walk *k, int dfd, size_t plen, unsigned depth);

/* The entry `name` of directory dfd, whose path is k->path. */
static int send_entry(struct walk *k, int dfd, const char *name, size_t plen, unsigned depth)
{
	struct stat sb;
	if (fstatat(dfd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0) {
		if (errno == ENOENT)  /* gone while walked */
			return 0;
		return errorf(k->err, k->errlen, "%s: stat: %s", k->path, strerror(errno));
	}
	bool whiteout = S_ISCHR(sb.st_mode) && sb.st_rdev == 0;
	if (sb.st_dev != k->dev || !(S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode) ||
				     S_ISLNK(sb.st_mode) || S_ISFIFO(sb.st_mode) || whiteout)) {
		k->st->skipped++;
		return 0;
	}
	if (sb.st_uid > TS_ID_MAX || sb.st_gid > TS_ID_MAX)
		return errorf(k->err, k->errlen, "%s: owner %u:%u beyond 65535", k->path,
			      (unsigned)sb.st_uid, (unsigned)sb.st_gid);

	struct ts_record rec = {
		.mode = sb.st_mode & 07777, .uid = sb.st_uid, .gid = sb.st_gid,
		.mtime_sec = sb.st_mtim.tv_sec, .mtime_nsec = (uint32_t)sb.st_mtim.tv_nsec,
		.path = k->path, .link = "",
	};
	char target[TS_LINK_MAX + 1];
	struct ts_xattr x[TS_XATTRS_MAX];
	char *store = NULL;
	int fd = -1, rc = -1;

	if (S_ISLNK(sb.st_mode)) {
		ssize_t n = readlinkat(dfd, name, target, sizeof target - 1);
		if (n <= 0)
			return errorf(k->err, k->errlen, "%s: readlink: %s", k->path,
				      n < 0 ? strerror(errno) : "empty target");
		target[n] = '\0';
		rec.type = TS_SYMLINK;
		rec.link = target;
		k->st->entries++;
		return ts_write_record(k->w, &rec, k->err, k->errlen);
	}
	if (S_ISFIFO(sb.st_mode) || whiteout) {
		rec.type = whiteout ? TS_WHITEOUT : TS_FIFO;
		k->st->entries++;
		return ts_write_record(k->w, &rec, k->err, k->errlen);
	}
	if (S_ISREG(sb.st_mode) && sb.st_nlink > 1) {
		const char *first = inode_seen(k, &sb, k->path);
		if (first) {
			/* a name, nothing more: the inode's fields went with the file */
			rec = (struct ts_record){ .type = TS_HARDLINK, .path = k->path, .link = first };
			k->st->entries++;
			return ts_write_record(k->w, &rec, k->err, k->errlen);
		}
	}
	fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC |
				       (S_ISDIR(sb.st_mode) ? O_DIRECTORY : 0));
	if (fd < 0)
		return errno == ENOENT ? 0 : errorf(k->err, k->errlen, "%s: open: %s", k->path, strerror(errno));
	/* the name may have been given to something else since the stat: what
	 * was opened is sent only if it is what was looked at */
	struct stat now;
	if (fstat(fd, &now) < 0 || now.st_ino != sb.st_ino || now.st_dev != sb.st_dev ||
	    (now.st_mode & S_IFMT) != (sb.st_mode & S_IFMT)) {
		close(fd);
		k->st->skipped++;
		return 0;
	}
	if (read_xattrs(k, fd, x, &rec.xattr_count, &store) < 0)
		goto out;
	rec.xattrs = x;
	k->st->entries++;
	if (S_ISDIR(sb.st_mode)) {
		rec.type = TS_DIR;
		if (ts_write_record(k->w, &rec, k->err, k->errlen) < 0)
			goto out;
		free(store);
		store = NULL;
		if (depth + 1 > TREEWALK_DEPTH_MAX) {
			errorf(k->err, k->errlen, "%s: deeper than %d directories", k->path, TREEWALK_DEPTH_MAX);
			goto out;
		}
		rc = walk_dir(k, fd, plen, depth + 1);
		fd = -1;  /* walk_dir closed it */
		goto out;
	}
	rec.type = TS_FILE;
	rec.size = (uint64_t)sb.st_size;
	rec.has_map = true;
	rec.map = k->map;
	if (file_map(k, fd, sb.st_size, &rec.map_count) < 0 ||
	    ts_write_record(k->w, &rec, k->err, k->errlen) < 0 ||
	    send_data(k, fd, rec.map_count) < 0 ||
	    ts_write_file_end(k->w, k->err, k->errlen) < 0)
		goto out;
	rc = 0;
out:
	free(store);
	if (fd >= 0)
		close(fd);
	return rc;
}

/* The sorted names of the directory dfd (which this closes when done). */
static int walk_dir(struct walk *k, int dfd, size_t plen, unsigned depth)
{
	int dup_fd = dup(dfd);
	DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int rc = -1;
	if (!d) {
		if (dup_fd >= 0)
			close(dup_fd);
		close(dfd);
		return errorf(k->err, k->errlen, "%s: opendir: %s", k->path, strerror(errno));
	}
	struct dirent *e;
	errno = 0;
	while ((e = readdir(d))) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		if (n == cap) {
			char **nn = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof *nn);
			if (!nn)
				goto out;
			names = nn;
		}
		if (!(names[n] = strdup(e->d_name)))
			goto out;
		n++;
	}
	closedir(d);
	d = NULL;
	qsort(names, n, sizeof *names, name_cmp);
	for (size_t i = 0; i < n; i++) {
		size_t nl = strlen(names[i]);
		size_t at = plen ? plen + 1 : 0;  /* plen 0: the root, "." */
		if (at + nl > TS_PATH_MAX) {
			errorf(k->err, k->errlen, "%s/%s: path longer than %d bytes", k->path, names[i],
			       TS_PATH_MAX);
			goto out;
		}
		if (at)
			k->path[plen] = '/';
		memcpy(k->path + at, names[i], nl + 1);
		int r = send_entry(k, dfd, names[i], at + nl, depth);
		if (plen)
			k->path[plen] = '\0';
		else
			strcpy(k->path, ".");
		if (r < 0)
			goto out;
	}
	rc = 0;
out:
	if (d)
		closedir(d);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	close(dfd);
	return rc;
}

int tree_walk(int dirfd, struct ts_writer *w, struct treewalk_stats *st, char *err, size_t errlen)
{
	struct walk k = { .w = w, .st = st, .err = err, .errlen = errlen };
	struct stat sb;
	int rc = -1;
	memset(st, 0, sizeof *st);
	if (fstat(dirfd, &sb) < 0 || !S_ISDIR(sb.st_mode))
		return errorf(err, errlen, "tree walk: the root is not a directory");
	k.dev = sb.st_dev;
	k.chunk = malloc(WALK_CHUNK);
	k.map = malloc(TS_MAP_MAX * sizeof *k.map);
	int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 0);
	if (!k.chunk || !k.map || fd < 0) {
		free(k.chunk);
		free(k.map);
		if (fd >= 0)
			close(fd);
		return errorf(err, errlen, "tree walk: %s", strerror(errno ? errno : ENOMEM));
	}
	strcpy(k.path, ".");
	struct ts_xattr x[TS_XATTRS_MAX];
	char *store = NULL;
	struct ts_record root = {
		.type = TS_DIR, .mode = sb.st_mode & 07777, .uid = sb.st_uid, .gid = sb.st_gid,
		.mtime_sec = sb.st_mtim.tv_sec, .mtime_nsec = (uint32_t)sb.st_mtim.tv_nsec,
		.path = ".", .link = "", .xattrs = x,
	};
	if (sb.st_uid > TS_ID_MAX || sb.st_gid > TS_ID_MAX) {
		errorf(err, errlen, ".: owner %u:%u beyond 65535", (unsigned)sb.st_uid, (unsigned)sb.st_gid);
		close(fd);
		goto out;
	}
	if (read_xattrs(&k, fd, x, &root.xattr_count, &store) < 0 ||
	    ts_write_record(w, &root, err, errlen) < 0) {
		close(fd);
		goto out;
	}
	st->entries++;
	if (walk_dir(&k, fd, 0, 1) < 0 || ts_write_end(w, err, errlen) < 0)
		goto out;
	rc = 0;
out:
	free(store);
	free(k.chunk);
	free(k.map);
	for (size_t i = 0; i < k.ninodes; i++)
		free(k.inodes[i].path);
	free(k.inodes);
	return rc;
}
