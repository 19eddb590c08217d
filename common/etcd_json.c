/* etcd's JSON gateway answers, read defensively: see etcd_json.h.
 *
 * The gateway is grpc-gateway over etcd's protobuf API, so: int64 fields
 * come as strings of digits, fields holding a zero value are left out,
 * keys and values are base64.  JSON goes through json_parse_strict (the
 * same reader as roombox-fcgi's request bodies: depth-bounded, NUL-safe),
 * base64 through textenc.c's strict decoder; a key or value with a NUL, a
 * key past ETCD_KEY_MAX or a value past ETCD_VALUE_MAX is refused whole
 * rather than cut, because a cut key would name another room. */
#include "etcd_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "json_strict.h"
#include "textenc.h"

int etcd_int64(json_object *parent, const char *field, int64_t *out)
{
	json_object *v;

	*out = 0;
	if (!json_object_is_type(parent, json_type_object))
		return -1;
	if (!json_object_object_get_ex(parent, field, &v) || !v)
		return 0;
	if (json_object_is_type(v, json_type_int)) {
		int64_t n = json_object_get_int64(v);
		if (n < 0)
			return -1;
		*out = n;
		return 0;
	}
	if (!json_object_is_type(v, json_type_string))
		return -1;
	const char *s = json_object_get_string(v);
	size_t len = (size_t)json_object_get_string_len(v);
	if (len == 0 || len > 19 || strspn(s, "0123456789") != len)
		return -1;
	uint64_t n = 0;
	for (size_t i = 0; i < len; i++)
		n = n * 10 + (uint64_t)(s[i] - '0');
	if (n > INT64_MAX)
		return -1;
	*out = (int64_t)n;
	return 0;
}

int etcd_header_revision(json_object *o, int64_t *rev, char *err, size_t errlen)
{
	json_object *h;

	if (!json_object_is_type(o, json_type_object) ||
	    !json_object_object_get_ex(o, "header", &h) ||
	    etcd_int64(h, "revision", rev) < 0 || *rev <= 0)
		return errorf(err, errlen, "etcd: answer without a revision");
	return 0;
}

/* A base64 field into bytes: absent is "", and a NUL inside is refused. */
static unsigned char *b64_field(json_object *o, const char *field, size_t max, size_t *len)
{
	json_object *v;

	*len = 0;
	if (!json_object_object_get_ex(o, field, &v) || !v)
		return (unsigned char *)strdup("");
	if (!json_object_is_type(v, json_type_string) ||
	    (size_t)json_object_get_string_len(v) > (max + 2) / 3 * 4)
		return NULL;
	unsigned char *b = base64_decode(json_object_get_string(v),
					 (size_t)json_object_get_string_len(v), len);
	if (b && (*len > max || memchr(b, '\0', *len))) {
		free(b);
		return NULL;
	}
	return b;
}

static int kv_parse(json_object *o, struct etcd_kv *kv)
{
	unsigned char *key;
	size_t klen;

	memset(kv, 0, sizeof(*kv));
	if (!json_object_is_type(o, json_type_object))
		return -1;
	key = b64_field(o, "key", ETCD_KEY_MAX, &klen);
	if (!key || klen == 0) {
		free(key);
		return -1;
	}
	memcpy(kv->key, key, klen);
	kv->key[klen] = '\0';
	kv->key_len = klen;
	free(key);
	kv->value = (char *)b64_field(o, "value", ETCD_VALUE_MAX, &kv->value_len);
	if (!kv->value || etcd_int64(o, "create_revision", &kv->create_rev) < 0 ||
	    etcd_int64(o, "mod_revision", &kv->mod_rev) < 0) {
		free(kv->value);
		kv->value = NULL;
		return -1;
	}
	return 0;
}

void etcd_kv_clear(struct etcd_kv *kv)
{
	free(kv->value);
	kv->value = NULL;
}

void etcd_kvs_free(struct etcd_kv *kvs, size_t n)
{
	for (size_t i = 0; kvs && i < n; i++)
		free(kvs[i].value);
	free(kvs);
}

int etcd_kvs_parse(json_object *arr, struct etcd_kv **kvs, size_t *n, char *err, size_t errlen)
{
	*kvs = NULL;
	*n = 0;
	if (!arr)
		return 0;
	if (!json_object_is_type(arr, json_type_array))
		return errorf(err, errlen, "etcd: kvs is not an array");
	size_t len = json_object_array_length(arr);
	if (len == 0)
		return 0;
	struct etcd_kv *out = calloc(len, sizeof(*out));
	if (!out)
		return errorf(err, errlen, "etcd: out of memory");
	for (size_t i = 0; i < len; i++) {
		if (kv_parse(json_object_array_get_idx(arr, i), &out[i]) < 0) {
			etcd_kvs_free(out, i);
			return errorf(err, errlen, "etcd: key-value %zu of %zu is not one", i + 1, len);
		}
	}
	*kvs = out;
	*n = len;
	return 0;
}

void etcd_watch_msg_free(struct etcd_watch_msg *m)
{
	for (size_t i = 0; m->events && i < m->n_events; i++)
		free(m->events[i].kv.value);
	free(m->events);
	m->events = NULL;
	m->n_events = 0;
}

static int events_parse(json_object *arr, struct etcd_watch_msg *m, char *err, size_t errlen)
{
	if (!arr)
		return 0;
	if (!json_object_is_type(arr, json_type_array))
		return errorf(err, errlen, "etcd watch: events is not an array");
	size_t len = json_object_array_length(arr);
	if (len == 0)
		return 0;
	m->events = calloc(len, sizeof(*m->events));
	if (!m->events)
		return errorf(err, errlen, "etcd watch: out of memory");
	for (size_t i = 0; i < len; i++) {
		json_object *ev = json_object_array_get_idx(arr, i), *type, *kv;
		const char *t = "PUT";

		if (!json_object_is_type(ev, json_type_object) ||
		    !json_object_object_get_ex(ev, "kv", &kv))
			return errorf(err, errlen, "etcd watch: event %zu has no kv", i + 1);
		if (json_object_object_get_ex(ev, "type", &type)) {
			if (!json_object_is_type(type, json_type_string))
				return errorf(err, errlen, "etcd watch: event %zu: type is not a string", i + 1);
			t = json_object_get_string(type);
		}
		if (strcmp(t, "PUT") != 0 && strcmp(t, "DELETE") != 0)
			return errorf(err, errlen, "etcd watch: event %zu: unknown type", i + 1);
		if (kv_parse(kv, &m->events[i].kv) < 0)
			return errorf(err, errlen, "etcd watch: event %zu: bad kv", i + 1);
		m->events[i].deleted = t[0] == 'D';
		m->n_events = i + 1;
	}
	return 0;
}

static bool bool_field(json_object *o, const char *field)
{
	json_object *v;

	return json_object_object_get_ex(o, field, &v) && json_object_is_type(v, json_type_boolean) &&
	       json_object_get_boolean(v);
}

int etcd_watch_parse(const char *text, size_t len, struct etcd_watch_msg *m,
		     char *err, size_t errlen)
{
	json_object *o, *res, *events = NULL;
	char why[128];
	int rc = -1;

	memset(m, 0, sizeof(*m));
	if (errlen)
		err[0] = '\0';
	if (json_parse_strict(text, len, &o, why, sizeof(why)) < 0)
		return errorf(err, errlen, "etcd watch: not JSON: %s", why);
	if (!json_object_is_type(o, json_type_object)) {
		errorf(err, errlen, "etcd watch: not an object");
	} else if (json_object_object_get_ex(o, "error", &res)) {
		json_object *msg = NULL;
		json_object_object_get_ex(res, "message", &msg);
		errorf(err, errlen, "etcd watch: error: %.200s",
		       json_object_is_type(msg, json_type_string) ? json_object_get_string(msg) : "?");
	} else if (!json_object_object_get_ex(o, "result", &res) ||
		   !json_object_is_type(res, json_type_object)) {
		errorf(err, errlen, "etcd watch: no result");
	} else if (etcd_header_revision(res, &m->revision, err, errlen) == 0 &&
		   etcd_int64(res, "compact_revision", &m->compact_revision) == 0) {
		m->created = bool_field(res, "created");
		m->canceled = bool_field(res, "canceled");
		json_object_object_get_ex(res, "events", &events);
		rc = events_parse(events, m, err, errlen);
	} else if (errlen && !err[0]) {
		errorf(err, errlen, "etcd watch: bad compact_revision");
	}
	if (rc < 0)
		etcd_watch_msg_free(m);
	json_object_put(o);
	return rc;
}

int etcd_lines_feed(struct etcd_lines *l, const char *data, size_t n,
		    int (*on_line)(void *ctx, const char *line, size_t len), void *ctx)
{
	while (n) {
		const char *nl = memchr(data, '\n', n);
		size_t take = nl ? (size_t)(nl - data) : n;

		if (l->len + take > ETCD_LINE_MAX)
			return -1;
		if (l->len + take + 1 > l->cap) {
			size_t cap = l->cap ? l->cap : 4096;
			while (cap < l->len + take + 1)
				cap *= 2;
			char *b = realloc(l->buf, cap);
			if (!b)
				return -1;
			l->buf = b;
			l->cap = cap;
		}
		memcpy(l->buf + l->len, data, take);
		l->len += take;
		data += take;
		n -= take;
		if (!nl)
			break;
		data++;
		n--;
		l->buf[l->len] = '\0';
		size_t len = l->len;
		l->len = 0;
		if (len && on_line(ctx, l->buf, len) < 0)
			return -1;
	}
	return 0;
}

void etcd_lines_free(struct etcd_lines *l)
{
	free(l->buf);
	memset(l, 0, sizeof(*l));
}

bool cluster_host_name_ok(const char *s, size_t len)
{
	if (len < 1 || len > CLUSTER_HOST_MAX)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}

static json_object *value_object(const char *value, size_t len)
{
	json_object *o;
	char why[128];

	if (json_parse_strict(value, len, &o, why, sizeof(why)) < 0)
		return NULL;
	if (!json_object_is_type(o, json_type_object)) {
		json_object_put(o);
		return NULL;
	}
	return o;
}

int room_record_parse(const char *value, size_t len, struct room_record *r)
{
	json_object *o = value_object(value, len), *host;
	int64_t epoch;
	int rc = -1;

	memset(r, 0, sizeof(*r));
	if (!o)
		return -1;
	if (json_object_object_get_ex(o, "host", &host) && json_object_is_type(host, json_type_string) &&
	    cluster_host_name_ok(json_object_get_string(host), (size_t)json_object_get_string_len(host)) &&
	    etcd_int64(o, "epoch", &epoch) == 0 && epoch >= 1) {
		memcpy(r->host, json_object_get_string(host), (size_t)json_object_get_string_len(host));
		r->epoch = (uint64_t)epoch;
		rc = 0;
	}
	json_object_put(o);
	return rc;
}

char *room_record_json(const struct room_record *r)
{
	char *s;

	if (asprintf(&s, "{\"host\":\"%s\",\"epoch\":%llu}", r->host, (unsigned long long)r->epoch) < 0)
		return NULL;
	return s;
}

static bool printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 0x7f)
			return false;
	return true;
}

int host_record_parse(const char *value, size_t len, struct host_record *h)
{
	json_object *o = value_object(value, len), *url, *state;
	int rc = -1;

	memset(h, 0, sizeof(*h));
	if (!o)
		return -1;
	if (json_object_object_get_ex(o, "url", &url) && json_object_is_type(url, json_type_string) &&
	    (size_t)json_object_get_string_len(url) < sizeof(h->url) &&
	    strncmp(json_object_get_string(url), "http://", 7) == 0 &&
	    printable(json_object_get_string(url)) &&
	    json_object_object_get_ex(o, "state", &state) && json_object_is_type(state, json_type_string) &&
	    (strcmp(json_object_get_string(state), "ready") == 0 ||
	     strcmp(json_object_get_string(state), "maint") == 0)) {
		snprintf(h->url, sizeof(h->url), "%s", json_object_get_string(url));
		h->maint = json_object_get_string(state)[0] == 'm';
		rc = 0;
	}
	json_object_put(o);
	return rc;
}
