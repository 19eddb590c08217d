/* The message store: one append-only file per room, "<dir>/<room>.jsonl".
 *
 * Why it is built this way:
 *
 * - Framing: one record per line, the message object written by json-c in
 *   its plain form, which escapes every control character, so a record never
 *   holds a raw "\n" (checked before writing).  A record counts only once
 *   its "\n" is there: a crash mid-write leaves a last line without one,
 *   and that torn tail is simply not listed.  Readable with `cat` and `jq`.
 * - The torn tail is cut away (ftruncate to just after the last "\n") by the
 *   next append, under the lock, so a new record never glues onto it.  A
 *   complete line that does not parse (only disk corruption makes one) is
 *   skipped, so one bad record never hides the others.
 * - Locking: flock on the room's file, exclusive to append or reset, shared
 *   to list.  Every call opens the file itself, and flock locks belong to
 *   the open file, so the lock orders threads of one process exactly as it
 *   orders processes.  The lock is held from before the tail check until
 *   after fsync, so records land whole and in the order their appends took
 *   the lock, and a reader never sees a record before it is durable.  The
 *   file is also opened O_APPEND, so even a writer that ignored the lock
 *   could not overwrite a record.
 * - Durability: fsync of the file before an append returns (the 201 is sent
 *   only after the message is on disk), plus fsync of the directory whenever
 *   the file was empty when we took the lock: that covers "we created it"
 *   and "someone created it and died before syncing the directory"; keying
 *   it on who created the file would let a second appender answer 201 before
 *   the creator had synced the directory.
 * - Reset unlinks the file (a deleted room leaves nothing behind) while
 *   holding the lock, then syncs the directory so the messages stay gone
 *   after a crash.  An appender that opened the file before and waited for
 *   the lock finds it unlinked (st_nlink == 0) and opens the path again.
 * - createdAt is taken under the lock, so file order is also time order
 *   (unless the clock steps back). */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uuid/uuid.h>

#include "errbuf.h"
#include "json_strict.h"
#include "roomid.h"
#include "textenc.h"
#include "timefmt.h"

#define STORE_SUFFIX ".jsonl"
/* The plain form is what guarantees one record per line (see above). */
#define STORE_JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
/* Reopen attempts when resets keep unlinking the file under us. */
#define STORE_OPEN_TRIES 100

/* Written by store_init only (see store.h). */
static int store_dirfd = -1;

/* "room R: messages: step: <errno text>"; errno must still be the cause. */
static int room_error(char *err, size_t errlen, const char *room, const char *step)
{
	return errorf(err, errlen, "room %s: messages: %s: %m", room, step);
}

/* ---- init ---- */

/* Make a new directory's own entry durable: fsync its parent. */
static int fsync_parent(const char *dir)
{
	char parent[PATH_MAX];
	char *slash;
	int fd, rc;

	snprintf(parent, sizeof(parent), "%s", dir);
	for (size_t n = strlen(parent); n > 1 && parent[n - 1] == '/'; n--)
		parent[n - 1] = '\0';
	slash = strrchr(parent, '/');
	if (!slash)
		snprintf(parent, sizeof(parent), ".");
	else if (slash == parent)
		parent[1] = '\0';
	else
		*slash = '\0';
	fd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

int store_init(const char *dir, char *err, size_t errlen)
{
	bool created = true;
	int fd;

	if (mkdir(dir, 0700) < 0) {
		if (errno != EEXIST)
			return errorf(err, errlen, "messages store %s: create: %m", dir);
		created = false;
	}
	if (created && fsync_parent(dir) < 0)
		return errorf(err, errlen, "messages store %s: fsync parent: %m", dir);
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return errorf(err, errlen, "messages store %s: open: %m", dir);
	/* Say so at start rather than at the first message. */
	if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) < 0) {
		close(fd);
		return errorf(err, errlen, "messages store %s: not writable: %m", dir);
	}
	if (store_dirfd >= 0)
		close(store_dirfd);
	store_dirfd = fd;
	return 0;
}

/* ---- the room's file ---- */

/* "<room>.jsonl" into name; -1 with err set for a bad room id. */
static int room_file_name(const char *room, char *name, size_t size,
			  char *err, size_t errlen)
{
	if (!room_id_valid(room))
		return errorf(err, errlen, "messages: invalid room id");
	if (store_dirfd < 0)
		return errorf(err, errlen, "room %s: messages: store not initialised", room);
	snprintf(name, size, "%s" STORE_SUFFIX, room);
	return 0;
}

static int flock_retry(int fd, int op)
{
	int rc;

	do
		rc = flock(fd, op);
	while (rc < 0 && errno == EINTR);
	return rc;
}

static int close_keep_errno(int fd)
{
	int saved = errno;

	close(fd);
	errno = saved;
	return -1;
}

/* Open the room's file (flags: O_RDONLY, or O_RDWR|O_CREAT|O_APPEND) and
 * take the lock.  Returns the fd with *st filled, or -1 with errno set and
 * *step naming what failed (errno ENOENT: no file and no O_CREAT).
 * O_NONBLOCK only keeps a FIFO at that name from hanging the open; it
 * changes nothing for regular files, nor for flock. */
static int room_open_locked(const char *name, int flags, int lock,
			    struct stat *st, const char **step)
{
	for (int tries = 0; tries < STORE_OPEN_TRIES; tries++) {
		int fd = openat(store_dirfd, name,
				flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);

		*step = "open";
		if (fd < 0)
			return -1;
		if (fstat(fd, st) < 0)
			return close_keep_errno(fd);
		if (!S_ISREG(st->st_mode)) {
			errno = S_ISDIR(st->st_mode) ? EISDIR : EINVAL;
			return close_keep_errno(fd);
		}
		*step = "lock";
		if (flock_retry(fd, lock) < 0)
			return close_keep_errno(fd);
		*step = "stat";
		if (fstat(fd, st) < 0)
			return close_keep_errno(fd);
		if (st->st_nlink > 0)
			return fd;
		close(fd);	/* a reset removed it while we waited: again */
	}
	*step = "open (the file keeps being removed)";
	errno = EAGAIN;
	return -1;
}

/* ---- append ---- */

/* Cut a torn last record (no "\n" at its end: a crash mid-append) so the
 * next record starts a line of its own.  Returns the new size, or -1. */
static off_t tail_repair(int fd, off_t size)
{
	char buf[4096];
	off_t end = size;

	while (end > 0) {
		size_t n = end > (off_t)sizeof(buf) ? sizeof(buf) : (size_t)end;
		ssize_t got = pread(fd, buf, n, end - (off_t)n);
		char *nl;

		if (got != (ssize_t)n) {
			if (got >= 0)
				errno = EIO;
			return -1;
		}
		nl = memrchr(buf, '\n', n);
		if (nl) {
			end = end - (off_t)n + (nl - buf) + 1;
			break;
		}
		end -= (off_t)n;
	}
	if (end != size && ftruncate(fd, end) < 0)
		return -1;
	return end;
}

static int json_add_string(json_object *obj, const char *key, const char *s, size_t len)
{
	json_object *v;

	if (len > INT_MAX)
		return -1;
	v = json_object_new_string_len(s, (int)len);
	if (!v)
		return -1;
	if (json_object_object_add(obj, key, v) < 0) {
		json_object_put(v);
		return -1;
	}
	return 0;
}

/* A new message object with a fresh id and createdAt = now. */
static json_object *message_new(const char *role, const char *content, size_t len)
{
	json_object *msg = json_object_new_object();
	struct timespec now;
	char id[37], created[32];
	uuid_t uu;

	if (!msg)
		return NULL;
	uuid_generate_random(uu);
	uuid_unparse_lower(uu, id);
	clock_gettime(CLOCK_REALTIME, &now);
	iso8601_utc(&now, created, sizeof(created));
	if (json_add_string(msg, "id", id, strlen(id)) < 0 ||
	    json_add_string(msg, "role", role, strlen(role)) < 0 ||
	    json_add_string(msg, "content", content, len) < 0 ||
	    json_add_string(msg, "createdAt", created, strlen(created)) < 0) {
		json_object_put(msg);
		return NULL;
	}
	return msg;
}

/* The record: the message in plain JSON and "\n"; malloc'd. */
static char *record_new(json_object *msg, size_t *len)
{
	size_t n = 0;
	const char *s = json_object_to_json_string_length(msg, STORE_JSON_FLAGS, &n);
	char *rec;

	if (!s || memchr(s, '\n', n)) {
		errno = s ? EINVAL : ENOMEM;
		return NULL;
	}
	rec = malloc(n + 1);
	if (!rec) {
		errno = ENOMEM;
		return NULL;
	}
	memcpy(rec, s, n);
	rec[n] = '\n';
	*len = n + 1;
	return rec;
}

static int write_all(int fd, const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			return -1;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* With the lock held: write the record at the end and make it durable.  On
 * failure the file is cut back to `size`, so a message whose append failed
 * is not listed (best effort: that may fail too, and then the next append
 * cuts the torn tail). */
static int record_write_locked(int fd, off_t size, const char *rec, size_t len,
			       const char **step)
{
	int saved;

	*step = "write";
	if (write_all(fd, rec, len) < 0)
		goto undo;
	*step = "fsync";
	if (fsync(fd) < 0)
		goto undo;
	*step = "fsync directory";
	if (size == 0 && fsync(store_dirfd) < 0)
		goto undo;
	return 0;
undo:
	saved = errno;
	if (ftruncate(fd, size) == 0)
		fsync(fd);
	errno = saved;
	return -1;
}

/* Everything under the lock: repair, stamp, serialise, write, sync. */
static int append_locked(int fd, const struct stat *st, const char *role,
			 const char *content, size_t content_len,
			 json_object **msg, const char **step)
{
	off_t size;
	char *rec;
	size_t len;
	int rc;

	*step = "cut torn last record";
	size = tail_repair(fd, st->st_size);
	if (size < 0)
		return -1;
	*step = "build record";
	*msg = message_new(role, content, content_len);
	if (!*msg) {
		errno = ENOMEM;
		return -1;
	}
	rec = record_new(*msg, &len);
	if (!rec)
		return -1;
	if ((uint64_t)size + len > STORE_MAX_BYTES) {
		free(rec);
		*step = NULL;
		return STORE_FULL;
	}
	rc = record_write_locked(fd, size, rec, len, step);
	free(rec);
	return rc;
}

static void full_error(const char *room, char *err, size_t errlen)
{
	errorf(err, errlen, "room %s: messages: full: a room keeps at most %u MiB of messages "
	       "(DELETE the room to start its conversation again)", room, STORE_MAX_BYTES >> 20);
}

int store_append(const char *room, const char *role, const char *content,
		 size_t content_len, json_object **message, char *err, size_t errlen)
{
	char name[ROOM_ID_MAX + sizeof(STORE_SUFFIX)];
	json_object *msg = NULL;
	const char *step;
	struct stat st;
	int fd, rc;

	if (message)
		*message = NULL;
	if (room_file_name(room, name, sizeof(name), err, errlen) < 0)
		return -1;
	fd = room_open_locked(name, O_RDWR | O_CREAT | O_APPEND, LOCK_EX, &st, &step);
	if (fd < 0)
		return room_error(err, errlen, room, step);
	rc = append_locked(fd, &st, role, content, content_len, &msg, &step);
	if (rc == STORE_FULL)
		full_error(room, err, errlen);
	else if (rc < 0)
		room_error(err, errlen, room, step);
	close(fd);	/* releases the lock */
	if (rc < 0 || !message)
		json_object_put(msg);
	else
		*message = msg;
	return rc;
}

/* ---- list ---- */

/* The whole file (size bytes, which cannot change under the shared lock). */
static char *file_read(int fd, size_t size)
{
	char *buf = malloc(size ? size : 1);
	size_t got = 0;

	if (!buf)
		return NULL;
	while (got < size) {
		ssize_t n = pread(fd, buf + got, size - got, (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = EIO;
			free(buf);
			return NULL;
		}
		got += (size_t)n;
	}
	return buf;
}

/* The four fields of a message, in the order a record has them. */
static const char *const message_keys[] = { "id", "role", "content", "createdAt" };

/* obj's `key` when it is a string of valid UTF-8, else NULL. */
static json_object *utf8_field(json_object *obj, const char *key)
{
	json_object *v;

	if (!json_object_object_get_ex(obj, key, &v) ||
	    !json_object_is_type(v, json_type_string) ||
	    !utf8_valid(json_object_get_string(v), (size_t)json_object_get_string_len(v)))
		return NULL;
	return v;
}

/* One line as a message, or NULL when it is not one.  json-c is lenient
 * (NaN, single quotes, invalid UTF-8 in strings), and a corrupt line must
 * not reach a client as invalid JSON: the message is built anew from the
 * four fields, each a string of valid UTF-8, and anything else in the line
 * is dropped.  A record store_append wrote always passes. */
static json_object *record_parse(json_tokener *tok, const char *line, size_t len)
{
	json_object *obj, *msg = NULL;

	if (len == 0 || len > INT_MAX)
		return NULL;
	json_tokener_reset(tok);
	obj = json_tokener_parse_ex(tok, line, (int)len);
	if (!obj || json_tokener_get_error(tok) != json_tokener_success ||
	    json_tokener_get_parse_end(tok) != len ||
	    !json_object_is_type(obj, json_type_object))
		goto out;
	msg = json_object_new_object();
	for (size_t i = 0; msg && i < sizeof(message_keys) / sizeof(message_keys[0]); i++) {
		json_object *v = utf8_field(obj, message_keys[i]);

		if (!v || json_object_object_add(msg, message_keys[i], json_object_get(v)) < 0) {
			if (v)
				json_object_put(v);
			json_object_put(msg);
			msg = NULL;
		}
	}
out:
	json_object_put(obj);
	return msg;
}

/* Every complete line that is a message, in order; the text after the last
 * "\n" is a torn record and is left out. */
static json_object *records_parse(const char *buf, size_t len)
{
	json_object *list = json_object_new_array();
	json_tokener *tok = json_tokener_new();
	const char *nl;
	size_t pos = 0;

	if (!list || !tok)
		goto fail;
	while ((nl = memchr(buf + pos, '\n', len - pos)) != NULL) {
		size_t n = (size_t)(nl - (buf + pos));
		json_object *msg = record_parse(tok, buf + pos, n);

		if (msg && json_object_array_add(list, msg) < 0) {
			json_object_put(msg);
			goto fail;
		}
		pos += n + 1;
	}
	json_tokener_free(tok);
	return list;
fail:
	if (tok)
		json_tokener_free(tok);
	json_object_put(list);
	return NULL;
}

json_object *store_list(const char *room, char *err, size_t errlen)
{
	char name[ROOM_ID_MAX + sizeof(STORE_SUFFIX)];
	json_object *list;
	const char *step;
	struct stat st;
	char *buf;
	int fd;

	if (room_file_name(room, name, sizeof(name), err, errlen) < 0)
		return NULL;
	fd = room_open_locked(name, O_RDONLY, LOCK_SH, &st, &step);
	if (fd < 0 && errno == ENOENT)
		return json_object_new_array();
	if (fd < 0) {
		room_error(err, errlen, room, step);
		return NULL;
	}
	buf = file_read(fd, (size_t)st.st_size);
	if (!buf)
		room_error(err, errlen, room, "read");
	close(fd);
	if (!buf)
		return NULL;
	list = records_parse(buf, (size_t)st.st_size);
	free(buf);
	if (!list)
		errorf(err, errlen, "room %s: messages: parse: out of memory", room);
	return list;
}

int store_room_for(const char *room, size_t bytes, char *err, size_t errlen)
{
	char name[ROOM_ID_MAX + sizeof(STORE_SUFFIX)];
	struct stat st;

	if (room_file_name(room, name, sizeof(name), err, errlen) < 0)
		return -1;
	if (fstatat(store_dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
	    (uint64_t)st.st_size + bytes <= STORE_MAX_BYTES)
		return 0;
	full_error(room, err, errlen);
	return STORE_FULL;
}

bool store_has_messages(const char *room)
{
	char name[ROOM_ID_MAX + sizeof(STORE_SUFFIX)], err[64];
	struct stat st;

	return room_file_name(room, name, sizeof(name), err, sizeof(err)) == 0 &&
	       fstatat(store_dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_size > 0;
}

/* ---- reset ---- */

int store_reset(const char *room, char *err, size_t errlen)
{
	char name[ROOM_ID_MAX + sizeof(STORE_SUFFIX)];
	const char *step;
	struct stat st;
	int fd, rc = 0;

	if (room_file_name(room, name, sizeof(name), err, errlen) < 0)
		return -1;
	fd = room_open_locked(name, O_RDONLY, LOCK_EX, &st, &step);
	if (fd < 0 && errno == ENOENT)
		return 0;	/* nothing stored: nothing to do */
	if (fd < 0)
		return room_error(err, errlen, room, step);
	if (unlinkat(store_dirfd, name, 0) < 0)
		rc = room_error(err, errlen, room, "remove");
	else if (fsync(store_dirfd) < 0)
		rc = room_error(err, errlen, room, "fsync directory");
	close(fd);	/* waiting appenders now see st_nlink == 0 */
	return rc;
}

/* ---- export and import (room_transfer.c) ---- */

bool store_line_is_message(const char *line, size_t len)
{
	json_object *o = NULL;
	char why[128];
	bool ok = json_parse_strict(line, len, &o, why, sizeof(why)) == 0 && o &&
		  json_object_is_type(o, json_type_object);
	for (size_t i = 0; ok && i < sizeof(message_keys) / sizeof(message_keys[0]); i++) {
		json_object *v;
		ok = json_object_object_get_ex(o, message_keys[i], &v) &&
		     json_object_is_type(v, json_type_string);
	}
	json_object_put(o);
	return ok;
}

/* buf's lines that are messages (store_line_is_message), kept in place
 * and in order; their length.  A torn tail (an append cut by a crash,
 * trimmed by the next append) and a line that is no message are left
 * out, as store_list leaves them out: an import would refuse them. */
static size_t messages_only(char *buf, size_t len)
{
	size_t pos = 0, out = 0;
	const char *nl;

	while ((nl = memchr(buf + pos, '\n', len - pos)) != NULL) {
		size_t n = (size_t)(nl - (buf + pos));

		if (store_line_is_message(buf + pos, n)) {
			memmove(buf + out, buf + pos, n + 1);
			out += n + 1;
		}
		pos += n + 1;
	}
	return out;
}

int store_read_raw(const char *room, size_t max, char **buf, size_t *len, char *err, size_t errlen)
{
	char name[ROOM_ID_MAX + sizeof(STORE_SUFFIX)];
	const char *step;
	struct stat st;

	*buf = NULL;
	*len = 0;
	if (room_file_name(room, name, sizeof(name), err, errlen) < 0)
		return -1;
	int fd = room_open_locked(name, O_RDONLY, LOCK_SH, &st, &step);
	if (fd < 0 && errno == ENOENT)
		return 0;
	if (fd < 0)
		return room_error(err, errlen, room, step);
	if ((uint64_t)st.st_size > max) {
		close(fd);
		return errorf(err, errlen, "room %s: messages: more than %zu bytes", room, max);
	}
	char *b = malloc((size_t)st.st_size + 1);
	size_t n = 0;
	ssize_t k = 0;
	while (b && n < (size_t)st.st_size &&
	       ((k = read(fd, b + n, (size_t)st.st_size - n)) > 0 || (k < 0 && errno == EINTR)))
		if (k > 0)
			n += (size_t)k;
	int rc = b && k >= 0 ? 0 : room_error(err, errlen, room, "read");
	close(fd);
	if (rc == 0)
		n = messages_only(b, n);
	if (rc < 0) {
		free(b);
		return -1;
	}
	*buf = b;
	*len = n;
	return 0;
}

int store_write_raw(const char *room, const char *buf, size_t len, char *err, size_t errlen)
{
	char name[ROOM_ID_MAX + sizeof(STORE_SUFFIX)], tmp[ROOM_ID_MAX + sizeof(STORE_SUFFIX) + 16];

	if (room_file_name(room, name, sizeof(name), err, errlen) < 0)
		return -1;
	snprintf(tmp, sizeof(tmp), ".%s.import", name);
	int fd = openat(store_dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return room_error(err, errlen, room, "create");
	size_t n = 0;
	while (n < len) {
		ssize_t k = write(fd, buf + n, len - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		n += (size_t)k;
	}
	int rc = n == len && fsync(fd) == 0 ? 0 : room_error(err, errlen, room, "write");
	close(fd);
	/* whole or absent: a new room's messages appear at once */
	if (rc == 0 && (renameat(store_dirfd, tmp, store_dirfd, name) < 0 || fsync(store_dirfd) < 0))
		rc = room_error(err, errlen, room, "rename");
	if (rc < 0)
		unlinkat(store_dirfd, tmp, 0);
	return rc;
}
