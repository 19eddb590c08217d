/* The jail of a room.
 *
 * jail_start forks twice.  The first child unshares the room's mount, uts,
 * ipc, net, pid and cgroup namespaces (after entering the room's cgroup) and
 * forks the second child, which is PID 1 of the new pid namespace: the
 * keeper.  The keeper builds the room's root in its private mount namespace —
 * overlays of a read-only lower tree and the room's upper dirs, a fresh
 * /proc, a minimal /dev — pivots into it, sets the hostname, brings up lo,
 * writes /etc/resolv.conf when network = egress (net.c; the helper gives the
 * namespace its eth0 once the keeper is up),
 * and execs roombox-keeper, which reports "ok" on a pipe (the failing step
 * if a step before it failed) and then serves the room's execs and reaps its
 * orphans until it is killed (keeper/keeper.c).  No mount is ever made in the
 * host's namespace, so when the keeper dies the kernel releases every mount
 * of the room with it.
 *
 * The lower tree for rootfs = host is <run_dir>/base: symlinks or overlay
 * mount points for /usr, /bin, /lib*, /sbin as on the host, and an /etc made
 * from an allowlist of host files.  It lives on the run directory (tmpfs), so
 * it is rebuilt after each boot, from whatever the host then has.
 */
#include "errbuf.h"
#include "jail.h"
#include "roomid.h"
#include "disk.h"
#include "net.h"
#include "room_filter.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <poll.h>
#include <time.h>
#include <unistd.h>

#define ERR(...) errorf(err, errlen, __VA_ARGS__)

/* Host top-level directories that make up the system of rootfs = host. */
static const char *const host_dirs[] = { "usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32" };
#define N_HOST_DIRS (sizeof(host_dirs) / sizeof(host_dirs[0]))

/* Host /etc entries a room may see: nothing secret, nothing of roombox. */
static const char *const etc_allow[] = {
	"ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "nsswitch.conf",
	"localtime", "timezone", "profile", "profile.d", "bash.bashrc", "inputrc",
	"mime.types", "protocols", "services", "debian_version", "os-release",
	"ssl", "ca-certificates", "ca-certificates.conf", "python3", "python3.11",
	"perl", "environment", "shells", "magic", "magic.mime", "gai.conf",
	"host.conf", "issue", "manpath.config", "vim", "wgetrc", "gitconfig",
	"locale.alias", "locale.gen", "mke2fs.conf",
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
		"run", "var", "var/tmp", "workspace", "mnt", "opt", "srv", "media", "sys" };
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
	snprintf(base, baselen, "%s/base", cfg->run_dir);
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

static int bind_dev(const char *root, const char *name)
{
	char src[64], dst[PATH_MAX];
	snprintf(src, sizeof(src), "/dev/%s", name);
	snprintf(dst, sizeof(dst), "%s/dev/%s", root, name);
	int fd = open(dst, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
	if (fd < 0)
		return -1;
	close(fd);
	if (mount(src, dst, NULL, MS_BIND, NULL) < 0)
		return -1;
	return mount(NULL, dst, NULL, MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NOEXEC, NULL);
}

static int setup_dev(const char *root)
{
	static const char *const nodes[] = { "null", "zero", "full", "random", "urandom", "tty" };
	char p[PATH_MAX], q[PATH_MAX];

	snprintf(p, sizeof(p), "%s/dev", root);
	/* nodev: the nodes below are bind mounts, each with its own flags */
	if (mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0755,size=64k,nr_inodes=64") < 0)
		return -1;
	for (size_t i = 0; i < sizeof(nodes) / sizeof(nodes[0]); i++)
		if (bind_dev(root, nodes[i]) < 0)
			return -1;
	snprintf(p, sizeof(p), "%s/dev/pts", root);
	if (mkdir(p, 0755) < 0 ||
	    mount("devpts", p, "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620") < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/dev/shm", root);
	if (mkdir(p, 01777) < 0 ||
	    mount("tmpfs", p, "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777,size=64m") < 0)
		return -1;
	static const char *const links[][2] = { { "pts/ptmx", "ptmx" }, { "/proc/self/fd", "fd" },
		{ "/proc/self/fd/0", "stdin" }, { "/proc/self/fd/1", "stdout" }, { "/proc/self/fd/2", "stderr" } };
	for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
		snprintf(q, sizeof(q), "%s/dev/%s", root, links[i][1]);
		if (symlink(links[i][0], q) < 0)
			return -1;
	}
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

/* Build the root in <run_dir>/mnt (private to this mount namespace). */
static int keeper_build_root(const struct room *r, const char *base, char *err, size_t errlen)
{
	const struct config *cfg = r->cfg;
	char root[PATH_MAX], up[PATH_MAX], wk[PATH_MAX], p[PATH_MAX], h[PATH_MAX];
	bool host = strcmp(cfg->rootfs, "host") == 0;

	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return ERR("room %s: make / private: %s", r->id, strerror(errno));
	snprintf(root, sizeof(root), "%s/mnt", cfg->run_dir);
	snprintf(p, sizeof(p), "%s/disk.img", r->state);
	snprintf(h, sizeof(h), "%s/disk", r->state);
	/* a room made while disk_limit was 0 has no image: its layer is a
	 * plain directory */
	struct stat img;
	if (lstat(p, &img) == 0 && disk_image_mount(p, h, err, errlen) < 0)
		return -1;
	if (room_upper_prepare(r, err, errlen) < 0)
		return -1;
	snprintf(up, sizeof(up), "%s/disk/upper/root", r->state);
	snprintf(wk, sizeof(wk), "%s/disk/work/root", r->state);
	if (mount_overlay(host ? base : cfg->rootfs, up, wk, root) < 0)
		return ERR("room %s: mount overlay root: %s", r->id, strerror(errno));
	for (size_t i = 0; host && i < N_HOST_DIRS; i++) {
		struct stat st;
		snprintf(h, sizeof(h), "/%s", host_dirs[i]);
		if (lstat(h, &st) < 0 || !S_ISDIR(st.st_mode))
			continue;
		snprintf(up, sizeof(up), "%s/disk/upper/%s", r->state, host_dirs[i]);
		snprintf(wk, sizeof(wk), "%s/disk/work/%s", r->state, host_dirs[i]);
		snprintf(p, sizeof(p), "%s/%s", root, host_dirs[i]);
		if (mount_overlay(h, up, wk, p) < 0)
			return ERR("room %s: mount overlay /%s: %s", r->id, host_dirs[i], strerror(errno));
	}
	if (setup_proc(root) < 0)
		return ERR("room %s: mount /proc: %s", r->id, strerror(errno));
	snprintf(p, sizeof(p), "%s/dev", root);
	mkdir(p, 0755);
	if (setup_dev(root) < 0)
		return ERR("room %s: build /dev: %s", r->id, strerror(errno));
	if (chdir(root) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 ||
	    umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return ERR("room %s: pivot_root: %s", r->id, strerror(errno));
	if (net_keeper_setup(r, err, errlen) < 0)
		return -1;
	char host_name[65];
	room_sandbox_name(r->id, host_name, sizeof(host_name));
	if (sethostname(host_name, strlen(host_name)) < 0)
		return ERR("room %s: sethostname: %s", r->id, strerror(errno));
	if (loopback_up() < 0)
		return ERR("room %s: bring up lo: %s", r->id, strerror(errno));
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
keeper_main(const struct room *r, const char *base, const int *keeper_fds, int report_fd)
{
	char err[512] = "";
	int sock = listen_exec_socket(r, err, sizeof(err));
	if (sock < 0 || keeper_build_root(r, base, err, sizeof(err)) < 0)
		report_fail(report_fd, err);
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
	char uid[32], gid[32];
	snprintf(uid, sizeof(uid), "ROOMBOX_UID=%u", (unsigned)r->uid);
	snprintf(gid, sizeof(gid), "ROOMBOX_GID=%u", (unsigned)r->gid);
	char *envp[] = { uid, gid, NULL };
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

/* Runs in the helper's first child: enter the room's cgroup, unshare, fork
 * the keeper and tell the helper the keeper's host pid on pid_fd. */
static void __attribute__((noreturn))
first_child(const struct room *r, const struct cgroup_sys *cg, const char *base,
	    const int *keeper_fds, int pid_fd, int report_fd)
{
	char err[512];
	setsid();
	if (cgroup_enter(cg, r->id, 0, err, sizeof(err)) < 0)
		report_fail(report_fd, err);
	if (unshare(JAIL_NS_FLAGS) < 0) {
		snprintf(err, sizeof(err), "room %s: unshare: %s", r->id, strerror(errno));
		report_fail(report_fd, err);
	}
	pid_t keeper = fork();
	if (keeper < 0) {
		snprintf(err, sizeof(err), "room %s: fork keeper: %s", r->id, strerror(errno));
		report_fail(report_fd, err);
	}
	if (keeper == 0) {
		close(pid_fd);
		keeper_main(r, base, keeper_fds, report_fd);
	}
	int32_t pid = keeper;
	_exit(write(pid_fd, &pid, sizeof(pid)) == sizeof(pid) ? 0 : 2);
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

pid_t jail_start(const struct room *r, const struct cgroup_sys *cg, char *err, size_t errlen)
{
	char base[PATH_MAX] = "";
	struct cgroup_limits lim = { r->cfg->memory_limit, r->cfg->pids_limit, r->cfg->cpu_limit };

	if (strcmp(r->cfg->rootfs, "host") == 0 && base_prepare(r->cfg, base, sizeof(base), err, errlen) < 0)
		return -1;
	/* under the state lock: the last destroy may be removing the
	 * instance's cgroup directory right now */
	int lock = room_state_lock(r->cfg);
	int rc = cgroup_room_setup(cg, r->id, &lim, err, errlen);
	if (lock >= 0)
		close(lock);
	if (rc < 0)
		return -1;
	net_prepare(r);
	/* [0] the keeper binary, [1] the seccomp filter as raw BPF */
	int keeper_fds[2] = { jail_keeper_exe_open(err, errlen), -1 };
	if (keeper_fds[0] < 0)
		return -1;
	keeper_fds[1] = memfd_create("roombox-filter", MFD_CLOEXEC);
	if (keeper_fds[1] < 0 ||
	    write(keeper_fds[1], room_filter_bpf, room_filter_bpf_size) != (ssize_t)room_filter_bpf_size) {
		ERR("room %s: seccomp filter memfd: %s", r->id, strerror(errno));
		close(keeper_fds[0]);
		if (keeper_fds[1] >= 0)
			close(keeper_fds[1]);
		return -1;
	}
	/* no CPU affinity or scheduling is set here: the room inherits the
	 * service's own (an admin's CPUAffinity stays in force) */
	int pid_pipe[2] = { -1, -1 }, report[2] = { -1, -1 };
	pid_t first = -1;
	if (pipe2(pid_pipe, O_CLOEXEC) == 0 && pipe2(report, O_CLOEXEC) == 0)
		first = fork();
	if (first == 0) {
		close(pid_pipe[0]);
		close(report[0]);
		first_child(r, cg, base, keeper_fds, pid_pipe[1], report[1]);
	}
	int fork_errno = errno;
	close(keeper_fds[0]);
	close(keeper_fds[1]);
	if (first < 0) {
		for (int i = 0; i < 2; i++) {
			if (pid_pipe[i] >= 0)
				close(pid_pipe[i]);
			if (report[i] >= 0)
				close(report[i]);
		}
		return ERR("room %s: start keeper: %s", r->id, strerror(fork_errno));
	}
	close(pid_pipe[1]);
	close(report[1]);
	int status = 0;
	int32_t pid = 0;
	waitpid(first, &status, 0);
	size_t got = read_all(pid_pipe[0], (char *)&pid, sizeof(pid));
	char msg[512];
	size_t n = read_all(report[0], msg, sizeof(msg) - 1);
	msg[n] = '\0';
	close(pid_pipe[0]);
	close(report[0]);
	if (got != sizeof(pid) || strcmp(msg, "ok") != 0) {
		if (got == sizeof(pid))
			kill(pid, SIGKILL);
		return n ? ERR("%s", msg) : ERR("room %s: the keeper died while starting", r->id);
	}
	if (net_room_up(r, pid, err, errlen) < 0) {
		kill(pid, SIGKILL);
		return -1;
	}
	if (room_keeper_record(r, pid, err, errlen) < 0) {
		kill(pid, SIGKILL);
		return -1;
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
	return cgroup_kill(cg, r->id, err, errlen) < 0 ? -1 : net;
}
