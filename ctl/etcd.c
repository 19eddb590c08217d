/* roomboxctl's etcd client (see etcd.h): JSON over HTTP to etcd v3.4's
 * gRPC gateway, one request at a time, with libcurl.
 *
 * - Each request goes to the endpoint that answered last, then to the
 *   others in turn: a member that is down, or cut off from the majority
 *   (it answers an error), is passed over, so the verbs work while a
 *   quorum does.
 * - Reads are linearizable (they need the quorum, as the service's own
 *   decisions do); when no member can give one, a range is asked again
 *   "serializable" (one member's possibly stale copy) so that `hosts` and
 *   `where` still show something while etcd is broken, and e->err says so.
 * - The gateway writes 64-bit numbers as JSON strings and keys and values
 *   as base64; json-c's get_int64 reads both forms of a number. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>
#include <json-c/json.h>

#include "etcd.h"
#include "textenc.h"

#define CONNECT_TIMEOUT_MS 1500L
#define REQUEST_TIMEOUT_MS 5000L
#define ANSWER_MAX (64u << 20)

struct buf {
	char *p;
	size_t len;
	bool over;
};

static size_t collect(char *data, size_t size, size_t n, void *ctx)
{
	struct buf *b = ctx;
	size_t add = size * n;
	char *p;

	if (b->len + add > ANSWER_MAX) {
		b->over = true;
		return 0;
	}
	p = realloc(b->p, b->len + add + 1);
	if (!p)
		return 0;
	memcpy(p + b->len, data, add);
	b->p = p;
	b->len += add;
	b->p[b->len] = '\0';
	return add;
}

int etcd_open(struct etcd *e, const char *list)
{
	char *copy, *tok, *save = NULL;

	memset(e, 0, sizeof(*e));
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		snprintf(e->err, sizeof(e->err), "libcurl could not start");
		return -1;
	}
	copy = strdup(list ? list : "");
	for (tok = strtok_r(copy, ", \t", &save); tok && e->n < ETCD_MAX_ENDPOINTS;
	     tok = strtok_r(NULL, ", \t", &save)) {
		size_t l = strlen(tok);

		while (l && tok[l - 1] == '/')
			tok[--l] = '\0';
		if (strncmp(tok, "http://", 7) != 0 && strncmp(tok, "https://", 8) != 0) {
			snprintf(e->err, sizeof(e->err), "etcd endpoint '%s' is not an http:// URL", tok);
			free(copy);
			etcd_close(e);
			return -1;
		}
		e->urls[e->n++] = strdup(tok);
	}
	free(copy);
	if (!e->n) {
		snprintf(e->err, sizeof(e->err), "no etcd endpoints (cluster_etcd, or -e URLS)");
		return -1;
	}
	return 0;
}

void etcd_close(struct etcd *e)
{
	for (int i = 0; i < e->n; i++)
		free(e->urls[i]);
	e->n = 0;
}

/* POST body to path on one endpoint: 0 with *ans (a 200's JSON), 1 when the
 * member answered an error (*why filled), -1 when it could not be reached. */
static int post_one(const char *url, const char *path, const char *body, json_object **ans,
		    char *why, size_t whylen)
{
	char full[600];
	struct buf b = { 0 };
	long status = 0;
	CURLcode rc;
	CURL *c = curl_easy_init();
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");

	snprintf(full, sizeof(full), "%s%s", url, path);
	curl_easy_setopt(c, CURLOPT_URL, full);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, REQUEST_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	if (rc != CURLE_OK) {
		snprintf(why, whylen, "%s: %s", url, b.over ? "answer too large" : curl_easy_strerror(rc));
		free(b.p);
		return -1;
	}
	*ans = b.p ? json_tokener_parse(b.p) : NULL;
	if (status != 200 || !*ans) {
		json_object *m = NULL;

		if (*ans && (json_object_object_get_ex(*ans, "message", &m) ||
			     json_object_object_get_ex(*ans, "error", &m)))
			snprintf(why, whylen, "%s: %s", url, json_object_get_string(m));
		else
			snprintf(why, whylen, "%s: HTTP %ld", url, status);
		json_object_put(*ans);
		*ans = NULL;
		free(b.p);
		return 1;
	}
	free(b.p);
	return 0;
}

/* POST to the endpoints in turn, from the one that answered last. */
static int post(struct etcd *e, const char *path, json_object *req, json_object **ans)
{
	const char *body = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	char why[400] = "";

	for (int i = 0; i < e->n; i++) {
		int k = (e->cur + i) % e->n;

		if (post_one(e->urls[k], path, body, ans, why, sizeof(why)) == 0) {
			e->cur = k;
			return 0;
		}
	}
	snprintf(e->err, sizeof(e->err), "etcd: no member answered %s (last: %s)", path, why);
	return -1;
}

static char *b64(const char *s)
{
	return base64_encode((const unsigned char *)s, strlen(s));
}

static char *unb64(json_object *o, const char *field)
{
	json_object *v;
	size_t n;
	char *out;

	if (!json_object_object_get_ex(o, field, &v))
		return strdup("");
	out = (char *)base64_decode(json_object_get_string(v), (size_t)json_object_get_string_len(v), &n);
	return out ? out : strdup("");
}

static int64_t i64(json_object *o, const char *field)
{
	json_object *v;

	return json_object_object_get_ex(o, field, &v) ? json_object_get_int64(v) : 0;
}

static void add_str(json_object *o, const char *field, char *owned)
{
	json_object_object_add(o, field, json_object_new_string(owned ? owned : ""));
	free(owned);
}

/* The range [key, range_end): range_end is the prefix with its last byte
 * one higher (every key under it), or NULL for the one key. */
static int range(struct etcd *e, const char *key, bool prefix, struct etcd_kv **kvs, int *n)
{
	json_object *req = json_object_new_object(), *ans = NULL, *list;
	int rc;

	e->err[0] = '\0';
	add_str(req, "key", b64(key));
	if (prefix) {
		char *end = strdup(key);

		end[strlen(end) - 1]++;
		add_str(req, "range_end", b64(end));
		free(end);
	}
	rc = post(e, "/v3/kv/range", req, &ans);
	if (rc < 0) {
		char first[sizeof(e->err)];

		snprintf(first, sizeof(first), "%s", e->err);
		json_object_object_add(req, "serializable", json_object_new_boolean(1));
		if (post(e, "/v3/kv/range", req, &ans) == 0)
			snprintf(e->err, sizeof(e->err), "%s; shown: one member's copy, "
				 "possibly stale", first);
		else
			snprintf(e->err, sizeof(e->err), "%s", first);
		rc = ans ? 1 : -1;
	}
	json_object_put(req);
	if (rc < 0)
		return -1;
	*n = 0;
	*kvs = NULL;
	if (json_object_object_get_ex(ans, "kvs", &list)) {
		size_t len = json_object_array_length(list);

		*kvs = calloc(len ? len : 1, sizeof(**kvs));
		for (size_t i = 0; *kvs && i < len; i++) {
			json_object *kv = json_object_array_get_idx(list, i);
			struct etcd_kv *o = &(*kvs)[(*n)++];

			o->key = unb64(kv, "key");
			o->value = unb64(kv, "value");
			o->mod_revision = i64(kv, "mod_revision");
			o->lease = i64(kv, "lease");
		}
	}
	json_object_put(ans);
	return rc;   /* 1: a stale copy (e->err says so) */
}

int etcd_range_prefix(struct etcd *e, const char *prefix, struct etcd_kv **kvs, int *n)
{
	return range(e, prefix, true, kvs, n) < 0 ? -1 : 0;
}

int etcd_get(struct etcd *e, const char *key, struct etcd_kv *kv)
{
	struct etcd_kv *kvs;
	int n;

	if (range(e, key, false, &kvs, &n) < 0)
		return -1;
	if (!n) {
		free(kvs);
		return 0;
	}
	*kv = kvs[0];
	for (int i = 1; i < n; i++)
		etcd_kv_clear(&kvs[i]);
	free(kvs);
	return 1;
}

static json_object *b64_field(const char *field, const char *s)
{
	json_object *o = json_object_new_object();

	add_str(o, field, b64(s));
	return o;
}

int etcd_txn_cmps(struct etcd *e, const struct etcd_cmp *cmp, int ncmp, const char *put_key,
		  const char *put_value, bool keep_lease, const char *del_key, int64_t *revision)
{
	json_object *req = json_object_new_object();
	json_object *cmps = json_object_new_array(), *ops = json_object_new_array(), *ans = NULL, *ok, *h, *r;
	char rev[24];
	int rc;

	for (int i = 0; i < ncmp; i++) {
		json_object *c = b64_field("key", cmp[i].key);

		snprintf(rev, sizeof(rev), "%lld", (long long)cmp[i].revision);
		json_object_object_add(c, "result", json_object_new_string("EQUAL"));
		json_object_object_add(c, "target", json_object_new_string(cmp[i].target));
		json_object_object_add(c, strcmp(cmp[i].target, "CREATE") == 0 ? "create_revision" :
				       "mod_revision", json_object_new_string(rev));
		json_object_array_add(cmps, c);
	}
	if (put_key) {
		json_object *op = json_object_new_object(), *put = b64_field("key", put_key);

		add_str(put, "value", b64(put_value));
		if (keep_lease)
			json_object_object_add(put, "ignore_lease", json_object_new_boolean(1));
		json_object_object_add(op, "request_put", put);
		json_object_array_add(ops, op);
	}
	if (del_key) {
		json_object *op = json_object_new_object();

		json_object_object_add(op, "request_delete_range", b64_field("key", del_key));
		json_object_array_add(ops, op);
	}
	json_object_object_add(req, "compare", cmps);
	json_object_object_add(req, "success", ops);
	rc = post(e, "/v3/kv/txn", req, &ans);
	json_object_put(req);
	if (rc < 0)
		return -1;
	rc = json_object_object_get_ex(ans, "succeeded", &ok) && json_object_get_boolean(ok);
	if (revision)
		*revision = json_object_object_get_ex(ans, "header", &h) &&
			    json_object_object_get_ex(h, "revision", &r) ? json_object_get_int64(r) : 0;
	json_object_put(ans);
	return rc;
}

int etcd_txn(struct etcd *e, const char *cmp_key, const char *target, int64_t revision,
	     const char *put_key, const char *put_value, bool keep_lease, const char *del_key)
{
	struct etcd_cmp c = { cmp_key, target, revision };

	return etcd_txn_cmps(e, &c, 1, put_key, put_value, keep_lease, del_key, NULL);
}

int etcd_put_if_unchanged(struct etcd *e, const char *key, const char *value,
			  int64_t mod_revision)
{
	return etcd_txn(e, key, "MOD", mod_revision, key, value, true, NULL);
}

int etcd_delete(struct etcd *e, const char *key)
{
	json_object *req = b64_field("key", key), *ans = NULL;
	int rc = post(e, "/v3/kv/deleterange", req, &ans);

	json_object_put(req);
	json_object_put(ans);
	return rc;
}

void etcd_kv_clear(struct etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
	kv->key = kv->value = NULL;
}

void etcd_kvs_free(struct etcd_kv *kvs, int n)
{
	for (int i = 0; i < n; i++)
		etcd_kv_clear(&kvs[i]);
	free(kvs);
}
