/* roombox's etcd v3 client over its JSON gateway (etcd.c), one for both
 * programs that speak to etcd: roombox-fcgi's cluster mode (range, its
 * transactions, a lease, a watch) and roomboxctl's cluster verbs (reads
 * that may fall back on one member's copy, the transactions of a move).
 * Keys and values are plain strings here; the gateway's base64 is this
 * module's business, and every answer goes through etcd_json.c's checks.
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
	/* A member without a leader answers "no leader" at once instead of
	 * holding the call (roomboxctl); every member saying so for
	 * 3 s (etcd.c's ETCD_ELECTION_MS: an election's time) fails the
	 * call, and every later one at once until etcd answers again
	 * (leaderless).  false: a member holds the call until its answer or
	 * the call's time (roombox-fcgi). */
	bool require_leader;
	atomic_bool leaderless;
	/* Called after each unary call the quorum answered (not a watch's
	 * message, not one member's own copy): every call of the program, in
	 * one place; NULL: none.  From the calling thread. */
	void (*answered)(void);
};

/* From a list of http:// client URLs (commas or spaces): cluster_etcd, or
 * roomboxctl's -e.  timeout_ms is then 2.5 s; a caller may set another. */
int etcd_init(struct etcd *e, const char *list, char *err, size_t errlen);

/* Keys in [key, range_end) (range_end NULL: key alone), and the store's
 * revision they were read at.  Linearizable; stale NULL: nothing else.
 * stale not NULL: when no member can answer so (no quorum), one member's
 * own copy is asked for instead, possibly behind, *stale says so and err
 * says why (an operator would rather see something while etcd is broken). */
int etcd_range(struct etcd *e, const char *key, const char *range_end,
	       struct etcd_kv **kvs, size_t *n, int64_t *rev, bool *stale,
	       char *err, size_t errlen);

/* One key: 1 found (*kv filled: etcd_kv_clear), 0 absent, -1 with err;
 * stale as etcd_range. */
int etcd_get(struct etcd *e, const char *key, struct etcd_kv *kv, bool *stale,
	     char *err, size_t errlen);

/* key = value only if key does not exist (compare create_revision == 0);
 * *created says which.  Not created: *existing is the key as it is
 * (etcd_kv_clear).  *rev: the store's revision after (a key created has
 * it as its mod_revision). */
int etcd_create_if_absent(struct etcd *e, const char *key, const char *value,
			  bool *created, struct etcd_kv *existing, int64_t *rev,
			  char *err, size_t errlen);

/* key = value under a lease (0: none). */
int etcd_put(struct etcd *e, const char *key, const char *value, int64_t lease,
	     char *err, size_t errlen);

/* key = value only if its mod_revision is still mod_rev, keeping the
 * key's lease (a host's key: its state changes, not its life); *done. */
int etcd_put_if_unchanged(struct etcd *e, const char *key, const char *value, int64_t mod_rev,
			  bool *done, char *err, size_t errlen);

/* key deleted only if its mod_revision is still mod_rev; *done says, *rev
 * (when not NULL) is the store's revision after. */
int etcd_delete_if(struct etcd *e, const char *key, int64_t mod_rev, bool *done, int64_t *rev,
		   char *err, size_t errlen);

/* key deleted, whatever it holds (0 too when there was nothing). */
int etcd_delete(struct etcd *e, const char *key, char *err, size_t errlen);

/* One transaction: when every comparison holds (a key's mod_revision, or
 * its create_revision, 0 for a key that does not exist, equal to rev),
 * put and delete, each when its key is not NULL.  *done: they held; *rev
 * (when not NULL): the store's revision after. */
enum etcd_target { ETCD_MOD, ETCD_CREATE };
struct etcd_cmp {
	const char *key;
	enum etcd_target target;
	int64_t rev;
};
struct etcd_then {
	const char *put_key, *put_value;
	bool keep_lease;           /* the put keeps the key's lease */
	const char *del_key;
};
int etcd_txn(struct etcd *e, const struct etcd_cmp *cmp, size_t ncmp, const struct etcd_then *then,
	     bool *done, int64_t *rev, char *err, size_t errlen);

int etcd_lease_grant(struct etcd *e, int64_t ttl_s, int64_t *id, char *err, size_t errlen);
/* *ttl_s 0: the lease is gone (expired). */
int etcd_lease_keepalive(struct etcd *e, int64_t id, int64_t *ttl_s, char *err, size_t errlen);

/* Watch [key, range_end) from start_rev: on_msg gets each message (its
 * return < 0 ends the watch); returns when the stream ends, the member
 * goes away or *stop is set: 0 when *stop ended it, else -1 with err
 * saying why (an error while *stop was set too is still -1). */
int etcd_watch(struct etcd *e, const char *key, const char *range_end, int64_t start_rev,
	       int (*on_msg)(void *ctx, const struct etcd_watch_msg *m), void *ctx,
	       const atomic_bool *stop, char *err, size_t errlen);

/* The end of the range of every key that starts with prefix. */
void etcd_prefix_end(const char *prefix, char *out, size_t outlen);

#endif
