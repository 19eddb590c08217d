/* Shared by test_treestream.c and test_room_archive.c: a real temporary
 * tree with every kind of entry a room can hold, and a plain applier of a
 * tree stream (what the keeper's import will do, without its namespace and
 * openat2 care) so a round trip can be compared by walking both trees. */
#ifndef ROOMBOX_TEST_TREE_FIXTURE_H
#define ROOMBOX_TEST_TREE_FIXTURE_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "treestream.h"
#include "treewalk.h"

#define GIB (1024ull * 1024 * 1024)

static bool fixture_xattrs_ok;   /* the tmp file system took a user.* xattr */
static bool fixture_owners_ok;   /* running as root: owners set */
static bool fixture_caps_ok;     /* a file capability was set (root, and the file system took it) */

static void put_file(int dfd, const char *path, const char *text, mode_t mode)
{
	int fd = openat(dfd, path, O_WRONLY | O_CREAT | O_TRUNC, mode);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	assert_int_equal(fchmod(fd, mode), 0);
	close(fd);
}

/* The tree: directories, small files, a 1 GiB sparse file with data at
 * both ends and in the middle, an all-hole file, symlinks (one dangling,
 * one absolute), a hard link, a fifo, a setuid file, an empty file, owners
 * across 0-65535 (as root), user.* xattrs (where the file system takes
 * them), a file capability (as root), names that are not UTF-8. */
static bool fixture_overlay_ok;   /* a whiteout and trusted.overlay.* made */

static void make_tree(const char *root)
{
	int d = open(root, O_RDONLY | O_DIRECTORY);
	assert_true(d >= 0);
	assert_int_equal(mkdirat(d, "etc", 0755), 0);
	assert_int_equal(mkdirat(d, "home", 0755), 0);
	assert_int_equal(mkdirat(d, "home/user", 0700), 0);
	assert_int_equal(mkdirat(d, "tmp", 01777), 0);
	assert_int_equal(fchmodat(d, "tmp", 01777, 0), 0);
	put_file(d, "etc/hosts", "127.0.0.1 localhost\n", 0644);
	put_file(d, "home/user/notes.txt", "line one\nline two\n", 0600);
	put_file(d, "home/user/empty", "", 0640);
	put_file(d, "suid-root", "#!/bin/sh\necho hi\n", 04755);
	put_file(d, "name with\nnewline", "odd\n", 0644);
	put_file(d, "caf\xe9 latin-1", "bytes, not UTF-8\n", 0644);
	put_file(d, "caf\xc3\xa9 utf-8", "UTF-8\n", 0644);

	int fd = openat(d, "sparse.img", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_true(fd >= 0);
	assert_int_equal(pwrite(fd, "head", 4, 0), 4);
	assert_int_equal(pwrite(fd, "middle", 6, (off_t)(GIB / 2)), 6);
	assert_int_equal(pwrite(fd, "tail", 4, (off_t)(GIB - 4)), 4);
	close(fd);
	fd = openat(d, "hole-only", O_WRONLY | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 1 << 20), 0);
	close(fd);

	assert_int_equal(symlinkat("../etc/hosts", d, "home/hosts-link"), 0);
	assert_int_equal(symlinkat("/nowhere/at/all", d, "dangling"), 0);
	assert_int_equal(linkat(d, "etc/hosts", d, "home/hosts-hard", 0), 0);
	assert_int_equal(mkfifoat(d, "home/fifo", 0620), 0);

	fixture_owners_ok = geteuid() == 0;
	if (fixture_owners_ok) {
		assert_int_equal(fchownat(d, "home/user", 1000, 1000, AT_SYMLINK_NOFOLLOW), 0);
		assert_int_equal(fchownat(d, "home/user/notes.txt", 1000, 1000, AT_SYMLINK_NOFOLLOW), 0);
		assert_int_equal(fchownat(d, "home/fifo", 65535, 65534, AT_SYMLINK_NOFOLLOW), 0);
		assert_int_equal(fchownat(d, "home/hosts-link", 1000, 100, AT_SYMLINK_NOFOLLOW), 0);
	}
	fd = openat(d, "etc/hosts", O_RDONLY);
	fixture_xattrs_ok = fsetxattr(fd, "user.roombox.test", "value", 5, 0) == 0;
	if (fixture_xattrs_ok)
		assert_int_equal(fsetxattr(fd, "user.another", "x\0y", 3, 0), 0);
	close(fd);
	/* a file capability (cap_net_bind_service+ep, VFS_CAP_REVISION_2) */
	static const unsigned char cap[20] = { 0x01, 0, 0, 0x02, 0x00, 0x04, 0, 0 };
	put_file(d, "cap-bin", "#!/bin/sh\n", 0755);
	fd = openat(d, "cap-bin", O_RDONLY);
	fixture_caps_ok = fixture_owners_ok && fsetxattr(fd, "security.capability", cap, sizeof cap, 0) == 0;
	close(fd);
	/* an overlay upper layer's marks (root only): a whiteout, an opaque
	 * directory, and an origin the walk leaves out */
	fixture_overlay_ok = fixture_owners_ok && mknodat(d, "home/gone", S_IFCHR | 0, 0) == 0;
	if (fixture_overlay_ok) {
		int h = openat(d, "home/user", O_RDONLY | O_DIRECTORY);
		fixture_overlay_ok = h >= 0 && fsetxattr(h, "trusted.overlay.opaque", "y", 1, 0) == 0 &&
			fsetxattr(h, "trusted.overlay.origin", "\0\xfb", 2, 0) == 0;
		if (h >= 0)
			close(h);
	}
	/* a known time, nanoseconds included, on a file and a directory */
	struct timespec ts[2] = { { 1700000000, 123456789 }, { 1700000000, 123456789 } };
	assert_int_equal(utimensat(d, "etc/hosts", ts, AT_SYMLINK_NOFOLLOW), 0);
	close(d);
}

static char *mkdtemp_in_tmp(void)
{
	char *t = strdup("/tmp/roombox-tree-XXXXXX");
	assert_non_null(mkdtemp(t));
	return t;
}

static void rm_tree(const char *path)
{
	char cmd[512];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
	assert_int_equal(system(cmd), 0);
}

/* A walk of dir into a new memfd, rewound. */
static int walk_to_memfd(const char *dir, struct treewalk_stats *st)
{
	char err[512];
	int out = memfd_create("tree", 0), d = open(dir, O_RDONLY | O_DIRECTORY);
	struct ts_writer w;
	assert_true(out >= 0 && d >= 0);
	assert_int_equal(ts_writer_init(&w, out), 0);
	if (tree_walk(d, &w, st, err, sizeof err) < 0)
		fail_msg("walk %s: %s", dir, err);
	ts_writer_free(&w);
	close(d);
	assert_int_equal(lseek(out, 0, SEEK_SET), 0);
	return out;
}

struct dir_time {
	char *path;
	struct timespec t;
};

/* Applies the tree stream on fd to the empty directory dir: 0, or -1 with
 * err (the reader's refusal). */
static int apply_stream(int fd, const char *dir, const struct ts_limits *lim, char *err, size_t errlen)
{
	struct ts_reader r;
	struct dir_time *dirs = NULL;
	size_t ndirs = 0;
	int d = open(dir, O_RDONLY | O_DIRECTORY), rc = -1, got;
	unsigned char *buf = malloc(1 << 20);
	assert_true(d >= 0 && buf);
	assert_int_equal(ts_reader_init(&r, fd, lim), 0);
	while ((got = ts_read_record(&r, err, errlen)) > 0) {
		const struct ts_record *rec = &r.rec;
		const char *p = rec->path;
		int f = -1;
		switch (rec->type) {
		case TS_DIR:
			if (strcmp(p, ".") != 0)
				assert_int_equal(mkdirat(d, p, 0700), 0);
			f = openat(d, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
			break;
		case TS_FILE:
			f = openat(d, p, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
			break;
		case TS_SYMLINK:
			assert_int_equal(symlinkat(rec->link, d, p), 0);
			assert_int_equal(fchownat(d, p, rec->uid, rec->gid, AT_SYMLINK_NOFOLLOW), 0);
			break;
		case TS_HARDLINK:
			assert_int_equal(linkat(d, rec->link, d, p, 0), 0);
			break;
		case TS_FIFO:
			assert_int_equal(mkfifoat(d, p, 0600), 0);
			f = openat(d, p, O_PATH | O_NOFOLLOW);
			break;
		case TS_WHITEOUT:
			assert_int_equal(mknodat(d, p, S_IFCHR | 0600, 0), 0);
			f = openat(d, p, O_PATH | O_NOFOLLOW);
			break;
		case TS_END:
			break;
		}
		if (rec->type == TS_FILE) {
			uint64_t off, len;
			int e;
			assert_true(f >= 0);
			while ((e = ts_read_extent(&r, &off, &len, err, errlen)) > 0) {
				ssize_t n;
				while ((n = ts_read_data(&r, buf, 1 << 20, err, errlen)) > 0) {
					assert_int_equal(pwrite(f, buf, (size_t)n, (off_t)off), n);
					off += (uint64_t)n;
				}
				if (n < 0)
					goto out;
			}
			if (e < 0)
				goto out;
			assert_int_equal(ftruncate(f, (off_t)rec->size), 0);
		}
		if (f >= 0) {
			char proc[64];
			snprintf(proc, sizeof proc, "/proc/self/fd/%d", f);
			/* owners, mode, then xattrs: a chown drops file
			 * capabilities and the setuid bits */
			assert_int_equal(fchownat(d, p, rec->uid, rec->gid, AT_SYMLINK_NOFOLLOW), 0);
			assert_int_equal(fchmodat(d, p, rec->mode, 0), 0);
			for (unsigned i = 0; i < rec->xattr_count; i++)
				assert_int_equal(setxattr(proc, rec->xattrs[i].name, rec->xattrs[i].value,
							   rec->xattrs[i].len, 0), 0);
			close(f);
		}
		if (rec->type != TS_HARDLINK) {
			struct timespec t[2] = { { rec->mtime_sec, rec->mtime_nsec },
						 { rec->mtime_sec, rec->mtime_nsec } };
			if (rec->type == TS_DIR) {
				dirs = realloc(dirs, (ndirs + 1) * sizeof *dirs);
				dirs[ndirs].path = strdup(p);
				dirs[ndirs++].t = t[0];
			} else {
				assert_int_equal(utimensat(d, p, t, AT_SYMLINK_NOFOLLOW), 0);
			}
		}
	}
	if (got == 0)
		rc = 0;
out:
	/* directories last, deepest first: filling them moved their times */
	while (ndirs-- > 0) {
		struct timespec t[2] = { dirs[ndirs].t, dirs[ndirs].t };
		if (rc == 0)
			assert_int_equal(utimensat(d, dirs[ndirs].path, t, AT_SYMLINK_NOFOLLOW), 0);
		free(dirs[ndirs].path);
	}
	free(dirs);
	free(buf);
	ts_reader_free(&r);
	close(d);
	return rc;
}

/* The bytes of fd from its start. */
static unsigned char *slurp(int fd, size_t *len)
{
	struct stat sb;
	assert_int_equal(fstat(fd, &sb), 0);
	unsigned char *p = malloc((size_t)sb.st_size + 1);
	assert_non_null(p);
	assert_int_equal(pread(fd, p, (size_t)sb.st_size, 0), sb.st_size);
	*len = (size_t)sb.st_size;
	return p;
}

/* The two trees walk to the same stream. */
static void assert_same_tree(const char *a, const char *b)
{
	struct treewalk_stats sa, sb;
	int fa = walk_to_memfd(a, &sa), fb = walk_to_memfd(b, &sb);
	size_t la, lb;
	unsigned char *pa = slurp(fa, &la), *pb = slurp(fb, &lb);
	assert_int_equal(sa.entries, sb.entries);
	assert_int_equal(la, lb);
	assert_memory_equal(pa, pb, la);
	free(pa);
	free(pb);
	close(fa);
	close(fb);
}

#endif
