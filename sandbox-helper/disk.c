/* Per-room disk images (see disk.h).  The loop device is configured with
 * LO_FLAGS_AUTOCLEAR and the mount exists only in the keeper's namespace, so
 * when the keeper dies the kernel unmounts the filesystem and unbinds the
 * loop device: nothing stays bound on the host, even after a crash.  The
 * unbound device itself stays until removed, which a stop does
 * (disk_loop_remove): otherwise the host keeps as many as rooms ever ran
 * at once.  So does the end of a transfer, which mounts an image on a
 * device of its own (transfer.c). */
#include "disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <limits.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <linux/mount.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "errbuf.h"

#define ERR(...) errorf(err, errlen, __VA_ARGS__)

/* mkfs.ext4 on path; with fill_dir, the filesystem gets that tree's
 * files, modes and owners (-d). */
static int run_mkfs(const char *path, const char *fill_dir, char *err, size_t errlen)
{
	char *argv[] = { "mkfs.ext4", "-q", "-F", "-m", "0", "-J", "size=4",
		"-E", "lazy_itable_init=1,lazy_journal_init=1,root_owner=0:0",
		(char *)path, NULL, NULL, NULL };
	if (fill_dir) {
		argv[10] = "-d";
		argv[11] = (char *)fill_dir;
	}
	char *envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL };
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int rc = posix_spawnp(&pid, "mkfs.ext4", &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return ERR("run mkfs.ext4: %s", strerror(rc));
	int status;
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return ERR("mkfs.ext4 %s failed", path);
	return 0;
}

int disk_template_make(const char *path, uint64_t bytes, const char *fill_dir, char *err, size_t errlen)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return ERR("create %s: %s", path, strerror(errno));
	int rc = ftruncate(fd, (off_t)bytes);
	int e = errno;
	close(fd);
	if (rc < 0) {
		unlink(path);
		return ERR("size %s: %s", path, strerror(e));
	}
	if (run_mkfs(path, fill_dir, err, errlen) < 0) {
		unlink(path);
		return -1;
	}
	return 0;
}

void disk_templates_remove(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t n = strlen(e->d_name);
		if (strncmp(e->d_name, ".disk-", 6) == 0 && n > 10 && strcmp(e->d_name + n - 4, ".img") == 0)
			unlinkat(dirfd(d), e->d_name, 0);
	}
	closedir(d);
}

/* One piece: copy_file_range, or sendfile where the two files are on
 * different file systems (an export's cut into memory).  Bytes copied,
 * or -1 with errno. */
static ssize_t copy_piece(int in, off_t *a, int out, off_t *b, size_t piece)
{
	ssize_t n = copy_file_range(in, a, out, b, piece, 0);
	if (n >= 0 || errno != EXDEV)
		return n;
	if (lseek(out, *b, SEEK_SET) < 0 || (n = sendfile(out, in, a, piece)) <= 0)
		return n;
	*b += n;
	return n;
}

/* Copy only the allocated extents: an empty 1G ext4 has well under 1 MiB.
 * In pieces of COPY_PIECE, each one's writeback started as the next is
 * copied (sync_file_range): a caller that then syncs the copy (a spare, a
 * snapshot) waits for the last pieces only. */
#define COPY_PIECE (16u << 20)
static int sparse_copy(int in, int out, uint64_t bytes)
{
	off_t data = 0;
	for (;;) {
		data = lseek(in, data, SEEK_DATA);
		if (data < 0)
			return errno == ENXIO ? ftruncate(out, (off_t)bytes) : -1;
		off_t hole = lseek(in, data, SEEK_HOLE);
		if (hole < 0)
			return -1;
		off_t a = data, b = data;
		while (a < hole) {
			off_t from = b;
			size_t piece = hole - a < COPY_PIECE ? (size_t)(hole - a) : COPY_PIECE;
			ssize_t n = copy_piece(in, &a, out, &b, piece);
			if (n <= 0)
				return -1;
			sync_file_range(out, from, n, SYNC_FILE_RANGE_WRITE);
		}
		data = hole;
	}
}

int disk_image_clone(int in, int out, uint64_t bytes, bool *reflinked)
{
	bool shared = ioctl(out, FICLONE, in) == 0;
	if (reflinked)
		*reflinked = shared;
	return shared ? 0 : sparse_copy(in, out, bytes);
}

int disk_image_create(const char *path, const char *tpl, uint64_t bytes, char *err, size_t errlen)
{
	int in = open(tpl, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return ERR("open %s: %s", tpl, strerror(errno));
	int out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0) {
		close(in);
		return ERR("create %s: %s", path, strerror(errno));
	}
	int rc = disk_image_clone(in, out, bytes, NULL);
	int e = errno;
	close(in);
	if (close(out) < 0 && rc == 0) {
		rc = -1;
		e = errno;
	}
	if (rc < 0) {
		unlink(path);
		return ERR("copy %s to %s: %s", tpl, path, strerror(e));
	}
	return 0;
}

int disk_image_spare_make(const char *spare, const char *tpl, uint64_t bytes)
{
	char tmp[PATH_MAX], err[256];
	size_t n = strlen(spare);
	/* still .disk-*.img, so that a template change sweeps a leftover */
	if (n < 4 || snprintf(tmp, sizeof(tmp), "%.*s-%d.img", (int)(n - 4), spare, (int)getpid()) >= (int)sizeof(tmp))
		return -1;
	unlink(tmp);
	if (disk_image_create(tmp, tpl, bytes, err, sizeof(err)) < 0)
		return -1;
	int fd = open(tmp, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fdatasync(fd) < 0 || rename(tmp, spare) < 0) {
		if (fd >= 0)
			close(fd);
		unlink(tmp);
		return -1;
	}
	close(fd);
	return 0;
}

static int loop_attach(int img_fd, bool direct, char *dev, size_t devlen, char *err, size_t errlen)
{
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return ERR("open /dev/loop-control: %s", strerror(errno));
	/* Another process may take the free device between GET_FREE and
	 * CONFIGURE: then ask again. */
	for (int attempt = 0; attempt < 16; attempt++) {
		int n = ioctl(ctl, LOOP_CTL_GET_FREE);
		if (n < 0) {
			close(ctl);
			return ERR("find a free loop device: %s", strerror(errno));
		}
		snprintf(dev, devlen, "/dev/loop%d", n);
		int fd = open(dev, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			continue;
		struct loop_config cfg = { 0 };
		cfg.fd = (unsigned)img_fd;
		cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | (direct ? LO_FLAGS_DIRECT_IO : 0);
		int rc = ioctl(fd, LOOP_CONFIGURE, &cfg);
		if (rc < 0 && errno == EINVAL && direct) {
			/* a file system that takes no direct I/O: buffered */
			cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
			rc = ioctl(fd, LOOP_CONFIGURE, &cfg);
		}
		if (rc == 0) {
			close(ctl);
			return fd;
		}
		int e = errno;
		close(fd);
		if (e != EBUSY) {
			close(ctl);
			return ERR("configure %s: %s", dev, strerror(e));
		}
	}
	close(ctl);
	return ERR("no free loop device");
}

int disk_image_attach(const char *path, char *dev, size_t devlen, char *err, size_t errlen)
{
	int img = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (img < 0)
		return ERR("open %s: %s", path, strerror(errno));
	/* direct I/O: the room's ext4 caches its blocks in the room's own page
	 * cache; a buffered device would keep a second copy of every block it
	 * reads or writes in the host's cache of the image file */
	int loop = loop_attach(img, true, dev, devlen, err, errlen);
	close(img);
	return loop;
}

int disk_image_attach_fd(int img, bool direct, char *dev, size_t devlen, char *err, size_t errlen)
{
	return loop_attach(img, direct, dev, devlen, err, errlen);
}

/* Is /dev/loop<n> bound to img (to anything: NULL)?  From sysfs: opening
 * the device would itself keep it from being removed. */
static bool loop_bound_to(unsigned n, const char *img)
{
	char path[64], backing[PATH_MAX + 2];
	snprintf(path, sizeof(path), "/sys/block/loop%u/loop/backing_file", n);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	ssize_t k = read(fd, backing, sizeof(backing) - 1);
	close(fd);
	if (k <= 0)
		return false;
	backing[k] = '\0';
	backing[strcspn(backing, "\n")] = '\0';
	return !img || strcmp(backing, img) == 0;
}

/* This device, n, is kept as the host's spare: any unbound one above it
 * was kept as the spare while n was bound (devices freed out of order, the
 * higher first) and is no one's next device any more, so it goes.  The
 * kernel refuses one that someone opened meanwhile to bind it (EBUSY), and
 * a start that opens one removed meanwhile asks for another (loop_attach). */
static void spares_above(int ctl, unsigned n)
{
	DIR *d = opendir("/sys/block");
	struct dirent *de;
	unsigned k;
	char tail;

	if (!d)
		return;
	while ((de = readdir(d)) != NULL)
		if (sscanf(de->d_name, "loop%u%c", &k, &tail) == 1 && k > n && !loop_bound_to(k, NULL))
			ioctl(ctl, LOOP_CTL_REMOVE, k);
	closedir(d);
}

void disk_loop_remove(const char *dev, const char *img)
{
	unsigned n;
	char tail;
	if (sscanf(dev, "/dev/loop%u%c", &n, &tail) != 1)
		return;
	for (int i = 0; img && i < 10 && loop_bound_to(n, img); i++) {
		struct timespec ts = { 0, 5 * 1000 * 1000 };
		nanosleep(&ts, NULL);
	}
	/* Bound still (a release later than the wait, or another room's
	 * already): the kernel would refuse its removal, and LOOP_CTL_GET_FREE
	 * below would make a new device when no other is free, left behind
	 * too. */
	if (loop_bound_to(n, NULL))
		return;
	int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
	if (ctl < 0)
		return;
	/* The lowest free device is the one the next start takes
	 * (LOOP_CTL_GET_FREE): kept as the host's spare when it is this one,
	 * which spares that start a new device and this stop the removal
	 * (tens of ms: the kernel waits out RCU grace periods). */
	int lowest = ioctl(ctl, LOOP_CTL_GET_FREE);
	if (lowest >= 0 && (unsigned)lowest != n)
		ioctl(ctl, LOOP_CTL_REMOVE, n);
	else if (lowest >= 0)
		spares_above(ctl, n);
	close(ctl);
}

int disk_image_fsmount(const char *dev, char *err, size_t errlen)
{
	int fs = (int)syscall(SYS_fsopen, "ext4", FSOPEN_CLOEXEC);
	if (fs < 0)
		return ERR("fsopen ext4: %s", strerror(errno));
	/* noinit_itable: the image is a sparse copy of a template made by
	 * mkfs, so the inode tables mkfs left uninitialised already read as
	 * zeros; without it every new room's mount queues ext4lazyinit to zero
	 * them again (background writes and buffers for each room created) */
	int mnt = -1;
	if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "source", dev, 0) == 0 &&
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "errors", "remount-ro", 0) == 0 &&
	    syscall(SYS_fsconfig, fs, FSCONFIG_SET_FLAG, "noinit_itable", NULL, 0) == 0 &&
	    syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
		mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
				   MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOATIME);
	int e = errno;
	close(fs);
	if (mnt < 0)
		return ERR("mount %s: %s", dev, strerror(e));
	return mnt;
}

int disk_image_extend(const char *path, uint64_t bytes, char *err, size_t errlen)
{
	struct stat st;
	int fd = open(path, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return ERR("open %s: %s", path, strerror(errno));
	int rc = 0;
	if (fstat(fd, &st) < 0)
		rc = ERR("stat %s: %s", path, strerror(errno));
	else if ((uint64_t)st.st_size < bytes)
		rc = ftruncate(fd, (off_t)bytes) < 0 ? ERR("grow %s: %s", path, strerror(errno)) : 1;
	close(fd);
	return rc;
}

/* argv[0] run on the image, its output thrown away: 0 when its exit
 * status is at most ok_max, else -1 (err set). */
static int run_tool(char *const argv[], int ok_max, char *err, size_t errlen)
{
	char *envp[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C", NULL };
	posix_spawn_file_actions_t fa;
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
	posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
	pid_t pid;
	int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	if (rc != 0)
		return ERR("run %s: %s", argv[0], strerror(rc));
	int status;
	if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) > ok_max)
		return ERR("%s failed", argv[0]);
	return 0;
}

int disk_image_grow_fs(const char *path, char *err, size_t errlen)
{
	/* resize2fs wants a checked file system; e2fsck -p mends only what
	 * is safe without asking (1: it did) */
	char *check[] = { "e2fsck", "-f", "-p", (char *)path, NULL };
	char *grow[] = { "resize2fs", (char *)path, NULL };
	if (run_tool(check, 1, err, errlen) < 0 || run_tool(grow, 0, err, errlen) < 0)
		return -1;
	return 0;
}
