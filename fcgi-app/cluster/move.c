/* A room moving between hosts, the hosts' side: see move.h.
 *
 * Why it is built this way: a move reuses the room's export and import
 * (room_transfer.c) unchanged, streamed from the source host's
 * GET /api/rooms/R/export to the target host's PUT /api/rooms/R/import by
 * whoever drives the move (roomboxctl move).  What makes those two calls a
 * move is one header, X-Roombox-Move, signed with the secret the hosts share
 * (cluster_key_file), and etcd's records at that moment:
 *
 *   X-Roombox-Move: <from> <to> <epoch> <unix time> <hex HMAC-SHA256 of
 *                   "roombox-move <room> <from> <to> <epoch> <unix time>">
 *
 * The signature stands instead of a token (the hosts share the key, not
 * necessarily their tokens) and holds for MOVE_WINDOW_S either side of its
 * time.  The records are read from etcd itself, not the cache: the room's
 * record must name <from> at epoch <epoch> - 1 and /roombox/moving/<room>
 * must exist (it freezes the room everywhere: every other request answers
 * 503); the export is answered only by <from>, the import only by <to>.
 * An import that succeeded writes <epoch> as the target's copy's epoch; the
 * target still answers 421 for the room until the mover's commit (the epoch
 * bump in etcd) names it.  Once a record names another host at an epoch
 * past this host's copy, the copy is removed here, leaving its epoch file
 * as the tombstone (cluster.c's tombstone thread). */
#include "move.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "cluster.h"
#include "etcd.h"
#include "http.h"
#include "room_transfer.h"

#define MOVE_WINDOW_S 300
#define KEY_MAX 4096

/* cluster_key_file's bytes, a last newline dropped; read at each move. */
static int key_read(const char *path, unsigned char *key, size_t *len, char *err, size_t errlen)
{
	if (!path[0])
		return snprintf(err, errlen, "this host takes part in no move: cluster_key_file is not set"), -1;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return snprintf(err, errlen, "cluster_key_file: %s", strerror(errno)), -1;
	ssize_t n = read(fd, key, KEY_MAX + 1);
	close(fd);
	if (n > 0 && key[n - 1] == '\n')
		n--;
	if (n <= 0 || n > KEY_MAX)
		return snprintf(err, errlen, "cluster_key_file: empty, unreadable or over %d bytes", KEY_MAX), -1;
	*len = (size_t)n;
	return 0;
}

int move_signature(const unsigned char *key, size_t keylen, const char *room, const char *from,
		   const char *to, uint64_t epoch, int64_t when, char hex[65])
{
	char msg[256];
	unsigned char mac[EVP_MAX_MD_SIZE];
	unsigned int len = 0;

	int n = snprintf(msg, sizeof(msg), "roombox-move %s %s %s %llu %lld", room, from, to,
			 (unsigned long long)epoch, (long long)when);
	if (n < 0 || (size_t)n >= sizeof(msg) ||
	    !HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg, (size_t)n, mac, &len) ||
	    len != 32)
		return -1;
	for (unsigned i = 0; i < 32; i++)
		snprintf(hex + 2 * i, 3, "%02x", mac[i]);
	return 0;
}

int move_header_parse(const char *text, struct move_header *h)
{
	char from[64], to[64], sig[80];
	unsigned long long epoch;
	long long when;
	int used = 0;

	memset(h, 0, sizeof(*h));
	if (!text || strlen(text) > 256 ||
	    sscanf(text, "%63s %63s %llu %lld %79s%n", from, to, &epoch, &when, sig, &used) != 5 ||
	    text[used] != '\0' || epoch < 2 || epoch > (1ull << 62) ||
	    !cluster_host_name_ok(from, strlen(from)) || !cluster_host_name_ok(to, strlen(to)) ||
	    strcmp(from, to) == 0 || strlen(sig) != 64 || strspn(sig, "0123456789abcdef") != 64)
		return -1;
	memcpy(h->from, from, strlen(from) + 1);
	memcpy(h->to, to, strlen(to) + 1);
	memcpy(h->sig, sig, 65);
	h->epoch = epoch;
	h->when = when;
	return 0;
}

/* The records as etcd has them now: the room's and whether it moves. */
int move_records_now(struct etcd *e, const char *room, struct room_record *rec, bool *has_rec,
		     bool *moving, bool *absent, int64_t *moving_rev, char *err, size_t errlen)
{
	char key[128];
	struct etcd_kv kv;
	int got;

	/* the moving key first: a commit puts the record and deletes it in
	 * one transaction, so a record read after its absence is the
	 * commit's (or no move's), never the one the commit replaced */
	snprintf(key, sizeof(key), CLUSTER_MOVING_PREFIX "%s", room);
	if ((got = etcd_get(e, key, &kv, NULL, err, errlen)) < 0)
		return -1;
	*moving = got == 1;
	if (moving_rev)
		*moving_rev = got == 1 ? kv.mod_rev : 0;
	etcd_kv_clear(&kv);
	snprintf(key, sizeof(key), CLUSTER_ROOMS_PREFIX "%s", room);
	if ((got = etcd_get(e, key, &kv, NULL, err, errlen)) < 0)
		return -1;
	*has_rec = got == 1 && room_record_parse(kv.value, kv.value_len, rec) == 0;
	if (absent)
		*absent = got == 0;
	etcd_kv_clear(&kv);
	return 0;
}

bool move_admit(struct app *app, struct etcd *e, const char *me, const char *room, bool export,
		const char *header, uint64_t *epoch, int64_t *moving_rev, struct response *rs)
{
	struct move_header h;
	unsigned char key[KEY_MAX + 1];
	size_t keylen;
	char err[512], want[65];

	if (move_header_parse(header, &h) < 0) {
		response_error(rs, 403, "move of room %s: X-Roombox-Move is not \"FROM TO EPOCH TIME "
			       "SIGNATURE\"", room);
		return false;
	}
	if (key_read(app->cfg.cluster_key_file, key, &keylen, err, sizeof(err)) < 0) {
		fprintf(stderr, "roombox-fcgi: room %s: move: %s\n", room, err);
		response_error(rs, 403, "move of room %s: %s", room, err);
		return false;
	}
	int sig_rc = move_signature(key, keylen, room, h.from, h.to, h.epoch, h.when, want);
	explicit_bzero(key, sizeof(key));
	long long now = (long long)time(NULL);
	if (sig_rc < 0 || CRYPTO_memcmp(want, h.sig, 64) != 0) {
		response_error(rs, 403, "move of room %s: bad signature", room);
		return false;
	}
	if (h.when < now - MOVE_WINDOW_S || h.when > now + MOVE_WINDOW_S) {
		response_error(rs, 403, "move of room %s: signed at %lld, more than %d s from now",
			       room, (long long)h.when, MOVE_WINDOW_S);
		return false;
	}
	if (strcmp(export ? h.from : h.to, me) != 0) {
		response_error(rs, 409, "move of room %s: this host is %s, not the move's %s", room, me,
			       export ? "source" : "target");
		return false;
	}
	struct room_record rec;
	bool has_rec, moving;
	if (move_records_now(e, room, &rec, &has_rec, &moving, NULL, moving_rev, err, sizeof(err)) < 0) {
		fprintf(stderr, "roombox-fcgi: room %s: move: %s\n", room, err);
		rs->retry_after = 5;
		response_error(rs, 503, "move of room %s: etcd does not answer (unreachable, or without "
			       "a quorum)", room);
		return false;
	}
	if (!moving || !has_rec || strcmp(rec.host, h.from) != 0 || rec.epoch + 1 != h.epoch) {
		response_error(rs, 409, "move of room %s: etcd's records do not say so (record: %s%s "
			       "epoch %llu; %s)", room, has_rec ? "on host " : "none",
			       has_rec ? rec.host : "", has_rec ? (unsigned long long)rec.epoch : 0ull,
			       moving ? "moving" : "not moving");
		return false;
	}
	*epoch = h.epoch;
	return true;
}
