/* Snapshots, restores and forks of a room (snapshot.h).
 *
 * A room's state, as far as root keeps it, is its disk image and its two
 * sessions; a snapshot is a copy of those three in
 * <state>/snapshots/<sid>/ (room.h), with a small `info` file (name,
 * createdAt, how the image was copied).  The image holds room-relative ids
 * (0-65535), so a copy works unchanged in any room's slot: a restore puts
 * one back in its own room, a fork in a new one.  Everything else of a
 * room's state -- preview exposures, process records -- is roombox-fcgi's.
 *
 * The cut.  A running room's ext4 is mounted only inside its keeper's
 * mount namespace, on a loop device over disk.img.  The helper gets a
 * descriptor on that file system by mounting the room's loop device once
 * more (fsopen/fsmount, attached nowhere: the kernel hands back the
 * superblock already mounted, so nothing is mounted twice), found by the
 * image's device and inode.  Then (cut_running):
 *   0. syncfs while the room runs: what it wrote reaches the image now,
 *      so what follows has little left to write;
 *   1. the room's cgroup is frozen (its processes stop where they are);
 *   2a. where the state directory shares blocks (XFS with reflink=1,
 *      btrfs): syncfs again, and the image is cloned (FICLONE) -- one
 *      atomic step, the loop device's writes to the image waiting for it
 *      -- then the cgroup is thawed.  The copy is the image as a power
 *      cut would have left it at that instant, holding every write made
 *      before 1; its journal is replayed at its next mount;
 *   2b. elsewhere the copy takes time and reads the image piece by piece:
 *      the ext4 is frozen with FIFREEZE (every dirty page written, the
 *      journal committed and checkpointed, new writes held back), the
 *      cgroup thawed, only the image's allocated extents copied
 *      (SEEK_DATA/SEEK_HOLE, copy_file_range), and the ext4 thawed
 *      (FITHAW).  Processes run on meanwhile; a write to the room's disk
 *      waits for the thaw.  A helper killed before it (SIGKILL) leaves
 *      the freeze, and its mark: the room's next cut, stop, restore,
 *      restart or idle sweep thaws it (snap_thaw_left).
 * Both times are measured and handed back (frozen_us: 1 to the cgroup's
 * thaw; fs_frozen_us: FIFREEZE to FITHAW, 0 for a clone).  A stopped
 * room's image is copied as it lies (its file system was unmounted
 * cleanly, or will replay its journal).  Every copy is on disk
 * (fdatasync) before it is named or put in place.
 *
 * A snapshot is made under .part-<sid> and renamed: whole or absent; a
 * removal renames it to .del-<sid> first.  Dot names are leftovers of a
 * crash, swept at the next snapshot.  A room without an image (disk_limit
 * 0, a plain directory) has no snapshots: conflict, said plainly.
 */
#include "snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/mount.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "disk.h"
#include "errbuf.h"
#include "jail.h"
#include "roomid.h"
#include "timefmt.h"

#define ERR(...) errorf(err, errlen, __VA_ARGS__)
#define SNAP_LIST_MAX 1024    /* listed at most (snapshots_max is far lower) */
static const char *const SESSIONS[] = { "session", "session.user" };

/* ---- small files ---------------------------------------------------------- */

static int64_t now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

static int path_of(char *p, const char *dir, const char *name)
{
	if (snprintf(p, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* dir/name's bytes into dst_dir/name (a temporary name, then renamed); a
 * missing source removes the destination.  0, or -1 with errno. */
static int file_copy(const char *dir, const char *dst_dir, const char *name)
{
	char src[PATH_MAX], dst[PATH_MAX], tmp[PATH_MAX], buf[65536];
	if (path_of(src, dir, name) < 0 || path_of(dst, dst_dir, name) < 0 ||
	    snprintf(tmp, sizeof(tmp), "%s/.%s.copy", dst_dir, name) >= (int)sizeof(tmp))
		return -1;
	int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return errno == ENOENT && (unlink(dst) == 0 || errno == ENOENT) ? 0 : -1;
	unlink(tmp);
	int out = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	ssize_t n = 0;
	while (out >= 0 && (n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			n = -1;
			break;
		}
	int e = errno;
	close(in);
	if (out < 0 || n < 0 || close(out) < 0 || rename(tmp, dst) < 0) {
		if (out >= 0)
			unlink(tmp);
		errno = out < 0 || n < 0 ? e : errno;
		return -1;
	}
	return 0;
}

/* A snapshot directory's files gone, then the directory. */
static void snap_dir_remove(const char *dir)
{
	static const char *const files[] = { "disk.img", "session", "session.user", "info",
		".session.copy", ".session.user.copy" };
	char p[PATH_MAX];
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (path_of(p, dir, files[i]) == 0)
			unlink(p);
	rmdir(dir);
}

/* ---- a snapshot's record ---------------------------------------------------- */

/* info: "<name>\n<createdAt>\n<copy>\n" (the helper's own file) */
static int info_write(const char *dir, const struct helper_snapshot *s)
{
	char p[PATH_MAX], text[256];
	int n = snprintf(text, sizeof(text), "%s\n%s\n%s\n", s->name, s->created_at, s->copy);
	if (path_of(p, dir, "info") < 0)
		return -1;
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	int rc = write(fd, text, (size_t)n) == n ? 0 : -1;
	return close(fd) < 0 ? -1 : rc;
}

static uint64_t file_bytes(const char *dir, const char *name)
{
	char p[PATH_MAX];
	struct stat st;
	if (path_of(p, dir, name) < 0 || lstat(p, &st) < 0)
		return 0;
	return (uint64_t)st.st_blocks * 512;
}

/* The snapshot <snaps>/<id>: 0 with *s, or -1 (none, or not whole). */
static int snap_load(const char *snaps, const char *id, struct helper_snapshot *s)
{
	char dir[PATH_MAX], p[PATH_MAX], text[256];
	memset(s, 0, sizeof(*s));
	if (!room_id_valid(id) || path_of(dir, snaps, id) < 0 || path_of(p, dir, "info") < 0)
		return -1;
	int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = '\0';
	char *name = text, *created = strchr(name, '\n'), *copy, *end;
	if (!created || !(copy = strchr(created + 1, '\n')) || !(end = strchr(copy + 1, '\n')))
		return -1;
	*created++ = *copy++ = *end = '\0';
	snprintf(s->id, sizeof(s->id), "%s", id);
	snprintf(s->name, sizeof(s->name), "%s", name);
	snprintf(s->created_at, sizeof(s->created_at), "%s", created);
	snprintf(s->copy, sizeof(s->copy), "%s", copy);
	for (size_t i = 0; i < 2; i++)
		s->size += file_bytes(dir, SESSIONS[i]);
	s->size += file_bytes(dir, "disk.img");
	return 0;
}

static void snaps_dir(const struct room *r, char *p)
{
	snprintf(p, PATH_MAX, "%s/snapshots", r->state);
}

static int by_created(const void *a, const void *b)
{
	const struct helper_snapshot *x = a, *y = b;
	int c = strcmp(x->created_at, y->created_at);
	return c ? c : strcmp(x->id, y->id);
}

/* Every whole snapshot of the room, oldest first (malloc'd, *n). */
static struct helper_snapshot *snaps_read(const struct room *r, size_t *n)
{
	char snaps[PATH_MAX];
	snaps_dir(r, snaps);
	*n = 0;
	struct helper_snapshot *all = calloc(SNAP_LIST_MAX, sizeof(*all));
	DIR *d = all ? opendir(snaps) : NULL;
	struct dirent *e;
	while (d && (e = readdir(d)) && *n < SNAP_LIST_MAX)
		if (e->d_name[0] != '.' && snap_load(snaps, e->d_name, &all[*n]) == 0)
			(*n)++;
	if (d)
		closedir(d);
	qsort(all, *n, sizeof(*all), by_created);
	return all;
}

/* The snapshot ref names (its id, else its name): 0 with *s, else -1. */
static int snap_find(const struct room *r, const char *ref, struct helper_snapshot *s)
{
	char snaps[PATH_MAX];
	snaps_dir(r, snaps);
	if (snap_load(snaps, ref, s) == 0)
		return 0;
	size_t n;
	struct helper_snapshot *all = snaps_read(r, &n);
	int rc = -1;
	for (size_t i = 0; all && i < n && rc < 0; i++)
		if (all[i].name[0] && strcmp(all[i].name, ref) == 0) {
			*s = all[i];
			rc = 0;
		}
	free(all);
	return rc;
}

/* ---- the cut -------------------------------------------------------------- */

/* Is the loop device dev attached to the image of st (its device and
 * inode, as the device itself says)? */
static bool loop_is(const char *dev, const struct stat *st)
{
	struct loop_info64 info;
	int lfd = open(dev, O_RDONLY | O_CLOEXEC);
	bool yes = lfd >= 0 && ioctl(lfd, LOOP_GET_STATUS64, &info) == 0 &&
		info.lo_inode == st->st_ino && info.lo_device == st->st_dev;
	if (lfd >= 0)
		close(lfd);
	return yes;
}

/* The loop device the running room's image is attached to, in dev: the
 * one its start noted, if it is still the image's, else the one whose
 * backing file is that image (by path, then by device and inode).  0, or
 * -1. */
static int loop_of(const struct room *r, const char *img, const struct stat *st, char *dev,
		   size_t devlen)
{
	char *hint = room_loop_hint(r);
	bool hit = hint && strlen(hint) < devlen && loop_is(hint, st);
	if (hit)
		snprintf(dev, devlen, "%s", hint);
	free(hint);
	if (hit)
		return 0;
	char real[PATH_MAX];
	if (!realpath(img, real))
		return -1;
	DIR *d = opendir("/sys/block");
	struct dirent *e;
	int rc = -1;
	while (d && rc < 0 && (e = readdir(d))) {
		char p[PATH_MAX], back[PATH_MAX];
		if (strncmp(e->d_name, "loop", 4) != 0 ||
		    snprintf(p, sizeof(p), "/sys/block/%s/loop/backing_file", e->d_name) >= (int)sizeof(p))
			continue;
		int fd = open(p, O_RDONLY | O_CLOEXEC);
		ssize_t n = fd >= 0 ? read(fd, back, sizeof(back) - 1) : -1;
		if (fd >= 0)
			close(fd);
		if (n <= 0)
			continue;
		back[n] = '\0';
		back[strcspn(back, "\n")] = '\0';
		if (strcmp(back, real) != 0)
			continue;
		snprintf(dev, devlen, "/dev/%s", e->d_name);
		if (loop_is(dev, st))
			rc = 0;
	}
	if (d)
		closedir(d);
	return rc;
}

/* A descriptor on the root of the ext4 mounted from dev: the same
 * superblock as the room's own mount, attached nowhere.  -1 with errno. */
static int ext4_root_open(const char *dev)
{
	int fs = (int)syscall(SYS_fsopen, "ext4", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -1;
	int mnt = -1, root = -1;
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", dev, 0) == 0 &&
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
		mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
	int e = errno;
	close(fs);
	if (mnt >= 0) {
		/* fsmount's is an O_PATH descriptor, which takes no ioctl */
		root = openat(mnt, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		e = errno;
		close(mnt);
	}
	errno = e;
	return root;
}

struct cut {
	int64_t frozen_us, fs_frozen_us;
	bool reflinked;
};

/* A running room's image (in) into out, its ext4 open at fs.  What the
 * room wrote is pushed to the image first, while it runs (syncfs), so the
 * freeze has little left to write.  Where the image can be reflinked, the
 * clone is one atomic step (the file system takes both files' locks, and
 * the loop device's writes to the image wait for it): the cut is the room
 * frozen, its file system synced, the image cloned -- a file system that
 * holds every write acknowledged before it, as after a power cut, which
 * its journal replays at the next mount.  Otherwise the copy takes time
 * and reads the image piece by piece: the file system is frozen
 * (FIFREEZE) for the whole copy, the room's processes only until then. */
/* The room's file system while it is frozen for a copy: the helper's
 * last line of defence (alarm, main.c) thaws it before the helper goes,
 * or the room's writes would wait until its next stop.  A helper killed
 * (SIGKILL) cannot: the mark <run>/frozen, made before the freeze and
 * removed after the thaw, tells the room's next stop (snap_thaw_left). */
static volatile sig_atomic_t frozen_fs = -1;
static char frozen_mark[PATH_MAX];

static void thaw_and_exit(int sig)
{
	if (frozen_fs >= 0 && ioctl(frozen_fs, FITHAW, 0) == 0)
		unlink(frozen_mark);
	_exit(128 + sig);
}

/* The mark made, its path kept for thaw_and_exit; false: none (no freeze
 * without it, or a killed helper's would go unseen). */
static bool mark_frozen(const struct room *r)
{
	int fd = path_of(frozen_mark, r->run, "frozen") < 0 ? -1
		: open(frozen_mark, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0) {
		frozen_mark[0] = '\0';
		return false;
	}
	close(fd);
	return true;
}

static int cut_running(const struct room *r, const struct cgroup_sys *cg, int fs, int in, int out,
		       uint64_t size, struct cut *c, char *err, size_t errlen)
{
	/* a freeze a helper killed mid-copy left (EINVAL: none) */
	ioctl(fs, FITHAW, 0);
	syncfs(fs);
	bool reflink = ioctl(out, FICLONE, in) == 0;   /* a probe, made again below */
	/* no alarm or SIGTERM ends the helper while the room's processes
	 * stand still (cgroup frozen), nor between the thaw and the mark's
	 * removal: held until then, they come after */
	sigset_t hold, prev;
	sigemptyset(&hold);
	sigaddset(&hold, SIGALRM);
	sigaddset(&hold, SIGTERM);
	sigprocmask(SIG_BLOCK, &hold, &prev);
	/* marked before anything stands still: a helper killed (SIGKILL)
	 * from here on leaves the mark, and the room's next stop, start or
	 * idle sweep thaws its cgroup and file system (snap_thaw_left) */
	if (!mark_frozen(r)) {
		sigprocmask(SIG_SETMASK, &prev, NULL);
		return ERR("room %s: mark its freeze: %s", r->id, strerror(errno));
	}
	int64_t t0 = now_us(), t1;
	bool frozen = cgroup_room_freeze(cg, r->id);
	int rc = 0;
	if (reflink) {
		if (syncfs(fs) < 0 || ioctl(out, FICLONE, in) < 0)
			rc = ERR("room %s: sync and clone its disk image: %s", r->id, strerror(errno));
		c->reflinked = true;
		if (frozen)
			cgroup_room_thaw(cg, r->id);
		c->frozen_us = now_us() - t0;
		unlink(frozen_mark);
		frozen_mark[0] = '\0';
		sigprocmask(SIG_SETMASK, &prev, NULL);
		return rc;
	}
	struct sigaction sa = { .sa_handler = thaw_and_exit }, old_alrm, old_term;
	sigaction(SIGALRM, &sa, &old_alrm);
	sigaction(SIGTERM, &sa, &old_term);
	frozen_fs = fs;
	bool fs_frozen = ioctl(fs, FIFREEZE, 0) == 0;
	if (!fs_frozen)
		rc = ERR("room %s: freeze its file system: %s", r->id, strerror(errno));
	t1 = now_us();
	if (frozen)
		cgroup_room_thaw(cg, r->id);
	c->frozen_us = now_us() - t0;
	sigprocmask(SIG_SETMASK, &prev, NULL);   /* from here a signal thaws */
	if (rc == 0 && disk_image_clone(in, out, size, &c->reflinked) < 0)
		rc = ERR("room %s: copy its disk image: %s", r->id, strerror(errno));
	sigprocmask(SIG_BLOCK, &hold, NULL);
	if (fs_frozen && ioctl(fs, FITHAW, 0) < 0)   /* the mark stays: the stop retries */
		fprintf(stderr, "roombox-helper: room %s: thaw its file system: %s\n", r->id, strerror(errno));
	else if (frozen_mark[0])
		unlink(frozen_mark);
	frozen_fs = -1;
	frozen_mark[0] = '\0';
	sigaction(SIGALRM, &old_alrm, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	sigprocmask(SIG_SETMASK, &prev, NULL);
	c->fs_frozen_us = now_us() - t1;
	return rc;
}

/* The room's image copied into out (an empty file), consistently (see the
 * top of this file).  0, or -1 with err. */
static int cut_image(const struct room *r, const struct cgroup_sys *cg, int out, struct cut *c,
		     char *err, size_t errlen)
{
	char img[PATH_MAX], dev[64];
	struct stat st;
	memset(c, 0, sizeof(*c));
	if (path_of(img, r->state, "disk.img") < 0)
		return ERR("room %s: its image: %s", r->id, strerror(errno));
	int in = open(img, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0 || fstat(in, &st) < 0) {
		if (in >= 0)
			close(in);
		return ERR("room %s: open its disk image: %s", r->id, strerror(errno));
	}
	int fs = -1;
	if (room_keeper_pid(r) > 0) {
		if (loop_of(r, img, &st, dev, sizeof(dev)) < 0) {
			close(in);
			return ERR("room %s: the loop device of its disk image is not found", r->id);
		}
		fs = ext4_root_open(dev);
		if (fs < 0) {
			close(in);
			return ERR("room %s: open its file system: %s", r->id, strerror(errno));
		}
	}
	int rc = fs >= 0 ? cut_running(r, cg, fs, in, out, (uint64_t)st.st_size, c, err, errlen)
		: disk_image_clone(in, out, (uint64_t)st.st_size, &c->reflinked) < 0
		? ERR("room %s: copy its disk image: %s", r->id, strerror(errno)) : 0;
	if (fs >= 0)
		close(fs);
	close(in);
	return rc;
}

bool snap_freeze_marked(const struct room *r)
{
	char mark[PATH_MAX];
	return path_of(mark, r->run, "frozen") == 0 && access(mark, F_OK) == 0;
}

void snap_thaw_left(const struct room *r, const struct cgroup_sys *cg)
{
	char mark[PATH_MAX], img[PATH_MAX], dev[64], sysfs[96];
	struct stat st;
	if (!snap_freeze_marked(r) || path_of(mark, r->run, "frozen") < 0)
		return;   /* no cut was cut short: the usual stop, one access() */
	/* killed while the room stood still: its processes first (a frozen
	 * cgroup that is not, or no cgroup at all, takes the write in vain) */
	cgroup_room_thaw(cg, r->id);
	int in = path_of(img, r->state, "disk.img") < 0 ? -1 : open(img, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	bool image = in >= 0 && fstat(in, &st) == 0 && S_ISREG(st.st_mode);
	if (in >= 0)
		close(in);
	/* a frozen ext4 keeps its loop device bound to the image: none bound,
	 * or (the keeper gone) no ext4 living on it, and nothing is frozen.
	 * Without a keeper only a living ext4 is mounted: never a fresh one */
	bool done = true;
	if (image && loop_of(r, img, &st, dev, sizeof(dev)) == 0) {
		const char *name = strrchr(dev, '/');
		snprintf(sysfs, sizeof(sysfs), "/sys/fs/ext4/%s", name ? name + 1 : dev);
		if (room_keeper_pid(r) > 0 || access(sysfs, F_OK) == 0) {
			int fs = ext4_root_open(dev);
			done = false;   /* unreachable now: the next stop tries again */
			if (fs >= 0) {
				int thawed = ioctl(fs, FITHAW, 0);
				if (thawed == 0)
					fprintf(stderr, "roombox-helper: room %s: thawed its file system, "
						"which a cut killed in its middle had left frozen\n", r->id);
				done = thawed == 0 || errno == EINVAL;   /* EINVAL: not frozen */
				close(fs);
			}
		}
	}
	if (done)
		unlink(mark);
}

/* The image at src (a snapshot's) into out. */
static int clone_file(const struct room *r, const char *src, int out, struct cut *c,
		      char *err, size_t errlen)
{
	struct stat st;
	memset(c, 0, sizeof(*c));
	int in = open(src, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0 || fstat(in, &st) < 0 ||
	    disk_image_clone(in, out, (uint64_t)st.st_size, &c->reflinked) < 0) {
		int e = errno;
		if (in >= 0)
			close(in);
		return ERR("room %s: copy the snapshot's disk image: %s", r->id, strerror(e));
	}
	close(in);
	return 0;
}

/* A new, empty, exclusive file at path (a leftover of a crash removed). */
static int fresh_file(const char *path)
{
	unlink(path);
	return open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

static bool room_has_image(const struct room *r)
{
	char img[PATH_MAX];
	struct stat st;
	return path_of(img, r->state, "disk.img") == 0 && lstat(img, &st) == 0 && S_ISREG(st.st_mode);
}

static int no_image(const struct room *r, char *err, size_t errlen)
{
	ERR("room %s: it has no disk image (made with disk_limit 0: a plain directory), and only "
	    "a disk image can be snapshotted or forked", r->id);
	return HELPER_E_CONFLICT;
}

/* KiB of memory the host has to spare (MemAvailable), 0 when unknown. */
static uint64_t mem_available_kib(void)
{
	char buf[4096];
	int fd = open("/proc/meminfo", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	const char *p = strstr(buf, "MemAvailable:");
	return p ? strtoull(p + 13, NULL, 10) : 0;
}

/* The host's one cut in memory: <state_dir>/cut-memory.lock, taken
 * without waiting and held until this helper exits, when the mount it
 * walked, and with it the memfd, goes.  A cut checks what the host has to
 * spare before it fills: cuts at once would each count what the others
 * are about to take, and exports read slowly would each keep a quarter of
 * what the ones before left.  true: this helper holds it. */
static bool cut_memory_lock(const struct room *r)
{
	static int held = -1;
	char p[PATH_MAX];
	if (held >= 0 || path_of(p, r->cfg->state_dir, "cut-memory.lock") < 0)
		return held >= 0;
	int fd = open(p, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
		close(fd);
		fd = -1;
	}
	held = fd;
	return held >= 0;
}

/* A copy of the image at img that is only read, then dropped (an
 * export's) goes into memory (a memfd) where the state directory shares
 * no blocks (probe: the empty file the copy would go to, which FICLONE
 * fills where it does, as the copy would), the image's whole size (not
 * its used blocks: what the room writes until the freeze adds to those,
 * up to its size) is at most a quarter of what the host has to spare,
 * and no other export's
 * cut is in memory (cut_memory_lock): a loop device flushes its backing
 * file when attached, which for a copy on the state directory's disk
 * wrote every byte of it there (or, with its writeback started as it was
 * made, slowed the copy threefold) only to delete it.  The memfd, or -1:
 * no. */
static int cut_memfd(const struct room *r, const char *img, int probe)
{
	struct stat st;
	int in = open(img, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	bool fits = in >= 0 && ioctl(probe, FICLONE, in) < 0 && fstat(in, &st) == 0 &&
		(uint64_t)st.st_size / 1024 <= mem_available_kib() / 4 && cut_memory_lock(r);
	if (in >= 0)
		close(in);
	return fits ? memfd_create("roombox-cut", MFD_CLOEXEC) : -1;
}

/* <state>/.cut.img made from snapshot s of r (ref given) or from r now;
 * the directory its sessions come from in sessions_dir.  With mem (a
 * copy only read: not durable), the copy may be a memfd instead: *mem its
 * descriptor then and tmp "", else *mem -1.  0, or -1. */
static int cut_to_temp(const struct room *r, const struct cgroup_sys *cg,
		       const struct helper_snapshot *s, char *tmp, char *sessions_dir,
		       struct cut *c, bool durable, int *mem, char *err, size_t errlen)
{
	char src[PATH_MAX];
	if (s)
		snprintf(sessions_dir, PATH_MAX, "%s/snapshots/%s", r->state, s->id);
	else
		snprintf(sessions_dir, PATH_MAX, "%s", r->state);
	if (path_of(tmp, r->state, ".cut.img") < 0 || path_of(src, s ? sessions_dir : r->state, "disk.img") < 0)
		return ERR("room %s: path too long", r->id);
	int out = fresh_file(tmp);
	if (out < 0)
		return ERR("room %s: create a copy of its image: %s", r->id, strerror(errno));
	int m = mem && !durable ? cut_memfd(r, src, out) : -1;
	if (mem)
		*mem = m;
	if (m >= 0) {
		close(out);
		unlink(tmp);
		tmp[0] = '\0';
		out = m;
	}
	int rc = s ? clone_file(r, src, out, c, err, errlen) : cut_image(r, cg, out, c, err, errlen);
	/* the copy is on disk before it is renamed over anything (an
	 * export's is only read, and gone after) */
	if (rc == 0 && durable && fdatasync(out) < 0)
		rc = ERR("room %s: write its copy: %s", r->id, strerror(errno));
	if (!tmp[0] && rc == 0)
		return 0;   /* the memfd: the caller's now */
	close(out);
	if (mem)
		*mem = -1;
	if (rc < 0 && tmp[0])
		unlink(tmp);
	return rc;
}

static int sessions_copy(const struct room *r, const char *from, const char *to,
			 char *err, size_t errlen)
{
	for (size_t i = 0; i < 2; i++)
		if (file_copy(from, to, SESSIONS[i]) < 0)
			return ERR("room %s: copy its %s: %s", r->id, SESSIONS[i], strerror(errno));
	return 0;
}

/* ---- the operations --------------------------------------------------------- */

/* Leftovers (dot names) of a crash in the room's snapshots directory. */
static void snaps_sweep(const char *snaps)
{
	DIR *d = opendir(snaps);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char p[PATH_MAX];
		if (e->d_name[0] == '.' && strcmp(e->d_name, ".") && strcmp(e->d_name, "..") &&
		    path_of(p, snaps, e->d_name) == 0)
			snap_dir_remove(p);
	}
	if (d)
		closedir(d);
}

void snap_leftovers_sweep(const struct room *r)
{
	char p[PATH_MAX];
	if (path_of(p, r->state, ".cut.img") == 0)
		unlink(p);
	snaps_dir(r, p);
	snaps_sweep(p);
}

static void snap_new_id(char *id, size_t len)
{
	unsigned char b[8] = { 0 };
	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) {
		uint64_t t = (uint64_t)now_us() ^ ((uint64_t)getpid() << 40);
		memcpy(b, &t, sizeof(b));
	}
	snprintf(id, len, "%02x%02x%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]);
}

/* May the room have one more snapshot named name?  HELPER_E_OK, or the
 * conflict with err. */
static int snap_admit(const struct room *r, const char *name, char *err, size_t errlen)
{
	size_t n;
	struct helper_snapshot *all = snaps_read(r, &n), found;
	if (!all)
		return ERR("room %s: list its snapshots: out of memory", r->id), HELPER_E_FAILED;
	free(all);
	if ((long)n >= (long)r->cfg->snapshots_max) {
		ERR("room %s: it has %zu snapshots, snapshots_max is %d: delete one first", r->id, n,
		    r->cfg->snapshots_max);
		return HELPER_E_CONFLICT;
	}
	if (name[0] && snap_find(r, name, &found) == 0) {
		ERR("room %s: a snapshot named %s exists", r->id, name);
		return HELPER_E_CONFLICT;
	}
	return HELPER_E_OK;
}

int snap_take(struct room *r, const struct cgroup_sys *cg, const char *name,
	      struct helper_snapshot *out, char *err, size_t errlen)
{
	char snaps[PATH_MAX], part[PATH_MAX], dir[PATH_MAX], img[PATH_MAX], id[HELPER_ROOM_LEN];
	if (!room_has_image(r))
		return no_image(r, err, errlen);
	int admitted = snap_admit(r, name, err, errlen);
	if (admitted)
		return admitted;
	snaps_dir(r, snaps);
	if (mkdir(snaps, 0700) < 0 && errno != EEXIST)
		return ERR("room %s: make its snapshots directory: %s", r->id, strerror(errno)), HELPER_E_FAILED;
	snaps_sweep(snaps);
	snap_new_id(id, sizeof(id));
	snprintf(part, sizeof(part), "%s/.part-%s", snaps, id);
	snprintf(dir, sizeof(dir), "%s/%s", snaps, id);
	if (mkdir(part, 0700) < 0 || path_of(img, part, "disk.img") < 0)
		return ERR("room %s: make a snapshot: %s", r->id, strerror(errno)), HELPER_E_FAILED;
	memset(out, 0, sizeof(*out));
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	iso8601_utc(&now, out->created_at, sizeof(out->created_at));
	int fd = fresh_file(img);
	struct cut c = { 0 };
	int rc = fd < 0 ? ERR("room %s: make a snapshot: %s", r->id, strerror(errno))
		: cut_image(r, cg, fd, &c, err, errlen);
	if (rc == 0 && fdatasync(fd) < 0)
		rc = ERR("room %s: write the snapshot: %s", r->id, strerror(errno));
	if (fd >= 0)
		close(fd);
	snprintf(out->id, sizeof(out->id), "%s", id);
	snprintf(out->name, sizeof(out->name), "%s", name);
	snprintf(out->copy, sizeof(out->copy), "%s", c.reflinked ? SNAP_COPY_REFLINK : SNAP_COPY_SPARSE);
	if (rc == 0)
		rc = sessions_copy(r, r->state, part, err, errlen);
	/* shared blocks are a promise, as a new room's image is (room.c) */
	uint64_t shared = c.reflinked ? file_bytes(part, "disk.img") : 0;
	int code = HELPER_E_FAILED;
	if (rc == 0 && shared && (rc = room_disk_commit_share(r, (int64_t)shared, err, errlen)) != 0)
		code = rc == ROOM_ENOSPACE ? HELPER_E_NO_SPACE : HELPER_E_FAILED;
	if (rc == 0 && (info_write(part, out) < 0 || rename(part, dir) < 0)) {
		rc = ERR("room %s: record the snapshot: %s", r->id, strerror(errno));
		if (shared)
			room_disk_commit_share(r, -(int64_t)shared, err, 0);
	}
	if (rc != 0) {
		snap_dir_remove(part);
		return code;
	}
	snap_load(snaps, id, out);
	out->frozen_us = (uint64_t)c.frozen_us;
	out->fs_frozen_us = (uint64_t)c.fs_frozen_us;
	return HELPER_E_OK;
}

int snap_list(const struct room *r, void (*emit)(const struct helper_snapshot *s, void *ctx),
	      void *ctx, char *err, size_t errlen)
{
	size_t n;
	struct helper_snapshot *all = snaps_read(r, &n);
	if (!all)
		return ERR("room %s: list its snapshots: out of memory", r->id);
	for (size_t i = 0; i < n; i++)
		emit(&all[i], ctx);
	free(all);
	return (int)n;
}

static int not_found(const struct room *r, const char *ref, char *err, size_t errlen)
{
	ERR("room %s: snapshot %s not found", r->id, ref);
	return HELPER_E_NOT_FOUND;
}

int snap_delete(struct room *r, const char *ref, struct helper_snapshot *out,
		char *err, size_t errlen)
{
	char snaps[PATH_MAX], dir[PATH_MAX], del[PATH_MAX];
	if (snap_find(r, ref, out) < 0)
		return not_found(r, ref, err, errlen);
	snaps_dir(r, snaps);
	snprintf(dir, sizeof(dir), "%s/%s", snaps, out->id);
	snprintf(del, sizeof(del), "%s/.del-%s", snaps, out->id);
	uint64_t shared = strcmp(out->copy, SNAP_COPY_REFLINK) == 0 ? file_bytes(dir, "disk.img") : 0;
	if (rename(dir, del) < 0)
		return ERR("room %s: remove snapshot %s: %s", r->id, out->id, strerror(errno)), HELPER_E_FAILED;
	snap_dir_remove(del);
	char ignored[256];
	if (shared)   /* its promise given back (room.c) */
		room_disk_commit_share(r, -(int64_t)shared, ignored, sizeof(ignored));
	return HELPER_E_OK;
}

int snap_restore(struct room *r, const struct cgroup_sys *cg, const char *ref,
		 struct helper_snapshot *out, char *err, size_t errlen)
{
	char tmp[PATH_MAX], from[PATH_MAX], img[PATH_MAX];
	struct cut c;
	if (snap_find(r, ref, out) < 0)
		return not_found(r, ref, err, errlen);
	/* copied while the room still runs: only the swap needs it stopped */
	if (cut_to_temp(r, cg, out, tmp, from, &c, true, NULL, err, errlen) < 0)
		return HELPER_E_FAILED;
	snap_thaw_left(r, cg);   /* as every stop does: its writers would not die */
	pid_t keeper = room_keeper_pid(r);
	if (keeper > 0 && jail_stop(r, cg, keeper, err, errlen) < 0) {
		unlink(tmp);
		return HELPER_E_FAILED;
	}
	if (path_of(img, r->state, "disk.img") < 0 || rename(tmp, img) < 0) {
		ERR("room %s: put the snapshot's disk in place: %s", r->id, strerror(errno));
		unlink(tmp);
		return HELPER_E_FAILED;
	}
	if (sessions_copy(r, from, r->state, err, errlen) < 0)
		return HELPER_E_FAILED;
	room_touch_active(r);
	return jail_start(r, cg, err, errlen) > 0 ? HELPER_E_OK : HELPER_E_FAILED;
}

/* The new room t made around the copy at tmp, its sessions from `from`
 * (t locked, and not existing). */
static int fork_make(struct room *t, const char *tmp, const char *from, char *err, size_t errlen)
{
	char img[PATH_MAX];
	int rc = room_create(t, err, errlen);
	if (rc < 0)
		return rc == ROOM_ELIMIT ? HELPER_E_LIMIT : rc == ROOM_ENOSPACE ? HELPER_E_NO_SPACE
			: HELPER_E_FAILED;
	if (room_create_dirs(t, err, errlen) < 0 || path_of(img, t->state, "disk.img") < 0 ||
	    (rename(tmp, img) < 0 && ERR("room %s: place its disk image: %s", t->id, strerror(errno))) ||
	    sessions_copy(t, from, t->state, err, errlen) < 0 ||
	    room_create_finish(t, err, errlen) < 0) {
		char e2[256];
		room_create_abort(t);
		room_remove_files(t, e2, sizeof(e2));
		return HELPER_E_FAILED;
	}
	return HELPER_E_OK;
}

/* Both rooms locked, the lower id first, so two forks between the same
 * rooms in opposite directions cannot wait on each other. */
static int lock_both(struct room *a, struct room *b, char *err, size_t errlen)
{
	struct room *first = strcmp(a->id, b->id) < 0 ? a : b, *second = first == a ? b : a;
	if (room_lock(first, true, err, errlen) < 0)
		return -1;
	if (room_lock(second, true, err, errlen) < 0) {
		room_unlock(first);
		return -1;
	}
	return 0;
}

static int fork_locked(struct room *r, struct room *t, const struct cgroup_sys *cg, const char *ref,
		       struct helper_snapshot *out, char *err, size_t errlen)
{
	char tmp[PATH_MAX], from[PATH_MAX];
	struct helper_snapshot s;
	struct cut c;
	int found = room_load(r, err, errlen);
	if (found <= 0)
		return found < 0 ? HELPER_E_FAILED : (ERR("room %s not found", r->id), HELPER_E_NOT_FOUND);
	found = room_load(t, err, errlen);
	if (found != 0)
		return found < 0 ? HELPER_E_FAILED : (ERR("room %s exists", t->id), HELPER_E_CONFLICT);
	if (!room_has_image(r))
		return no_image(r, err, errlen);
	if (ref[0] && snap_find(r, ref, &s) < 0)
		return not_found(r, ref, err, errlen);
	if (cut_to_temp(r, cg, ref[0] ? &s : NULL, tmp, from, &c, true, NULL, err, errlen) < 0)
		return HELPER_E_FAILED;
	memset(out, 0, sizeof(*out));
	if (ref[0])
		*out = s;
	snprintf(out->copy, sizeof(out->copy), "%s", c.reflinked ? SNAP_COPY_REFLINK : SNAP_COPY_SPARSE);
	out->frozen_us = (uint64_t)c.frozen_us;
	out->fs_frozen_us = (uint64_t)c.fs_frozen_us;
	int code = fork_make(t, tmp, from, err, errlen);
	unlink(tmp);   /* left only by a failure */
	return code;
}

int snap_fork(struct room *r, const struct cgroup_sys *cg, const char *ref, const char *to,
	      struct helper_snapshot *out, char *err, size_t errlen)
{
	struct room t;
	if (room_init(&t, r->cfg, to) < 0)
		return ERR("room %s: path too long", to), HELPER_E_INVALID;
	if (lock_both(r, &t, err, errlen) < 0)
		return HELPER_E_FAILED;
	int code = fork_locked(r, &t, cg, ref, out, err, errlen);
	room_unlock(&t);
	room_unlock(r);
	return code;
}

int snap_export_source(struct room *r, const struct cgroup_sys *cg, const char *ref,
		       struct snap_source *src, char *err, size_t errlen)
{
	struct helper_snapshot s;
	struct cut c;
	memset(src, 0, sizeof(*src));
	src->img_fd = -1;
	src->was_running = room_keeper_pid(r) > 0;
	if (ref[0] && snap_find(r, ref, &s) < 0)
		return not_found(r, ref, err, errlen);
	if (!ref[0] && (!src->was_running || !room_has_image(r))) {
		snprintf(src->sessions, sizeof(src->sessions), "%s", r->state);
		return HELPER_E_OK;   /* the room's own disk, as it lies */
	}
	/* a snapshot's image is copied too: one cut from a running room by a
	 * clone replays its journal at its first mount, which must not write
	 * into the kept snapshot */
	if (cut_to_temp(r, cg, ref[0] ? &s : NULL, src->img, src->sessions, &c, false, &src->img_fd,
			err, errlen) < 0)
		return HELPER_E_FAILED;
	src->temporary = true;
	if (ref[0])
		snprintf(src->id, sizeof(src->id), "%s", s.id);
	return HELPER_E_OK;
}
