/* The mask over the shared host trees; see hostmask.h. */
#include "errbuf.h"
#include "hostmask.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
#include <time.h>
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

/* <host_root>/<path> (host_root "" for the host's own trees). */
static void tree_path(char *p, size_t len, const char *host_root, const struct hostmask_tree *t)
{
	snprintf(p, len, "%s/%s", host_root, t->path);
}

static bool tree_is_dir(const char *host_root, const struct hostmask_tree *t)
{
	char host[PATH_MAX];
	struct stat st;
	tree_path(host, sizeof(host), host_root, t);
	return lstat(host, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The status of the directories above the tree (var, var/lib for
 * var/lib/dpkg) summed into *key; whether one of them, or the tree's root,
 * is closed to others (1), so that the tree is hidden whole. */
static int tree_above(const char *host_root, const struct hostmask_tree *t, uint64_t *key)
{
	char p[PATH_MAX];
	int closed = 0;
	size_t base = (size_t)snprintf(p, sizeof(p), "%s/", host_root);
	for (const char *c = t->path; base < sizeof(p); c++) {
		if (*c != '/' && *c != '\0')
			continue;
		snprintf(p + base, sizeof(p) - base, "%.*s", (int)(c - t->path), t->path);
		struct stat st;
		if (lstat(p, &st) == 0) {
			if (key)
				*key = stat_hash(*key, &st);
			closed |= hostmask_hides(st.st_mode);
		}
		if (*c == '\0')
			break;
	}
	return closed;
}

/* The boot's id: a run_dir that outlives a reboot (not a tmpfs) never
 * gives the new boot a mask of the old one's trees. */
static int boot_key(uint64_t *key)
{
	char id[64];
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	ssize_t got = fd < 0 ? -1 : read(fd, id, sizeof(id));
	if (fd >= 0)
		close(fd);
	if (got <= 0) {
		if (got == 0)
			errno = EIO;
		return -1;
	}
	*key = fnv(*key, id, (size_t)got);
	return 0;
}

int hostmask_key(const char *host_root, const struct hostmask_tree *trees, size_t n, uint64_t *key)
{
	*key = 0xcbf29ce484222325ULL;
	if (boot_key(key) < 0)
		return -1;
	for (size_t i = 0; i < n; i++) {
		char host[PATH_MAX];
		tree_path(host, sizeof(host), host_root, &trees[i]);
		if (!tree_is_dir(host_root, &trees[i]))
			continue;
		tree_above(host_root, &trees[i], key);
		if (tree_key(host, key) < 0)
			return -1;
	}
	return 0;
}

/* ---- walking the trees: their mask and the sum of every entry ----------- */

/* One tree's walk: the mask directory that mirrors the host directory
 * being read, and the chain of host directories above it, whose copies
 * are made only once something below them is hidden.  A dry walk writes
 * nothing: it only sums what it reads. */
struct walk {
	char path[PATH_MAX];
	size_t len[MAX_DEPTH + 1];        /* path's length at each depth */
	struct stat dir[MAX_DEPTH + 1];   /* the host directory at each depth */
	int made;                         /* depths below this exist in the mask */
	bool dry;
	bool changed;                     /* a directory was replaced while read */
	uint64_t sum;                     /* entry_sum of every entry read */
};

/* One entry's part of the sum, added in whatever order readdir gives:
 * its name and directory, inode, mode, owner and ctime (which a chmod,
 * chown, write, link or rename moves). */
static uint64_t entry_sum(const char *name, const struct stat *dir, const struct stat *st)
{
	uint64_t v[] = { dir->st_ino, st->st_dev, st->st_ino, st->st_mode, st->st_uid, st->st_gid,
			 (uint64_t)st->st_ctim.tv_sec, (uint64_t)st->st_ctim.tv_nsec };
	return fnv(fnv(0xcbf29ce484222325ULL, name, strlen(name)), v, sizeof(v));
}

/* The mask's copies of the host directories down to depth: owner and
 * mode as on the host (times once the directory is done, dir_done), so
 * that the room sees them as it would without the mask (overlay shows a
 * directory as its highest layer has it). */
static int mirror_dirs(struct walk *w, int depth)
{
	for (; !w->dry && w->made <= depth; w->made++) {
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
	if (w->dry)
		return 0;
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

static int read_dir(struct walk *w, int fd, int depth, bool hide_all);

/* A directory others may read and search: walked, unless it is too deep
 * or its path too long to mirror, when it is hidden whole.  The directory
 * opened must be the one whose mode was read (st): one put in its place
 * meanwhile fails the walk. */
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
	struct stat now;
	int got = fstat(fd, &now);
	if (got < 0 || now.st_dev != st->st_dev || now.st_ino != st->st_ino) {
		int e = errno;
		w->changed = got == 0;
		close(fd);
		errno = e;
		return -1;
	}
	if (hostmask_hides(now.st_mode)) {           /* closed meanwhile */
		close(fd);
		return hide(w, depth, name);
	}
	snprintf(w->path + at, sizeof(w->path) - at, "/%s", name);
	w->len[depth + 1] = at + (size_t)n;
	w->dir[depth + 1] = now;
	int rc = read_dir(w, fd, depth + 1, false);
	if (w->made > depth + 1)
		w->made = depth + 1;
	w->path[at] = '\0';
	return rc;
}

/* Read one host directory (fd, closed here) at depth; with hide_all, a
 * whiteout for each of its entries. */
static int read_dir(struct walk *w, int fd, int depth, bool hide_all)
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
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		if (hide_all) {
			if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0)
				w->sum += entry_sum(e->d_name, &w->dir[depth], &st);
			rc = hide(w, depth, e->d_name);
			continue;
		}
		if (e->d_type == DT_LNK)
			continue;
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
			if (errno != ENOENT)
				rc = -1;
			continue;
		}
		w->sum += entry_sum(e->d_name, &w->dir[depth], &st);
		if (hostmask_hides(st.st_mode))
			rc = hide(w, depth, e->d_name);
		else if (S_ISDIR(st.st_mode))
			rc = walk_subdir(w, dirfd(d), depth, e->d_name, &st);
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

/* The mask of one host tree in <dir>/<name>.  The tree is read through a
 * clone of its mount (open_tree without AT_RECURSIVE): what a room's lower
 * layer shows, with no mount below it.  A tree whose root, or a directory
 * above it, others may not list and search is hidden whole: a whiteout
 * for each entry of its root (the root of an overlay's layer cannot be
 * one). */
static int mask_tree(struct walk *w, const char *host_root, const char *dir,
		     const struct hostmask_tree *t, char *err, size_t errlen)
{
	char host[PATH_MAX];
	tree_path(host, sizeof(host), host_root, t);
	int clone = (int)syscall(SYS_open_tree, AT_FDCWD, host, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	int fd = clone < 0 ? -1 : openat(clone, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (clone >= 0)
		close(clone);
	if (fd < 0 || fstat(fd, &w->dir[0]) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return ERR("mask of %s: open it: %s", host, strerror(e));
	}
	uint64_t above = 0xcbf29ce484222325ULL;
	bool closed = tree_above(host_root, t, &above) || hostmask_hides(w->dir[0].st_mode);
	w->sum += above + entry_sum(t->path, &w->dir[0], &w->dir[0]);
	snprintf(w->path, sizeof(w->path), "%s/%s", dir, t->name);
	w->len[0] = strlen(w->path);
	w->made = 0;
	w->changed = false;
	if (mirror_dirs(w, 0) < 0 || read_dir(w, fd, 0, closed) < 0)
		return ERR("mask of %s: %s: %s", host, w->path,
			   w->changed ? "a directory changed while read" : strerror(errno));
	return 0;
}

/* Every tree's walk, into path (dry: as if). */
static int walk_trees(const char *host_root, const struct hostmask_tree *trees, size_t n,
		      const char *path, bool dry, uint64_t *sum, char *err, size_t errlen)
{
	static struct walk w;    /* 14 KiB: not on the stack */
	w.dry = dry;
	w.sum = 0;
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < n; i++)
		if (tree_is_dir(host_root, &trees[i]))
			rc = mask_tree(&w, host_root, path, &trees[i], err, errlen);
	*sum = w.sum;
	return rc;
}

/* name in the directory parent and all below it, fd-relative, following
 * no symlink, at any depth. */
static int remove_at(int parent, const char *name)
{
	if (unlinkat(parent, name, 0) == 0 || errno == ENOENT)
		return 0;
	if (errno != EISDIR)
		return -1;
	int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && remove_at(dirfd(d), e->d_name) < 0)
			rc = -1;
	closedir(d);
	return rc == 0 ? unlinkat(parent, name, AT_REMOVEDIR) : -1;
}

int hostmask_build(const char *host_root, const struct hostmask_tree *trees, size_t n,
		   const char *path, uint64_t *sum, char *err, size_t errlen)
{
	if (mkdir(path, 0755) < 0)
		return ERR("mask: mkdir %s: %s", path, strerror(errno));
	int rc = walk_trees(host_root, trees, n, path, false, sum, err, errlen);
	if (rc < 0)
		remove_at(AT_FDCWD, path);
	return rc;
}

int hostmask_sum(const char *host_root, const struct hostmask_tree *trees, size_t n,
		 const char *path, uint64_t *sum, char *err, size_t errlen)
{
	return walk_trees(host_root, trees, n, path, true, sum, err, errlen);
}

/* ---- the current mask ----------------------------------------------------- */

/* <run_dir>/mask.current names the current mask, "mask-<key>-<sum>\n";
 * its mtime is the time of the last full walk of the trees. */
#define RECORD "mask.current"
#define RECORD_LEN (sizeof("mask-0123456789abcdef-0123456789abcdef\n") - 1)

static int record_path(char *p, size_t len, const char *run_dir, const char *suffix)
{
	return snprintf(p, len, "%s/" RECORD "%s", run_dir, suffix) >= (int)len ? -1 : 0;
}

static int record_read(const char *run_dir, uint64_t *key, uint64_t *sum, struct stat *st)
{
	char p[PATH_MAX], text[RECORD_LEN + 1];
	if (record_path(p, sizeof(p), run_dir, "") < 0)
		return -1;
	int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t got = fstat(fd, st) < 0 ? -1 : read(fd, text, sizeof(text));
	close(fd);
	unsigned long long k, s;
	if (got != (ssize_t)RECORD_LEN)
		return -1;
	text[got] = '\0';
	if (sscanf(text, "mask-%16llx-%16llx", &k, &s) != 2)
		return -1;
	*key = k;
	*sum = s;
	return 0;
}

/* Written whole under a temporary name, then renamed (mask.lock held). */
static int record_write(const char *run_dir, uint64_t key, uint64_t sum)
{
	char p[PATH_MAX], tmp[PATH_MAX], text[RECORD_LEN + 1];
	if (record_path(p, sizeof(p), run_dir, "") < 0 || record_path(tmp, sizeof(tmp), run_dir, ".tmp") < 0)
		return -1;
	snprintf(text, sizeof(text), "mask-%016llx-%016llx\n", (unsigned long long)key,
		 (unsigned long long)sum);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	int rc = write(fd, text, RECORD_LEN) == (ssize_t)RECORD_LEN ? 0 : -1;
	if (close(fd) < 0)
		rc = -1;
	return rc == 0 ? rename(tmp, p) : -1;
}

static int mask_name(char *out, size_t len, const char *run_dir, uint64_t key, uint64_t sum)
{
	return snprintf(out, len, "%s/mask-%016llx-%016llx", run_dir, (unsigned long long)key,
			(unsigned long long)sum) >= (int)len ? -1 : 0;
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

/* Builds a helper did not finish (killed meanwhile): mask-*.tmp.*, at
 * any depth.  mask.lock held. */
static void remove_unfinished(const char *run_dir)
{
	int fd = open(run_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (!strncmp(e->d_name, "mask-", 5) && strstr(e->d_name, ".tmp."))
			remove_at(dirfd(d), e->d_name);
	closedir(d);
}

enum { STALE, CURRENT, WALK_DUE };

/* What the record says for the trees of this key: STALE (no mask for
 * them), or their mask in out (and its sum), CURRENT or WALK_DUE (its last
 * full walk is max_age seconds old or more); -1 with err. */
static int record_state(const char *run_dir, uint64_t key, unsigned max_age, char *out,
			size_t outlen, uint64_t *sum, char *err, size_t errlen)
{
	uint64_t k;
	struct stat st;
	if (record_read(run_dir, &k, sum, &st) < 0 || k != key)
		return STALE;
	if (mask_name(out, outlen, run_dir, k, *sum) < 0)
		return ERR("mask: run_dir path too long");
	int ready = mask_ready(out, err, errlen);
	if (ready <= 0)
		return ready < 0 ? -1 : STALE;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	int64_t age = (int64_t)now.tv_sec - (int64_t)st.st_mtim.tv_sec;
	return age < 0 || age >= (int64_t)max_age ? WALK_DUE : CURRENT;
}

/* A new mask for the trees of this key into out, recorded; when the
 * record has a mask of this key (recorded: its sum), only if a full walk
 * finds the trees changed since it was built.  mask.lock held. */
static int renew(const char *host_root, const char *run_dir, const struct hostmask_tree *trees,
		 size_t n, uint64_t key, const uint64_t *recorded, char *out, size_t outlen,
		 char *err, size_t errlen)
{
	char tmp[PATH_MAX];
	uint64_t sum;
	/* the same length whichever helper walks: the depth at which a
	 * directory is hidden whole for its path's length is the same */
	if (snprintf(tmp, sizeof(tmp), "%s/mask-%016llx.tmp.%010d", run_dir, (unsigned long long)key,
		     (int)getpid()) >= (int)sizeof(tmp))
		return ERR("mask: run_dir path too long");
	if (recorded) {
		if (hostmask_sum(host_root, trees, n, tmp, &sum, err, errlen) < 0)
			return -1;
		if (sum == *recorded) {
			char p[PATH_MAX];
			if (record_path(p, sizeof(p), run_dir, "") < 0 ||
			    utimensat(AT_FDCWD, p, NULL, AT_SYMLINK_NOFOLLOW) < 0)
				return ERR("mask: touch %s: %s", p, strerror(errno));
			return 0;
		}
	}
	if (hostmask_build(host_root, trees, n, tmp, &sum, err, errlen) < 0)
		return -1;
	int ready = mask_name(out, outlen, run_dir, key, sum) < 0 ?
		    ERR("mask: run_dir path too long") : mask_ready(out, err, errlen);
	if (ready == 0 && rename(tmp, out) < 0)
		ready = ERR("mask: rename %s: %s", out, strerror(errno));
	if (ready != 0)
		remove_at(AT_FDCWD, tmp);     /* failed, or the same trees' mask is there */
	if (ready < 0)
		return -1;
	if (record_write(run_dir, key, sum) < 0)
		return ERR("mask: write %s/" RECORD ": %s", run_dir, strerror(errno));
	return 0;
}

int hostmask_current(const char *host_root, const char *run_dir, const struct hostmask_tree *trees,
		     size_t n, unsigned max_age, char *out, size_t outlen, char *err, size_t errlen)
{
	uint64_t key, sum;
	if (hostmask_key(host_root, trees, n, &key) < 0)
		return ERR("mask: read the host's trees: %s", strerror(errno));
	int state = record_state(run_dir, key, max_age, out, outlen, &sum, err, errlen);
	if (state < 0 || state == CURRENT)
		return state < 0 ? -1 : 0;
	/* one helper walks; the others wait and take its mask */
	char lock[PATH_MAX];
	snprintf(lock, sizeof(lock), "%s/mask.lock", run_dir);
	int fd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 || flock(fd, LOCK_EX) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		return ERR("mask: lock %s: %s", lock, strerror(e));
	}
	state = record_state(run_dir, key, max_age, out, outlen, &sum, err, errlen);
	int rc = state < 0 ? -1 : 0;
	if (state == STALE || state == WALK_DUE) {
		remove_unfinished(run_dir);
		rc = renew(host_root, run_dir, trees, n, key, state == WALK_DUE ? &sum : NULL, out,
			   outlen, err, errlen);
	}
	close(fd);
	return rc;
}

static unsigned full_walk_age = HOSTMASK_START_WALK_S;

void hostmask_sweeping(void)
{
	full_walk_age = HOSTMASK_SWEEP_WALK_S;
}

int hostmask_prepare(const struct config *cfg, const struct hostmask_tree *trees, size_t n,
		     char *out, size_t outlen, char *err, size_t errlen)
{
	return hostmask_current("", cfg->run_dir, trees, n, full_walk_age, out, outlen, err, errlen);
}
