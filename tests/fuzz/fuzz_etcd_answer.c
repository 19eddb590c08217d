/* libFuzzer target: what etcd answers (common/etcd_json.c), a
 * watch stream and a range answer, bytes any member of the cluster (or
 * whoever wrote its keys) decides.
 *
 * Input: any bytes.  The first byte picks the size of the pieces the watch
 * stream arrives in; the whole input is also read as one range answer, and
 * every value found is read as a room record and a host record.
 *
 * Invariants: every key taken is NUL-free, at most ETCD_KEY_MAX, not
 * empty; every value at most ETCD_VALUE_MAX and NUL-terminated at its
 * length; revisions are never negative; a room record taken names a host
 * of [a-z0-9-]{1,32} and an epoch >= 1, and writes back to the same
 * record; a host record's URL is http://; the line splitter never holds a
 * line past ETCD_LINE_MAX. */
#include <stdint.h>
#include <string.h>

#include "etcd_json.h"
#include "fuzz.h"
#include "json_strict.h"

static void check_kv(const struct etcd_kv *kv)
{
	FUZZ_ASSERT(kv->key_len > 0 && kv->key_len <= ETCD_KEY_MAX, "key length %zu", kv->key_len);
	FUZZ_ASSERT(strlen(kv->key) == kv->key_len, "key with a NUL");
	FUZZ_ASSERT(kv->value && kv->value_len <= ETCD_VALUE_MAX, "value length %zu", kv->value_len);
	FUZZ_ASSERT(kv->value[kv->value_len] == '\0' && strlen(kv->value) == kv->value_len,
		    "value not NUL-terminated at its length");
	FUZZ_ASSERT(kv->create_rev >= 0 && kv->mod_rev >= 0, "negative revision");

	struct room_record r;
	if (room_record_parse(kv->value, kv->value_len, &r) == 0) {
		FUZZ_ASSERT(r.epoch >= 1, "epoch 0 taken");
		FUZZ_ASSERT(cluster_host_name_ok(r.host, strlen(r.host)), "host '%s' taken", r.host);
		char *back = room_record_json(&r);
		struct room_record again;
		FUZZ_ASSERT(back && room_record_parse(back, strlen(back), &again) == 0 &&
			    again.epoch == r.epoch && strcmp(again.host, r.host) == 0,
			    "record does not read back");
		free(back);
	}
	struct host_record h;
	if (host_record_parse(kv->value, kv->value_len, &h) == 0)
		FUZZ_ASSERT(strncmp(h.url, "http://", 7) == 0, "host url '%s' taken", h.url);
}

static int on_line(void *ctx, const char *line, size_t len)
{
	struct etcd_watch_msg m;
	char err[256];

	FUZZ_ASSERT(len <= ETCD_LINE_MAX, "line of %zu", len);
	if (etcd_watch_parse(line, len, &m, err, sizeof(err)) < 0) {
		FUZZ_ASSERT(err[0], "refused without a reason");
		FUZZ_ASSERT(!m.events && !m.n_events, "events left after a refusal");
		return 0;
	}
	FUZZ_ASSERT(m.revision > 0 && m.compact_revision >= 0, "revision");
	for (size_t i = 0; i < m.n_events; i++)
		check_kv(&m.events[i].kv);
	etcd_watch_msg_free(&m);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct etcd_lines lines = { 0 };

	if (size < 1)
		return 0;
	size_t chunk = 1 + data[0] % 61;
	for (size_t off = 1; off < size; off += chunk) {
		size_t n = size - off < chunk ? size - off : chunk;
		if (etcd_lines_feed(&lines, (const char *)data + off, n, on_line, NULL) < 0)
			break;
		FUZZ_ASSERT(lines.len <= ETCD_LINE_MAX, "held %zu", lines.len);
	}
	etcd_lines_free(&lines);

	/* the same bytes as a range answer */
	json_object *o, *kvs = NULL;
	char err[256];
	if (json_parse_strict((const char *)data + 1, size - 1, &o, err, sizeof(err)) == 0) {
		struct etcd_kv *kv;
		size_t n;
		int64_t rev;
		if (json_object_is_type(o, json_type_object))
			json_object_object_get_ex(o, "kvs", &kvs);
		if (etcd_header_revision(o, &rev, err, sizeof(err)) == 0)
			FUZZ_ASSERT(rev > 0, "revision %lld", (long long)rev);
		if (etcd_kvs_parse(kvs, &kv, &n, err, sizeof(err)) == 0) {
			for (size_t i = 0; i < n; i++)
				check_kv(&kv[i]);
			etcd_kvs_free(kv, n);
		}
		json_object_put(o);
	}
	return 0;
}
