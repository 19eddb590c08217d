/* What etcd's JSON gateway answers, read into plain structs (etcd_json.c),
 * for the etcd client (etcd.c) of roombox-fcgi and roomboxctl alike, and
 * the records roombox keeps there.
 *
 * Every answer from etcd is input the process does not control (another
 * host, an operator's etcdctl, a damaged member may have written it): each
 * function here checks types, bounds and encodings and refuses what it
 * does not expect, and never trusts a length it was told.  Nothing here
 * does I/O, so all of it runs under the fuzzer (tests/fuzz/fuzz_etcd_answer.c). */
#ifndef ROOMBOX_ETCD_JSON_H
#define ROOMBOX_ETCD_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#define ETCD_KEY_MAX 256           /* roombox's keys are short: longer is not ours */
#define ETCD_VALUE_MAX 4096        /* nor are bigger values */
#define ETCD_LINE_MAX (4u << 20)   /* one message of a watch stream */
#define CLUSTER_HOST_MAX 32

struct etcd_kv {
	char key[ETCD_KEY_MAX + 1];    /* NUL-free, NUL-terminated */
	size_t key_len;
	char *value;                   /* malloc'd, NUL-terminated; "" for a delete */
	size_t value_len;
	int64_t create_rev, mod_rev;
};

struct etcd_event {
	bool deleted;                  /* DELETE; else PUT */
	struct etcd_kv kv;
};

/* One message of a watch stream. */
struct etcd_watch_msg {
	int64_t revision;              /* its header's */
	bool created, canceled;
	int64_t compact_revision;      /* > 0: the start revision was compacted */
	struct etcd_event *events;
	size_t n_events;
};

/* A non-negative int64 given as a JSON string of digits (how the gateway
 * writes int64) or as a number; a missing field is 0 (proto3 leaves zero
 * values out).  -1 for anything else. */
int etcd_int64(json_object *parent, const char *field, int64_t *out);

/* o's header.revision. */
int etcd_header_revision(json_object *o, int64_t *rev, char *err, size_t errlen);

/* A "kvs" array (absent = none) into *kvs (malloc'd, n of them). */
int etcd_kvs_parse(json_object *arr, struct etcd_kv **kvs, size_t *n, char *err, size_t errlen);
void etcd_kvs_free(struct etcd_kv *kvs, size_t n);
/* One key-value's value freed (a struct etcd_kv of etcd_get's). */
void etcd_kv_clear(struct etcd_kv *kv);

/* One line of a watch stream: {"result":{...}} or {"error":{...}}. */
int etcd_watch_parse(const char *text, size_t len, struct etcd_watch_msg *m,
		     char *err, size_t errlen);
void etcd_watch_msg_free(struct etcd_watch_msg *m);

/* A watch stream arrives in pieces: bytes in, whole lines out to on_line
 * (without their '\n').  A line longer than ETCD_LINE_MAX is an error. */
struct etcd_lines {
	char *buf;
	size_t len, cap;
};
int etcd_lines_feed(struct etcd_lines *l, const char *data, size_t n,
		    int (*on_line)(void *ctx, const char *line, size_t len), void *ctx);
void etcd_lines_free(struct etcd_lines *l);

/* /roombox/rooms/<id> = {"host":"<host>","epoch":N}, N >= 1. */
struct room_record {
	char host[CLUSTER_HOST_MAX + 1];
	uint64_t epoch;
};
int room_record_parse(const char *value, size_t len, struct room_record *r);
/* Its value, malloc'd. */
char *room_record_json(const struct room_record *r);

/* /roombox/hosts/<host> = {"url":"http://..","state":"ready"|"maint"} */
struct host_record {
	char url[256];
	bool maint;
};
int host_record_parse(const char *value, size_t len, struct host_record *h);

bool cluster_host_name_ok(const char *s, size_t len);

#endif
