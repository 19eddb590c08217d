/* A small etcd v3 client over its JSON gateway (etcd.c): the few calls
 * cluster mode makes -- range, two transactions, a lease, a watch.
 *
 * Each call tries the members in turn, starting with the one that last
 * answered; -1 with err says that no member answered in time (unreachable,
 * or no quorum: etcd answers no write and no linearizable read without
 * one), or that the answer was not etcd's.  Thread-safe: each call has its
 * own connection. */
#ifndef ROOMBOX_ETCD_H
#define ROOMBOX_ETCD_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "etcd_json.h"

#define ETCD_MEMBERS_MAX 9

struct etcd {
	char urls[ETCD_MEMBERS_MAX][256];
	int n;
	atomic_int current;        /* the member that answered last */
	long timeout_ms;           /* one unary call, all members together */
};

/* From cluster_etcd's list (commas or spaces). */
int etcd_init(struct etcd *e, const char *list, char *err, size_t errlen);

/* Keys in [key, range_end) (range_end NULL: key alone), and the store's
 * revision they were read at. */
int etcd_range(struct etcd *e, const char *key, const char *range_end,
	       struct etcd_kv **kvs, size_t *n, int64_t *rev, char *err, size_t errlen);

/* key = value only if key does not exist (compare create_revision == 0);
 * *created says which.  Not created: *existing is the key as it is
 * (caller frees its value).  *rev: the store's revision after. */
int etcd_create_if_absent(struct etcd *e, const char *key, const char *value,
			  bool *created, struct etcd_kv *existing, int64_t *rev,
			  char *err, size_t errlen);

/* key = value under a lease (0: none). */
int etcd_put(struct etcd *e, const char *key, const char *value, int64_t lease,
	     char *err, size_t errlen);

/* key deleted only if its mod_revision is still mod_rev; *done says, *rev
 * is the store's revision after. */
int etcd_delete_if(struct etcd *e, const char *key, int64_t mod_rev, bool *done, int64_t *rev,
		   char *err, size_t errlen);

int etcd_lease_grant(struct etcd *e, int64_t ttl_s, int64_t *id, char *err, size_t errlen);
/* *ttl_s 0: the lease is gone (expired). */
int etcd_lease_keepalive(struct etcd *e, int64_t id, int64_t *ttl_s, char *err, size_t errlen);

/* Watch [key, range_end) from start_rev: on_msg gets each message (its
 * return < 0 ends the watch); returns when the stream ends, the member
 * goes away or *stop is set.  Always -1 with err saying why. */
int etcd_watch(struct etcd *e, const char *key, const char *range_end, int64_t start_rev,
	       int (*on_msg)(void *ctx, const struct etcd_watch_msg *m), void *ctx,
	       const atomic_bool *stop, char *err, size_t errlen);

/* The end of the range of every key that starts with prefix. */
void etcd_prefix_end(const char *prefix, char *out, size_t outlen);

#endif
