/* The jail of a room.
 *
 * jail_start runs two lanes side by side.  A jail thread makes the room's
 * cgroup and its user namespace (userns.c: the room's ids 0-65535 on host
 * ids of that room alone), and clones the keeper into new mount, uts, ipc,
 * net and pid namespaces -- owned by the host's user namespace, so no
 * capability of the room ever reaches them.  The keeper is PID 1 of its pid
 * namespace; it shares the helper's memory (and borrows the jail thread's
 * thread area, the thread waiting meanwhile) until it execs roombox-keeper:
 * no page table is copied and no page is copied on write, which on a VM
 * without nested paging was most of a start.  The keeper keeps only its own
 * descriptors, tells the helper its pid, enters the room's cgroup and
 * unshares a cgroup namespace rooted there.  Still host root, it builds the
 * room's root in its private mount namespace: on a scratch tmpfs, idmapped
 * clones of the lower trees (host id N shows as room id N, so the host's
 * files appear owned by the room's root) and of the mask that hides, above
 * the host's, what only its owner or group may read there (hostmask.h);
 * then the room's disk (mounted by
 * the helper, below), moved in and cloned idmapped too (the disk keeps
 * room-relative ids), overlays of them, a fresh /proc, a minimal /dev; it
 * pivots into the root, writes /etc/resolv.conf when network = egress,
 * enters the room's user namespace as its root, and execs roombox-keeper,
 * which reports "ok" on a pipe (the failing step if a step before it
 * failed) and then serves the room's execs and reaps its orphans until it
 * is killed (keeper/keeper.c).  No mount is ever made in the host's
 * namespace, so when the keeper dies the kernel releases every mount of the
 * room with it.
 *
 * Meanwhile the helper does what needs no namespace of the room's: for a
 * new room its state directory and disk image (room.h: meta last, once the
 * keeper is there); the disk image on a loop device, mounted with fsmount
 * and attached nowhere (the mount goes to the keeper over a socket); and,
 * once the keeper's pid is known, the room's network (net.c: eth0 into the
 * keeper's namespace) and its record.  For a new room, a thread makes the
 * next new room's disk image (disk.h: a spare) from the moment this one
 * took the spare until the helper's call ends.  A start costs the longer
 * of the lanes, not their sum.
 *
 * The lower tree for rootfs = host is <run_dir>/base-3: symlinks or overlay
 * mount points for /usr, /bin, /lib*, /sbin and /var/lib/dpkg as on the
 * host, and an /etc made from an allowlist of host files (with apt's and
 * dpkg's, so the room's apt knows the host's sources and its dpkg the host's
 * installed packages).  It lives on the run directory (tmpfs), so
 * it is rebuilt after each boot, from whatever the host then has; so is
 * the mask, and whenever its key says the host's trees changed.
 */
#include "errbuf.h"
#include "fdpass.h"
#include "hostmask.h"
#include "jail.h"
#include "roomid.h"
#include "disk.h"
#include "net.h"
#include "room_filter.h"
#include "userns.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <grp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <linux/mount.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#define ERR(...) errorf(err, errlen, __VA_ARGS__)

/* The keeper's stack until its execve: building the root goes a few
 * PATH_MAX buffers deep; pages are only made as it touches them. */
#define KEEPER_STACK (256 * 1024)
#define GUARD_PAGE 4096

/* Host top-level directories that make up the system of rootfs = host. */
static const char *const host_dirs[] = { "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
#define N_HOST_DIRS (sizeof(host_dirs) / sizeof(host_dirs[0]))

/* Host directories each overlaid at the same place in a room with rootfs =
 * host, and the name of their upper and work directories on the room's
 * disk (and of their part of the mask, hostmask.h): the system directories
 * above, and dpkg's database, so the room's dpkg starts from the host's
 * installed packages and records its own. */
static const struct hostmask_tree host_layers[] = {
	{ "usr", "usr" }, { "bin", "bin" }, { "sbin", "sbin" }, { "lib", "lib" },
	{ "lib32", "lib32" }, { "lib64", "lib64" }, { "libx32", "libx32" },
	{ "var/lib/dpkg", "var-lib-dpkg" },
};
#define N_HOST_LAYERS (sizeof(host_layers) / sizeof(host_layers[0]))

/* Host /etc entries a room may see: nothing secret, nothing of roombox. */
static const char *const etc_allow[] = {
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "nsswitch.conf",
	"localtime", "timezone", "profile", "profile.d", "bash.bashrc", "inputrc",
	"mime.types", "protocols", "services", "debian_version", "os-release",
	"ssl", "ca-certificates", "ca-certificates.conf", "python3", "python3.11",
	"perl", "environment", "shells", "magic", "magic.mime", "gai.conf",
	"host.conf", "issue", "manpath.config", "vim", "wgetrc", "gitconfig",
	"locale.alias", "locale.gen", "mke2fs.conf",
	/* apt's sources and settings, dpkg's settings (readable files only:
	 * apt's auth.conf.d is root's alone and stays out) */
	"apt", "dpkg", "debconf.conf", "ucf.conf", "login.defs", "skel", "adduser.conf",
};

/* ---- the lower tree for rootfs = host ---------------------------------- */

static int copy_entry(const char *src, const char *dst);

static int copy_file(const char *src, const char *dst, mode_t mode)
{
	int in = open(src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (in < 0)
		return -1;
	int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode & 0755);
	if (out < 0) {
		close(in);
		return -1;
	}
	char buf[65536];
	ssize_t n;
	int rc = 0;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n) {
			rc = -1;
			break;
		}
	if (n < 0)
		rc = -1;
	close(in);
	close(out);
	return rc;
}

static int copy_dir(const char *src, const char *dst)
{
	if (mkdir(dst, 0755) < 0 && errno != EEXIST)
		return -1;
	DIR *d = opendir(src);
	if (!d)
		return -1;
	struct dirent *e;
	char a[PATH_MAX], b[PATH_MAX];
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(a, sizeof(a), "%s/%s", src, e->d_name);
		snprintf(b, sizeof(b), "%s/%s", dst, e->d_name);
		copy_entry(a, b);  /* best effort: an unreadable file is skipped */
	}
	closedir(d);
	return 0;
}

/* Copy a file, a symlink (as a symlink) or a directory tree; only files
 * readable by everyone, so a host file meant for root alone never leaks. */
static int copy_entry(const char *src, const char *dst)
{
	struct stat st;
	if (lstat(src, &st) < 0)
		return -1;
	if (S_ISLNK(st.st_mode)) {
		char target[PATH_MAX];
		ssize_t n = readlink(src, target, sizeof(target) - 1);
		if (n < 0)
			return -1;
		target[n] = '\0';
		return symlink(target, dst);
	}
	if (S_ISDIR(st.st_mode))
		return (st.st_mode & S_IROTH) ? copy_dir(src, dst) : 0;
	if (S_ISREG(st.st_mode) && (st.st_mode & S_IROTH))
		return copy_file(src, dst, st.st_mode);
	return 0;
}

/* The host's device nodes a room has, bound one by one into its /dev. */
static const char *const dev_nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
#define N_DEV_NODES (sizeof(dev_nodes) / sizeof(dev_nodes[0]))
static int dev_entries(const char *dir);

static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -1;
	size_t len = strlen(text);
	int rc = write(fd, text, len) == (ssize_t)len ? 0 : -1;
	close(fd);
	return rc;
}

static int build_base_tree(const char *dir)
{
	static const char *const dirs[] = { "etc", "proc", "dev", "tmp", "home", "root",
		"run", "var", "var/tmp", "workspace", "mnt", "opt", "srv", "media", "sys",
		/* where apt and dpkg keep their state, logs and downloads */
		"var/lib", "var/lib/dpkg", "var/lib/apt", "var/lib/apt/lists",
		"var/lib/apt/lists/partial", "var/cache", "var/cache/apt",
		"var/cache/apt/archives", "var/cache/apt/archives/partial",
		"var/cache/debconf", "var/log", "var/log/apt" };
	char p[PATH_MAX], h[PATH_MAX];

	if (mkdir(dir, 0755) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, dirs[i]);
		if (mkdir(p, 0755) < 0)
			return -1;
	}
	snprintf(p, sizeof(p), "%s/tmp", dir);
	chmod(p, 01777);
	snprintf(p, sizeof(p), "%s/var/tmp", dir);
	chmod(p, 01777);
	snprintf(p, sizeof(p), "%s/root", dir);
	chmod(p, 0700);
	snprintf(p, sizeof(p), "%s/dev", dir);
	if (dev_entries(p) < 0)
		return -1;
	for (size_t i = 0; i < N_HOST_DIRS; i++) {
		struct stat st;
		snprintf(h, sizeof(h), "/%s", host_dirs[i]);
		snprintf(p, sizeof(p), "%s/%s", dir, host_dirs[i]);
		if (lstat(h, &st) < 0)
			continue;
		if (S_ISLNK(st.st_mode)) {
			if (copy_entry(h, p) < 0)
				return -1;
		} else if (S_ISDIR(st.st_mode) && mkdir(p, 0755) < 0) {
			return -1;
		}
	}
	for (size_t i = 0; i < sizeof(etc_allow) / sizeof(etc_allow[0]); i++) {
		snprintf(h, sizeof(h), "/etc/%s", etc_allow[i]);
		snprintf(p, sizeof(p), "%s/etc/%s", dir, etc_allow[i]);
		copy_entry(h, p);
	}
	snprintf(p, sizeof(p), "%s/etc/hosts", dir);
	if (write_text(p, "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n") < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/etc/resolv.conf", dir);
	write_text(p, "# network = none: no name servers\n");
	snprintf(p, sizeof(p), "%s/etc/passwd", dir);
	write_text(p, "root:x:0:0:root:/root:/usr/sbin/nologin\n");
	snprintf(p, sizeof(p), "%s/etc/group", dir);
	write_text(p, "root:x:0:\n");
	return 0;
}

/* Build <run_dir>/base once per boot: into a temporary name, then rename,
 * so a concurrent helper sees either nothing or the whole tree. */
static int base_prepare(const struct config *cfg, char *base, size_t baselen,
			char *err, size_t errlen)
{
	struct stat st;
	/* -3: the tree of this version (apt's and dpkg's places, /dev's
	 * entries); one made by an earlier version, if any, stays until the
	 * next boot */
	snprintf(base, baselen, "%s/base-3", cfg->run_dir);
	if (lstat(base, &st) == 0) {
		if (!S_ISDIR(st.st_mode) || st.st_uid != 0)
			return ERR("%s: not a root-owned directory (refusing)", base);
		return 0;
	}
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s/.base.%d", cfg->run_dir, (int)getpid());
	if (build_base_tree(tmp) < 0)
		return ERR("build %s: %s", tmp, strerror(errno));
	if (rename(tmp, base) < 0 && errno != ENOTEMPTY && errno != EEXIST)
		return ERR("rename %s: %s", base, strerror(errno));
	/* lost a race with another helper: its tree is as good as ours */
	return 0;
}

/* ---- inside the keeper ------------------------------------------------- */

/* Paths relative to the stage (the keeper's working directory while it
 * mounts them): overlay shows its options as given, in the room's
 * /proc/self/mountinfo too, and they name nothing of the host's layout. */
static int mount_overlay(const char *lower, const char *upper, const char *work,
			 const char *target)
{
	char opts[3 * PATH_MAX + 64];
	if (mkdir(upper, 0755) < 0 && errno != EEXIST)
		return -1;
	if (mkdir(work, 0700) < 0 && errno != EEXIST)
		return -1;
	int n = snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work);
	if (n >= (int)sizeof(opts)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return mount("overlay", target, "overlay", MS_NOSUID | MS_NODEV, opts);
}

/* The mount point of each (an empty file), then pts/ and shm/, then the
 * symlinks: what a room's /dev holds, in dir. */
static int dev_entries(const char *dir)
{
	static const char *const links[][2] = { { "pts/ptmx", "ptmx" }, { "/proc/self/fd", "fd" },
		{ "/proc/self/fd/0", "stdin" }, { "/proc/self/fd/1", "stdout" }, { "/proc/self/fd/2", "stderr" } };
	char p[PATH_MAX];

	for (size_t i = 0; i < N_DEV_NODES; i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, dev_nodes[i]);
		int fd = open(p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd < 0)
			return -1;
		close(fd);
	}
	snprintf(p, sizeof(p), "%s/pts", dir);
	if (mkdir(p, 0755) < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/shm", dir);
	if (mkdir(p, 01777) < 0)
		return -1;
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", dir, links[i][1]);
		if (symlink(links[i][0], p) < 0)
			return -1;
	}
	return 0;
}

static int bind_dev(const char *root, const char *name)
{
	char src[64], dst[PATH_MAX];
	snprintf(src, sizeof(src), "/dev/%s", name);
	snprintf(dst, sizeof(dst), "%s/dev/%s", root, name);
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		return -1;
	return mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC, NULL);
}

/* /dev: the nodes below are bind mounts, each with its own flags (so the
 * directory itself is nodev), devpts and a tmpfs for shm.  With rootfs =
 * host the overlay's own dev/ is bound onto itself read-only: the
 * generated lower root's dev/ holds the mount points and the symlinks
 * already (build_base_tree), and nothing of the room ever reached the
 * overlay's dev/, always covered.  A tmpfs of its own would be one more
 * superblock per room, and each costs every memory cgroup a shrinker slot
 * (setup_sys).
 * A prepared rootfs gets a small tmpfs, filled here. */
static int setup_dev(const char *root, bool host)
{
	char p[PATH_MAX];

	snprintf(p, sizeof(p), "%s/dev", root);
	if (host) {
		if (mount(p, p, NULL, MS_BIND, NULL) < 0 ||
		    mount(NULL, p, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			  NULL) < 0)
			return -1;
	} else if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64") < 0 ||
		   dev_entries(p) < 0) {
		return -1;
	}
	for (size_t i = 0; i < N_DEV_NODES; i++)
		if (bind_dev(root, dev_nodes[i]) < 0)
			return -1;
	snprintf(p, sizeof(p), "%s/dev/pts", root);
	if (mount("devpts", p, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/dev/shm", root);
	if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m") < 0)
		return -1;
	if (host)
		return 0;
	snprintf(p, sizeof(p), "%s/dev", root);
	return mount(NULL, p, NULL, MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY,
		     "mode=0755,size=64k,nr_inodes=64");
}

static int setup_proc(const char *root)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/proc", root);
	if (mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=0") < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/proc/sys", root);
	if (mount(p, p, NULL, MS_BIND, NULL) < 0)
		return -1;
	return mount(NULL, p, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

/* /sys stays empty and read-only even for the room's root (which owns the
 * bare directory of the lower tree).  With rootfs = host it is bound onto
 * itself read-only: the generated lower root's sys/ is empty, and nothing
 * of the room ever reached the overlay's sys/, always covered.  Not a file
 * system of its own: every superblock costs each memory cgroup on the host
 * a slot in its shrinker map (cgroup.c), so a room's superblocks cost
 * memory in proportion to the rooms running.  (Nor a bind of the lower
 * tree's directory: the room's mount table would show its host path.)  A
 * prepared rootfs may have anything in its /sys: an empty read-only tmpfs
 * covers that. */
static int setup_sys(const char *root, bool host)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof(p), "%s/sys", root);
	if (lstat(p, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	if (!host)
		return mount("tmpfs", p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
			     "mode=0555,size=4k,nr_inodes=1");
	if (mount(p, p, NULL, MS_BIND, NULL) < 0)
		return -1;
	return mount(NULL, p, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL);
}

static int loopback_up(void)
{
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	struct ifreq ifr = { 0 };
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "lo");
	int rc = ioctl(s, SIOCGIFFLAGS, &ifr);
	if (rc == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		rc = ioctl(s, SIOCSIFFLAGS, &ifr);
	}
	close(s);
	return rc;
}

static int sysctl_write(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t len = strlen(text);
	int rc = write(fd, text, len) == (ssize_t)len ? 0 : -1;
	int e = errno;
	close(fd);
	errno = e;
	return rc;
}

/* Binding ports below 1024 needs CAP_NET_BIND_SERVICE over the room's
 * network namespace, which the host's user namespace owns: as Docker does,
 * the room's namespace lets every port be bound, and ping use ICMP sockets
 * (the room's host gids).  Written through the host's /proc/sys, which
 * shows the writer's network namespace. */
static int room_net_sysctls(const struct room *r)
{
	char range[64];
	snprintf(range, sizeof(range), "%u %u", (unsigned)room_host_id(r, 0),
		 (unsigned)room_host_id(r, ROOM_ID_COUNT - 1));
	if (sysctl_write("/proc/sys/net/ipv4/ip_unprivileged_port_start", "0\n") < 0)
		return -1;
	/* ping_group_range: only where the kernel has it */
	if (sysctl_write("/proc/sys/net/ipv4/ping_group_range", range) < 0 && errno != ENOENT)
		return -1;
	return 0;
}

static size_t read_all(int fd, char *buf, size_t max)
{
	size_t n = 0;
	ssize_t k;
	while (n < max && ((k = read(fd, buf + n, max - n)) > 0 || (k < 0 && errno == EINTR)))
		if (k > 0)
			n += (size_t)k;
	return n;
}

/* The room's disk: mounted (or a plain directory), its skeleton made, and
 * a room of the previous version converted to room-relative ids (once).
 * The helper mounts the image while this process is being made, attached
 * nowhere, and sends the mount on disk_sock ("m"; "-": no image). */
static int keeper_disk(const struct room *r, int disk_sock, char *err, size_t errlen)
{
	char disk[PATH_MAX];
	int mnt;
	char c = fd_recv_byte(disk_sock, &mnt);
	close(disk_sock);
	if (c != '-' && (c != 'm' || mnt < 0)) {
		if (mnt >= 0)
			close(mnt);
		return ERR("room %s: its disk: the helper sent no mount", r->id);
	}
	snprintf(disk, sizeof(disk), "%s/disk", r->state);
	/* a room made while disk_limit was 0 has no image: its layer is a
	 * plain directory */
	if (c == 'm') {
		int rc = (int)syscall(SYS_move_mount, mnt, "", AT_FDCWD, disk, MOVE_MOUNT_F_EMPTY_PATH);
		int e = errno;
		close(mnt);
		if (rc < 0)
			return ERR("room %s: place its disk: %s", r->id, strerror(e));
	}
	if (room_upper_prepare(r, err, errlen) < 0)
		return -1;
	if (!r->ids_room && (userns_migrate_upper(r, err, errlen) < 0 ||
			     room_meta_mark_ids(r, err, errlen) < 0))
		return -1;
	return 0;
}

/* On the scratch tmpfs <stage>: lower/<name> idmapped clones of the lower
 * trees and, over the host's, mask/ (hostmask.h); the room's disk joins
 * them once the helper has sent it. */
static int stage_lower(const struct room *r, const char *stage, const struct jail_lower *lower,
		       int userns, char *err, size_t errlen)
{
	const char *base = lower->base;
	const struct config *cfg = r->cfg;
	char p[PATH_MAX], h[PATH_MAX];
	bool host = strcmp(cfg->rootfs, "host") == 0;

	if (mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k") < 0)
		return ERR("room %s: mount scratch tmpfs on %s: %s", r->id, stage, strerror(errno));
	snprintf(p, sizeof(p), "%s/lower", stage);
	if (mkdir(p, 0755) < 0)
		return ERR("room %s: mkdir %s: %s", r->id, p, strerror(errno));
	snprintf(p, sizeof(p), "%s/lower/root", stage);
	if (idmap_bind(host ? base : cfg->rootfs, p, userns) < 0)
		return ERR("room %s: idmapped mount of %s: %s", r->id, host ? base : cfg->rootfs, strerror(errno));
	for (size_t i = 0; host && i < N_HOST_LAYERS; i++) {
		struct stat st;
		snprintf(h, sizeof(h), "/%s", host_layers[i].path);
		if (lstat(h, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		snprintf(p, sizeof(p), "%s/lower/%s", stage, host_layers[i].name);
		if (idmap_bind(h, p, userns) < 0)
			return ERR("room %s: idmapped mount of %s: %s", r->id, h, strerror(errno));
	}
	snprintf(p, sizeof(p), "%s/mask", stage);
	if (host && idmap_bind(lower->mask, p, userns) < 0)
		return ERR("room %s: idmapped mount of the mask %s: %s", r->id, lower->mask, strerror(errno));
	return 0;
}

/* The overlays, with the room root's ids as fsuid (userns.h), from the
 * stage as working directory: the root on root/, and each host layer in
 * it, its mask above it. */
static int mount_overlays(const struct room *r, const char *stage, char *err, size_t errlen)
{
	char lo[2 * PATH_MAX], up[PATH_MAX], wk[PATH_MAX], p[PATH_MAX];
	bool host = strcmp(r->cfg->rootfs, "host") == 0;

	if (chdir(stage) < 0)
		return ERR("room %s: chdir %s: %s", r->id, stage, strerror(errno));
	if (mkdir("root", 0755) < 0 || mount_overlay("lower/root", "disk/upper/root", "disk/work/root", "root") < 0)
		return ERR("room %s: mount overlay root: %s", r->id, strerror(errno));
	for (size_t i = 0; host && i < N_HOST_LAYERS; i++) {
		struct stat st;
		const char *name = host_layers[i].name;
		snprintf(p, sizeof(p), "lower/%s", name);
		if (lstat(p, &st) < 0)
			continue;
		snprintf(lo, sizeof(lo), "mask/%s:lower/%s", name, name);
		snprintf(up, sizeof(up), "disk/upper/%s", name);
		snprintf(wk, sizeof(wk), "disk/work/%s", name);
		snprintf(p, sizeof(p), "root/%s", host_layers[i].path);
		if (mount_overlay(lo, up, wk, p) < 0)
			return ERR("room %s: mount overlay /%s: %s", r->id, host_layers[i].path, strerror(errno));
	}
	/* mount points a prepared rootfs may lack, made as the room's root */
	mkdir("root/proc", 0555);
	mkdir("root/dev", 0755);
	return 0;
}

/* Build the root in <run_dir>/mnt/root (private to this mount namespace).
 * What needs no disk comes first: the helper mounts it meanwhile. */
static int keeper_build_root(const struct room *r, const struct jail_lower *lower, int userns,
			     int disk_sock, char *err, size_t errlen)
{
	char stage[PATH_MAX], root[PATH_MAX], p[PATH_MAX], h[PATH_MAX];

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return ERR("room %s: make / private: %s", r->id, strerror(errno));
	if (room_net_sysctls(r) < 0)
		return ERR("room %s: network sysctls: %s", r->id, strerror(errno));
	char host_name[65];
	room_sandbox_name(r->id, host_name, sizeof(host_name));
	if (sethostname(host_name, strlen(host_name)) < 0)
		return ERR("room %s: sethostname: %s", r->id, strerror(errno));
	if (loopback_up() < 0)
		return ERR("room %s: bring up lo: %s", r->id, strerror(errno));
	snprintf(stage, sizeof(stage), "%s/mnt", r->cfg->run_dir);
	snprintf(root, sizeof(root), "%s/root", stage);
	if (stage_lower(r, stage, lower, userns, err, errlen) < 0)
		return -1;
	if (keeper_disk(r, disk_sock, err, errlen) < 0)
		return -1;
	snprintf(h, sizeof(h), "%s/disk", r->state);
	snprintf(p, sizeof(p), "%s/disk", stage);
	if (idmap_bind(h, p, userns) < 0)
		return ERR("room %s: idmapped mount of its disk %s: %s", r->id, h, strerror(errno));
	if (overlay_creds(r, true) < 0)
		return ERR("room %s: take the room root's ids: %s", r->id, strerror(errno));
	int rc = mount_overlays(r, stage, err, errlen);
	if (overlay_creds(r, false) < 0 && rc == 0)
		rc = ERR("room %s: take back host root's ids: %s", r->id, strerror(errno));
	if (rc < 0)
		return -1;
	if (setup_proc(root) < 0)
		return ERR("room %s: mount /proc: %s", r->id, strerror(errno));
	if (setup_dev(root, strcmp(r->cfg->rootfs, "host") == 0) < 0)
		return ERR("room %s: build /dev: %s", r->id, strerror(errno));
	if (setup_sys(root, strcmp(r->cfg->rootfs, "host") == 0) < 0)
		return ERR("room %s: cover /sys: %s", r->id, strerror(errno));
	if (chdir(root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return ERR("room %s: pivot_root: %s", r->id, strerror(errno));
	return net_keeper_setup(r, err, errlen);
}

/* Last step on the host's side.  The audit login uid is cleared first (it
 * takes CAP_AUDIT_CONTROL, which the room never has), so that each exec's
 * child may set it once, without privilege, and then nothing in the room
 * can change it; without audit there is nothing to clear.  Then the keeper
 * becomes the root of the room's user namespace: capabilities over that
 * namespace only, host ids of the room's range. */
static int enter_userns(const struct room *r, int userns, char *err, size_t errlen)
{
	/* read first: a write costs an audit record (milliseconds), and the
	 * service's is usually unset already */
	char now[16] = "";
	int fd = open("/proc/self/loginuid", O_RDWR | O_CLOEXEC);
	if (fd >= 0 && read(fd, now, sizeof(now) - 1) > 0 && strcmp(now, "4294967295") == 0) {
		close(fd);
		fd = -1;
	}
	if (fd >= 0) {
		if (pwrite(fd, "4294967295", 10, 0) != 10 && errno != EPERM) {
			int e = errno;
			close(fd);
			return ERR("room %s: clear audit login uid: %s", r->id, strerror(e));
		}
		close(fd);
	}
	if (setns(userns, CLONE_NEWUSER) < 0)
		return ERR("room %s: enter its user namespace: %s", r->id, strerror(errno));
	/* raw calls: this is the keeper's clone, in the helper's memory, and
	 * libc's set*id() would change the ids of every thread it knows of:
	 * the helper's */
	if (syscall(SYS_setgroups, 0, NULL) < 0 || syscall(SYS_setresgid, 0, 0, 0) < 0 ||
	    syscall(SYS_setresuid, 0, 0, 0) < 0)
		return ERR("room %s: become the room's root: %s", r->id, strerror(errno));
	/* changing uid set the memory's dumpable mode to fs.suid_dumpable, and
	 * that memory is still the helper's: with 1, a process of the room
	 * root's host uid could trace it (none exists before the keeper runs;
	 * closed all the same, until the execve gives the keeper its own) */
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return ERR("room %s: not dumpable: %s", r->id, strerror(errno));
	return 0;
}

static void __attribute__((noreturn)) report_fail(int fd, const char *msg)
{
	if (write(fd, msg, strlen(msg)) < 0)
		_exit(3);
	_exit(2);
}

/* The exec socket, bound while the host's run directory is still visible;
 * its root-only directory keeps everyone but root from connecting. */
static int listen_exec_socket(const struct room *r, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", r->run) >= (int)sizeof(sa.sun_path))
		return ERR("room %s: socket path too long", r->id);
	unlink(sa.sun_path);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0)
		return ERR("room %s: exec socket: %s", r->id, strerror(errno));
	return fd;
}

/* Become the room's PID 1: exec roombox-keeper (opened before pivot_root)
 * with /dev/null, the report pipe (fd 3, where it says "ok"), the exec
 * socket (fd 4) and the seccomp filter (fd 5). */
static void __attribute__((noreturn))
keeper_main(const struct room *r, const struct jail_lower *lower, const int *keeper_fds, int userns,
	    int report_fd, int disk_sock)
{
	char err[512] = "";
	int sock = listen_exec_socket(r, err, sizeof(err));
	if (sock < 0 || keeper_build_root(r, lower, userns, disk_sock, err, sizeof(err)) < 0 ||
	    enter_userns(r, userns, err, sizeof(err)) < 0)
		report_fail(report_fd, err);
	close(userns);
	/* The helper's descriptors (its stdin/stdout pipes among them) must not
	 * stay open for the life of the room. */
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	int exe = fcntl(keeper_fds[0], F_DUPFD_CLOEXEC, 10);
	int filter = fcntl(keeper_fds[1], F_DUPFD_CLOEXEC, 10);
	int rep = fcntl(report_fd, F_DUPFD_CLOEXEC, 10);
	sock = fcntl(sock, F_DUPFD_CLOEXEC, 10);
	if (null < 0 || exe < 0 || filter < 0 || rep < 0 || sock < 0 ||
	    dup2(null, 0) < 0 || dup2(null, 1) < 0 || dup2(null, 2) < 0 ||
	    dup2(rep, 3) < 0 || dup2(sock, 4) < 0 || dup2(filter, 5) < 0 || dup2(exe, 6) < 0) {
		snprintf(err, sizeof(err), "room %s: keeper descriptors: %s", r->id, strerror(errno));
		report_fail(report_fd, err);
	}
	syscall(SYS_close_range, 7, ~0U, 0);
	fcntl(6, F_SETFD, FD_CLOEXEC);
	char *argv[] = { "roombox-keeper", NULL };
	char *envp[] = { NULL };
	syscall(SYS_execveat, 6, "", argv, envp, AT_EMPTY_PATH);
	snprintf(err, sizeof(err), "room %s: exec roombox-keeper: %s", r->id, strerror(errno));
	report_fail(3, err);
}

/* roombox-keeper sits beside this helper; a setuid program's own path comes
 * from the kernel, and the keeper must be root's and writable by root alone. */
int jail_keeper_exe_open(char *err, size_t errlen)
{
	char self[PATH_MAX], path[PATH_MAX + 32];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		return ERR("find own path: %s", strerror(errno));
	self[n] = '\0';
	char *slash = strrchr(self, '/');
	*slash = '\0';
	snprintf(path, sizeof(path), "%s/roombox-keeper", self);
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0)
		return ERR("open %s: %s", path, strerror(errno));
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022)) {
		close(fd);
		return ERR("%s: not a root-owned file writable by root alone (refusing)", path);
	}
	return fd;
}

/* A start's shared plan, in the helper's memory: read by the jail thread
 * and the keeper's clone. */
struct jail_job {
	struct room room;       /* a copy: the helper's own goes on changing */
	const struct cgroup_sys *cg;
	struct jail_lower lower;
	int keeper_fds[2];      /* the keeper binary, the seccomp filter */
	int lock;               /* the state lock of a room being created, or -1 */
	int pid_fd, report_fd, disk_sock;   /* the keeper's ends */
	int userns;
	pid_t keeper;           /* CLONE_PARENT_SETTID: its pid as the helper sees it */
};

/* Close every descriptor from 3 up but the n in keep. */
static void close_all_but(const int *keep, int n)
{
	int top = 2;
	for (int i = 0; i < n; i++)
		top = keep[i] > top ? keep[i] : top;
	for (int fd = 3; fd < top; fd++) {
		bool kept = false;
		for (int i = 0; i < n && !kept; i++)
			kept = keep[i] == fd;
		if (!kept)
			close(fd);
	}
	syscall(SYS_close_range, (unsigned)top + 1, ~0U, 0);
}

/* The keeper, from its clone to its execve.  Its descriptor table is a
 * copy of the helper's at the clone, with whatever the helper had open at
 * that moment: it keeps only its own (a copy of, say, the pipe on which
 * the helper's posix_spawn waits for mkfs's execve would hold the helper
 * there while this waits for the helper's disk), tells the helper
 * its pid (the helper sets up the room's network while this builds the
 * root), leaves the helper's session, enters the room's cgroup and makes a
 * cgroup namespace rooted there, and goes on as keeper_main. */
static int keeper_clone_main(void *arg)
{
	struct jail_job *j = arg;
	char err[512];
	int32_t pid = j->keeper;
	int keep[] = { j->pid_fd, j->report_fd, j->disk_sock, j->userns, j->keeper_fds[0], j->keeper_fds[1] };
	close_all_but(keep, 6);
	if (write(j->pid_fd, &pid, sizeof(pid)) != sizeof(pid))
		_exit(2);
	close(j->pid_fd);
	setsid();
	if (cgroup_enter(j->cg, j->room.id, 0, err, sizeof(err)) < 0)
		report_fail(j->report_fd, err);
	if (unshare(CLONE_NEWCGROUP) < 0) {
		snprintf(err, sizeof(err), "room %s: unshare the cgroup namespace: %s", j->room.id,
			 strerror(errno));
		report_fail(j->report_fd, err);
	}
	keeper_main(&j->room, &j->lower, j->keeper_fds, j->userns, j->report_fd, j->disk_sock);
}

/* The jail thread, beside the helper's disk work: the room's cgroup, its
 * user namespace, and the keeper, cloned into the room's new mount, uts,
 * ipc, net and pid namespaces (owned by the host's user namespace).  The
 * keeper shares the helper's memory until its execve, on a stack of its
 * own and with this thread's thread area, and this thread waits for that
 * (CLONE_VFORK): no page of the helper is copied.  A fork would copy the
 * page tables, and each page either side then touched would cost a fault
 * (on a VM without nested paging some 20 us each: most of a start).
 * Then it closes the keeper's ends (its own and the helper's: one table),
 * a failure before the keeper's first having been written on the report. */
static void *jail_thread(void *arg)
{
	struct jail_job *j = arg;
	struct room *r = &j->room;
	char err[512] = "";
	struct config_room_limits own = room_limits_effective(r);   /* PATCH'd, or the configuration's */
	struct cgroup_limits lim = { own.memory, own.pids, own.cpu };
	/* under the state lock: the last destroy may be removing the
	 * instance's cgroup directory now */
	int lock = j->lock >= 0 ? j->lock : room_state_lock(r->cfg);
	int rc = cgroup_room_setup(j->cg, r->id, &lim, err, sizeof(err));
	if (j->lock < 0 && lock >= 0)
		close(lock);
	if (rc == 0 && (j->userns = userns_make(r, err, sizeof(err))) < 0)
		rc = -1;
	char *stack = MAP_FAILED;
	if (rc == 0) {
		/* the lowest page a guard: an overflow faults, and writes
		 * nothing of the helper's */
		stack = mmap(NULL, KEEPER_STACK + GUARD_PAGE, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE, -1, 0);
		if (stack == MAP_FAILED || mprotect(stack, GUARD_PAGE, PROT_NONE) < 0 ||
		    clone(keeper_clone_main, stack + GUARD_PAGE + KEEPER_STACK,
			  CLONE_VM | CLONE_VFORK | CLONE_PARENT_SETTID | SIGCHLD |
			  (JAIL_NS_FLAGS & ~CLONE_NEWCGROUP), j, &j->keeper) < 0)
			rc = errorf(err, sizeof(err), "room %s: start keeper: %s", r->id, strerror(errno));
	}
	/* nothing written: the helper reports that the keeper died */
	if (rc < 0 && write(j->report_fd, err, strlen(err)) < 0)
		rc = -1;
	if (stack != MAP_FAILED)
		munmap(stack, KEEPER_STACK + GUARD_PAGE);
	if (j->userns >= 0)
		close(j->userns);
	close(j->keeper_fds[0]);
	close(j->keeper_fds[1]);
	close(j->pid_fd);
	close(j->report_fd);
	close(j->disk_sock);
	return NULL;
}

/* The next new room's disk image (disk.h: a spare) is made beside the rest
 * of a creation, by a thread from the moment this room took the spare to
 * the end of the helper's call (jail_spare_wait): 4-10 ms of copying and
 * syncing that the start used to wait for after the room's network.  The
 * thread touches only its own temporary file until its rename (disk.c),
 * and takes no signal (every one blocked): a signal meant for the main
 * thread, or held off by it (snapshot.c, around a freeze), never lands
 * here.  Without a thread, the caller makes it itself. */
static pthread_t spare_thread;
static bool spare_busy;

static void *spare_main(void *cfg)
{
	room_disk_spare_make(cfg);
	return NULL;
}

static void spare_start(const struct config *cfg)
{
	sigset_t all, was;
	if (spare_busy)
		return;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &was);
	spare_busy = pthread_create(&spare_thread, NULL, spare_main, (void *)cfg) == 0;
	pthread_sigmask(SIG_SETMASK, &was, NULL);
	if (!spare_busy)
		room_disk_spare_make(cfg);
}

void jail_spare_wait(void)
{
	if (spare_busy)
		pthread_join(spare_thread, NULL);
	spare_busy = false;
}

/* The helper's share of a start, while the jail thread makes the cgroup,
 * the user namespace and the keeper: a room being created gets its files,
 * and the disk image goes on a loop device and is mounted, attached
 * nowhere (then sent to the keeper on disk_sock).  -1 with err set, or -2
 * when the keeper is gone (its report says why). */
static int host_side(struct room *r, bool creating, int disk_sock, char *err, size_t errlen)
{
	if (creating && room_create_files(r, err, errlen) < 0)
		return -1;
	if (creating)
		spare_start(r->cfg);   /* the spare taken (or none found): the next */
	char img[PATH_MAX], dev[64], c = '-';
	int mnt = -1;
	struct stat st;
	snprintf(img, sizeof(img), "%s/disk.img", r->state);
	if (lstat(img, &st) == 0) {
		/* a disk limit raised since its last start (PATCH): the image
		 * grows now; a lower one leaves it as it is.  Only a regular
		 * file shorter than the limit is touched: anything else is for
		 * the attach below to refuse by name, and a start that grows
		 * nothing opens nothing more. */
		uint64_t want = room_limits_effective(r).disk;
		if (S_ISREG(st.st_mode) && (uint64_t)st.st_size < want) {
			int grown = disk_image_extend(img, want, err, errlen);
			if (grown < 0)
				return room_error_relative(r, "grow its disk image", err, errlen);
			/* (a failed resize leaves the file longer than its file
			 * system, which is harmless: the room keeps its old size) */
			if (grown && disk_image_grow_fs(img, err, errlen) < 0)
				return room_error_relative(r, "grow its disk image", err, errlen);
		}
		int loop = disk_image_attach(img, dev, sizeof(dev), err, errlen);
		if (loop < 0)
			return room_error_relative(r, "attach its disk image", err, errlen);
		room_loop_note(r, dev);   /* for a cut (snapshot.c) */
		mnt = disk_image_fsmount(dev, err, errlen);
		close(loop);   /* the mount holds it; without one it is freed */
		if (mnt < 0)
			return room_error_relative(r, "mount its disk image", err, errlen);
		c = 'm';
	}
	ssize_t sent = fds_send(disk_sock, &c, 1, &mnt, mnt >= 0 ? 1 : 0);
	if (mnt >= 0)
		close(mnt);
	return sent == 1 ? 0 : -2;
}

int jail_lower_prepare(const struct config *cfg, struct jail_lower *lower, char *err, size_t errlen)
{
	lower->base[0] = lower->mask[0] = '\0';
	if (strcmp(cfg->rootfs, "host") != 0)
		return 0;
	if (base_prepare(cfg, lower->base, sizeof(lower->base), err, errlen) < 0)
		return -1;
	return hostmask_prepare(cfg, host_layers, N_HOST_LAYERS, lower->mask, sizeof(lower->mask),
				err, errlen);
}

pid_t jail_start(struct room *r, const struct cgroup_sys *cg, char *err, size_t errlen)
{
	struct jail_job j = { .room = *r, .cg = cg, .keeper_fds = { -1, -1 },
			      .lock = r->create_lock, .userns = -1 };
	if (jail_lower_prepare(r->cfg, &j.lower, err, errlen) < 0)
		return room_error_relative(r, "prepare the lower trees", err, errlen);
	net_prepare(r);
	/* the keeper binary, the seccomp filter as raw BPF */
	j.keeper_fds[0] = jail_keeper_exe_open(err, errlen);
	if (j.keeper_fds[0] < 0)
		return -1;
	j.keeper_fds[1] = memfd_create("roombox-filter", MFD_CLOEXEC);
	if (j.keeper_fds[1] < 0 ||
	    write(j.keeper_fds[1], room_filter_bpf, room_filter_bpf_size) != (ssize_t)room_filter_bpf_size) {
		ERR("room %s: seccomp filter memfd: %s", r->id, strerror(errno));
		close(j.keeper_fds[0]);
		if (j.keeper_fds[1] >= 0)
			close(j.keeper_fds[1]);
		return -1;
	}
	/* no CPU affinity or scheduling is set here: the room inherits the
	 * service's own (an admin's CPUAffinity stays in force).
	 * p[0] and p[1] carry the keeper's pid and its report to the helper,
	 * p[2] (a socket pair) the disk's mount. */
	int p[3][2] = { { -1, -1 }, { -1, -1 }, { -1, -1 } };
	pthread_t thread;
	int started;
	if (pipe2(p[0], O_CLOEXEC) == 0 && pipe2(p[1], O_CLOEXEC) == 0 &&
	    socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p[2]) == 0) {
		j.pid_fd = p[0][1];
		j.report_fd = p[1][1];
		j.disk_sock = p[2][0];
		started = pthread_create(&thread, NULL, jail_thread, &j);
	} else {
		started = errno;
	}
	if (started != 0) {
		/* the thread closes the keeper's ends; without it, this does */
		for (int i = 0; i < 3; i++)
			for (int k = 0; k < 2; k++)
				if (p[i][k] >= 0)
					close(p[i][k]);
		close(j.keeper_fds[0]);
		close(j.keeper_fds[1]);
		return ERR("room %s: start keeper: %s", r->id, strerror(started));
	}
	bool creating = r->create_lock >= 0;
	int host = host_side(r, creating, p[2][1], err, errlen);
	close(p[2][1]);
	int32_t pid = 0;
	size_t got = read_all(p[0][0], (char *)&pid, sizeof(pid));
	close(p[0][0]);
	/* a room being created is finished (meta last) once its keeper is
	 * there: the jail thread made its cgroup under the creation's lock */
	if (host == 0 && got == sizeof(pid) && creating && room_create_finish(r, err, errlen) < 0)
		host = -1;
	/* while the keeper builds the room's root: the room's network (its
	 * namespace is there from the keeper's clone), and its record */
	int net = 0;
	if (host == 0 && got == sizeof(pid) && (net = net_room_up(r, pid, err, errlen)) == 0)
		net = room_keeper_record(r, pid, err, errlen);
	char msg[512];
	size_t n = read_all(p[1][0], msg, sizeof(msg) - 1);
	msg[n] = '\0';
	close(p[1][0]);
	pthread_join(thread, NULL);
	if (host < 0 || got != sizeof(pid) || strcmp(msg, "ok") != 0 || net < 0) {
		if (got == sizeof(pid)) {
			/* the helper's own child: reaped, so that no dead PID 1
			 * stays counted in the room's pids cgroup */
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			room_keeper_forget(r);
		}
		if (host == -1)
			return -1;
		if (strcmp(msg, "ok") == 0)
			return -1;      /* net < 0: err says why */
		return n ? ERR("%s", msg) : ERR("room %s: the keeper died while starting", r->id);
	}
	return pid;
}

int jail_stop(const struct room *r, const struct cgroup_sys *cg, pid_t keeper, char *err, size_t errlen)
{
	/* the room's network goes first (net.c): it is of no more use */
	int net = net_room_down(r, err, errlen);
	int pidfd = (int)syscall(SYS_pidfd_open, keeper, 0);
	room_keeper_forget(r);
	if (pidfd < 0)
		return errno == ESRCH ? net : ERR("room %s: pidfd_open keeper: %s", r->id, strerror(errno));
	syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
	struct pollfd p = { pidfd, POLLIN, 0 };
	int rc = poll(&p, 1, 5000);
	close(pidfd);
	if (rc <= 0)
		return ERR("room %s: keeper %d did not die", r->id, (int)keeper);
	/* The pid namespace is gone with its init; whatever escaped it (nothing
	 * should) is still in the room's cgroup. */
	if (cgroup_kill(cg, r->id, err, errlen) < 0)
		return -1;
	/* A stopped room keeps no cgroup: every memory cgroup costs the kernel
	 * a shrinker map as long as the most superblocks the host ever had at
	 * once (cgroup.c), over 1 MiB after a 10,000-room run, and the next
	 * start makes them again with the room's limits.  Best effort: what
	 * cannot be removed now (a blocker in it) is the destroy's to report. */
	char cg_err[256];
	cgroup_room_remove(cg, r->id, cg_err, sizeof(cg_err));
	/* With its last process went the room's mounts, and its disk let go
	 * of the loop device: the device goes too (disk.h) */
	char *dev = room_loop_hint(r);
	if (dev) {
		char img[PATH_MAX];
		snprintf(img, sizeof(img), "%s/disk.img", r->state);
		disk_loop_remove(dev, img);
		free(dev);
	}
	return net;
}
