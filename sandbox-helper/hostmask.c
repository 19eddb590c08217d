/* The mask over the shared host trees; see hostmask.h. */
#include "errbuf.h"
#include "hostmask.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/mount.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#define ERR(...) errorf(err, errlen, __VA_ARGS__)

/* A directory this deep, or whose mask path would not fit, is hidden
 * whole rather than walked: when in doubt, the mask hides. */
#define MAX_DEPTH 64

int hostmask_hides(unsigned mode)
{
	if (S_ISLNK(mode))
		return 0;
	if (S_ISDIR(mode))
		return (mode & (S_IROTH | S_IXOTH)) != (S_IROTH | S_IXOTH);
	return !(mode & S_IROTH);
}

/* ---- the key: the trees' top two levels --------------------------------- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ULL;
	return h;
}

static uint64_t stat_hash(uint64_t h, const struct stat *st)
{
	uint64_t v[] = { st->st_dev, st->st_ino, st->st_mode, st->st_uid, st->st_gid,
			 (uint64_t)st->st_mtim.tv_sec, (uint64_t)st->st_mtim.tv_nsec,
			 (uint64_t)st->st_ctim.tv_sec, (uint64_t)st->st_ctim.tv_nsec };
	return fnv(h, v, sizeof(v));
}

/* The tree's root and each entry in it, summed so that the order readdir
 * gives them in does not matter.  -1 when the tree cannot be read. */
static int tree_key(const char *path, uint64_t *key)
{
	int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	uint64_t sum = stat_hash(fnv(0xcbf29ce484222325ULL, path, strlen(path)), &st);
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
			sum += stat_hash(fnv(0xcbf29ce484222325ULL, e->d_name, strlen(e->d_name)), &st);
	closedir(d);
	*key = fnv(*key, &sum, sizeof(sum));
	return 0;
}

/* ---- building a mask ------------------------------------------------------ */

/* One tree's walk: the mask directory that mirrors the host directory
 * being read, and the chain of host directories above it, whose copies
 * are made only once something below them is hidden. */
struct walk {
	char path[PATH_MAX];
	size_t len[MAX_DEPTH + 1];        /* path's length at each depth */
	struct stat dir[MAX_DEPTH + 1];   /* the host directory at each depth */
	int made;                         /* depths below this exist in the mask */
};

/* The mask's copies of the host directories down to depth: owner and
 * mode as on the host (times once the directory is done, dir_done), so
 * that the room sees them as it would without the mask (overlay shows a
 * directory as its highest layer has it). */
static int mirror_dirs(struct walk *w, int depth)
{
	for (; w->made <= depth; w->made++) {
		const struct stat *st = &w->dir[w->made];
		char keep = w->path[w->len[w->made]];
		w->path[w->len[w->made]] = '\0';
		int rc = mkdir(w->path, 0700) < 0 || lchown(w->path, st->st_uid, st->st_gid) < 0 ||
			 chmod(w->path, st->st_mode & 07777) < 0 ? -1 : 0;
		w->path[w->len[w->made]] = keep;
		if (rc < 0)
			return -1;
	}
	return 0;
}

/* The host directory's times on its copy, if one was made, once nothing
 * more is added to it. */
static int dir_done(struct walk *w, int depth)
{
	if (w->made <= depth)
		return 0;
	struct timespec t[2] = { w->dir[depth].st_atim, w->dir[depth].st_mtim };
	return utimensat(AT_FDCWD, w->path, t, AT_SYMLINK_NOFOLLOW);
}

/* An overlay whiteout for name in the directory at depth. */
static int hide(struct walk *w, int depth, const char *name)
{
	if (mirror_dirs(w, depth) < 0)
		return -1;
	size_t at = w->len[depth];
	if (snprintf(w->path + at, sizeof(w->path) - at, "/%s", name) >= (int)(sizeof(w->path) - at)) {
		w->path[at] = '\0';
		errno = ENAMETOOLONG;
		return -1;
	}
	int rc = mknod(w->path, S_IFCHR | 0600, makedev(0, 0));
	w->path[at] = '\0';
	return rc;
}

static int walk_dir(struct walk *w, int fd, int depth);

/* A directory others may read and search: walked, unless it is too deep
 * or its path too long to mirror, when it is hidden whole. */
static int walk_subdir(struct walk *w, int parent, int depth, const char *name,
		       const struct stat *st)
{
	size_t at = w->len[depth];
	int n = snprintf(w->path + at, sizeof(w->path) - at, "/%s", name);
	w->path[at] = '\0';
	if (depth + 1 >= MAX_DEPTH || n >= (int)(sizeof(w->path) - at) - NAME_MAX - 2)
		return hide(w, depth, name);
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -1;       /* gone meanwhile */
	snprintf(w->path + at, sizeof(w->path) - at, "/%s", name);
	w->len[depth + 1] = at + (size_t)n;
	w->dir[depth + 1] = *st;
	int rc = walk_dir(w, fd, depth + 1);
	if (w->made > depth + 1)
		w->made = depth + 1;
	w->path[at] = '\0';
	return rc;
}

/* Read one host directory (fd, closed here) at depth. */
static int walk_dir(struct walk *w, int fd, int depth)
{
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -1;
	}
	struct dirent *e;
	int rc = 0;
	while (rc == 0 && (errno = 0, e = readdir(d))) {
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..") || e->d_type == DT_LNK)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				rc = -1;
		} else if (hostmask_hides(st.st_mode)) {
			rc = hide(w, depth, e->d_name);
		} else if (S_ISDIR(st.st_mode)) {
			rc = walk_subdir(w, dirfd(d), depth, e->d_name, &st);
		}
	}
	if (rc == 0 && errno != 0)
		rc = -1;
	if (rc == 0)
		rc = dir_done(w, depth);
	int e2 = errno;
	closedir(d);
	errno = e2;
	return rc;
}

/* <host_root>/<path> (host_root "" for the host's own trees). */
static void tree_path(char *p, size_t len, const char *host_root, const struct hostmask_tree *t)
{
	snprintf(p, len, "%s/%s", host_root, t->path);
}

/* The mask of one host tree in <dir>/<name>.  The tree is read through a
 * clone of its mount (open_tree without AT_RECURSIVE): what a room's lower
 * layer shows, with no mount below it. */
static int mask_tree(const char *host_root, const char *dir, const struct hostmask_tree *t,
		     char *err, size_t errlen)
{
	static struct walk w;    /* 14 KiB: not on the stack */
	char host[PATH_MAX];
	tree_path(host, sizeof(host), host_root, t);
	int clone = (int)syscall(SYS_open_tree, AT_FDCWD, host, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	int fd = clone < 0 ? -1 : openat(clone, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (clone >= 0)
		close(clone);
	if (fd < 0 || fstat(fd, &w.dir[0]) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return ERR("mask of %s: open it: %s", host, strerror(e));
	}
	snprintf(w.path, sizeof(w.path), "%s/%s", dir, t->name);
	w.len[0] = strlen(w.path);
	w.made = 0;
	if (mirror_dirs(&w, 0) < 0 || walk_dir(&w, fd, 0) < 0)
		return ERR("mask of %s: %s: %s", host, w.path, strerror(errno));
	return 0;
}

static bool tree_is_dir(const char *host_root, const struct hostmask_tree *t)
{
	char host[PATH_MAX];
	struct stat st;
	tree_path(host, sizeof(host), host_root, t);
	return lstat(host, &st) == 0 && S_ISDIR(st.st_mode);
}

int hostmask_key(const char *host_root, const struct hostmask_tree *trees, size_t n, uint64_t *key)
{
	*key = 0xcbf29ce484222325ULL;
	for (size_t i = 0; i < n; i++) {
		char host[PATH_MAX];
		tree_path(host, sizeof(host), host_root, &trees[i]);
		if (tree_is_dir(host_root, &trees[i]) && tree_key(host, key) < 0)
			return -1;
	}
	return 0;
}

/* A mask there already: 1; none: 0; something else in its place: -1. */
static int mask_ready(const char *path, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(path, &st) < 0)
		return 0;
	if (!S_ISDIR(st.st_mode) || st.st_uid != 0)
		return ERR("%s: not a root-owned directory (refusing)", path);
	return 1;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

/* Built under a temporary name in the same directory, then renamed: a
 * helper sees either no mask of that name or a whole one.  A build that
 * failed (here or in a helper that died, whose pid this one may have)
 * leaves nothing. */
int hostmask_build(const char *host_root, const struct hostmask_tree *trees, size_t n,
		   const char *path, char *err, size_t errlen)
{
	char tmp[PATH_MAX];
	if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
		return ERR("mask: %s: path too long", path);
	nftw(tmp, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	if (mkdir(tmp, 0755) < 0)
		return ERR("mask: mkdir %s: %s", tmp, strerror(errno));
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (tree_is_dir(host_root, &trees[i]))
			rc = mask_tree(host_root, tmp, &trees[i], err, errlen);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = ERR("mask: rename %s: %s", path, strerror(errno));
	if (rc < 0)
		nftw(tmp, remove_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	return rc;
}

int hostmask_prepare(const struct config *cfg, const struct hostmask_tree *trees, size_t n,
		     char *out, size_t outlen, char *err, size_t errlen)
{
	uint64_t key;
	if (hostmask_key("", trees, n, &key) < 0)
		return ERR("mask: read the host's trees: %s", strerror(errno));
	if (snprintf(out, outlen, "%s/mask-%016llx", cfg->run_dir, (unsigned long long)key) >= (int)outlen)
		return ERR("mask: run_dir path too long");
	int ready = mask_ready(out, err, errlen);
	if (ready != 0)
		return ready < 0 ? -1 : 0;
	/* one helper builds it; the others wait and take its mask */
	char lock[PATH_MAX];
	snprintf(lock, sizeof(lock), "%s/mask.lock", cfg->run_dir);
	int fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return ERR("mask: lock %s: %s", lock, strerror(e));
	}
	ready = mask_ready(out, err, errlen);
	int rc = ready < 0 ? -1 : ready ? 0 : hostmask_build("", trees, n, out, err, errlen);
	close(fd);
	return rc;
}
