/* Room state on disk: paths, locks, uid slots, keeper record, session.
 * See room.h for the layout.  Every open here uses O_NOFOLLOW (and the
 * directories are root's), so nothing planted by a room or another user can
 * redirect a write of this setuid program. */
#include "errbuf.h"
#include "room.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <pthread.h>
#include <signal.h>
#include <ftw.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "disk.h"
#include "errbuf.h"
#include "fnv.h"
#include "session_file.h"
#include "timefmt.h"

#define ERR(...) errorf(err, errlen, __VA_ARGS__)

static int rm_tree(const char *path);
static char rm_failed[PATH_MAX];
static int rm_errno;
static int remove_failed(const struct room *r, const char *path, int e, char *err, size_t errlen);

int room_init(struct room *r, const struct config *cfg, const char *id)
{
	memset(r, 0, sizeof(*r));
	r->cfg = cfg;
	r->slot = -1;
	r->lock_fd = -1;
	r->create_lock = -1;
	if (snprintf(r->id, sizeof(r->id), "%s", id) >= (int)sizeof(r->id))
		return -1;
	if (snprintf(r->state, sizeof(r->state), "%s/rooms/%s", cfg->state_dir, id) >= (int)sizeof(r->state))
		return -1;
	if (snprintf(r->run, sizeof(r->run), "%s/rooms/%s", cfg->run_dir, id) >= (int)sizeof(r->run))
		return -1;
	return 0;
}

int room_error_relative(const struct room *r, const char *step, char *err, size_t errlen)
{
	char whole[512];
	snprintf(whole, sizeof(whole), "%s", err);
	fprintf(stderr, "roombox-helper: room %s: %s: %s\n", r->id, step, whole);
	const char *cause = strrchr(whole, ':');
	cause = cause ? cause + 1 + (cause[1] == ' ') : whole;
	if (strchr(cause, '/'))		/* "mkfs.ext4 <path> failed" */
		cause = "failed (the service log says where)";
	return ERR("room %s: %s: %s", r->id, step, cause);
}

/* mkdir that accepts an existing root-owned real directory only. */
static int safe_mkdir(const char *path, mode_t mode, char *err, size_t errlen)
{
	struct stat st;

	if (mkdir(path, mode) == 0)
		return 0;
	if (errno != EEXIST)
		return ERR("mkdir %s: %s", path, strerror(errno));
	if (lstat(path, &st) < 0)
		return ERR("stat %s: %s", path, strerror(errno));
	if (!S_ISDIR(st.st_mode) || st.st_uid != 0)
		return ERR("%s: not a root-owned directory (refusing)", path);
	return 0;
}

static int mkdir_parents(const char *path, mode_t mode, char *err, size_t errlen)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, 0755) < 0 && errno != EEXIST)
			return ERR("mkdir %s: %s", buf, strerror(errno));
		*p = '/';
	}
	return safe_mkdir(buf, mode, err, errlen);
}

static bool root_dir(const char *dir, const char *leaf)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof(p), "%s/%s", dir, leaf);
	return lstat(p, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == 0;
}

int room_dirs_prepare(const struct config *cfg, char *err, size_t errlen)
{
	char p[PATH_MAX];

	/* the usual case, three system calls: all there already */
	if (root_dir(cfg->state_dir, "rooms") && root_dir(cfg->run_dir, "rooms") && root_dir(cfg->run_dir, "mnt"))
		return 0;

	if (mkdir_parents(cfg->state_dir, 0711, err, errlen) < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/rooms", cfg->state_dir);
	if (safe_mkdir(p, 0700, err, errlen) < 0)
		return -1;
	if (mkdir_parents(cfg->run_dir, 0711, err, errlen) < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/rooms", cfg->run_dir);
	if (safe_mkdir(p, 0700, err, errlen) < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/mnt", cfg->run_dir);
	return safe_mkdir(p, 0700, err, errlen);
}

/* <dir>/<name> in p (PATH_MAX); -1 with ENAMETOOLONG if it does not fit. */
static int path_in(char *p, const char *dir, const char *name)
{
	if (snprintf(p, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

static int open_in(const char *dir, const char *name, int flags, mode_t mode)
{
	char p[PATH_MAX];
	if (path_in(p, dir, name) < 0)
		return -1;
	/* openat, not open: musl's open() follows O_CLOEXEC with an fcntl
	 * (for kernels older than 2.6.23), one more system call per file on
	 * every exec */
	return openat(AT_FDCWD, p, flags | O_NOFOLLOW | O_CLOEXEC, mode);
}

/* Whether the locked file is still linked: a destroy removes the run
 * directory, its lock with it, while it holds that lock (one fstat: nothing
 * else ever replaces the file). */
static bool still_linked(int fd)
{
	struct stat st;
	return fstat(fd, &st) == 0 && st.st_nlink > 0;
}

/* A lock taken on a file that a destroy removed meanwhile is no one's to
 * share: taken again on the file the path names now, which the next
 * request opens too (a destroy a try; the bound is only against a loop). */
static int lock_as(struct room *r, int how, char *err, size_t errlen)
{
	for (int tries = 0; tries < 100; tries++) {
		if (safe_mkdir(r->run, 0700, err, errlen) < 0)
			return room_error_relative(r, "run directory", err, errlen);
		r->lock_fd = open_in(r->run, "lock", O_RDWR | O_CREAT, 0600);
		if (r->lock_fd < 0)
			return ERR("room %s: open lock: %s", r->id, strerror(errno));
		if (flock(r->lock_fd, how) < 0) {
			close(r->lock_fd);
			r->lock_fd = -1;
			return ERR("room %s: lock: %s", r->id, strerror(errno));
		}
		if (still_linked(r->lock_fd))
			return 0;
		close(r->lock_fd);
		r->lock_fd = -1;
	}
	return ERR("room %s: lock: its lock file was removed under each of 100 waits", r->id);
}

int room_lock(struct room *r, bool exclusive, char *err, size_t errlen)
{
	return lock_as(r, exclusive ? LOCK_EX : LOCK_SH, err, errlen);
}

bool room_lock_if_free(struct room *r)
{
	char err[256];
	return lock_as(r, LOCK_EX | LOCK_NB, err, sizeof(err)) == 0;
}

void room_unlock(struct room *r)
{
	if (r->lock_fd >= 0)
		close(r->lock_fd);
	r->lock_fd = -1;
}

/* A regular file is read as far as its size (up to max), into a buffer of
 * that size.  (These state files are replaced by rename, never grown in
 * place; the sessions, written in place, are read by session_file.c.) */
static char *read_small(const char *dir, const char *name, size_t max, size_t *len)
{
	int fd = open_in(dir, name, O_RDONLY, 0);
	if (fd < 0)
		return NULL;
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 && (uint64_t)st.st_size < max)
		max = (size_t)st.st_size;
	char *buf = malloc(max + 1);
	size_t n = 0;
	ssize_t k;
	while (buf && n < max && (k = read(fd, buf + n, max - n)) > 0)
		n += (size_t)k;
	close(fd);
	if (!buf)
		return NULL;
	buf[n] = '\0';
	if (len)
		*len = n;
	return buf;
}

/* data under a temporary name in dir, of mode (less the umask),
 * (fsynced,) its path in tmp: the first half of an atomic write.  -1 with
 * errno, nothing left. */
static int temp_write(const char *dir, const char *name, const char *data, size_t len, bool sync,
		      mode_t mode, char tmp[PATH_MAX])
{
	char base[64];
	snprintf(base, sizeof(base), ".%s.%d", name, (int)getpid());
	snprintf(tmp, PATH_MAX, "%s/%s", dir, base);
	int fd = open_in(dir, base, O_WRONLY | O_CREAT | O_TRUNC, mode);
	if (fd < 0)
		return -1;
	size_t off = 0;
	while (off < len) {
		ssize_t k = write(fd, data + off, len - off);
		if (k < 0)
			break;
		off += (size_t)k;
	}
	int rc = off == len && (!sync || fsync(fd) == 0) ? 0 : -1;
	int e = errno;
	if (close(fd) < 0 && rc == 0) {
		rc = -1;
		e = errno;
	}
	if (rc < 0) {
		unlink(tmp);
		errno = e;
	}
	return rc;
}

/* The temporary file a renamed to b, or removed: 0, or -1 with errno. */
static int temp_rename(const char *a, const char *b)
{
	if (rename(a, b) == 0)
		return 0;
	int e = errno;
	unlink(a);
	errno = e;
	return -1;
}

/* Write a whole file atomically: temporary name, (fsync,) rename.  A
 * reader sees the old file or the new, whole; ext4 writes the new one's
 * blocks before the rename over an old one lands (auto_da_alloc), so
 * after a crash too. */
static int room_file_write(const char *dir, const char *name, const char *data, size_t len, bool sync)
{
	char a[PATH_MAX], b[PATH_MAX];
	if (temp_write(dir, name, data, len, sync, 0600, a) < 0)
		return -1;
	snprintf(b, sizeof(b), "%s/%s", dir, name);
	return temp_rename(a, b);
}

/* A record the helper can always make again from what it describes
 * (disk-commit.json, which the service's start counts afresh), of mode:
 * swapped with the old one (RENAME_EXCHANGE), which is then unlinked.  A
 * reader still sees one whole record, the old or the new.  A rename over
 * the old one would first have ext4 write the new one's blocks out
 * (auto_da_alloc: 0.4-1.9 ms, where this takes 0.2, on every room's
 * creation and removal); without that a crash may leave the record empty,
 * and an empty record is counted again.  Where there is no exchange (a
 * file system or kernel without it): rename.  An old record left under the
 * temporary name (a crash between the two) goes at the service's start
 * (room_disk_commit_count). */
static int record_replace(const char *dir, const char *name, const char *data, size_t len, mode_t mode)
{
	char a[PATH_MAX], b[PATH_MAX];
	if (temp_write(dir, name, data, len, false, mode, a) < 0)
		return -1;
	snprintf(b, sizeof(b), "%s/%s", dir, name);
	if (syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) == 0) {
		unlink(a);   /* the new record is in place: that is what counts */
		return 0;
	}
	if (errno == ENOENT || errno == EINVAL || errno == ENOSYS)
		return temp_rename(a, b);
	int e = errno;
	unlink(a);
	errno = e;
	return -1;
}

static int write_atomic(const char *dir, const char *name, const char *data, size_t len)
{
	return room_file_write(dir, name, data, len, true);
}

uid_t room_host_id(const struct room *r, unsigned id)
{
	return r->cfg->uid_base + (uid_t)r->slot * ROOM_ID_COUNT + id;
}

static void room_set_slot(struct room *r, int slot)
{
	r->slot = slot;
	r->uid = room_host_id(r, 0);
	r->gid = r->uid;
}

/* The room's own directories must be real, root-owned directories: every
 * open below them uses O_NOFOLLOW on the last component only, so a symlink
 * standing in for the directory itself must be refused here. */
static int room_dir_check(const struct room *r, const char *dir, char *err, size_t errlen)
{
	struct stat st;
	const char *which = dir == r->state ? "state directory" : "run directory";
	if (lstat(dir, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		ERR("stat %s: %s", dir, strerror(errno));
		return room_error_relative(r, which, err, errlen);
	}
	if (!S_ISDIR(st.st_mode) || st.st_uid != 0) {
		ERR("%s: not a root-owned directory (refusing)", dir);
		return room_error_relative(r, which, err, errlen);
	}
	return 0;
}

int room_state_check(const struct room *r, char *err, size_t errlen)
{
	return room_dir_check(r, r->state, err, errlen);
}

/* The value of "name" in meta's text (after its colon and any spaces), or
 * NULL. */
static const char *meta_field(const char *text, const char *name)
{
	size_t n = strlen(name);
	for (const char *p = text; (p = strchr(p, '"')); p++) {
		if (strncmp(p + 1, name, n) != 0 || p[n + 1] != '"')
			continue;
		p += n + 2;
		p += strspn(p, " ");
		if (*p != ':')
			continue;
		return p + 1 + strspn(p + 1, " ");
	}
	return NULL;
}

int room_load(struct room *r, char *err, size_t errlen)
{
	if (room_dir_check(r, r->state, err, errlen) < 0)
		return -1;
	char *text = read_small(r->state, "meta", 4096, NULL);
	if (!text) {
		if (errno == ENOENT)
			return 0;
		return ERR("room %s: read meta: %s", r->id, strerror(errno));
	}
	/* meta is the helper's own file, one line in meta_write's form: its
	 * fields are found by name (spaces around the colon allowed) */
	const char *v = meta_field(text, "slot");
	char *end = NULL;
	long slot = v ? strtol(v, &end, 10) : -1;
	if (!v || end == v || (*end != ',' && *end != '}' && *end != ' ')) {
		free(text);
		return ERR("room %s: meta is damaged", r->id);
	}
	if (slot < 0 || slot >= r->cfg->max_rooms) {
		free(text);
		return ERR("room %s: meta: slot %ld out of range", r->id, slot);
	}
	room_set_slot(r, (int)slot);
	const char *ids = meta_field(text, "ids");
	r->ids_room = ids && strncmp(ids, "\"room\"", 6) == 0;
	const char *created = meta_field(text, "createdAt");
	if (created && *created == '"') {
		created++;
		size_t n = strcspn(created, "\"\n");
		if (n < sizeof(r->created_at) && created[n] == '"')
			snprintf(r->created_at, sizeof(r->created_at), "%.*s", (int)n, created);
	}
	free(text);
	return 1;
}

/* <state_dir>/slots/<n> is a symlink to the id of the room whose uid is
 * uid_base + n, made with symlink()'s create-exclusive semantics under the
 * state lock.  One read of the directory finds the free slots (a failed
 * symlink per used slot costs milliseconds once a thousand rooms exist).  A
 * slot whose room has no meta (its creation crashed) is taken over on a
 * second pass, when no slot is free. */
static bool slot_stale(const struct config *cfg, const char *slots, int n)
{
	char link[PATH_MAX], owner[ROOM_ID_MAX + 2], meta[PATH_MAX];
	snprintf(link, sizeof(link), "%s/%d", slots, n);
	ssize_t k = readlink(link, owner, sizeof(owner) - 1);
	if (k <= 0)
		return false;
	owner[k] = '\0';
	snprintf(meta, sizeof(meta), "%s/rooms/%s/meta", cfg->state_dir, owner);
	return !room_id_valid(owner) || access(meta, F_OK) < 0;
}

/* The slot a name of <state_dir>/slots stands for, or -1: a decimal
 * number as slot_claim writes it (no sign, no leading zero), below max. */
int room_slot_parse(const char *name, int max)
{
	long n = 0;
	if (!*name || (name[0] == '0' && name[1]))
		return -1;
	for (const char *c = name; *c; c++) {
		if (*c < '0' || *c > '9')
			return -1;
		n = n * 10 + (*c - '0');
		if (n >= max)
			return -1;
	}
	return (int)n;
}

/* used[n] set for each slot that has a link now; false if the directory
 * cannot be read (then every slot is tried). */
static bool slots_used(const char *slots, bool *used, int max)
{
	DIR *d = opendir(slots);
	if (!d)
		return false;
	struct dirent *e;
	while ((e = readdir(d))) {
		int n = room_slot_parse(e->d_name, max);
		if (n >= 0)
			used[n] = true;
	}
	closedir(d);
	return true;
}

static int slot_claim(struct room *r, char *err, size_t errlen)
{
	char slots[PATH_MAX], link[PATH_MAX];
	int max = r->cfg->max_rooms;
	snprintf(slots, sizeof(slots), "%s/slots", r->cfg->state_dir);
	if (mkdir(slots, 0700) < 0 && errno != EEXIST)
		return ERR("room %s: mkdir slots: %s", r->id, strerror(errno));
	bool *used = calloc((size_t)max + 1, sizeof(bool));
	if (!used)
		return ERR("room %s: claim a uid slot: out of memory", r->id);
	slots_used(slots, used, max);
	for (int pass = 0; pass < 2; pass++) {
		for (int n = 0; n < max; n++) {
			if (pass == 0 && used[n])
				continue;
			snprintf(link, sizeof(link), "%s/%d", slots, n);
			if (pass == 1 && slot_stale(r->cfg, slots, n))
				unlink(link);
			if (symlink(r->id, link) == 0) {
				free(used);
				return n;
			}
			if (errno != EEXIST) {
				free(used);
				return ERR("room %s: claim uid slot %d: %s", r->id, n, strerror(errno));
			}
		}
	}
	free(used);
	ERR("room limit reached");
	return ROOM_ELIMIT;
}

void room_slot_release(const struct room *r)
{
	char link[PATH_MAX], owner[ROOM_ID_MAX + 2];
	if (r->slot < 0)
		return;
	snprintf(link, sizeof(link), "%s/slots/%d", r->cfg->state_dir, r->slot);
	ssize_t k = readlink(link, owner, sizeof(owner) - 1);
	if (k <= 0)
		return;
	owner[k] = '\0';
	if (strcmp(owner, r->id) == 0)
		unlink(link);
}

/* The host's system accounts (ids 1-999) of /etc/passwd or /etc/group
 * appended to *buf: packages name them (dpkg's statoverride, file owners),
 * and in a room they are the same ids, mapped like the host's files.  Not
 * root, user or nobody, which the room defines itself.  At most 1 MiB of
 * the host's file is read. */
static void host_system_accounts(const char *path, char *buf, size_t cap)
{
	size_t len = 0;
	char *text = read_small("/etc", path, 1 << 20, &len);
	if (!text)
		return;
	size_t used = strlen(buf);
	for (char *line = text, *next; line && *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = '\0';
		char name[64], *f2 = strchr(line, ':'), *f3 = f2 ? strchr(f2 + 1, ':') : NULL;
		if (!f3 || f2 - line >= (ptrdiff_t)sizeof(name))
			continue;
		snprintf(name, sizeof(name), "%.*s", (int)(f2 - line), line);
		long id = strtol(f3 + 1, NULL, 10);
		if (id < 1 || id > 999 || !strcmp(name, "root") || !strcmp(name, "user") ||
		    !strcmp(name, "nobody") || !strcmp(name, "nogroup"))
			continue;
		size_t n = strlen(line);
		if (used + n + 2 > cap)
			break;
		memcpy(buf + used, line, n);
		buf[used + n] = '\n';
		used += n + 1;
		buf[used] = '\0';
	}
	free(text);
}

/* The room's own /etc/passwd and /etc/group (static buffers): the shared
 * lower /etc has neither, and `id -un` must say "user".  Ids are the room's
 * own (its disk stores room-relative ids). */
static char etc_passwd[1 << 16], etc_group[1 << 16];

static void etc_ids_make(void)
{
	snprintf(etc_passwd, sizeof(etc_passwd), "root:x:0:0:root:/root:/bin/sh\n");
	host_system_accounts("passwd", etc_passwd, sizeof(etc_passwd) - 256);
	/* apt's sandbox user, if the host has none */
	if (!strstr(etc_passwd, "\n_apt:"))
		strcat(etc_passwd, "_apt:x:42:65534::/nonexistent:/usr/sbin/nologin\n");
	strcat(etc_passwd, "user:x:1000:1000:sandbox user:/home/user:/bin/sh\n"
			   "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
	snprintf(etc_group, sizeof(etc_group), "root:x:0:\n");
	host_system_accounts("group", etc_group, sizeof(etc_group) - 256);
	strcat(etc_group, "user:x:1000:\nnogroup:x:65534:\n");
}

/* Made once a process: a start's helper thread and keeper clone share it
 * (jail.c). */
static void etc_ids_text(const char **passwd_text, const char **group_text)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, etc_ids_make);
	*passwd_text = etc_passwd;
	*group_text = etc_group;
}

/* passwd and group in <disk>/upper/root/etc */
static int etc_ids_write(const char *disk, const char *passwd, const char *group)
{
	char dir[PATH_MAX], p[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/upper/root/etc", disk);
	if (room_file_write(dir, "passwd", passwd, strlen(passwd), false) < 0 ||
	    room_file_write(dir, "group", group, strlen(group), false) < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/passwd", dir);
	chmod(p, 0644);
	snprintf(p, sizeof(p), "%s/group", dir);
	chmod(p, 0644);
	return 0;
}

int room_etc_ids_write(const struct room *r, const char *disk)
{
	(void)r;
	const char *passwd, *group;
	etc_ids_text(&passwd, &group);
	return etc_ids_write(disk, passwd, group);
}

/* The writable layer's skeleton in disk (the disk's root, raw room-relative
 * ids): what the room user owns from the start, and the room's own passwd
 * and group; .ready last. */
static int skeleton_make(const char *disk, const char *passwd, const char *group, char *err, size_t errlen)
{
	static const char *dirs[] = { "upper", "work", "upper/root", "work/root",
		"upper/root/etc", "upper/root/home", "upper/root/home/user",
		"upper/root/workspace", "upper/root/tmp" };
	char p[PATH_MAX];
	for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
		snprintf(p, sizeof(p), "%s/%s", disk, dirs[i]);
		if (mkdir(p, 0755) < 0 && errno != EEXIST)
			return ERR("mkdir %s: %s", dirs[i], strerror(errno));
	}
	snprintf(p, sizeof(p), "%s/upper/root/tmp", disk);
	if (chmod(p, 01777) < 0)
		return ERR("chmod tmp: %s", strerror(errno));
	static const char *owned[] = { "upper/root/home/user", "upper/root/workspace" };
	for (size_t i = 0; i < 2; i++) {
		snprintf(p, sizeof(p), "%s/%s", disk, owned[i]);
		if (lchown(p, ROOM_USER_ID, ROOM_USER_ID) < 0)
			return ERR("chown %s: %s", owned[i], strerror(errno));
	}
	if (etc_ids_write(disk, passwd, group) < 0)
		return ERR("write /etc/passwd and /etc/group: %s", strerror(errno));
	if (room_file_write(disk, ".ready", "", 0, false) < 0)
		return ERR("mark disk ready: %s", strerror(errno));
	return 0;
}

/* Made once, where the room's first start finds no .ready: a room whose
 * disk is a plain directory (disk_limit = 0); an image has it from its
 * template.  Runs where <state>/disk is the room's disk. */
int room_upper_prepare(const struct room *r, char *err, size_t errlen)
{
	char disk[PATH_MAX], p[PATH_MAX];
	struct stat st;
	snprintf(disk, sizeof(disk), "%s/disk", r->state);
	snprintf(p, sizeof(p), "%s/.ready", disk);
	if (lstat(p, &st) == 0)
		return 0;
	const char *passwd, *group;
	etc_ids_text(&passwd, &group);
	if (skeleton_make(disk, passwd, group, err, errlen) < 0) {
		char why[256];
		snprintf(why, sizeof(why), "%s", err);
		return ERR("room %s: %s", r->id, why);
	}
	return 0;
}

/* The template of a new room's disk image, and the spare image made from
 * it ahead of the next new room (disk.h), are named after the size and a
 * hash of the skeleton's passwd and group (made from the host's accounts):
 * when either changes, a new template replaces the old. */
static void disk_template_names(const struct config *cfg, char *tpl, char *spare, size_t len)
{
	const char *passwd, *group;
	etc_ids_text(&passwd, &group);
	uint64_t h = fnv1a64_more(fnv1a64_more(fnv1a64("skeleton 1\n"), passwd), "\n");
	h = fnv1a64_more(h, group);
	snprintf(tpl, len, "%s/.disk-%llu-%016llx.img", cfg->state_dir,
		 (unsigned long long)cfg->disk_limit, (unsigned long long)h);
	snprintf(spare, len, "%s/.disk-%llu-%016llx.spare.img", cfg->state_dir,
		 (unsigned long long)cfg->disk_limit, (unsigned long long)h);
}

/* The template at tpl: an ext4 of disk_limit bytes that already holds the
 * skeleton (mkfs.ext4 -d), so a room's first start writes nothing on it.
 * Under the state lock. */
static int disk_template(const struct config *cfg, const char *tpl, char *err, size_t errlen)
{
	struct stat st;
	if (lstat(tpl, &st) == 0)
		return 0;
	disk_templates_remove(cfg->state_dir);
	const char *passwd, *group;
	etc_ids_text(&passwd, &group);
	char skel[PATH_MAX];
	snprintf(skel, sizeof(skel), "%s/.skeleton", cfg->state_dir);
	if (rm_tree(skel) < 0 || mkdir(skel, 0755) < 0)
		return ERR("make %s: %s", skel, strerror(errno));
	/* made under another name and renamed: a template is whole or absent
	 * (a crash during mkfs, or a spare copied from it without the lock) */
	char part[PATH_MAX];
	snprintf(part, sizeof(part), "%.*s.partial.img", (int)(strlen(tpl) - 4), tpl);
	int rc = skeleton_make(skel, passwd, group, err, errlen);
	if (rc == 0)
		rc = disk_template_make(part, cfg->disk_limit, skel, err, errlen);
	if (rc == 0 && rename(part, tpl) < 0) {
		rc = ERR("rename %s: %s", part, strerror(errno));
		unlink(part);
	}
	rm_tree(skel);
	return rc;
}

void room_disk_spare_make(const struct config *cfg)
{
	char tpl[PATH_MAX], spare[PATH_MAX];
	struct stat st;
	if (!cfg->disk_limit)
		return;
	disk_template_names(cfg, tpl, spare, sizeof(tpl));
	if (lstat(spare, &st) < 0 && lstat(tpl, &st) == 0)
		disk_image_spare_make(spare, tpl, cfg->disk_limit);
}

/* meta, as room_create writes it: the room's files keep room-relative ids */
static int meta_write(const struct room *r)
{
	char meta[160];
	int n = snprintf(meta, sizeof(meta), "{\"slot\":%d,\"createdAt\":\"%s\",\"ids\":\"room\"}\n",
			 r->slot, r->created_at);
	return write_atomic(r->state, "meta", meta, (size_t)n);
}

void room_limits_read(const struct room *r, struct helper_limits *l)
{
	memset(l, 0, sizeof(*l));
	int fd = open_in(r->state, "limits", O_RDONLY, 0);
	if (fd < 0)
		return;
	struct helper_limits got;
	if (read(fd, &got, sizeof(got)) == (ssize_t)sizeof(got))
		*l = got;
	close(fd);
}

int room_limits_write(const struct room *r, const struct helper_limits *l, char *err, size_t errlen)
{
	if (write_atomic(r->state, "limits", (const char *)l, sizeof(*l)) < 0)
		return ERR("room %s: write its limits: %s", r->id, strerror(errno));
	return 0;
}

struct config_room_limits room_limits_effective(const struct room *r)
{
	struct helper_limits own;
	const struct config *c = r->cfg;
	room_limits_read(r, &own);
	return (struct config_room_limits){
		.memory = own.memory ? own.memory : c->memory_limit,
		.pids = own.pids ? (int)own.pids : c->pids_limit,
		.cpu = own.cpu_milli ? (double)own.cpu_milli / 1000.0 : c->cpu_limit,
		.disk = own.disk ? own.disk : c->disk_limit,
		.idle_timeout_ms = own.idle_timeout_ms ? own.idle_timeout_ms : c->idle_timeout_ms,
		.exec_timeout_max_ms = own.exec_timeout_max_ms ? own.exec_timeout_max_ms
			: c->exec_timeout_max_ms,
	};
}

int room_meta_mark_ids(const struct room *r, char *err, size_t errlen)
{
	if (meta_write(r) < 0)
		return ERR("room %s: write meta: %s", r->id, strerror(errno));
	return 0;
}

int room_state_lock(const struct config *cfg)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/lock", cfg->state_dir);
	int fd = open(p, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0 && flock(fd, LOCK_EX) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* ---- what the rooms' disk images promise ---------------------------------
 *
 * An image is sparse: it holds only what its room wrote, and may grow to
 * its full size.  So that the host never promises more than it has, a new
 * room is refused while the free space of the state directory's file
 * system, times disk_overcommit, is less than what the existing images may
 * still grow by (their sizes less the bytes they hold) plus the new room's
 * disk_limit.  Refusing, not reserving (fallocate): a reserved image would
 * take its whole disk_limit from the host at once, for rooms that mostly
 * write little.
 *
 * Counting (one fstatat per room) costs ~3 ms with a thousand rooms, so a
 * creation does not count: <state_dir>/disk-commit.json keeps the images'
 * number and total size exactly (each creation and removal updates it,
 * under the state lock) and the bytes they held when last counted.  An
 * image only ever grows on the host (its file system is mounted without
 * discard, and only the helper could trim it), so those bytes are a lower
 * bound of what the images hold now, and the growth figured from them an
 * upper bound: a creation that fits by it fits.  Only one that does not is
 * counted afresh before it is refused.  The service's start counts too. */

struct disk_commit {
	uint64_t images, promised, used;
	char counted_at[32];     /* when used was counted */
};

/* A room's snapshots (room.h) promise too, where their images share
 * blocks with the room's (a reflink): the bytes each holds, which the
 * room's overwrites may leave to it alone.  A copied one took its bytes
 * from the free space at once, and promises nothing more.  dir is the
 * room's state directory. */
static uint64_t snapshots_shared(const char *dir)
{
	char p[PATH_MAX];
	uint64_t total = 0;
	if (snprintf(p, sizeof(p), "%s/snapshots", dir) >= (int)sizeof(p))
		return 0;
	int fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *e;
	while (d && (e = readdir(d))) {
		char sub[ROOM_ID_MAX + 16], info[128];
		struct stat st;
		if (e->d_name[0] == '.' || !room_id_valid(e->d_name))
			continue;
		snprintf(sub, sizeof(sub), "%s/info", e->d_name);
		int f = openat(dirfd(d), sub, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		ssize_t n = f >= 0 ? read(f, info, sizeof(info) - 1) : -1;
		if (f >= 0)
			close(f);
		info[n > 0 ? n : 0] = '\0';
		snprintf(sub, sizeof(sub), "%s/disk.img", e->d_name);
		if (strstr(info, "\n" SNAP_COPY_REFLINK "\n") &&
		    fstatat(dirfd(d), sub, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
			total += (uint64_t)st.st_blocks * 512;
	}
	if (d)
		closedir(d);
	else if (fd >= 0)
		close(fd);
	return total;
}

static const char DISK_COMMIT_FILE[] = "disk-commit.json";

/* The images under <state_dir>/rooms, counted now. */
static int disk_commit_count(const struct config *cfg, struct disk_commit *c)
{
	char p[PATH_MAX];
	struct timespec now;
	memset(c, 0, sizeof(*c));
	clock_gettime(CLOCK_REALTIME, &now);
	iso8601_utc(&now, c->counted_at, sizeof(c->counted_at));
	snprintf(p, sizeof(p), "%s/rooms", cfg->state_dir);
	int fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return errno == ENOENT ? 0 : -1;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		char img[ROOM_ID_MAX + 16];
		struct stat st;
		if (e->d_type != DT_DIR || !room_id_valid(e->d_name))
			continue;
		snprintf(img, sizeof(img), "%s/disk.img", e->d_name);
		if (fstatat(dirfd(d), img, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
			continue;
		uint64_t held = (uint64_t)st.st_blocks * 512;
		c->images++;
		c->promised += (uint64_t)st.st_size;
		c->used += held < (uint64_t)st.st_size ? held : (uint64_t)st.st_size;
		snprintf(p, sizeof(p), "%s/rooms/%s", cfg->state_dir, e->d_name);
		c->promised += snapshots_shared(p);
	}
	closedir(d);
	return 0;
}

/* The record as disk_commit_save wrote it: true, or false (none, or not
 * ours: then the caller counts). */
static bool disk_commit_load(const struct config *cfg, struct disk_commit *c)
{
	unsigned long long images = 0, promised = 0, used = 0;
	char *text = read_small(cfg->state_dir, DISK_COMMIT_FILE, 512, NULL);
	bool ok = text && sscanf(text, "{\"rooms\":%llu,\"promisedBytes\":%llu,\"usedBytes\":%llu,"
				 "\"countedAt\":\"%31[^\"]\"}", &images, &promised, &used, c->counted_at) == 4;
	free(text);
	c->images = images;
	c->promised = promised;
	c->used = used;
	return ok;
}

/* 0644: roombox-fcgi reads it for /api/health, which tells it to anyone. */
static void disk_commit_save(const struct config *cfg, const struct disk_commit *c)
{
	char text[256];
	int n = snprintf(text, sizeof(text),
			 "{\"rooms\":%llu,\"promisedBytes\":%llu,\"usedBytes\":%llu,\"countedAt\":\"%s\"}\n",
			 (unsigned long long)c->images, (unsigned long long)c->promised,
			 (unsigned long long)c->used, c->counted_at);
	record_replace(cfg->state_dir, DISK_COMMIT_FILE, text, (size_t)n, 0644);
}

/* Whether a new room of disk_limit fits beside the images of c. */
static bool disk_commit_fits(const struct config *cfg, const struct disk_commit *c, uint64_t free_bytes)
{
	uint64_t growth = c->promised > c->used ? c->promised - c->used : 0;
	return (double)(growth + cfg->disk_limit) <= (double)free_bytes * cfg->disk_overcommit;
}

/* rounded up: a promise is never told smaller than it is */
static uint64_t mib(uint64_t bytes)
{
	return (bytes + (1u << 20) - 1) >> 20;
}

/* Under the state lock, the new room's slot claimed: 0 (its promise
 * recorded), or ROOM_ENOSPACE with err when there is not enough free
 * space for it, or -1. */
static int disk_commit_check(const struct room *r, char *err, size_t errlen)
{
	const struct config *cfg = r->cfg;
	struct disk_commit c;
	struct statvfs vfs;
	if (statvfs(cfg->state_dir, &vfs) < 0)
		return ERR("room %s: free space of the state directory: %s", r->id, strerror(errno));
	uint64_t free_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
	if (!disk_commit_load(cfg, &c) || !disk_commit_fits(cfg, &c, free_bytes)) {
		if (disk_commit_count(cfg, &c) < 0)
			return ERR("room %s: count the disk images: %s", r->id, strerror(errno));
		if (!disk_commit_fits(cfg, &c, free_bytes)) {
			disk_commit_save(cfg, &c);
			ERR("room %s: create its disk image: not enough free disk: %llu MiB free on "
			    "the state directory's file system, the %llu rooms' images may still grow "
			    "by %llu MiB, a new room's disk_limit is %llu MiB (disk_overcommit %g)",
			    r->id, (unsigned long long)(free_bytes >> 20), (unsigned long long)c.images,
			    (unsigned long long)mib(c.promised - c.used),
			    (unsigned long long)mib(cfg->disk_limit), cfg->disk_overcommit);
			return ROOM_ENOSPACE;
		}
	}
	/* its image holds bytes too, but counting none keeps the bound */
	c.images++;
	c.promised += cfg->disk_limit;
	disk_commit_save(cfg, &c);
	return 0;
}

int room_disk_commit_share(const struct room *r, int64_t bytes, char *err, size_t errlen)
{
	const struct config *cfg = r->cfg;
	struct disk_commit c;
	struct statvfs vfs;
	int lock = room_state_lock(cfg), rc = 0;
	if (lock < 0)
		return ERR("room %s: state lock: %s", r->id, strerror(errno));
	if (!disk_commit_load(cfg, &c) && disk_commit_count(cfg, &c) < 0) {
		close(lock);
		return ERR("room %s: count the disk images: %s", r->id, strerror(errno));
	}
	if (bytes > 0 && statvfs(cfg->state_dir, &vfs) == 0) {
		uint64_t free_bytes = (uint64_t)vfs.f_bavail * vfs.f_frsize;
		uint64_t growth = c.promised > c.used ? c.promised - c.used : 0;
		if ((double)(growth + (uint64_t)bytes) > (double)free_bytes * cfg->disk_overcommit &&
		    disk_commit_count(cfg, &c) == 0) {
			growth = c.promised > c.used ? c.promised - c.used : 0;
			if ((double)(growth + (uint64_t)bytes) > (double)free_bytes * cfg->disk_overcommit) {
				ERR("room %s: snapshot: not enough free disk: %llu MiB free on the state "
				    "directory's file system, the images and snapshots may still grow by "
				    "%llu MiB, this snapshot shares %llu MiB (disk_overcommit %g)", r->id,
				    (unsigned long long)(free_bytes >> 20), (unsigned long long)mib(growth),
				    (unsigned long long)mib((uint64_t)bytes), cfg->disk_overcommit);
				rc = ROOM_ENOSPACE;
			}
		}
	}
	if (rc == 0 && bytes > 0)
		c.promised += (uint64_t)bytes;
	else if (rc == 0)
		c.promised -= (uint64_t)-bytes < c.promised ? (uint64_t)-bytes : c.promised;
	disk_commit_save(cfg, &c);
	close(lock);
	return rc;
}

/* The pid in a temporary file's name of a helper's (temp_write's
 * ".disk-commit.json.<pid>", disk_image_spare_make's
 * ".disk-<size>-<hash>.spare-<pid>.img"), or 0 for any other name. */
static pid_t temp_writer(const char *n)
{
	static const char rec[] = ".disk-commit.json.", spare[] = ".spare-";
	const char *p = NULL, *end;
	if (strncmp(n, rec, sizeof(rec) - 1) == 0)
		p = n + sizeof(rec) - 1;
	else if (strncmp(n, ".disk-", 6) == 0 && (p = strstr(n, spare)) != NULL)
		p += sizeof(spare) - 1;
	if (!p || *p < '1' || *p > '9')
		return 0;
	long pid = strtol(p, (char **)&end, 10);
	bool tail_ok = p == n + sizeof(rec) - 1 ? *end == '\0' : strcmp(end, ".img") == 0;
	return tail_ok && pid > 0 && pid <= INT32_MAX ? (pid_t)pid : 0;
}

/* What a helper killed in the middle of a write left in the state
 * directory (a disk-commit record under its temporary name, a spare image
 * half made), once its writer is gone. */
static void temps_sweep(const struct config *cfg)
{
	DIR *d = opendir(cfg->state_dir);
	struct dirent *e;
	while (d && (e = readdir(d))) {
		pid_t pid = temp_writer(e->d_name);
		if (pid > 0 && kill(pid, 0) < 0 && errno == ESRCH)
			unlinkat(dirfd(d), e->d_name, 0);
	}
	if (d)
		closedir(d);
}

void room_disk_commit_count(const struct config *cfg)
{
	struct disk_commit c;
	int lock = room_state_lock(cfg);
	if (lock >= 0)
		temps_sweep(cfg);
	if (lock >= 0 && disk_commit_count(cfg, &c) == 0)
		disk_commit_save(cfg, &c);
	if (lock >= 0)
		close(lock);
}

/* A removed image's promise given back: its size and the bytes it held
 * (more than or as many as were counted for it, so what is left stays a
 * lower bound). */
static void disk_commit_forget(const struct config *cfg, const struct stat *img)
{
	struct disk_commit c;
	int lock = room_state_lock(cfg);
	if (lock < 0)
		return;
	if (disk_commit_load(cfg, &c)) {
		uint64_t size = (uint64_t)img->st_size, held = (uint64_t)img->st_blocks * 512;
		c.images -= c.images > 0;
		c.promised -= size < c.promised ? size : c.promised;
		c.used -= held < c.used ? held : c.used;
		disk_commit_save(cfg, &c);
	} else if (disk_commit_count(cfg, &c) == 0) {
		disk_commit_save(cfg, &c);
	}
	close(lock);
}

int room_create(struct room *r, char *err, size_t errlen)
{
	int gfd = room_state_lock(r->cfg);
	if (gfd < 0)
		return ERR("room %s: state lock: %s", r->id, strerror(errno));
	r->create_lock = gfd;
	int slot = slot_claim(r, err, errlen);
	if (slot < 0) {
		room_create_abort(r);
		return slot;
	}
	room_set_slot(r, slot);
	int rc = r->cfg->disk_limit ? disk_commit_check(r, err, errlen) : 0;
	if (rc < 0) {
		room_create_abort(r);
		return rc;
	}
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	iso8601_utc(&now, r->created_at, sizeof(r->created_at));
	r->ids_room = true;
	return 0;
}

int room_create_dirs(const struct room *r, char *err, size_t errlen)
{
	char p[PATH_MAX];
	/* No meta, so whatever is here is not this room's: the leftovers of a
	 * creation that crashed or of a destroy that failed half-way. */
	if (rm_tree(r->state) < 0)
		return remove_failed(r, rm_failed, rm_errno, err, errlen);
	if (mkdir(r->state, 0700) < 0 && errno != EEXIST)
		return ERR("room %s: mkdir state: %s", r->id, strerror(errno));
	if (room_dir_check(r, r->state, err, errlen) < 0)
		return -1;
	snprintf(p, sizeof(p), "%s/disk", r->state);
	if (mkdir(p, 0700) < 0 && errno != EEXIST)
		return ERR("room %s: mkdir disk: %s", r->id, strerror(errno));
	return 0;
}

int room_create_files(const struct room *r, char *err, size_t errlen)
{
	char p[PATH_MAX], tpl[PATH_MAX];
	if (room_create_dirs(r, err, errlen) < 0)
		return -1;
	if (!r->cfg->disk_limit)
		return 0;
	snprintf(p, sizeof(p), "%s/disk.img", r->state);
	char spare[PATH_MAX];
	disk_template_names(r->cfg, tpl, spare, sizeof(tpl));
	if (disk_template(r->cfg, tpl, err, errlen) < 0)
		return room_error_relative(r, "create its disk image", err, errlen);
	/* the image made ahead (disk_image_spare_make), if there is one */
	if (rename(spare, p) == 0)
		return 0;
	if (disk_image_create(p, tpl, r->cfg->disk_limit, err, errlen) < 0)
		return room_error_relative(r, "create its disk image", err, errlen);
	return 0;
}

int room_create_finish(struct room *r, char *err, size_t errlen)
{
	/* meta last: a room without meta does not exist, so a crash before
	 * this point leaves nothing that holds a slot. */
	if (meta_write(r) < 0) {
		ERR("room %s: write meta: %s", r->id, strerror(errno));
		room_create_abort(r);
		return -1;
	}
	room_touch_active(r);
	flock(r->create_lock, LOCK_UN);
	close(r->create_lock);
	r->create_lock = -1;
	return 0;
}

void room_create_abort(struct room *r)
{
	if (r->create_lock < 0)
		return;
	if (r->slot >= 0) {
		room_slot_release(r);
		r->slot = -1;
	}
	/* unlocked explicitly: children made meanwhile share the open file */
	flock(r->create_lock, LOCK_UN);
	close(r->create_lock);
	r->create_lock = -1;
}

/* Field 22 of /proc/<pid>/stat: start time in clock ticks since boot; 0 if
 * the process is gone. */
static unsigned long long proc_starttime(pid_t pid)
{
	char p[64], buf[1024];
	snprintf(p, sizeof(p), "/proc/%d/stat", (int)pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	char *s = strrchr(buf, ')');
	if (!s)
		return 0;
	/* after ")": field 3 is state; starttime is field 22.  A zombie is
	 * dead even if nobody has reaped it yet. */
	s += 2;
	if (*s == 'Z' || *s == 'X')
		return 0;
	for (int field = 3; field < 22 && s; field++) {
		s = strchr(s, ' ');
		if (s)
			s++;
	}
	return s ? strtoull(s, NULL, 10) : 0;
}

pid_t room_keeper_pid(const struct room *r)
{
	char *text = read_small(r->run, "keeper", 64, NULL);
	if (!text)
		return 0;
	long pid = 0;
	unsigned long long start = 0;
	int ok = sscanf(text, "%ld %llu", &pid, &start) == 2;
	free(text);
	if (!ok || pid <= 1)
		return 0;
	unsigned long long now = proc_starttime((pid_t)pid);
	return now && now == start ? (pid_t)pid : 0;
}

int room_keeper_record(const struct room *r, pid_t pid, char *err, size_t errlen)
{
	char text[64];
	int n = snprintf(text, sizeof(text), "%d %llu\n", (int)pid, proc_starttime(pid));
	/* run_dir is a tmpfs: nothing to sync, and a reboot forgets keepers */
	if (room_file_write(r->run, "keeper", text, (size_t)n, false) < 0)
		return ERR("room %s: record keeper: %s", r->id, strerror(errno));
	return 0;
}

void room_keeper_forget(const struct room *r)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/keeper", r->run);
	unlink(p);
}

void room_loop_note(const struct room *r, const char *dev)
{
	room_file_write(r->run, "loop", dev, strlen(dev), false);
}

char *room_loop_hint(const struct room *r)
{
	char *text = read_small(r->run, "loop", 64, NULL);
	if (text && strncmp(text, "/dev/loop", 9) != 0) {
		free(text);
		text = NULL;
	}
	return text;
}

int room_busy_enter(const struct room *r)
{
	int fd = open_in(r->run, "busy", O_RDWR | O_CREAT, 0600);
	if (fd >= 0 && flock(fd, LOCK_SH) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

void room_marks_open(const struct room *r, int *busy, int *active)
{
	*busy = open_in(r->run, "busy", O_RDWR | O_CREAT, 0600);
	*active = open_in(r->state, "active", O_WRONLY | O_CREAT, 0600);
}

bool room_is_busy(const struct room *r)
{
	int fd = open_in(r->run, "busy", O_RDWR, 0);
	if (fd < 0)
		return false;
	bool busy = flock(fd, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK;
	close(fd);
	return busy;
}

bool room_touch_active_existing(const struct room *r)
{
	char p[PATH_MAX];
	return path_in(p, r->state, "active") == 0 && utimensat(AT_FDCWD, p, NULL, AT_SYMLINK_NOFOLLOW) == 0;
}

/* One system call on every exec (the file is there after the first):
 * the mtime is set through the path, not following a symlink; only a
 * missing file is created. */
void room_touch_active(const struct room *r)
{
	if (room_touch_active_existing(r) || errno != ENOENT)
		return;
	int fd = open_in(r->state, "active", O_WRONLY | O_CREAT, 0600);
	if (fd >= 0) {
		futimens(fd, NULL);
		close(fd);
	}
}

int64_t room_last_active_ms(const struct room *r)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof(p), "%s/active", r->state);
	if (lstat(p, &st) < 0)
		return 0;
	return (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
}

/* Root's session keeps the name a room's one session had before the user
 * got one of its own: a room from then keeps it as root's (it ran as root
 * by default), and its user starts afresh. */
static const char *session_name(bool as_user)
{
	return as_user ? "session.user" : "session";
}

char *room_session_read(const struct room *r, bool as_user, size_t max)
{
	int fd = room_session_open(r, as_user, O_RDONLY);
	char *s = fd >= 0 ? session_file_read(fd, max) : NULL;
	if (fd >= 0)
		close(fd);
	return s ? s : strdup("");
}

/* Not fsync'd: the session is a convenience, and this runs on every exec.
 * In place (session_file.h): a keeper's exec channel holds the file open. */
int room_session_write(const struct room *r, bool as_user, const char *text, size_t len)
{
	int fd = room_session_open(r, as_user, O_RDWR | O_CREAT);
	if (fd < 0)
		return -1;
	int rc = session_file_write(fd, text, len);
	close(fd);
	return rc;
}

int room_session_open(const struct room *r, bool as_user, int flags)
{
	return open_in(r->state, session_name(as_user), flags, 0600);
}

static uint64_t du_total;
static int du_add(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	du_total += (uint64_t)st->st_blocks * 512;
	return 0;
}

uint64_t room_disk_usage(const struct room *r)
{
	char p[PATH_MAX];
	struct stat st;
	snprintf(p, sizeof(p), "%s/disk.img", r->state);
	if (lstat(p, &st) == 0)
		return (uint64_t)st.st_blocks * 512;
	snprintf(p, sizeof(p), "%s/disk", r->state);
	du_total = 0;
	nftw(p, du_add, 32, FTW_PHYS | FTW_MOUNT);
	return du_total;
}

/* rm_failed and rm_errno: the first entry rm_tree could not remove, and
 * why (nftw passes no context to its callback). */
static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	int rc = flag == FTW_DP ? rmdir(path) : unlink(path);
	if (rc < 0 && errno != ENOENT) {
		rm_errno = errno;
		snprintf(rm_failed, sizeof(rm_failed), "%s", path);
		return -1;
	}
	return 0;
}

static int rm_tree(const char *path)
{
	struct stat st;
	rm_errno = 0;
	snprintf(rm_failed, sizeof(rm_failed), "%s", path);
	if (lstat(path, &st) < 0) {
		rm_errno = errno;
		return errno == ENOENT ? 0 : -1;
	}
	int rc = nftw(path, rm_one, 32, FTW_PHYS | FTW_MOUNT | FTW_DEPTH);
	if (rc != 0 && !rm_errno)
		rm_errno = errno;	/* nftw's own failure: open or stat */
	return rc != 0 ? -1 : 0;
}

/* A failed removal: the host path goes to the service log (our stderr is
 * roombox-fcgi's), the caller's message names only the room, since it
 * reaches clients. */
static int remove_failed(const struct room *r, const char *path, int e, char *err, size_t errlen)
{
	fprintf(stderr, "roombox-helper: room %s: remove %s: %s\n", r->id, path, strerror(e));
	return ERR("room %s: remove files: %s", r->id, strerror(e));
}

int room_forget(const struct room *r, char *err, size_t errlen)
{
	char p[PATH_MAX];
	struct stat st;
	/* no real directory, no meta of ours: never unlink through a link */
	if (lstat(r->state, &st) < 0 || !S_ISDIR(st.st_mode))
		return 0;
	if (path_in(p, r->state, "meta") < 0)
		return ERR("room %s: remove meta: %s", r->id, strerror(errno));
	if (unlink(p) < 0 && errno != ENOENT && errno != ENOTDIR) {
		int e = errno;
		fprintf(stderr, "roombox-helper: room %s: remove %s: %s\n", r->id, p, strerror(e));
		return ERR("room %s: remove meta: %s", r->id, strerror(e));
	}
	return 0;
}

int room_remove_files(const struct room *r, char *err, size_t errlen)
{
	char p[PATH_MAX];
	struct stat img;
	if (room_forget(r, err, errlen) < 0)
		return -1;
	bool had_image = path_in(p, r->state, "disk.img") == 0 && lstat(p, &img) == 0 &&
			 S_ISREG(img.st_mode);
	uint64_t shared = snapshots_shared(r->state);
	if (rm_tree(r->state) < 0)
		return remove_failed(r, rm_failed, rm_errno, err, errlen);
	if (had_image)
		disk_commit_forget(r->cfg, &img);
	char ignored[256];
	if (shared)
		room_disk_commit_share(r, -(int64_t)shared, ignored, sizeof(ignored));
	if (rm_tree(r->run) < 0)
		return remove_failed(r, rm_failed, rm_errno, err, errlen);
	return 0;
}

int room_foreach(const struct config *cfg, int (*fn)(const char *id, void *arg), void *arg)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/rooms", cfg->state_dir);
	DIR *d = opendir(p);
	if (!d)
		return errno == ENOENT ? 0 : -1;
	struct dirent *e;
	int rc = 0;
	while ((e = readdir(d))) {
		if (e->d_type != DT_DIR || !room_id_valid(e->d_name))
			continue;
		if ((rc = fn(e->d_name, arg)) != 0)
			break;
	}
	closedir(d);
	return rc;
}
