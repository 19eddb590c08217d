/* A room moving between hosts, the hosts' side (move.c): the signed
 * X-Roombox-Move header on a room's export (at the source) and import (at
 * the target). */
#ifndef ROOMBOX_MOVE_H
#define ROOMBOX_MOVE_H

#include <stdbool.h>
#include <stdint.h>

#include "app.h"
#include "etcd_json.h"

struct etcd;

struct move_header {
	char from[CLUSTER_HOST_MAX + 1], to[CLUSTER_HOST_MAX + 1];
	uint64_t epoch;               /* the room's epoch once moved, >= 2 */
	int64_t when;                 /* unix time it was signed */
	char sig[65];                 /* lower-case hex */
};

/* "FROM TO EPOCH TIME SIG" into *h: 0, or -1 for anything else. */
int move_header_parse(const char *text, struct move_header *h);

/* The hex HMAC-SHA256 under key of "roombox-move ROOM FROM TO EPOCH TIME". */
int move_signature(const unsigned char *key, size_t keylen, const char *room, const char *from,
		   const char *to, uint64_t epoch, int64_t when, char hex[65]);

/* May this signed export (export) or import of room go ahead on host me?
 * true with *epoch, or false with rs answered (403 bad signature, 409
 * records that do not match, 503 without etcd). */
bool move_admit(struct app *app, struct etcd *e, const char *me, const char *room, bool export,
		const char *header, uint64_t *epoch, int64_t *moving_rev, struct response *rs);

/* The room's record (*has_rec: there and well-formed; *absent, when not
 * NULL: no record at all) and whether a move of it is in flight (its key's
 * revision in *moving_rev, when not NULL), as etcd's quorum has them now
 * (not the watch's cache, which may lag).  0, or -1 with err. */
int move_records_now(struct etcd *e, const char *room, struct room_record *rec, bool *has_rec,
		     bool *moving, bool *absent, int64_t *moving_rev, char *err, size_t errlen);

#endif
