/* Cluster mode, the host's side: see cluster.h.
 *
 * Theory of operation
 * -------------------
 * etcd holds, for every room, the host that serves it and an epoch
 * (/roombox/rooms/<id> = {"host","epoch"}); this file keeps a copy of those
 * records in memory and decides, before a request's handler runs, whether
 * this host may serve the room:
 *
 *   record names another host      421 "room R lives on host H"
 *   /roombox/moving/<id> present   503 + Retry-After (a move is in flight)
 *   record names this host         served, if this host's copy of the room
 *                                  (its epoch, epoch_store.c) is not older
 *                                  than the record; an older copy is never
 *                                  served (another copy superseded it);
 *                                  503 + Retry-After while the host is
 *                                  fenced (below)
 *   no record, request creates     (503 while this host is in "maint")
 *                                  a create-if-absent transaction places
 *                                  it here (one winner among any number of
 *                                  concurrent first requests on any hosts;
 *                                  the others see the winner's record)
 *   no record, request only reads  the handler answers (404 for a room
 *                                  that does not exist)
 *
 * Threads (both detached, both only in cluster mode):
 *   watch   reads every key under /roombox/ (a range) into the cache, then
 *           follows a watch from the range's revision; when the watch
 *           fails (a member gone, compaction) it reads the range again.
 *           While it has no watch, a request for a room the cache does not
 *           know asks etcd itself (one range); known rooms keep being
 *           served from the cache, so an etcd without quorum stops only
 *           the creation of rooms.
 *   lease   grants this host's lease (LEASE_TTL_S), writes
 *           /roombox/hosts/<host> under it, and keeps it alive; a lease
 *           that expired (etcd unreachable longer than its TTL) is granted
 *           again and the host key written again, keeping a "maint" state
 *           an operator set.
 *
 * Out of touch, then back.  A host that hears nothing from etcd's quorum
 * (a partition, the quorum lost) keeps serving its rooms from what it last
 * knew: with etcd's quorum lost everywhere no placement can change, and
 * from inside, "the quorum is lost" and "I am the one cut off" look the
 * same.  Its own clock tells it when its lease may have run out (the TTL
 * the last keepalive answered, counted from when that keepalive was sent,
 * less a margin); past that `roomboxctl restore --force` may have given
 * its rooms to another host, which is the operator's assertion that this
 * host is gone.  So the moment etcd answers again after such a lapse, the
 * host is fenced -- by whichever thread hears etcd first: the lease
 * thread's keepalive, the watch thread's full read or a request's own
 * call, finding the lease not live -- and its rooms answer 503 +
 * Retry-After until the watch thread has read every record anew under a
 * live lease (a linearizable range begun after etcd answered), and only
 * then served -- or answered 421, if they went elsewhere meanwhile.  While
 * fenced, the watch thread reads again every half second instead of
 * waiting in a watch.  (Between the heal and that first answer, at most a
 * keepalive interval, a client that reaches the host straight may still
 * be served the old copy; through the router it is not.)
 *
 * The cache is a tree (tsearch: room ids are the client's, so no hash
 * whose collisions a client could pick) behind a read-write lock; each
 * entry keeps the etcd revision it was last changed at, so a watch event
 * and a transaction's answer arriving in either order leave the newer.  An
 * answer of this host's own (a transaction, a range) is applied only when
 * it is newer than everything the watch has brought: so the entry of a
 * room whose record and moving key are gone can be freed (the cache does
 * not grow with every room ever made) without an older answer arriving
 * late to bring it back. */
#include "cluster.h"

#include <pthread.h>
#include <search.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "epoch_store.h"
#include "errbuf.h"
#include "etcd.h"
#include "agent.h"
#include "fair_share.h"
#include "helper_client.h"
#include "http.h"
#include "move.h"
#include "roomid.h"
#include "store.h"

#define LEASE_TTL_S 10
/* often enough that a lease is rarely past half its TTL: a host cut off
 * keeps serving for most of it */
#define KEEPALIVE_EVERY_MS 1000
#define LEASE_MARGIN_MS 500
#define RETRY_MS 1000
#define MOVING_RETRY_S 2
#define NO_QUORUM_RETRY_S 5
#define QUIESCE_MS (60 * 1000)   /* a move's export waits this long for the room's requests */

struct placement {
	char room[ROOM_ID_MAX + 1];
	bool has_record, bad_record, moving;
	struct room_record rec;
	int64_t mod_rev;          /* of the record (or of its delete) */
	int64_t moving_rev;
	int64_t seen_rec;         /* the resync that last saw its record */
	int64_t seen_moving;      /* ... and its moving key (two keys, two marks:
				   * a moving key deleted unseen goes even
				   * when the record was read) */
	bool local_loaded;
	uint64_t local_epoch;     /* this host's copy's, 0 = none */
};

static struct {
	bool on;
	struct app *app;
	struct etcd etcd;
	char me[CLUSTER_HOST_MAX + 1];
	pthread_rwlock_t lock;
	void *tree;               /* of struct placement */
	int64_t resync;           /* count of full reads */
	atomic_bool synced;       /* the cache follows a live watch */
	atomic_bool maint;        /* this host's record says "maint" (drain) */
	int64_t known_rev;        /* the cache holds every change up to it
				   * (the watch's or a full read's revision;
				   * under lock) */
	atomic_bool stop;
	/* fencing (see the top of this file) */
	atomic_llong lease_until; /* CLOCK_MONOTONIC ms: the lease surely lives
				   * until then; 0 = no lease */
	atomic_bool fenced;       /* back in touch after a lapse (or never
				   * read), and the cache not read whole since
				   * cache was not read whole since */
	atomic_llong fence_gen;   /* bumped at each lapse */
	atomic_bool reread;       /* ends the watch: the lease thread asks for
				   * a full read */
	int64_t lease;            /* the lease thread's (and cluster_start's) */
} cl = { .lock = PTHREAD_RWLOCK_INITIALIZER, .fenced = true };

bool cluster_enabled(void)
{
	return cl.on;
}

const char *cluster_host_name(void)
{
	return cl.on ? cl.me : NULL;
}

static int by_room(const void *a, const void *b)
{
	return strcmp(((const struct placement *)a)->room, ((const struct placement *)b)->room);
}

static void sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static bool lease_live(void)
{
	return now_ms() < atomic_load(&cl.lease_until);
}

/* Back in touch after the lease may have lapsed: rooms stop being served
 * until a full read begun from now (the watch thread clears fenced). */
static void fence(void)
{
	/* the generation first: a watch thread that clears fenced checks it
	 * again after, and puts back a fence begun meanwhile */
	atomic_fetch_add(&cl.fence_gen, 1);
	atomic_store(&cl.fenced, true);
	atomic_store(&cl.reread, true);
}

/* One of this host's calls was answered by etcd: if the lease may have
 * lapsed meanwhile, the outage is over for this host, and so the fence
 * begins now, whichever thread heard etcd first (a request placing a
 * room, a move's read of the records, the watch thread's read, the lease
 * thread's keepalive may each come first, a second or more before the
 * others).  Fenced already: the fence stands until the watch thread's
 * read under a live lease.  Called by the etcd client itself after each
 * call the quorum answered (cl.etcd.answered): no call site can forget. */
static void heard_etcd(void)
{
	if (!lease_live() && !atomic_load(&cl.fenced)) {
		fence();
		fprintf(stderr, "roombox-fcgi: cluster: etcd answers again while this host's lease "
			"may have lapsed; its rooms answer 503 until every record is read anew "
			"under a live lease\n");
	}
}

/* The entry of room, made if missing; with the write lock held. */
static struct placement *entry_locked(const char *room)
{
	struct placement key, *p, **found;

	snprintf(key.room, sizeof(key.room), "%s", room);
	found = tfind(&key, &cl.tree, by_room);
	if (found)
		return *found;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	memcpy(p->room, key.room, sizeof(p->room));
	found = tsearch(p, &cl.tree, by_room);
	if (!found || *found != p) {
		free(p);
		return found ? *found : NULL;
	}
	return p;
}

/* A copy of room's entry; false when the cache has none. */
static bool entry_get(const char *room, struct placement *out)
{
	struct placement key, **found;
	bool ok = false;

	snprintf(key.room, sizeof(key.room), "%s", room);
	pthread_rwlock_rdlock(&cl.lock);
	found = tfind(&key, &cl.tree, by_room);
	if (found) {
		*out = **found;
		ok = true;
	}
	pthread_rwlock_unlock(&cl.lock);
	return ok;
}

/* ---- tombstones ----
 * A record that names another host is queued here (and so is the end of a
 * move); the tombstone thread removes this host's copy of the room when it
 * has one (an epoch file) and no move is in flight: the room moved away or
 * was restored elsewhere, or a move to here was given up before its
 * commit, and the copy left here is never served again.  The epoch file
 * stays as the tombstone.  Not under the cache's lock: removing a room runs the
 * helper. */
static pthread_mutex_t tomb_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tomb_cond = PTHREAD_COND_INITIALIZER;
static struct tomb {
	char room[ROOM_ID_MAX + 1];
	bool elsewhere;   /* pushed for a record seen naming another host */
} *tomb_queue;
static size_t tomb_n, tomb_cap;
static char tomb_current[ROOM_ID_MAX + 1];   /* the one tomb_one works on */

/* Is a copy of room queued for (or in) the tombstone's look?  A room is
 * not placed here again meanwhile: placed first, its first request would
 * be served the old copy (its epoch written over), or have its writes
 * removed with it. */
static bool tomb_pending(const char *room)
{
	bool pending;
	pthread_mutex_lock(&tomb_lock);
	pending = strcmp(tomb_current, room) == 0;
	for (size_t i = 0; !pending && i < tomb_n; i++)
		pending = strcmp(tomb_queue[i].room, room) == 0;
	pthread_mutex_unlock(&tomb_lock);
	return pending;
}

static void tomb_push(const char *room, bool elsewhere)
{
	pthread_mutex_lock(&tomb_lock);
	if (tomb_n == tomb_cap) {
		size_t cap = tomb_cap ? tomb_cap * 2 : 64;
		void *q = realloc(tomb_queue, cap * sizeof(*tomb_queue));
		if (!q) {
			pthread_mutex_unlock(&tomb_lock);
			return;
		}
		tomb_queue = q;
		tomb_cap = cap;
	}
	snprintf(tomb_queue[tomb_n].room, ROOM_ID_MAX + 1, "%s", room);
	tomb_queue[tomb_n++].elsewhere = elsewhere;
	pthread_cond_signal(&tomb_cond);
	pthread_mutex_unlock(&tomb_lock);
}

static bool entry_get(const char *room, struct placement *out);

static void tomb_one(const char *room, bool elsewhere)
{
	struct placement p;
	char err[1024];
	uint64_t mine;

	if (epoch_get(room, &mine, err, sizeof(err)) < 0 || mine == 0)
		return;   /* no copy of ours was ever placed */
	/* (a record seen elsewhere and deleted since: the room was cleaned
	 * up on its host, and the quorum below says so) */
	if (!elsewhere && (!entry_get(room, &p) || !p.has_record || p.bad_record || p.moving ||
			   strcmp(p.rec.host, cl.me) == 0))
		return;
	/* and so says etcd itself: the watch may not have brought the moving
	 * key yet when an import to here ends (the import's admission read
	 * it from the quorum), and removing that copy would leave this host
	 * serving an empty room after the commit */
	struct room_record now = { .host = "" };
	bool has_rec, moving, absent;
	if (move_records_now(&cl.etcd, room, &now, &has_rec, &moving, &absent, NULL, err,
			     sizeof(err)) < 0) {
		fprintf(stderr, "roombox-fcgi: room %s: cluster: copy kept, etcd not asked: %s\n", room, err);
		return;
	}
	/* no record at all after one seen elsewhere: cleaned up there, and a
	 * copy kept here would be served again, deleted contents and all, to
	 * the id's next first request.  (Never for a record not seen: a host
	 * whose etcd lost its records keeps its rooms.) */
	bool cleaned_up = absent && elsewhere && !moving;
	if (!cleaned_up && (!has_rec || moving || strcmp(now.host, cl.me) == 0)) {
		fprintf(stderr, "roombox-fcgi: room %s: cluster: copy (epoch %llu) kept: etcd %s (this "
			"host's watch is behind)\n", room, (unsigned long long)mine,
			moving ? "has a move of it in flight" : has_rec ? "places it here" : "holds no record");
		return;
	}
	char where[CLUSTER_HOST_MAX + 64];
	if (cleaned_up)
		snprintf(where, sizeof(where), "cleaned up on the host it moved to");
	else
		snprintf(where, sizeof(where), "now on host %s at epoch %llu", now.host,
			 (unsigned long long)now.epoch);
	if (rooms_remove_local(cl.app, room, err, sizeof(err)) < 0) {
		fprintf(stderr, "roombox-fcgi: room %s: cluster: %s; removing this host's copy: %s\n",
			room, where, err);
		return;
	}
	fprintf(stderr, "roombox-fcgi: room %s: cluster: %s; this host's copy (epoch %llu) removed, "
		"its epoch kept as a tombstone\n", room, where, (unsigned long long)mine);
}

static void *tomb_main(void *unused)
{
	for (;;) {
		pthread_mutex_lock(&tomb_lock);
		while (!tomb_n)
			pthread_cond_wait(&tomb_cond, &tomb_lock);
		struct tomb t = tomb_queue[--tomb_n];
		memcpy(tomb_current, t.room, sizeof(tomb_current));
		pthread_mutex_unlock(&tomb_lock);
		tomb_one(t.room, t.elsewhere);
		pthread_mutex_lock(&tomb_lock);
		tomb_current[0] = '\0';
		pthread_mutex_unlock(&tomb_lock);
	}
	return NULL;
}

/* A key under /roombox/rooms/ or /roombox/moving/: its room id, or NULL
 * for a key that names none (left alone: not ours to read). */
static const char *key_room(const char *key, const char *prefix)
{
	size_t n = strlen(prefix);

	if (strncmp(key, prefix, n) != 0 || !room_id_valid(key + n))
		return NULL;
	return key + n;
}

/* An entry that says nothing any more: freed (with the write lock held). */
static void entry_drop_locked(struct placement *p)
{
	if (p->has_record || p->moving || p->bad_record)
		return;
	tdelete(p, &cl.tree, by_room);
	free(p);
}

/* One key as read or watched: newer than what the cache has wins.
 * answer_rev: the revision of this host's own answer it came in (a
 * transaction's, a range's), skipped when the cache knows past it; 0 for
 * the watch and a full read, which are the cache's own order. */
static void apply_kv(const struct etcd_kv *kv, bool deleted, int64_t resync, int64_t answer_rev)
{
	const char *room;
	bool moving = false;

	if (strncmp(kv->key, CLUSTER_HOSTS_PREFIX, strlen(CLUSTER_HOSTS_PREFIX)) == 0) {
		struct host_record h;
		char err[256];
		/* a record deleted is its lease's end (a restart, etcd away), not
		 * an operator's word: the state stays as it was until the host
		 * registers again, keeping it */
		if (deleted || strcmp(kv->key + strlen(CLUSTER_HOSTS_PREFIX), cl.me) != 0)
			return;
		bool maint = host_record_parse(kv->value, kv->value_len, &h) == 0 && h.maint;
		if (atomic_exchange(&cl.maint, maint) != maint &&
		    epoch_store_maint_set(maint, err, sizeof(err)) < 0)
			fprintf(stderr, "roombox-fcgi: cluster: %s\n", err);
		return;
	}
	if ((room = key_room(kv->key, CLUSTER_ROOMS_PREFIX)) == NULL) {
		if ((room = key_room(kv->key, CLUSTER_MOVING_PREFIX)) == NULL)
			return;
		moving = true;
	}
	pthread_rwlock_wrlock(&cl.lock);
	if (answer_rev && answer_rev <= cl.known_rev) {
		pthread_rwlock_unlock(&cl.lock);
		return;   /* the watch brought this, or what came after it */
	}
	struct placement *p = entry_locked(room);
	if (p && moving && kv->mod_rev >= p->moving_rev) {
		p->moving = !deleted;
		p->moving_rev = kv->mod_rev;
	} else if (p && !moving && kv->mod_rev >= p->mod_rev) {
		p->mod_rev = kv->mod_rev;
		p->has_record = !deleted;
		p->bad_record = false;
		memset(&p->rec, 0, sizeof(p->rec));
		if (!deleted && room_record_parse(kv->value, kv->value_len, &p->rec) < 0) {
			/* an unreadable record still says the room is placed:
			 * never served, never placed again here */
			p->bad_record = true;
			fprintf(stderr, "roombox-fcgi: room %s: cluster: its record in etcd is "
				"unreadable; the room is not served\n", room);
		}
	}
	bool elsewhere = p && !p->moving && p->has_record && !p->bad_record &&
			 strcmp(p->rec.host, cl.me) != 0;
	if (p && resync && moving)
		p->seen_moving = resync;
	else if (p && resync)
		p->seen_rec = resync;
	if (p && deleted)
		entry_drop_locked(p);
	pthread_rwlock_unlock(&cl.lock);
	if (elsewhere)
		tomb_push(room, true);
}

static void known_up_to(int64_t rev)
{
	pthread_rwlock_wrlock(&cl.lock);
	if (rev > cl.known_rev)
		cl.known_rev = rev;
	pthread_rwlock_unlock(&cl.lock);
}

/* ---- the watch thread ---- */

static int64_t sweep_gen, sweep_rev;
static struct placement **sweep_list;
static size_t sweep_n, sweep_cap;

static void sweep_visit(const void *node, VISIT which, void *unused)
{
	struct placement *p = *(struct placement *const *)node;

	if (which != postorder && which != leaf)
		return;
	if ((p->has_record && p->seen_rec != sweep_gen && p->mod_rev <= sweep_rev) ||
	    (p->moving && p->seen_moving != sweep_gen && p->moving_rev <= sweep_rev)) {
		if (sweep_n == sweep_cap) {
			size_t cap = sweep_cap ? sweep_cap * 2 : 64;
			struct placement **l = realloc(sweep_list, cap * sizeof(*l));
			if (!l)
				return;
			sweep_list = l;
			sweep_cap = cap;
		}
		sweep_list[sweep_n++] = p;
	}
}

/* Keys gone while no watch ran: absent from a full read at rev. */
static void sweep_unseen(int64_t gen, int64_t rev)
{
	pthread_rwlock_wrlock(&cl.lock);
	sweep_gen = gen;
	sweep_rev = rev;
	sweep_n = 0;
	twalk_r(cl.tree, sweep_visit, NULL);
	for (size_t i = 0; i < sweep_n; i++) {
		struct placement *p = sweep_list[i];
		if (p->has_record && p->seen_rec != gen && p->mod_rev <= rev)
			p->has_record = p->bad_record = false;
		if (p->moving && p->seen_moving != gen && p->moving_rev <= rev) {
			p->moving = false;
			/* a move given up unseen: a copy it left here goes, as
			 * when the watch brings the moving key's delete
			 * (tomb_push takes only its own lock) */
			if (p->has_record && !p->bad_record && strcmp(p->rec.host, cl.me) != 0)
				tomb_push(p->room, true);
		}
		entry_drop_locked(p);
	}
	if (rev > cl.known_rev)
		cl.known_rev = rev;
	pthread_rwlock_unlock(&cl.lock);
}

static int resync(int64_t *rev, char *err, size_t errlen)
{
	struct etcd_kv *kvs;
	size_t n;
	char end[64];

	etcd_prefix_end("/roombox/", end, sizeof(end));
	if (etcd_range(&cl.etcd, "/roombox/", end, &kvs, &n, rev, NULL, err, errlen) < 0)
		return -1;
	int64_t gen = ++cl.resync;
	for (size_t i = 0; i < n; i++)
		apply_kv(&kvs[i], false, gen, 0);
	etcd_kvs_free(kvs, n);
	sweep_unseen(gen, *rev);
	return 0;
}

static int on_watch(void *ctx, const struct etcd_watch_msg *m)
{
	char *why = ctx;

	if (m->canceled || m->compact_revision) {
		snprintf(why, 256, "etcd watch: %s", m->compact_revision ? "compacted" : "canceled");
		return -1;
	}
	if (m->created)
		atomic_store(&cl.synced, true);
	for (size_t i = 0; i < m->n_events; i++)
		apply_kv(&m->events[i].kv, m->events[i].deleted, 0, 0);
	/* events come in revision order: every change up to the last one's
	 * is in (a message's header revision is the store's, which may be
	 * ahead of the events sent so far) */
	if (m->n_events)
		known_up_to(m->events[m->n_events - 1].kv.mod_rev);
	return 0;
}

static void *watch_main(void *unused)
{
	char err[256], why[256];
	bool said = false;
	int64_t rev;

	while (!atomic_load(&cl.stop)) {
		char end[64];
		/* read before the range: a range that ends the fence must have
		 * begun under a live lease, after the lapse; reread cleared
		 * first, so a fence() from here on ends the next watch at once */
		atomic_store(&cl.reread, false);
		long long gen = atomic_load(&cl.fence_gen);
		bool live = lease_live();
		if (resync(&rev, err, sizeof(err)) < 0) {
			if (!said)
				fprintf(stderr, "roombox-fcgi: cluster: %s (retrying)\n", err);
			said = true;
			sleep_ms(RETRY_MS);
			continue;
		}
		if (said)
			fprintf(stderr, "roombox-fcgi: cluster: etcd answers again\n");
		said = false;
		if (live && gen == atomic_load(&cl.fence_gen) && atomic_exchange(&cl.fenced, false)) {
			if (gen != atomic_load(&cl.fence_gen))
				atomic_store(&cl.fenced, true);   /* a fence() came meanwhile */
			else
				fprintf(stderr, "roombox-fcgi: cluster: records read anew under a live "
					"lease; this host's rooms are served again\n");
		}
		if (atomic_load(&cl.fenced)) {
			/* still fenced: read again shortly rather than wait in a
			 * watch for the lease thread's word (a keepalive sent before
			 * the lease ran out and answered after it makes the lease
			 * live again without a lapse, and so without a fence() to
			 * end the watch: the host stayed fenced until the watch
			 * failed for another reason) */
			sleep_ms(RETRY_MS / 2);
			continue;
		}
		why[0] = '\0';
		etcd_prefix_end("/roombox/", end, sizeof(end));
		int ended = etcd_watch(&cl.etcd, "/roombox/", end, rev + 1, on_watch, why, &cl.reread,
				       err, sizeof(err));
		atomic_store(&cl.synced, false);
		/* ended by an error, said even when a fence's re-read was asked
		 * for meanwhile (the read comes next either way); ended by that
		 * ask alone (0), nothing to say */
		if (ended < 0)
			fprintf(stderr, "roombox-fcgi: cluster: %s%s\n", why[0] ? why : err,
				atomic_load(&cl.reread) ? " (a fence's re-read of every record follows)" : "");
		sleep_ms(RETRY_MS / 5);
	}
	return NULL;
}

/* ---- the lease thread ---- */

/* /roombox/hosts/<me> under lease, keeping an operator's "maint": from
 * the record, or when the lease's end took it, as this host last had it. */
static int register_host(int64_t lease, char *err, size_t errlen)
{
	char key[128], *value;
	struct etcd_kv kv;
	struct host_record h;
	bool maint = atomic_load(&cl.maint);
	int got;

	snprintf(key, sizeof(key), CLUSTER_HOSTS_PREFIX "%s", cl.me);
	if ((got = etcd_get(&cl.etcd, key, &kv, NULL, err, errlen)) < 0)
		return -1;
	if (got == 1 && host_record_parse(kv.value, kv.value_len, &h) == 0)
		maint = h.maint;
	etcd_kv_clear(&kv);
	json_object *o = json_object_new_object();
	json_object_object_add(o, "url", json_object_new_string(cl.app->cfg.cluster_url));
	json_object_object_add(o, "state", json_object_new_string(maint ? "maint" : "ready"));
	value = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
						      JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(o);
	int rc = value ? etcd_put(&cl.etcd, key, value, lease, err, errlen) : -1;
	free(value);
	return rc;
}

/* A new lease, and the host key under it (cl.lease set). */
static int grant_and_register(char *err, size_t errlen)
{
	int64_t lease;

	if (etcd_lease_grant(&cl.etcd, LEASE_TTL_S, &lease, err, errlen) < 0 ||
	    register_host(lease, err, errlen) < 0)
		return -1;
	cl.lease = lease;
	fprintf(stderr, "roombox-fcgi: cluster: host %s registered (lease %llx)\n",
		cl.me, (unsigned long long)lease);
	return 0;
}

/* A grant or keepalive sent at sent (ms) answered with ttl: the lease
 * lives at least until sent + ttl (etcd counts from its receipt). */
static void lease_renewed(long long sent, int64_t ttl, bool *lapsed)
{
	if (*lapsed) {
		/* the fence ends with a full read begun under this lease: fenced
		 * before the lease shows live, so that no read the watch thread
		 * began before this fence can end it (a host that served on
		 * and was fenced a moment later would turn clients away after
		 * it had seemed to be back; heard_etcd, called with the answer,
		 * said so already) */
		*lapsed = false;
		fence();
	}
	atomic_store(&cl.lease_until, sent + ttl * 1000 - LEASE_MARGIN_MS);
}

static void *lease_main(void *unused)
{
	char err[256];
	int64_t ttl;
	bool said = false, lapsed = atomic_load(&cl.fenced);

	while (!atomic_load(&cl.stop)) {
		int rc;
		long long sent = now_ms();
		if (!lapsed && sent >= atomic_load(&cl.lease_until)) {
			fprintf(stderr, "roombox-fcgi: cluster: no keepalive answered within the lease's "
				"TTL: this host's rooms are served from what it last knew, and fenced "
				"once etcd answers again until every record is read anew\n");
			/* a full read begun before the lapse ends no fence */
			atomic_fetch_add(&cl.fence_gen, 1);
			lapsed = true;
		}
		if (!cl.lease) {
			rc = grant_and_register(err, sizeof(err));
			if (rc == 0)
				lease_renewed(sent, LEASE_TTL_S, &lapsed);
		} else {
			rc = etcd_lease_keepalive(&cl.etcd, cl.lease, &ttl, err, sizeof(err));
			if (rc == 0 && ttl == 0) {
				fprintf(stderr, "roombox-fcgi: cluster: lease %llx expired; "
					"registering again\n", (unsigned long long)cl.lease);
				cl.lease = 0;
				fence();
				lapsed = true;
				continue;
			}
			if (rc == 0)
				lease_renewed(sent, ttl, &lapsed);
		}
		if (rc < 0 && !said)
			fprintf(stderr, "roombox-fcgi: cluster: lease: %s (retrying)\n", err);
		said = rc < 0;
		sleep_ms(rc < 0 ? RETRY_MS : KEEPALIVE_EVERY_MS);
	}
	return NULL;
}

int cluster_start(struct app *app, char *err, size_t errlen)
{
	pthread_t t;
	char dir[PATH_MAX], why[256];

	if (strspn(app->cfg.cluster_etcd, ", ") == strlen(app->cfg.cluster_etcd))
		return 0;   /* single host */
	if (etcd_init(&cl.etcd, app->cfg.cluster_etcd, why, sizeof(why)) < 0)
		return errorf(err, errlen, "cluster_etcd: %s", why);
	/* every call of this host that etcd answers, whoever makes it (the
	 * threads, a request's placement, look-up or delete, a move's read of
	 * the records): fenced at once after a lapse */
	cl.etcd.answered = heard_etcd;
	snprintf(dir, sizeof(dir), "%s/epochs", app->cfg.state_dir);
	if (epoch_store_init(dir, err, errlen) < 0)
		return -1;
	atomic_store(&cl.maint, epoch_store_maint_get());
	cl.app = app;
	snprintf(cl.me, sizeof(cl.me), "%s", app->cfg.cluster_host);
	snprintf(http_host_header, sizeof(http_host_header), "X-Roombox-Host: %s\r\n", cl.me);
	cl.on = true;
	/* the lease, then a first read under it, before requests come: they
	 * find the cache full and the host not fenced; an etcd that does not
	 * answer yet is the threads' to retry (what the read queues for the
	 * tombstone thread waits for it) */
	int64_t rev;
	long long sent = now_ms();
	if (grant_and_register(why, sizeof(why)) == 0)
		atomic_store(&cl.lease_until, sent + LEASE_TTL_S * 1000 - LEASE_MARGIN_MS);
	else
		fprintf(stderr, "roombox-fcgi: cluster: lease: %s (retrying)\n", why);
	bool live = lease_live();
	if (resync(&rev, why, sizeof(why)) < 0)
		fprintf(stderr, "roombox-fcgi: cluster: %s (retrying)\n", why);
	else if (live)
		atomic_store(&cl.fenced, false);
	if (pthread_create(&t, NULL, tomb_main, NULL) != 0 ||
	    pthread_detach(t) != 0 ||
	    pthread_create(&t, NULL, watch_main, NULL) != 0 ||
	    pthread_detach(t) != 0 ||
	    pthread_create(&t, NULL, lease_main, NULL) != 0 ||
	    pthread_detach(t) != 0) {
		snprintf(err, errlen, "cluster: cannot start its threads");
		return -1;
	}
	fprintf(stderr, "roombox-fcgi: cluster: host %s (%s), etcd %s\n", cl.me,
		app->cfg.cluster_url, app->cfg.cluster_etcd);
	return 0;
}

/* ---- the decision ---- */

static void record_key(const char *room, char *key, size_t len)
{
	snprintf(key, len, CLUSTER_ROOMS_PREFIX "%s", room);
}

/* This host's copy's epoch, read once from epoch_store. */
static uint64_t local_epoch(struct placement *p)
{
	char err[256];
	uint64_t e;

	if (p->local_loaded)
		return p->local_epoch;
	if (epoch_get(p->room, &e, err, sizeof(err)) < 0) {
		fprintf(stderr, "roombox-fcgi: %s\n", err);
		return 0;
	}
	pthread_rwlock_wrlock(&cl.lock);
	struct placement *q = entry_locked(p->room);
	if (q) {
		q->local_loaded = true;
		q->local_epoch = e;
	}
	pthread_rwlock_unlock(&cl.lock);
	return e;
}

static int local_epoch_set(const char *room, uint64_t e)
{
	char err[256];

	if (epoch_set(room, e, err, sizeof(err)) < 0) {
		fprintf(stderr, "roombox-fcgi: %s\n", err);
		return -1;
	}
	pthread_rwlock_wrlock(&cl.lock);
	struct placement *q = entry_locked(room);
	if (q) {
		q->local_loaded = true;
		q->local_epoch = e;
	}
	pthread_rwlock_unlock(&cl.lock);
	return 0;
}

/* A room with a record: serve it here, or answer. */
static bool admit_recorded(struct placement *p, struct response *rs)
{
	if (p->bad_record) {
		response_error(rs, 503, "room %s: its placement record in etcd is unreadable; "
			       "it is not served until an operator repairs it", p->room);
		return false;
	}
	if (strcmp(p->rec.host, cl.me) != 0) {
		response_error(rs, 421, "room %s lives on host %s", p->room, p->rec.host);
		return false;
	}
	if (atomic_load(&cl.fenced)) {
		rs->retry_after = NO_QUORUM_RETRY_S;
		response_error(rs, 503, "room %s: host %s is reading etcd's records anew (after an "
			       "outage, or at start): it serves the room once it knows it is still its own",
			       p->room, cl.me);
		return false;
	}
	uint64_t mine = local_epoch(p);
	if (mine >= p->rec.epoch)
		return true;
	if (mine == 0 && p->rec.epoch == 1) {
		/* placed here by a claim whose epoch was not written yet (a
		 * crash between the two, or another thread's claim) */
		return local_epoch_set(p->room, 1) == 0 ||
		       (response_error(rs, 500, "room %s: cannot record its epoch", p->room), false);
	}
	fprintf(stderr, "roombox-fcgi: room %s: cluster: this host's copy (epoch %llu) is older "
		"than etcd's record (epoch %llu); not served\n", p->room,
		(unsigned long long)mine, (unsigned long long)p->rec.epoch);
	response_error(rs, 503, "room %s: this host's copy (epoch %llu) is older than its record "
		       "(epoch %llu) and is never served", p->room,
		       (unsigned long long)mine, (unsigned long long)p->rec.epoch);
	return false;
}

/* The transaction that places room here unless it is placed already; the
 * cache learns the outcome either way.  0, or -1 with rs answered. */
static int place_here(const char *room, struct response *rs)
{
	struct room_record rec = { .epoch = 1 };
	struct etcd_kv existing;
	char key[128], err[512], *value;
	bool created;
	int64_t rev;

	if (tomb_pending(room)) {
		rs->retry_after = MOVING_RETRY_S;
		response_error(rs, 503, "room %s: this host is removing an old copy of it; retry "
			       "shortly", room);
		return -1;
	}
	if (atomic_load(&cl.maint)) {
		/* drained: its rooms go elsewhere, no new one comes */
		rs->retry_after = NO_QUORUM_RETRY_S;
		response_error(rs, 503, "room %s: host %s is in maintenance and takes no new rooms",
			       room, cl.me);
		return -1;
	}
	snprintf(rec.host, sizeof(rec.host), "%s", cl.me);
	record_key(room, key, sizeof(key));
	value = room_record_json(&rec);
	if (!value) {
		response_error(rs, 500, "out of memory");
		return -1;
	}
	int rc = etcd_create_if_absent(&cl.etcd, key, value, &created, &existing, &rev, err, sizeof(err));
	if (rc < 0) {
		free(value);
		fprintf(stderr, "roombox-fcgi: room %s: cluster: place: %s\n", room, err);
		rs->retry_after = NO_QUORUM_RETRY_S;
		response_error(rs, 503, "room %s: cannot place a new room: etcd does not answer "
			       "(unreachable, or without a quorum); existing rooms keep serving", room);
		return -1;
	}
	if (created) {
		struct etcd_kv mine = { .value = value, .value_len = strlen(value),
					.create_rev = rev, .mod_rev = rev };
		record_key(room, mine.key, sizeof(mine.key));
		apply_kv(&mine, false, 0, rev);
		free(value);
		return local_epoch_set(room, 1) == 0 ? 0 :
		       (response_error(rs, 500, "room %s: cannot record its epoch", room), -1);
	}
	free(value);
	apply_kv(&existing, false, 0, rev);
	free(existing.value);
	return 0;
}

/* The cache knows nothing of room and has no watch: ask etcd once. */
static void look_up(const char *room)
{
	struct etcd_kv *kvs;
	size_t n;
	int64_t rev;
	char key[128], err[256];

	record_key(room, key, sizeof(key));
	if (etcd_range(&cl.etcd, key, NULL, &kvs, &n, &rev, NULL, err, sizeof(err)) < 0)
		return;   /* nothing to learn: the handler answers from what is here */
	for (size_t i = 0; i < n; i++)
		apply_kv(&kvs[i], false, 0, rev);
	etcd_kvs_free(kvs, n);
}

bool cluster_room_admit(struct app *app, const char *room, bool creates, bool *placed,
			struct response *rs)
{
	struct placement p;

	*placed = false;
	if (!cl.on)
		return true;
	bool known = entry_get(room, &p) && (p.has_record || p.moving);
	if (!known && !creates && !atomic_load(&cl.synced)) {
		look_up(room);
		known = entry_get(room, &p) && (p.has_record || p.moving);
	}
	if (!known && creates) {
		if (place_here(room, rs) < 0)
			return false;
		known = entry_get(room, &p) && (p.has_record || p.moving);
		*placed = known && p.has_record && strcmp(p.rec.host, cl.me) == 0;
	}
	if (!known)
		return true;   /* a read of a room nobody placed: the handler's 404 */
	if (p.moving) {
		rs->retry_after = MOVING_RETRY_S;
		response_error(rs, 503, "room %s is moving between hosts; retry shortly", room);
		return false;
	}
	return admit_recorded(&p, rs);
}

/* Rooms a claim is making now (POST /api/rooms, a fork's target): ids,
 * once each claim (a fork holds no worker of its new room's, so the
 * workers' count cannot show it to cluster_room_unmade). */
static pthread_mutex_t claims_lock = PTHREAD_MUTEX_INITIALIZER;
static char (*claims)[ROOM_ID_MAX + 1];
static size_t claims_n, claims_cap;

static bool claimed(const char *room)
{
	bool found = false;
	pthread_mutex_lock(&claims_lock);
	for (size_t i = 0; !found && i < claims_n; i++)
		found = strcmp(claims[i], room) == 0;
	pthread_mutex_unlock(&claims_lock);
	return found;
}

bool cluster_room_claim(const char *room, struct response *rs)
{
	struct placement p;

	if (!cl.on)
		return true;
	pthread_mutex_lock(&claims_lock);
	if (claims_n == claims_cap) {
		size_t cap = claims_cap ? claims_cap * 2 : 16;
		void *n = realloc(claims, cap * sizeof(*claims));
		if (!n) {
			pthread_mutex_unlock(&claims_lock);
			response_error(rs, 500, "out of memory");
			return false;
		}
		claims = n;
		claims_cap = cap;
	}
	snprintf(claims[claims_n++], ROOM_ID_MAX + 1, "%s", room);
	pthread_mutex_unlock(&claims_lock);
	if (place_here(room, rs) < 0) {
		cluster_room_claim_end(room);
		return false;
	}
	if (!entry_get(room, &p) || !p.has_record || strcmp(p.rec.host, cl.me) != 0) {
		cluster_room_claim_end(room);
		response_error(rs, 409, "room %s exists", room);
		return false;
	}
	return true;
}

void cluster_room_claim_end(const char *room)
{
	if (!cl.on)
		return;
	pthread_mutex_lock(&claims_lock);
	for (size_t i = 0; i < claims_n; i++)
		if (strcmp(claims[i], room) == 0) {
			memcpy(claims[i], claims[--claims_n], sizeof(claims[i]));
			break;
		}
	pthread_mutex_unlock(&claims_lock);
}

/* room's record removed from etcd, if it is still this host's as the
 * cache has it (p), and the epoch with it.  0; 1 when the record changed
 * meanwhile; -1 with err when etcd does not answer. */
static int unplace(const char *room, const struct placement *p, char *err, size_t errlen)
{
	char key[128];
	bool done = false;
	int64_t rev = 0;

	record_key(room, key, sizeof(key));
	if (etcd_delete_if(&cl.etcd, key, p->mod_rev, &done, &rev, err, errlen) < 0)
		return -1;
	if (!done)
		return 1;
	if (epoch_forget(room, err, errlen) < 0)
		fprintf(stderr, "roombox-fcgi: %s\n", err);
	struct etcd_kv gone = { .value = (char *)"", .mod_rev = rev };
	memcpy(gone.key, key, strlen(key) + 1);
	apply_kv(&gone, true, 0, rev);
	/* an entry kept (a move in flight) reads the epoch again */
	struct placement k, **found;
	snprintf(k.room, sizeof(k.room), "%s", room);
	pthread_rwlock_wrlock(&cl.lock);
	if ((found = tfind(&k, &cl.tree, by_room)) != NULL)
		(*found)->local_loaded = false;
	pthread_rwlock_unlock(&cl.lock);
	return 0;
}

bool cluster_room_ended(const char *room, struct response *rs)
{
	struct placement p;
	char err[512];

	if (!cl.on || !entry_get(room, &p) || !p.has_record || strcmp(p.rec.host, cl.me) != 0)
		return true;
	int rc = unplace(room, &p, err, sizeof(err));
	if (rc != 0) {
		/* The room is gone from here but its record is not: a 200 would
		 * leave the id placed on this host for good (listed by every
		 * host, counted and moved by a drain) with nobody told.  The
		 * epoch stays with the record, so the id made again here is
		 * this host's to serve; the DELETE retried removes the record
		 * (what was cleaned up is cleaned up again: nothing).  A record
		 * that changed meanwhile is not this host's to delete: the
		 * retry finds where the room lives now. */
		fprintf(stderr, "roombox-fcgi: room %s: cluster: its record stays in etcd: %s\n",
			room, rc < 0 ? err : "it changed meanwhile");
		rs->retry_after = NO_QUORUM_RETRY_S;
		if (rc < 0)
			response_error(rs, 503, "room %s: cleaned up on host %s, but its placement "
				       "record could not be removed: etcd does not answer (unreachable, "
				       "or without a quorum); retry the request", room, cl.me);
		else
			response_error(rs, 503, "room %s: cleaned up on host %s, but its placement "
				       "record changed meanwhile; retry the request", room, cl.me);
		return false;
	}
	return true;
}

void cluster_room_unmade(struct app *app, const char *room, bool holds_share)
{
	struct placement p;
	struct helper_status st;
	struct helper_error herr;
	char err[512];

	if (!cl.on || !entry_get(room, &p) || !p.has_record || strcmp(p.rec.host, cl.me) != 0)
		return;
	/* another request for it runs here, or a model call's thread: it
	 * may be making the room; or the room has messages: it was made */
	if ((app->room_workers && fair_share_held(app->room_workers, room) > (holds_share ? 1 : 0)) ||
	    claimed(room) || agent_room_calls(room) > 0 || store_has_messages(room))
		return;
	struct helper_target target = app_helper(app);
	if (helper_status(&target, room, &st, &herr) == 0 || herr.http_status != 404)
		return;   /* made after all (or the helper cannot say): placed it stays */
	int rc = unplace(room, &p, err, sizeof(err));
	if (rc != 0)
		fprintf(stderr, "roombox-fcgi: room %s: cluster: the record of a room never made stays in "
			"etcd: %s\n", room, rc < 0 ? err : "it changed meanwhile");
}

/* ---- the cluster-wide list ---- */

bool cluster_room_listed_here(const char *room)
{
	struct placement p;

	if (!cl.on || !entry_get(room, &p) || !p.has_record)
		return true;
	return !p.bad_record && strcmp(p.rec.host, cl.me) == 0;
}

static void remote_visit(const void *node, VISIT which, void *list)
{
	const struct placement *p = *(struct placement *const *)node;
	char name[SANDBOX_NAME_MAX + 1];

	if (which != postorder && which != leaf)
		return;
	if (!p->has_record || p->bad_record || strcmp(p->rec.host, cl.me) == 0)
		return;
	room_sandbox_name(p->room, name, sizeof(name));
	json_object *o = json_object_new_object();
	json_object_object_add(o, "roomId", json_object_new_string(p->room));
	json_object_object_add(o, "sandboxName", json_object_new_string(name));
	json_object_object_add(o, "host", json_object_new_string(p->rec.host));
	json_object_array_add(list, o);
}

void cluster_rooms_add_remote(json_object *list)
{
	if (!cl.on)
		return;
	pthread_rwlock_rdlock(&cl.lock);
	twalk_r(cl.tree, remote_visit, list);
	pthread_rwlock_unlock(&cl.lock);
}

/* ---- moves ---- */

bool cluster_move_admit(struct app *app, const char *room, bool export, const char *header,
			uint64_t *epoch, struct response *rs)
{
	int64_t moving_rev = 0;
	if (!move_admit(app, &cl.etcd, cl.me, room, export, header, epoch, &moving_rev, rs))
		return false;
	if (export) {
		/* etcd's quorum has the move: the cache says so at once, before
		 * the watch brings its key (behind, this host would admit
		 * requests whose writes miss the export's cut).  Not over a
		 * later change of the key the watch has applied already. */
		pthread_rwlock_wrlock(&cl.lock);
		struct placement *p = entry_locked(room);
		/* (known_rev: the watch has applied everything up to it, the
		 * move's end included when the entry went with it) */
		if (p && moving_rev > p->moving_rev && moving_rev > cl.known_rev) {
			p->moving = true;
			p->moving_rev = moving_rev;
		}
		pthread_rwlock_unlock(&cl.lock);
	}
	return true;
}

bool cluster_room_still_admitted(const char *room, struct response *rs)
{
	struct placement p;

	if (!cl.on || !entry_get(room, &p) || !p.moving)
		return true;
	rs->retry_after = MOVING_RETRY_S;
	response_error(rs, 503, "room %s is moving between hosts; retry shortly", room);
	return false;
}

void cluster_move_imported(const char *room, uint64_t epoch)
{
	/* the copy is whole (an import makes the room only once all of it
	 * came and was found right); its epoch says which copy it is */
	if (local_epoch_set(room, epoch) == 0)
		fprintf(stderr, "roombox-fcgi: room %s: cluster: moved in at epoch %llu; served once "
			"etcd's record names this host\n", room, (unsigned long long)epoch);
	/* a move aborted while its import still ran (its mover stopped, then
	 * move --abort) brings no event after the copy is whole: look now,
	 * or the copy would stay here, never served and never removed */
	tomb_push(room, false);
}

bool cluster_move_quiesce(struct app *app, const char *room, struct response *rs)
{
	/* the room answers 503 to every new request since the moving key; those
	 * admitted before it may still write, and an acknowledged write must be
	 * in the copy that moves: wait until this export is the room's only
	 * request (parked ones hold nothing and meet the 503 when released).
	 * Counted on the clock, not in polls: on a loaded machine a 10 ms
	 * sleep takes far longer, and a wait past the mover's 120 s of
	 * silence would make it give up on a timeout, not read this 503 */
	long long until = now_ms() + QUIESCE_MS;
	while (app->room_workers && fair_share_held(app->room_workers, room) > 1) {
		if (now_ms() >= until) {
			rs->retry_after = MOVING_RETRY_S;
			response_error(rs, 503, "move of room %s: its requests still run after %d s",
				       room, QUIESCE_MS / 1000);
			return false;
		}
		sleep_ms(10);
	}
	return true;
}
