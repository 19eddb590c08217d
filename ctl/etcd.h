/* roomboxctl's etcd client: the few calls of etcd v3's JSON gateway
 * (/v3/kv/range, /v3/kv/txn) the cluster verbs need, over libcurl.
 * Keys and values are plain strings here; the base64 the gateway wants is
 * this module's business.  roombox-fcgi has a client of its own
 * (fcgi-app/cluster/), with leases and watches, which roomboxctl does not
 * need. */
#ifndef ROOMBOX_CTL_ETCD_H
#define ROOMBOX_CTL_ETCD_H

#include <stdbool.h>
#include <stdint.h>

#define ETCD_MAX_ENDPOINTS 16

struct etcd {
	char *urls[ETCD_MAX_ENDPOINTS];
	int n;
	int cur;                 /* the endpoint that answered last */
	char err[512];
};

struct etcd_kv {
	char *key;
	char *value;
	int64_t mod_revision;
	int64_t lease;
};

/* list: client URLs separated by commas or spaces.  0, or -1 with e->err. */
int etcd_open(struct etcd *e, const char *list);
void etcd_close(struct etcd *e);

/* Every key under prefix, in key order: *kvs malloc'd (etcd_kvs_free),
 * *n their number.  0, or -1 with e->err. */
int etcd_range_prefix(struct etcd *e, const char *prefix, struct etcd_kv **kvs, int *n);
/* One key: 1 found (*kv filled), 0 absent, -1 with e->err. */
int etcd_get(struct etcd *e, const char *key, struct etcd_kv *kv);
/* Put value at key if the key's mod_revision is still mod_revision, keeping
 * the key's lease: 1 done, 0 the key changed meanwhile, -1 with e->err. */
int etcd_put_if_unchanged(struct etcd *e, const char *key, const char *value,
			  int64_t mod_revision);

/* One transaction: if cmp_key's revision of kind target ("MOD": its
 * mod_revision, "CREATE": its create_revision, 0 for a key that does not
 * exist) equals revision, put put_value at put_key (keep_lease: the key's
 * lease kept) and delete del_key, each when not NULL.  1 done, 0 the
 * comparison failed, -1 with e->err. */
int etcd_txn(struct etcd *e, const char *cmp_key, const char *target, int64_t revision,
	     const char *put_key, const char *put_value, bool keep_lease, const char *del_key);
/* The same with every comparison in cmp (all must hold), and the store's
 * revision after it in *revision (when not NULL): a key the transaction
 * put has that mod_revision. */
struct etcd_cmp {
	const char *key, *target;
	int64_t revision;
};
int etcd_txn_cmps(struct etcd *e, const struct etcd_cmp *cmp, int ncmp, const char *put_key,
		  const char *put_value, bool keep_lease, const char *del_key, int64_t *revision);
/* 0 (deleted, or there was nothing), -1 with e->err. */
int etcd_delete(struct etcd *e, const char *key);

void etcd_kv_clear(struct etcd_kv *kv);
void etcd_kvs_free(struct etcd_kv *kvs, int n);

#endif
