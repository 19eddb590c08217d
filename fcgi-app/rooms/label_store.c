/* A room's labels (see label_store.h).
 *
 * Why it is built this way: labels are the client's, not the sandbox's,
 * so they live with roombox-fcgi's other per-room data (messages,
 * previews), outside every room, and need no privilege.  One small file
 * per room, written whole under a temporary name and renamed, so a crash
 * leaves the old labels or the new ones.  A patch is a read, a merge and
 * a write under an exclusive flock of the directory, so two patches of
 * one room (from any thread or process) do not lose each other's keys;
 * readers need no lock (rename is atomic). */
#include "label_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errbuf.h"
#include "http.h"
#include "json_strict.h"
#include "room_settings.h"
#include "roomid.h"

/* LABELS_MAX labels of 63 + 63 characters, quoted, fit well below this */
#define LABEL_FILE_MAX 16384

static int label_dirfd = -1;

int label_store_init(const char *dir, char *err, size_t errlen)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return errorf(err, errlen, "labels store %s: create: %m", dir);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errorf(err, errlen, "labels store %s: open: %m", dir);
	if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) < 0) {
		close(fd);
		return errorf(err, errlen, "labels store %s: not writable: %m", dir);
	}
	label_dirfd = fd;
	return 0;
}

static int usable(const char *room, char *err, size_t errlen)
{
	if (label_dirfd < 0)
		return errorf(err, errlen, "room %s: labels: store not open", room);
	if (!room_id_valid(room))
		return errorf(err, errlen, "labels: invalid room id");
	return 0;
}

json_object *labels_get(const char *room, char *err, size_t errlen)
{
	char text[LABEL_FILE_MAX + 1];
	json_object *o = NULL;
	if (usable(room, err, errlen) < 0)
		return NULL;
	int fd = openat(label_dirfd, room, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		if (errno == ENOENT)
			return json_object_new_object();
		errorf(err, errlen, "room %s: labels: open: %m", room);
		return NULL;
	}
	ssize_t n = read(fd, text, LABEL_FILE_MAX);
	close(fd);
	if (n < 0 || json_parse_strict(text, (size_t)n, &o, err, errlen) < 0 ||
	    !json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		errorf(err, errlen, "room %s: labels: unreadable", room);
		return NULL;
	}
	return o;
}

static int labels_write(const char *room, json_object *labels, char *err, size_t errlen)
{
	char tmp[ROOM_ID_MAX + 8];
	size_t len;
	const char *text = json_write(labels, &len);
	snprintf(tmp, sizeof(tmp), ".%s", room);
	int fd = openat(label_dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return errorf(err, errlen, "room %s: labels: create: %m", room);
	bool ok = write(fd, text, len) == (ssize_t)len && fsync(fd) == 0;
	close(fd);
	if (!ok || renameat(label_dirfd, tmp, label_dirfd, room) < 0) {
		unlinkat(label_dirfd, tmp, 0);
		return errorf(err, errlen, "room %s: labels: write: %m", room);
	}
	fsync(label_dirfd);
	return 0;
}

json_object *labels_patch(const char *room, json_object *patch, bool *too_many,
			  char *err, size_t errlen)
{
	json_object *old, *labels = NULL;
	*too_many = false;
	if (usable(room, err, errlen) < 0)
		return NULL;
	int lock = openat(label_dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (lock < 0 || flock(lock, LOCK_EX) < 0) {
		errorf(err, errlen, "room %s: labels: lock: %m", room);
		if (lock >= 0)
			close(lock);
		return NULL;
	}
	old = labels_get(room, err, errlen);
	if (old) {
		labels = labels_patched(old, patch, err, errlen);
		*too_many = labels == NULL;
		json_object_put(old);
	}
	if (labels && labels_write(room, labels, err, errlen) < 0) {
		json_object_put(labels);
		labels = NULL;
	}
	close(lock);
	return labels;
}

int labels_forget(const char *room, char *err, size_t errlen)
{
	if (usable(room, err, errlen) < 0)
		return -1;
	if (unlinkat(label_dirfd, room, 0) < 0 && errno != ENOENT)
		return errorf(err, errlen, "room %s: labels: remove: %m", room);
	return 0;
}
