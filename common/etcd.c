/* The etcd client: see etcd.h.
 *
 * Why it is written this way:
 * - etcd's JSON gateway (POST /v3/...) on each member's client URL, with
 *   libcurl: no gRPC, no code generator, and every answer goes through
 *   etcd_json.c's checks, whichever program asked.
 * - A unary call has ETCD_CALL_MS for all the members together, each
 *   connect ETCD_CONNECT_MS: a member that is down refuses at once, one
 *   cut off from its quorum answers nothing, and the caller (a request
 *   creating a room) must get its 503 quickly either way.  roomboxctl
 *   gives each member longer (an operator can wait).
 * - libcurl's global start is etcd_init's: curl_global_init is thread-safe
 *   and counted since libcurl 7.84 (Debian 12 has 7.88), so it needs no
 *   guard of ours and may meet the agent's own (llm.c).
 * - The watch is one long POST whose answer never ends: libcurl hands its
 *   bytes to etcd_lines_feed, one JSON message a line.  TCP keepalive
 *   notices a member that vanished without closing (a cut cable, a
 *   partition), which would otherwise leave the stream silent forever.
 * - Only http, no redirects, sockets close-on-exec (no helper spawned by
 *   another thread meanwhile inherits one).
 * - require_leader (roomboxctl): a member that lost its quorum takes a
 *   linearizable call and answers it only at etcd's own timeout (9 s
 *   measured), so an operator waited 5 s per call, 10 for `hosts`.  With
 *   gRPC's "hasleader" metadata (the gateway takes Grpc-Metadata-*
 *   headers) a member that knows it has no leader answers "no leader" at
 *   once.  An election answers so too for a moment: the call is asked
 *   again for up to ETCD_ELECTION_MS, once per program (a call after that
 *   one fails at once, until etcd answers again).  A member with a leader
 *   but slow is given its time as before; one member's own copy (stale
 *   reads) is asked without the header, which would refuse it too. */
#include "etcd.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <curl/curl.h>

#include "errbuf.h"
#include "json_strict.h"
#include "textenc.h"

#define ETCD_CALL_MS 2500
#define ETCD_CONNECT_MS 1000
/* require_leader: how long every member saying "no leader" is taken for an
 * election under way (asked again every ETCD_ELECTION_POLL_MS) */
#define ETCD_ELECTION_MS 3000
#define ETCD_ELECTION_POLL_MS 250
#define ETCD_ANSWER_MAX (64u << 20)   /* a range of every room: 10,000s of them */

int etcd_init(struct etcd *e, const char *list, char *err, size_t errlen)
{
	memset(e, 0, sizeof(*e));
	e->timeout_ms = ETCD_CALL_MS;
	for (const char *p = list ? list : ""; *(p += strspn(p, ", \t")); ) {
		size_t n = strcspn(p, ", \t");
		if (e->n == ETCD_MEMBERS_MAX)
			return errorf(err, errlen, "more than %d etcd members", ETCD_MEMBERS_MAX);
		if (n >= sizeof(e->urls[0]))
			return errorf(err, errlen, "an etcd endpoint's URL past %zu bytes",
				      sizeof(e->urls[0]) - 1);
		if (n < 7 || strncmp(p, "http://", 7) != 0)
			return errorf(err, errlen, "etcd endpoint '%.*s' is not an http:// URL", (int)n, p);
		memcpy(e->urls[e->n], p, n);
		while (n && e->urls[e->n][n - 1] == '/')
			n--;
		e->urls[e->n][n] = '\0';
		e->n++;
		p += strcspn(p, ", \t");
	}
	if (!e->n)
		return errorf(err, errlen, "no etcd endpoints");
	CURLcode rc = curl_global_init(CURL_GLOBAL_DEFAULT);
	if (rc != CURLE_OK)
		return errorf(err, errlen, "libcurl: %s", curl_easy_strerror(rc));
	return 0;
}

void etcd_prefix_end(const char *prefix, char *out, size_t outlen)
{
	snprintf(out, outlen, "%s", prefix);
	size_t n = strlen(out);
	if (n)
		out[n - 1]++;   /* "/roombox/" -> "/roombox0": every key under it */
}

static curl_socket_t socket_cloexec(void *unused, curlsocktype purpose, struct curl_sockaddr *a)
{
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

struct answer {
	char *buf;
	size_t len;
	bool too_big;
};

static size_t on_bytes(char *data, size_t size, size_t nmemb, void *arg)
{
	struct answer *a = arg;
	size_t n = size * nmemb;

	if (a->len + n > ETCD_ANSWER_MAX) {
		a->too_big = true;
		return 0;
	}
	char *b = realloc(a->buf, a->len + n + 1);
	if (!b)
		return 0;
	memcpy(b + a->len, data, n);
	a->len += n;
	b[a->len] = '\0';
	a->buf = b;
	return n;
}

static void handle_setup(CURL *c, const char *url, const char *body, struct curl_slist *h,
			 char *curl_err)
{
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, socket_cloexec);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)ETCD_CONNECT_MS);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curl_err);
	curl_easy_setopt(c, CURLOPT_USERAGENT, "roombox/" ROOMBOX_VERSION);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
}

/* POST path with req to one member; its JSON answer, or NULL with err
 * (*no_leader: the member said it has none; asked only with leader). */
static json_object *post_one(const char *base, const char *path, const char *body, long timeout_ms,
			     bool leader, bool *no_leader, char *err, size_t errlen)
{
	char url[320], curl_err[CURL_ERROR_SIZE] = "", why[128];
	struct answer a = { 0 };
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	CURL *c = curl_easy_init();

	if (h && leader)
		h = curl_slist_append(h, "Grpc-Metadata-hasleader: true");
	json_object *o = NULL;
	long status = 0;

	snprintf(url, sizeof(url), "%s%s", base, path);
	if (!c || !h) {
		errorf(err, errlen, "etcd %s: out of memory", base);
		goto out;
	}
	handle_setup(c, url, body, h, curl_err);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_bytes);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
	CURLcode rc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	if (rc != CURLE_OK) {
		errorf(err, errlen, "etcd %s: %s", base,
		       a.too_big ? "answer too big" : curl_err[0] ? curl_err : curl_easy_strerror(rc));
	} else if (json_parse_strict(a.buf ? a.buf : "", a.len, &o, why, sizeof(why)) < 0) {
		errorf(err, errlen, "etcd %s: HTTP %ld, not JSON: %s", base, status, why);
	} else if (status != 200 || !json_object_is_type(o, json_type_object)) {
		json_object *msg = NULL;
		if (json_object_is_type(o, json_type_object))
			json_object_object_get_ex(o, "message", &msg);
		errorf(err, errlen, "etcd %s: HTTP %ld: %.200s", base, status,
		       json_object_is_type(msg, json_type_string) ? json_object_get_string(msg) : "");
		*no_leader = leader && json_object_is_type(msg, json_type_string) &&
			     strcmp(json_object_get_string(msg), "etcdserver: no leader") == 0;
		json_object_put(o);
		o = NULL;
	}
out:
	free(a.buf);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return o;
}

/* Each member in turn from the last that answered, within the call's time;
 * quorum: the answer is the quorum's (not one member's serializable read),
 * which e->answered hears of. */
static json_object *post_as(struct etcd *e, const char *path, json_object *req, bool quorum,
			    char *err, size_t errlen)
{
	const char *body = json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN);
	long each = e->timeout_ms / e->n > ETCD_CONNECT_MS ? e->timeout_ms / e->n : ETCD_CONNECT_MS;
	bool leader = quorum && e->require_leader;
	json_object *o = NULL;
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		int start = atomic_load(&e->current), leaderless = 0;
		for (int i = 0; i < e->n && !o; i++) {
			int m = (start + i) % e->n;
			bool no_leader = false;
			o = post_one(e->urls[m], path, body, each, leader, &no_leader, err, errlen);
			if (o)
				atomic_store(&e->current, m);
			leaderless += no_leader;
		}
		if (o || !leaderless)
			break;
		/* every member that answered has no leader: an election, or
		 * the quorum lost */
		clock_gettime(CLOCK_MONOTONIC, &t);
		long waited = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
		if (atomic_load(&e->leaderless) || waited >= ETCD_ELECTION_MS) {
			atomic_store(&e->leaderless, true);
			errorf(err, errlen, "etcd has no quorum: %d of its %d members %s no leader, "
			       "the others do not answer", leaderless, e->n,
			       leaderless == 1 ? "answers it has" : "answer they have");
			break;
		}
		struct timespec pause = { 0, ETCD_ELECTION_POLL_MS * 1000000L };
		nanosleep(&pause, NULL);
	}
	if (o && quorum)   /* one member's own copy says nothing of a leader */
		atomic_store(&e->leaderless, false);
	if (o && quorum && e->answered)
		e->answered();
	return o;
}

static json_object *post(struct etcd *e, const char *path, json_object *req, char *err, size_t errlen)
{
	return post_as(e, path, req, true, err, errlen);
}

/* req (taken) posted; 0 when the answer is etcd's (its header's revision). */
static int post_applied(struct etcd *e, const char *path, json_object *req, char *err, size_t errlen)
{
	json_object *a = post(e, path, req, err, errlen);
	int64_t rev;

	json_object_put(req);
	if (!a)
		return -1;
	int rc = etcd_header_revision(a, &rev, err, errlen);
	json_object_put(a);
	return rc;
}

static void add_b64(json_object *o, const char *field, const char *s)
{
	char *b = base64_encode((const unsigned char *)s, strlen(s));
	json_object_object_add(o, field, json_object_new_string(b ? b : ""));
	free(b);
}

static void add_i64(json_object *o, const char *field, int64_t v)
{
	char n[24];
	snprintf(n, sizeof(n), "%lld", (long long)v);
	json_object_object_add(o, field, json_object_new_string(n));
}

int etcd_range(struct etcd *e, const char *key, const char *range_end,
	       struct etcd_kv **kvs, size_t *n, int64_t *rev, bool *stale,
	       char *err, size_t errlen)
{
	json_object *req = json_object_new_object(), *a, *arr = NULL;
	int rc = -1;

	*kvs = NULL;
	*n = 0;
	if (stale)
		*stale = false;
	add_b64(req, "key", key);
	if (range_end)
		add_b64(req, "range_end", range_end);
	a = post(e, "/v3/kv/range", req, err, errlen);
	if (!a && stale) {
		char first[256];

		snprintf(first, sizeof(first), "%s", err);
		json_object_object_add(req, "serializable", json_object_new_boolean(1));
		a = post_as(e, "/v3/kv/range", req, false, err, errlen);
		if (a)
			errorf(err, errlen, "%s; shown: one member's copy, possibly stale", first);
		else
			errorf(err, errlen, "%s", first);
		*stale = a != NULL;
	}
	json_object_put(req);
	if (!a)
		return -1;
	json_object_object_get_ex(a, "kvs", &arr);
	if (etcd_header_revision(a, rev, err, errlen) == 0)
		rc = etcd_kvs_parse(arr, kvs, n, err, errlen);
	json_object_put(a);
	return rc;
}

int etcd_get(struct etcd *e, const char *key, struct etcd_kv *kv, bool *stale,
	     char *err, size_t errlen)
{
	struct etcd_kv *kvs;
	size_t n;
	int64_t rev;

	memset(kv, 0, sizeof(*kv));
	if (etcd_range(e, key, NULL, &kvs, &n, &rev, stale, err, errlen) < 0)
		return -1;
	if (n > 1 || (n == 1 && strcmp(kvs[0].key, key) != 0)) {
		etcd_kvs_free(kvs, n);
		return errorf(err, errlen, "etcd: the range of %.100s names another key", key);
	}
	if (n == 1)
		*kv = kvs[0];
	free(kvs);
	return (int)n;
}

/* A txn's "succeeded" (left out when false) and its header revision. */
static int txn_post(struct etcd *e, json_object *req, bool *ok, int64_t *rev, json_object **answer,
		    char *err, size_t errlen)
{
	json_object *a = post(e, "/v3/kv/txn", req, err, errlen), *s;
	int64_t r;

	json_object_put(req);
	if (!a)
		return -1;
	*ok = json_object_object_get_ex(a, "succeeded", &s) &&
	      json_object_is_type(s, json_type_boolean) && json_object_get_boolean(s);
	if (etcd_header_revision(a, rev ? rev : &r, err, errlen) < 0) {
		json_object_put(a);
		return -1;
	}
	*answer = a;
	return 0;
}

static json_object *compare(const struct etcd_cmp *c)
{
	json_object *o = json_object_new_object();
	bool create = c->target == ETCD_CREATE;

	add_b64(o, "key", c->key);
	json_object_object_add(o, "target", json_object_new_string(create ? "CREATE" : "MOD"));
	json_object_object_add(o, "result", json_object_new_string("EQUAL"));
	add_i64(o, create ? "create_revision" : "mod_revision", c->rev);
	return o;
}

static json_object *compares(const struct etcd_cmp *cmp, size_t ncmp)
{
	json_object *arr = json_object_new_array();

	for (size_t i = 0; i < ncmp; i++)
		json_object_array_add(arr, compare(&cmp[i]));
	return arr;
}

static void add_op(json_object *arr, const char *op, json_object *inner)
{
	json_object *o = json_object_new_object();
	json_object_object_add(o, op, inner);
	json_object_array_add(arr, o);
}

static json_object *one(const char *op, json_object *inner)
{
	json_object *arr = json_object_new_array();
	add_op(arr, op, inner);
	return arr;
}

static json_object *key_only(const char *key)
{
	json_object *o = json_object_new_object();
	add_b64(o, "key", key);
	return o;
}

int etcd_txn(struct etcd *e, const struct etcd_cmp *cmp, size_t ncmp, const struct etcd_then *then,
	     bool *done, int64_t *rev, char *err, size_t errlen)
{
	json_object *req = json_object_new_object(), *ops = json_object_new_array(), *a;

	if (then->put_key) {
		json_object *put = key_only(then->put_key);
		add_b64(put, "value", then->put_value);
		if (then->keep_lease)
			json_object_object_add(put, "ignore_lease", json_object_new_boolean(1));
		add_op(ops, "request_put", put);
	}
	if (then->del_key)
		add_op(ops, "request_delete_range", key_only(then->del_key));
	json_object_object_add(req, "compare", compares(cmp, ncmp));
	json_object_object_add(req, "success", ops);
	if (txn_post(e, req, done, rev, &a, err, errlen) < 0)
		return -1;
	json_object_put(a);
	return 0;
}

int etcd_create_if_absent(struct etcd *e, const char *key, const char *value,
			  bool *created, struct etcd_kv *existing, int64_t *rev,
			  char *err, size_t errlen)
{
	json_object *req = json_object_new_object(), *put = key_only(key);
	json_object *a, *res, *r0, *rr, *kvs = NULL;
	struct etcd_cmp absent = { key, ETCD_CREATE, 0 };
	struct etcd_kv *found = NULL;
	size_t n = 0;

	memset(existing, 0, sizeof(*existing));
	add_b64(put, "value", value);
	json_object_object_add(req, "compare", compares(&absent, 1));
	json_object_object_add(req, "success", one("request_put", put));
	json_object_object_add(req, "failure", one("request_range", key_only(key)));
	if (txn_post(e, req, created, rev, &a, err, errlen) < 0)
		return -1;
	if (*created) {
		json_object_put(a);
		return 0;
	}
	/* responses[0].response_range.kvs[0]: the key as it is */
	if (!json_object_object_get_ex(a, "responses", &res) || !json_object_is_type(res, json_type_array) ||
	    !(r0 = json_object_array_get_idx(res, 0)) || !json_object_is_type(r0, json_type_object) ||
	    !json_object_object_get_ex(r0, "response_range", &rr) ||
	    !json_object_is_type(rr, json_type_object)) {
		json_object_put(a);
		return errorf(err, errlen, "etcd: txn answer without its range");
	}
	json_object_object_get_ex(rr, "kvs", &kvs);
	if (etcd_kvs_parse(kvs, &found, &n, err, errlen) < 0) {
		json_object_put(a);
		return -1;
	}
	json_object_put(a);
	if (n != 1 || strcmp(found[0].key, key) != 0) {
		etcd_kvs_free(found, n);
		/* deleted between the compare and the range: cannot be, the
		 * txn is atomic; anything else is not etcd's answer */
		return errorf(err, errlen, "etcd: txn answer names another key");
	}
	*existing = found[0];
	free(found);
	return 0;
}

int etcd_put(struct etcd *e, const char *key, const char *value, int64_t lease,
	     char *err, size_t errlen)
{
	json_object *req = key_only(key);

	add_b64(req, "value", value);
	if (lease)
		add_i64(req, "lease", lease);
	return post_applied(e, "/v3/kv/put", req, err, errlen);
}

int etcd_put_if_unchanged(struct etcd *e, const char *key, const char *value, int64_t mod_rev,
			  bool *done, char *err, size_t errlen)
{
	struct etcd_cmp same = { key, ETCD_MOD, mod_rev };
	struct etcd_then put = { .put_key = key, .put_value = value, .keep_lease = true };

	return etcd_txn(e, &same, 1, &put, done, NULL, err, errlen);
}

int etcd_delete_if(struct etcd *e, const char *key, int64_t mod_rev, bool *done, int64_t *rev,
		   char *err, size_t errlen)
{
	struct etcd_cmp same = { key, ETCD_MOD, mod_rev };
	struct etcd_then del = { .del_key = key };

	return etcd_txn(e, &same, 1, &del, done, rev, err, errlen);
}

int etcd_delete(struct etcd *e, const char *key, char *err, size_t errlen)
{
	return post_applied(e, "/v3/kv/deleterange", key_only(key), err, errlen);
}

int etcd_lease_grant(struct etcd *e, int64_t ttl_s, int64_t *id, char *err, size_t errlen)
{
	json_object *req = json_object_new_object(), *a;
	int rc = -1;

	add_i64(req, "TTL", ttl_s);
	a = post(e, "/v3/lease/grant", req, err, errlen);
	json_object_put(req);
	if (!a)
		return -1;
	if (etcd_int64(a, "ID", id) < 0 || *id == 0)
		errorf(err, errlen, "etcd: lease grant answer without an ID");
	else
		rc = 0;
	json_object_put(a);
	return rc;
}

int etcd_lease_keepalive(struct etcd *e, int64_t id, int64_t *ttl_s, char *err, size_t errlen)
{
	json_object *req = json_object_new_object(), *a, *res;
	int rc = -1;

	add_i64(req, "ID", id);
	a = post(e, "/v3/lease/keepalive", req, err, errlen);
	json_object_put(req);
	if (!a)
		return -1;
	if (!json_object_object_get_ex(a, "result", &res) || etcd_int64(res, "TTL", ttl_s) < 0)
		errorf(err, errlen, "etcd: keepalive answer without a TTL");
	else
		rc = 0;
	json_object_put(a);
	return rc;
}

/* ---- the watch ---- */

struct watch_state {
	struct etcd_lines lines;
	int (*on_msg)(void *ctx, const struct etcd_watch_msg *m);
	void *ctx;
	const atomic_bool *stop;
	char *err;
	size_t errlen;
	bool failed;
};

static int watch_line(void *arg, const char *line, size_t len)
{
	struct watch_state *w = arg;
	struct etcd_watch_msg m;

	if (etcd_watch_parse(line, len, &m, w->err, w->errlen) < 0) {
		w->failed = true;
		return -1;
	}
	int rc = w->on_msg(w->ctx, &m);
	etcd_watch_msg_free(&m);
	if (rc < 0)
		w->failed = true;
	return rc;
}

static size_t watch_bytes(char *data, size_t size, size_t nmemb, void *arg)
{
	struct watch_state *w = arg;
	size_t n = size * nmemb;

	if (etcd_lines_feed(&w->lines, data, n, watch_line, w) < 0) {
		if (!w->failed)
			errorf(w->err, w->errlen, "etcd watch: a message past %u bytes", ETCD_LINE_MAX);
		w->failed = true;
		return 0;
	}
	return n;
}

static int watch_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	struct watch_state *w = arg;
	return atomic_load(w->stop) ? 1 : 0;
}

int etcd_watch(struct etcd *e, const char *key, const char *range_end, int64_t start_rev,
	       int (*on_msg)(void *ctx, const struct etcd_watch_msg *m), void *ctx,
	       const atomic_bool *stop, char *err, size_t errlen)
{
	json_object *req = json_object_new_object(), *cr = json_object_new_object();
	struct watch_state w = { .on_msg = on_msg, .ctx = ctx, .stop = stop, .err = err, .errlen = errlen };
	char url[320], curl_err[CURL_ERROR_SIZE] = "";
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	/* a member that has lost its leader (cut off from the others) cancels
	 * the stream instead of keeping it open and silent, so the next watch
	 * goes to another member: etcd's WithRequireLeader, as etcdctl asks */
	struct curl_slist *h2 = h ? curl_slist_append(h, "Grpc-Metadata-hasleader: true") : NULL;
	CURL *c = curl_easy_init();
	int m = atomic_load(&e->current), ret = -1;

	if (h2)
		h = h2;
	add_b64(cr, "key", key);
	add_b64(cr, "range_end", range_end);
	add_i64(cr, "start_revision", start_rev);
	json_object_object_add(req, "create_request", cr);
	snprintf(url, sizeof(url), "%s/v3/watch", e->urls[m]);
	if (!c || !h || !h2) {
		errorf(err, errlen, "etcd watch: out of memory");
		goto out;
	}
	handle_setup(c, url, json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN), h, curl_err);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, watch_bytes);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &w);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, watch_progress);
	curl_easy_setopt(c, CURLOPT_XFERINFODATA, &w);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPIDLE, 3L);
	curl_easy_setopt(c, CURLOPT_TCP_KEEPINTVL, 2L);
	CURLcode rc = curl_easy_perform(c);
	if (!w.failed && rc == CURLE_ABORTED_BY_CALLBACK) {
		/* watch_progress: *stop, no failure (the member stays) */
		errorf(err, errlen, "etcd watch: stopped");
		ret = 0;
	} else if (!w.failed) {
		long status = 0;
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
		if (rc != CURLE_OK)
			errorf(err, errlen, "etcd watch %s: %s", e->urls[m],
			       curl_err[0] ? curl_err : curl_easy_strerror(rc));
		else
			errorf(err, errlen, "etcd watch %s: the stream ended (HTTP %ld)", e->urls[m], status);
		/* the next watch tries the next member */
		atomic_compare_exchange_strong(&e->current, &m, (m + 1) % e->n);
	}
out:
	etcd_lines_free(&w.lines);
	json_object_put(req);
	curl_slist_free_all(h);
	curl_easy_cleanup(c);
	return ret;
}
