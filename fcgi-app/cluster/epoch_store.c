/* Each room's local epoch (see epoch_store.h).
 *
 * Why it is built this way: the epoch says which copy of a room this is
 * (etcd's record names the host and the epoch of the copy that may be
 * served), so it lives with roombox-fcgi's other per-room data in the
 * state directory (<state_dir>/epochs/<room>, beside messages, previews
 * and labels), survives restarts, and needs no privilege.  One small file
 * per room, written whole under a temporary name and renamed: a crash
 * leaves the old epoch or the new one, never a torn number. */
#include "epoch_store.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errbuf.h"
#include "roomid.h"

static int epoch_dirfd = -1;
/* one writer at a time: concurrent first requests of a room write the same
 * epoch under the same temporary name */
static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;

int epoch_store_init(const char *dir, char *err, size_t errlen)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return errorf(err, errlen, "epochs store %s: create: %m", dir);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errorf(err, errlen, "epochs store %s: open: %m", dir);
	epoch_dirfd = fd;
	return 0;
}

int epoch_get(const char *room, uint64_t *epoch, char *err, size_t errlen)
{
	char text[32];

	*epoch = 0;
	if (epoch_dirfd < 0 || !room_id_valid(room))
		return errorf(err, errlen, "room %s: epoch: store not open", room);
	int fd = openat(epoch_dirfd, room, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : errorf(err, errlen, "room %s: epoch: open: %m", room);
	ssize_t n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return errorf(err, errlen, "room %s: epoch: read: %s", room, n < 0 ? strerror(errno) : "empty");
	text[n] = '\0';
	char *end;
	errno = 0;
	unsigned long long v = strtoull(text, &end, 10);
	if (errno || end == text || (*end && *end != '\n') || v == 0)
		return errorf(err, errlen, "room %s: epoch: not a number", room);
	*epoch = v;
	return 0;
}

static int epoch_write(const char *room, uint64_t epoch, char *err, size_t errlen)
{
	char tmp[ROOM_ID_MAX + 16], text[32];

	if (epoch_dirfd < 0 || !room_id_valid(room))
		return errorf(err, errlen, "room %s: epoch: store not open", room);
	snprintf(tmp, sizeof(tmp), ".%s.tmp", room);
	int n = snprintf(text, sizeof(text), "%llu\n", (unsigned long long)epoch);
	int fd = openat(epoch_dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return errorf(err, errlen, "room %s: epoch: create: %m", room);
	if (write(fd, text, (size_t)n) != n || fsync(fd) < 0) {
		int e = errno;
		close(fd);
		unlinkat(epoch_dirfd, tmp, 0);
		errno = e;
		return errorf(err, errlen, "room %s: epoch: write: %m", room);
	}
	close(fd);
	if (renameat(epoch_dirfd, tmp, epoch_dirfd, room) < 0) {
		unlinkat(epoch_dirfd, tmp, 0);
		return errorf(err, errlen, "room %s: epoch: rename: %m", room);
	}
	return 0;
}

int epoch_set(const char *room, uint64_t epoch, char *err, size_t errlen)
{
	pthread_mutex_lock(&write_lock);
	int rc = epoch_write(room, epoch, err, errlen);
	pthread_mutex_unlock(&write_lock);
	return rc;
}

int epoch_forget(const char *room, char *err, size_t errlen)
{
	if (epoch_dirfd < 0 || !room_id_valid(room))
		return errorf(err, errlen, "room %s: epoch: store not open", room);
	if (unlinkat(epoch_dirfd, room, 0) < 0 && errno != ENOENT)
		return errorf(err, errlen, "room %s: epoch: remove: %m", room);
	return 0;
}

/* ---- this host's drained state, as last heard from etcd ---- */

static const char MAINT_FILE[] = ".maint";   /* never a room id */

bool epoch_store_maint_get(void)
{
	return epoch_dirfd >= 0 && faccessat(epoch_dirfd, MAINT_FILE, F_OK, AT_SYMLINK_NOFOLLOW) == 0;
}

int epoch_store_maint_set(bool maint, char *err, size_t errlen)
{
	if (epoch_dirfd < 0)
		return errorf(err, errlen, "host state: store not open");
	if (maint) {
		int fd = openat(epoch_dirfd, MAINT_FILE, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		int rc = fd < 0 || fsync(fd) < 0 ? -1 : 0;
		if (fd >= 0 && close(fd) < 0)
			rc = -1;
		if (rc < 0 || fsync(epoch_dirfd) < 0)
			return errorf(err, errlen, "host state: write %s: %m", MAINT_FILE);
	} else if (unlinkat(epoch_dirfd, MAINT_FILE, 0) < 0 && errno != ENOENT) {
		return errorf(err, errlen, "host state: remove %s: %m", MAINT_FILE);
	}
	return 0;
}
