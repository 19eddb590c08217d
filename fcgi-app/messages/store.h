/* The message store: each room's messages, oldest first,
 * in one append-only file per room, durable before an append returns.
 *
 * A message is {"id":<uuid v4>,"role":...,"content":...,"createdAt":<ISO>}.
 * Thread- and process-safe: every call locks the room's file with flock, so
 * any number of threads and roombox-fcgi processes may share one directory.
 *
 * State: one directory descriptor, set by store_init before the worker
 * threads start and only read afterwards.  Room ids must already be valid
 * (roomid.h); the store checks again, because they become file names.
 *
 * Errors go to err as "room <id>: messages: <step>: <reason>". */
#ifndef ROOMBOX_FCGI_STORE_H
#define ROOMBOX_FCGI_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>

/* Use `dir` (created 0700 if missing) for every room's messages.  Call once
 * at start, before any other store call; calling it again (tests) replaces
 * the directory and must not race with other store calls.  0 or -1. */
int store_init(const char *dir, char *err, size_t errlen);

/* A room's messages take at most this much (its file): an export carries
 * them as one part of at most 64 MiB (room_archive.h), and a listing reads
 * them whole. */
#define STORE_MAX_BYTES (64u << 20)
#define STORE_FULL (-2)

/* Append a message with a new id and createdAt = now; return only once it is
 * on disk (file fsync'd, and the directory too when the file is new).
 * content is content_len bytes of UTF-8 and may hold U+0000.  On success
 * *message (if not NULL) gets the stored message (the caller puts it).
 * 0, STORE_FULL (nothing stored: it would take the room's messages past
 * STORE_MAX_BYTES; err says so) or -1. */
int store_append(const char *room, const char *role, const char *content,
		 size_t content_len, json_object **message, char *err, size_t errlen);

/* The room's messages as a new JSON array, oldest first; [] when there are
 * none.  A torn last record (a crash mid-append) is not listed.  NULL with
 * err set on failure. */
json_object *store_list(const char *room, char *err, size_t errlen);

/* Whether bytes more would still fit in the room's messages: 0, or
 * STORE_FULL with err as store_append says it (-1 for a bad room id).  A
 * check ahead of work whose message is stored after it. */
int store_room_for(const char *room, size_t bytes, char *err, size_t errlen);

/* Whether the room has a message file that holds anything. */
bool store_has_messages(const char *room);

/* Delete the room's messages, durably.  0 when they are gone, also when
 * there were none; -1 on failure. */
int store_reset(const char *room, char *err, size_t errlen);

/* The room's messages as stored (export): its file's lines that are
 * messages (a torn tail or a corrupt line left out, as store_list does),
 * *buf malloc'd (NULL, 0: no file), a file of at most max bytes.  And a new room's file written whole (import; the
 * caller checked every line): written under another name, fsync'd,
 * renamed.  0, or -1 with err. */
int store_read_raw(const char *room, size_t max, char **buf, size_t *len, char *err, size_t errlen);
int store_write_raw(const char *room, const char *buf, size_t len, char *err, size_t errlen);

/* One line (no newline) as an export carries it and an import takes it:
 * strict JSON, an object whose id, role, content and createdAt are
 * strings. */
bool store_line_is_message(const char *line, size_t len);

#endif
