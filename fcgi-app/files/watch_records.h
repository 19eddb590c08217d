/* The watch tool's output (keeper/watch.c; records in common/protocol.h)
 * made into the watch stream's JSON events.  The bytes come from a process
 * in the room -- the keeper's code, but a room's root can take it over --
 * so they are parsed as untrusted: any bytes give well-formed events (or
 * none), never more memory than one record's bound (fuzzed:
 * tests/fuzz/fuzz_watch_records.c). */
#ifndef ROOMBOX_FCGI_WATCH_RECORDS_H
#define ROOMBOX_FCGI_WATCH_RECORDS_H

#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>

/* Two paths of at most PATH_MAX and the record's head */
#define WATCH_RECORD_MAX (2 * 4096 + 4)

struct watch_records {
	bool started;        /* the tool said "ok" */
	char kind[32];       /* or what it said on "E <kind>" */
	char rec[WATCH_RECORD_MAX];
	size_t len;
	bool skipping;       /* a record past the bound: dropped up to its end */
};

/* Each whole event the bytes complete goes to emit (the object is the
 * caller's only during the call): {"type","path","to"?,"isDir",
 * "pathBase64"?,"toBase64"?} or {"type":"overflow"}. */
typedef void watch_emit_fn(void *ctx, json_object *ev);
void watch_records_feed(struct watch_records *p, const char *data, size_t n, watch_emit_fn *emit, void *ctx);

#endif
