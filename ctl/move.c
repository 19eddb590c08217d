/* roomboxctl's mover (see move.h): the steps of a move of room R from host
 * A to host B, as the hosts expect them (roombox-fcgi's fcgi-app/cluster/
 * move.c checks each):
 *
 *   1. create /roombox/moving/R if absent: every host answers R 503 +
 *      Retry-After from now on, and no second move can start;
 *   2. GET A's /api/rooms/R/export, streamed as it comes into
 *   3. PUT B's /api/rooms/R/import, both with X-Roombox-Move: A B N T SIG
 *      (N the record's epoch + 1, T now, SIG the HMAC-SHA256 under
 *      cluster_key_file of "roombox-move R A B N T"): no token needed, each
 *      host checks the signature and etcd's records itself;
 *   4. the router's map flipped to B (R answers 503 everywhere until the
 *      commit, so this early flip costs nothing, and spares the clients
 *      A's 421 between the commit and a later sync), then the commit: one
 *      transaction, compared on the record's mod_revision, puts
 *      {"host":B,"epoch":N} and deletes the moving key.  B serves R from
 *      then on; A removes its copy by itself.
 *
 * A failure before the commit deletes the moving key (the abort): A serves
 * R again, B removes whatever it imported.  After the commit there is
 * nothing to undo.
 *
 * The commit also compares the moving key's mod_revision with the one this
 * mover wrote: a mover stopped for a while (a paused VM, SIGSTOP) whose
 * move an operator aborted meanwhile (move --abort, after which A served
 * and took writes) cannot commit B's stale copy when it wakes.  A commit
 * whose answer never came (etcd's leader lost, a timeout) may still have
 * been applied: the record is read again until etcd answers, and only a
 * record still as it was counts as not committed.  The abort compares the
 * moving key the same way, so it never deletes another mover's key.
 *
 * A mover killed outright leaves the moving key: `roomboxctl move --abort
 * R` (move_abort) deletes it, which is the abort above done by hand, and a
 * new move can start.  The export reaches the import through a pipe, from a
 * child process doing the GET: two transfers at once with no temporary
 * file and no threads. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <curl/curl.h>
#include <json-c/json.h>

#include "move.h"
#include "sha256.h"

#define ROOMS_PREFIX "/roombox/rooms/"
#define HOSTS_PREFIX "/roombox/hosts/"
#define MOVING_PREFIX "/roombox/moving/"
/* a transfer that moves less than 1 byte/s for this long is given up */
#define STALL_S 120L
/* how long a commit whose answer was lost asks etcd for its outcome */
#define COMMIT_ASK_S 60

static void hmac_sha256_hex(const unsigned char *key, size_t klen, const char *msg, char out[65])
{
	unsigned char k[64] = { 0 }, pad[64], inner[32], mac[32];
	struct sha256_ctx c;

	if (klen > 64)
		sha256(key, klen, k);
	else
		memcpy(k, key, klen);
	for (int i = 0; i < 64; i++)
		pad[i] = k[i] ^ 0x36;
	sha256_init(&c);
	sha256_update(&c, pad, 64);
	sha256_update(&c, msg, strlen(msg));
	sha256_final(&c, inner);
	for (int i = 0; i < 64; i++)
		pad[i] = k[i] ^ 0x5c;
	sha256_init(&c);
	sha256_update(&c, pad, 64);
	sha256_update(&c, inner, 32);
	sha256_final(&c, mac);
	for (int i = 0; i < 32; i++)
		sprintf(out + 2 * i, "%02x", mac[i]);
}

/* The key file's bytes, a last newline dropped. */
static unsigned char *read_key(const char *path, size_t *len)
{
	FILE *f = fopen(path, "r");
	unsigned char *buf = f ? malloc(4097) : NULL;

	if (!buf) {
		if (f)
			fclose(f);
		return NULL;
	}
	*len = fread(buf, 1, 4096, f);
	fclose(f);
	if (*len && buf[*len - 1] == '\n')
		(*len)--;
	if (!*len) {
		free(buf);
		return NULL;
	}
	return buf;
}

static const char *field(json_object *o, const char *key)
{
	json_object *v;

	return o && json_object_object_get_ex(o, key, &v) ? json_object_get_string(v) : NULL;
}

/* The URL of a host with a live record; its state in *state (malloc'd). */
static char *host_url(struct etcd *e, const char *host, char **state)
{
	char key[128], err[512], *url = NULL;
	struct etcd_kv kv = { 0 };

	snprintf(key, sizeof(key), HOSTS_PREFIX "%s", host);
	if (etcd_get(e, key, &kv, NULL, err, sizeof(err)) == 1) {
		json_object *v = json_tokener_parse(kv.value);

		if (field(v, "url"))
			url = strdup(field(v, "url"));
		if (state)
			*state = strdup(field(v, "state") ?: "?");
		json_object_put(v);
	}
	etcd_kv_clear(&kv);
	return url;
}

struct body {
	char text[512];
	size_t len;
};

/* An answer that is not the stream: its start kept, for the reason. */
static size_t keep_text(char *p, size_t size, size_t n, void *ctx)
{
	struct body *b = ctx;
	size_t add = size * n, room = sizeof(b->text) - 1 - b->len;

	memcpy(b->text + b->len, p, add < room ? add : room);
	b->len += add < room ? add : room;
	b->text[b->len] = '\0';
	return add;
}

struct pipe_out {
	int fd;
	long status;
	CURL *curl;
	struct body err;
};

static size_t to_pipe(char *p, size_t size, size_t n, void *ctx)
{
	struct pipe_out *o = ctx;
	size_t len = size * n;

	if (!o->status)
		curl_easy_getinfo(o->curl, CURLINFO_RESPONSE_CODE, &o->status);
	if (o->status != 200)
		return keep_text(p, size, n, &o->err);
	for (size_t off = 0; off < len;) {
		ssize_t w = write(o->fd, p + off, len - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return 0;
		off += (size_t)w;
	}
	return len;
}

static size_t from_pipe(char *p, size_t size, size_t n, void *ctx)
{
	int fd = *(int *)ctx;
	ssize_t r;

	do
		r = read(fd, p, size * n);
	while (r < 0 && errno == EINTR);
	return r < 0 ? CURL_READFUNC_ABORT : (size_t)r;
}

static CURL *http(const char *url, struct curl_slist *h)
{
	CURL *c = curl_easy_init();

	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 5L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, STALL_S);
	return c;
}

/* The archive read from fd into PUT B's /api/rooms/R/import, with the
 * headers h (the signature; h is extended, and freed by the caller).
 * 0, or -1 with the reason. */
static int put_import(const char *b_url, const char *room, struct curl_slist *h, int fd,
		      char *why, size_t whylen)
{
	char dst[600];
	struct body in = { 0 };
	long status = 0;

	snprintf(dst, sizeof(dst), "%s/api/rooms/%s/import", b_url, room);
	h = curl_slist_append(h, "Content-Type: application/x-roombox-room");
	h = curl_slist_append(h, "Transfer-Encoding: chunked");
	h = curl_slist_append(h, "Expect:");
	CURL *c = http(dst, h);
	curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
	curl_easy_setopt(c, CURLOPT_READFUNCTION, from_pipe);
	curl_easy_setopt(c, CURLOPT_READDATA, &fd);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, keep_text);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &in);
	CURLcode cr = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	if (cr != CURLE_OK || status != 201) {
		snprintf(why, whylen, "import on %s: %s %ld %s", dst,
			 cr != CURLE_OK ? curl_easy_strerror(cr) : "HTTP", status, in.text);
		return -1;
	}
	return 0;
}

/* The export from A into the import on B.  0, or -1 with the reason. */
static int stream(const char *a_url, const char *b_url, const char *room, const char *header,
		  char *why, size_t whylen)
{
	char src[600];
	struct curl_slist *h = curl_slist_append(NULL, header);
	int fds[2], wst = 0, rc;
	pid_t pid;

	snprintf(src, sizeof(src), "%s/api/rooms/%s/export", a_url, room);
	if (pipe(fds) < 0) {
		snprintf(why, whylen, "pipe: %s", strerror(errno));
		curl_slist_free_all(h);
		return -1;
	}
	pid = fork();
	if (pid < 0) {
		snprintf(why, whylen, "fork: %s", strerror(errno));
		close(fds[0]);
		close(fds[1]);
		curl_slist_free_all(h);
		return -1;
	}
	if (pid == 0) {
		struct pipe_out o = { .fd = fds[1] };
		CURLcode cr;

		close(fds[0]);
		signal(SIGPIPE, SIG_IGN);
		o.curl = http(src, h);
		curl_easy_setopt(o.curl, CURLOPT_WRITEFUNCTION, to_pipe);
		curl_easy_setopt(o.curl, CURLOPT_WRITEDATA, &o);
		cr = curl_easy_perform(o.curl);
		curl_easy_getinfo(o.curl, CURLINFO_RESPONSE_CODE, &o.status);
		if (cr != CURLE_OK || o.status != 200) {
			fprintf(stderr, "roomboxctl: move %s: export from %s: %s %s\n", room, src,
				cr != CURLE_OK ? curl_easy_strerror(cr) : "HTTP", o.err.text);
			_exit(1);
		}
		_exit(0);
	}
	close(fds[1]);
	rc = put_import(b_url, room, h, fds[0], why, whylen);
	close(fds[0]);
	while (waitpid(pid, &wst, 0) < 0 && errno == EINTR)
		;
	curl_slist_free_all(h);
	if ((!WIFEXITED(wst) || WEXITSTATUS(wst) != 0) && rc == 0) {
		snprintf(why, whylen, "the export from the room's host failed (above)");
		rc = -1;
	}
	/* both failed: the import's reason is kept (the export's, above, is
	 * often only that the import stopped reading) */
	return rc;
}

/* The outcome of a commit whose answer did not say (an error): 1 the
 * record names `to` at epoch (committed), 0 the record is still the one
 * read at rev (not committed), -1 anything else or etcd silent for
 * COMMIT_ASK_S (said).  Every read of a move is etcd's quorum's, never
 * one member's copy: a member behind would show the record as it was
 * and make a committed move look aborted. */
static int commit_outcome(struct etcd *e, const char *rkey, int64_t rev, const char *to,
			  long long epoch)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct etcd_kv kv = { 0 };
		char err[512];
		int got = etcd_get(e, rkey, &kv, NULL, err, sizeof(err)), rc = -1;

		if (got == 1) {
			json_object *v = json_tokener_parse(kv.value);
			const char *host = field(v, "host");
			long long n = v ? json_object_get_int64(json_object_object_get(v, "epoch")) : 0;

			if (kv.mod_rev == rev)
				rc = 0;
			else if (host && strcmp(host, to) == 0 && n == epoch)
				rc = 1;
			json_object_put(v);
		}
		etcd_kv_clear(&kv);
		if (got >= 0)
			return rc;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec >= COMMIT_ASK_S)
			return -1;
		struct timespec pause = { 0, 500 * 1000 * 1000 };
		nanosleep(&pause, NULL);
	}
}

/* The moving key deleted if it is still the one written at mrev (0: any
 * moving key of the room).  0 deleted or gone, -1 with err. */
static int moving_delete(struct etcd *e, const char *mkey, int64_t mrev, char *err, size_t errlen)
{
	struct etcd_kv kv = { 0 };
	bool done;
	int got;

	if (mrev == 0) {
		got = etcd_get(e, mkey, &kv, NULL, err, errlen);
		mrev = kv.mod_rev;
		etcd_kv_clear(&kv);
		if (got <= 0)
			return got;
	}
	return etcd_delete_if(e, mkey, mrev, &done, NULL, err, errlen);
}

/* A move (fd -1: the archive is A's export) or a restore (the archive
 * read from fd, A asserted gone when force): the steps above either way,
 * verb naming them in messages. */
static int relocate(struct etcd *e, const char *key_file, const char *room, const char *to,
		    int fd, bool force, move_flip *flip, void *ctx)
{
	const char *verb = fd < 0 ? "move" : "restore";
	char rkey[160], mkey[160], header[400], msg[300], sig[65], why[900] = "", value[200];
	char err[512], *a_url = NULL, *b_url = NULL, *b_state = NULL, *from = NULL;
	struct etcd_kv rec = { 0 }, existing;
	bool done;
	unsigned char *key;
	size_t klen = 0;
	long long epoch;
	json_object *v;
	int rc = 1, got;
	int64_t mrev = 0;
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	key = key_file && key_file[0] ? read_key(key_file, &klen) : NULL;
	if (!key) {
		fprintf(stderr, "roomboxctl: %s %s: no key to sign with (cluster_key_file %s)\n",
			verb, room, key_file && key_file[0] ? key_file : "is not set");
		return 1;
	}
	snprintf(rkey, sizeof(rkey), ROOMS_PREFIX "%s", room);
	snprintf(mkey, sizeof(mkey), MOVING_PREFIX "%s", room);
	got = etcd_get(e, rkey, &rec, NULL, err, sizeof(err));
	if (got != 1) {
		fprintf(stderr, "roomboxctl: %s %s: %s\n", verb, room,
			got == 0 ? "no record in etcd (the room was never placed)" : err);
		goto out;
	}
	v = json_tokener_parse(rec.value);
	from = field(v, "host") ? strdup(field(v, "host")) : NULL;
	epoch = v ? json_object_get_int64(json_object_object_get(v, "epoch")) : 0;
	json_object_put(v);
	if (!from || epoch < 1) {
		fprintf(stderr, "roomboxctl: %s %s: its record is not {host, epoch}: %s\n", verb, room,
			rec.value);
		goto out;
	}
	if (strcmp(from, to) == 0 && fd < 0) {
		printf("room %s: already on %s\n", room, to);
		rc = 0;
		goto out;
	}
	if (strcmp(from, to) == 0) {
		fprintf(stderr, "roomboxctl: restore %s: its record names %s already: restore it onto "
			"another host\n", room, to);
		goto out;
	}
	a_url = host_url(e, from, NULL);
	b_url = host_url(e, to, &b_state);
	if (fd >= 0 && a_url && !force) {
		fprintf(stderr, "roomboxctl: restore %s: its host %s is still registered (its lease is "
			"alive): move the room instead, or add --force if %s is gone for good\n", room,
			from, from);
		goto out;
	}
	if ((!a_url && fd < 0) || !b_url) {
		fprintf(stderr, "roomboxctl: %s %s: host %s is not up (no live record)\n", verb, room,
			!b_url ? to : from);
		goto out;
	}
	if (strcmp(b_state, "ready") != 0) {
		fprintf(stderr, "roomboxctl: %s %s: host %s is in %s: it takes no rooms\n", verb, room,
			to, b_state);
		goto out;
	}
	/* 1. the moving key */
	snprintf(value, sizeof(value), "{\"from\":\"%s\",\"to\":\"%s\",\"epoch\":%lld}", from, to,
		 epoch + 1);
	got = etcd_create_if_absent(e, mkey, value, &done, &existing, &mrev, err, sizeof(err));
	etcd_kv_clear(&existing);
	if (got < 0 || !done) {
		fprintf(stderr, "roomboxctl: %s %s: %s\n", verb, room,
			got == 0 ? "a move of it is already in flight (/roombox/moving/; a mover "
			"that died leaves it: roomboxctl move --abort ROOM)" : err);
		if (got < 0)   /* written, perhaps, and its answer lost */
			fprintf(stderr, "roomboxctl: %s %s: if roomboxctl where %s says it moves, "
				"roomboxctl move --abort %s\n", verb, room, room, room);
		goto out;
	}
	/* 2, 3. the export into the import, signed */
	snprintf(msg, sizeof(msg), "roombox-move %s %s %s %lld %lld", room, from, to, epoch + 1,
		 (long long)time(NULL));
	hmac_sha256_hex(key, klen, msg, sig);
	snprintf(header, sizeof(header), "X-Roombox-Move: %s %s", msg + strlen("roombox-move ") +
		 strlen(room) + 1, sig);
	if (fd < 0 && stream(a_url, b_url, room, header, why, sizeof(why)) < 0)
		goto abort;
	if (fd >= 0) {
		struct curl_slist *h = curl_slist_append(NULL, header);
		int bad = put_import(b_url, room, h, fd, why, sizeof(why));

		curl_slist_free_all(h);
		if (bad)
			goto abort;
	}
	/* 4. the commit, the router's map flipped just before it */
	if (flip)
		flip(ctx, room, to);
	snprintf(value, sizeof(value), "{\"host\":\"%s\",\"epoch\":%lld}", to, epoch + 1);
	struct etcd_cmp both[2] = { { rkey, ETCD_MOD, rec.mod_rev }, { mkey, ETCD_MOD, mrev } };
	struct etcd_then commit = { .put_key = rkey, .put_value = value, .del_key = mkey };
	got = etcd_txn(e, both, 2, &commit, &done, NULL, err, sizeof(err));
	if (got < 0 || !done) {
		/* no answer, or a comparison failed: perhaps on a retry of a
		 * transaction that was applied; the record says which */
		snprintf(why, sizeof(why), "%s", got == 0 ? "the room's record or its moving key "
			 "changed meanwhile (another mover, or move --abort)" : err);
		int outcome = commit_outcome(e, rkey, rec.mod_rev, to, epoch + 1);
		if (outcome == 0 && got == 0) {
			/* not ours to abort: the moving key is someone else's */
			fprintf(stderr, "roomboxctl: %s %s: %s; not committed\n", verb, room, why);
			if (flip)
				flip(ctx, room, from);
			goto out;
		}
		if (outcome == 0)
			goto abort;
		if (outcome < 0) {
			fprintf(stderr, "roomboxctl: %s %s: the commit's outcome is unknown (%s; etcd does "
				"not say): see roomboxctl where %s, then move --abort %s if its record "
				"still names %s at epoch %lld\n", verb, room, why, room, room, from, epoch);
			rc = 2;
			goto out;
		}
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("room %s: %s from %s to %s (epoch %lld, %.2f s)\n", room,
	       fd < 0 ? "moved" : "restored", from, to, epoch + 1,
	       (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	rc = 0;
	goto out;
abort:
	fprintf(stderr, "roomboxctl: %s %s: %s; the room stays on %s\n", verb, room, why, from);
	if (flip)
		flip(ctx, room, from);
	if (moving_delete(e, mkey, mrev, err, sizeof(err)) < 0) {
		fprintf(stderr, "roomboxctl: %s %s: could not delete %s (%s): the room answers 503 "
			"until it is deleted: roomboxctl move --abort %s\n", verb, room, mkey, err,
			room);
		rc = 2;
	}
out:
	etcd_kv_clear(&rec);
	free(key);
	free(from);
	free(a_url);
	free(b_url);
	free(b_state);
	return rc;
}

int move_abort(struct etcd *e, const char *room, move_flip *flip, void *ctx)
{
	char rkey[160], mkey[160], err[512];
	struct etcd_kv rec = { 0 }, mv = { 0 };
	int got, rc = 1;

	snprintf(rkey, sizeof(rkey), ROOMS_PREFIX "%s", room);
	snprintf(mkey, sizeof(mkey), MOVING_PREFIX "%s", room);
	got = etcd_get(e, mkey, &mv, NULL, err, sizeof(err));
	if (got == 0) {
		printf("room %s: no move in flight\n", room);
		rc = 0;
		goto out;
	}
	if (got < 0 || (got = etcd_get(e, rkey, &rec, NULL, err, sizeof(err))) < 0) {
		fprintf(stderr, "roomboxctl: move --abort %s: %s\n", room, err);
		goto out;
	}
	json_object *v = got == 1 ? json_tokener_parse(rec.value) : NULL;
	const char *host = field(v, "host");
	char *where = host ? strdup(host) : NULL;
	json_object_put(v);
	if (moving_delete(e, mkey, mv.mod_rev, err, sizeof(err)) < 0) {
		fprintf(stderr, "roomboxctl: move --abort %s: %s\n", room, err);
		free(where);
		goto out;
	}
	/* the map back to the record's host: a mover that died after its
	 * early flip left it on the target */
	if (where && flip)
		flip(ctx, room, where);
	printf("room %s: move aborted (was %s); the room serves from %s\n", room, mv.value,
	       where ? where : "nowhere (no record)");
	free(where);
	rc = 0;
out:
	etcd_kv_clear(&rec);
	etcd_kv_clear(&mv);
	return rc;
}

int move_room(struct etcd *e, const char *key_file, const char *room, const char *to,
	      move_flip *flip, void *ctx)
{
	return relocate(e, key_file, room, to, -1, false, flip, ctx);
}

int restore_room(struct etcd *e, const char *key_file, const char *room, const char *to,
		 const char *file, bool force, move_flip *flip, void *ctx)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0) {
		fprintf(stderr, "roomboxctl: restore %s: %s: %s\n", room, file, strerror(errno));
		return 1;
	}
	rc = relocate(e, key_file, room, to, fd, force, flip, ctx);
	close(fd);
	return rc;
}
