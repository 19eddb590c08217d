/* A room's user namespace and its idmapped mounts; see userns.h. */
#include "errbuf.h"
#include "userns.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/capability.h>
#include <linux/mount.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define ERR(...) errorf(err, errlen, __VA_ARGS__)

static int write_text(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = write(fd, text, strlen(text));
	int e = errno;
	close(fd);
	errno = e;
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* The child (vfork: it borrows this process's memory and stack, and this
 * process waits until it has exited) unshares a user namespace and exits at
 * once: the namespace outlives it while the child is not yet reaped (a
 * zombie keeps its credentials, and /proc/<pid>/ns/user and the maps work
 * on them), so the parent opens it and writes its maps afterwards.  A
 * forked child that waited for the maps cost a copy of the page tables and
 * a page copied for each page either side wrote after (25 us a page on a
 * VM).  Root of the new namespace, the child sets that namespace's
 * max_user_namespaces to 0 (the /proc/sys/user files show the reader's
 * namespace): no process of the room can make a user namespace, even past
 * the seccomp filter (clone3's flags are out of a filter's sight).  It
 * reaches the file through proc, a procfs instance of its own: in the
 * host's /proc, every user namespace that ever looked up /proc/sys/user
 * leaves a dentry of that name, and each lookup compares against all of
 * them under one lock (3 ms with a thousand rooms running).  Its exit
 * status says which step failed. */
static void __attribute__((noreturn)) userns_child(int proc)
{
	if (unshare(CLONE_NEWUSER) < 0)
		_exit(10);
	int fd = proc >= 0 ? openat(proc, "sys/user/max_user_namespaces", O_WRONLY | O_CLOEXEC)
			   : open("/proc/sys/user/max_user_namespaces", O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, "0\n", 2) != 2)
		_exit(11);
	_exit(0);
}

/* A procfs instance mounted nowhere (a new superblock, so an empty dentry
 * cache), or -1 where the kernel has no fsopen: then /proc serves. */
static __attribute__((noinline)) int private_proc(void)
{
	int fs = (int)syscall(SYS_fsopen, "proc", FSOPEN_CLOEXEC);
	if (fs < 0)
		return -1;
	int mnt = -1;
	if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) == 0)
		mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
				   MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
	close(fs);
	return mnt;
}

int userns_make(const struct room *r, char *err, size_t errlen)
{
	int proc = private_proc();
	pid_t pid = vfork();
	if (pid == 0)
		userns_child(proc);
	int e = errno;
	if (proc >= 0)
		close(proc);
	if (pid < 0)
		return ERR("room %s: user namespace: vfork: %s", r->id, strerror(e));
	/* the child has exited: its status, leaving it unreaped */
	siginfo_t si = { 0 };
	int fd = -1;
	char path[64], map[64];
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT) < 0 || si.si_code != CLD_EXITED ||
	    si.si_status != 0) {
		ERR("room %s: %s", r->id, si.si_status == 10 ? "unshare a user namespace: refused by the kernel"
		    : si.si_status == 11 ? "user namespace: set max_user_namespaces to 0: refused"
		    : "user namespace: the child died");
	} else {
		/* written by host root: setgroups stays allowed in the room,
		 * and the maps may name any host ids */
		snprintf(map, sizeof(map), "0 %u %u\n", (unsigned)room_host_id(r, 0), ROOM_ID_COUNT);
		snprintf(path, sizeof(path), "/proc/%d/uid_map", (int)pid);
		if (write_text(path, map) < 0) {
			ERR("room %s: write uid_map: %s", r->id, strerror(errno));
		} else {
			snprintf(path, sizeof(path), "/proc/%d/gid_map", (int)pid);
			if (write_text(path, map) < 0) {
				ERR("room %s: write gid_map: %s", r->id, strerror(errno));
			} else {
				snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
				fd = open(path, O_RDONLY | O_CLOEXEC);
				if (fd < 0)
					ERR("room %s: open user namespace: %s", r->id, strerror(errno));
			}
		}
	}
	waitpid(pid, NULL, 0);
	return fd;
}

int idmap_bind(const char *src, const char *dst, int userns_fd)
{
	int fd = (int)syscall(SYS_open_tree, AT_FDCWD, src, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
	if (fd < 0)
		return -1;
	struct mount_attr attr = { .attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns_fd };
	int rc = -1;
	if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) == 0 &&
	    (mkdir(dst, 0755) == 0 || errno == EEXIST))
		rc = (int)syscall(SYS_move_mount, fd, "", AT_FDCWD, dst, MOVE_MOUNT_F_EMPTY_PATH);
	int e = errno;
	close(fd);
	errno = e;
	return rc < 0 ? -1 : 0;
}

/* setfsuid away from 0 clears the file capabilities from the effective
 * set; they are raised again from the permitted set (capset). */
int overlay_creds(const struct room *r, bool on)
{
	uid_t id = on ? room_host_id(r, 0) : 0;
	syscall(SYS_setfsuid, id);
	syscall(SYS_setfsgid, id);
	if ((uid_t)syscall(SYS_setfsuid, -1) != id || (gid_t)syscall(SYS_setfsgid, -1) != id) {
		errno = EPERM;
		return -1;
	}
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) < 0)
		return -1;
	for (int i = 0; i < 2; i++)
		data[i].effective = data[i].permitted;
	return (int)syscall(SYS_capset, &hdr, data);
}

/* ---- rooms of the previous version ---------------------------------------- */

static uid_t old_id;
static int migrate_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	uid_t u = st->st_uid == old_id ? ROOM_USER_ID : st->st_uid;
	gid_t g = st->st_gid == old_id ? ROOM_USER_ID : st->st_gid;
	if ((u != st->st_uid || g != st->st_gid) && lchown(path, u, g) < 0)
		return -1;
	/* chown clears set-id bits: give them back (a room's own setuid file
	 * is only ever setuid to a room id) */
	if (!S_ISLNK(st->st_mode) && (st->st_mode & (S_ISUID | S_ISGID)) && (u != st->st_uid || g != st->st_gid))
		chmod(path, st->st_mode & 07777);
	return 0;
}

int userns_migrate_upper(const struct room *r, char *err, size_t errlen)
{
	char p[PATH_MAX];
	old_id = r->cfg->uid_base + (uid_t)r->slot;
	snprintf(p, sizeof(p), "%s/disk/upper", r->state);
	if (nftw(p, migrate_one, 32, FTW_PHYS | FTW_MOUNT) != 0 && errno != ENOENT)
		return ERR("room %s: give the files of uid %u to the room's user: %s", r->id,
			   (unsigned)old_id, strerror(errno));
	snprintf(p, sizeof(p), "%s/disk", r->state);
	if (room_etc_ids_write(r, p) < 0)
		return ERR("room %s: rewrite /etc/passwd and /etc/group: %s", r->id, strerror(errno));
	return 0;
}
