/* A room's fair share of a pool the service has a fixed number of: its
 * workers (router.c) and its preview relays (preview_relay.c).
 *
 * Why: a room whose requests hang (slow execs, file listings of a hostile
 * room, WebSockets left open) would otherwise hold the whole pool, and
 * every other room and /api/health would wait.  So each use of the pool on
 * behalf of a room is counted per room, and a room may hold at most
 * `share` of it.  Shares alone still let a few busy rooms fill the pool
 * together, so two more things are kept back:
 *   - one unit for uses that name no room (/api/health, the room list),
 *     whenever the pool has more than one;
 *   - min(share, total - share) units for rooms that hold none yet: a room
 *     that already holds one gets another only while that many stay free.
 * A room refused answers at once (503 with Retry-After): it waits for its
 * own uses to end, never for anyone else's.  Many rooms of one client can
 * still fill the pool together; the fair share is between rooms. */
#ifndef ROOMBOX_FCGI_FAIR_SHARE_H
#define ROOMBOX_FCGI_FAIR_SHARE_H

#include <pthread.h>
#include <stdbool.h>

#include "roomid.h"

enum fair_share_result {
	FAIR_SHARE_TAKEN,
	FAIR_SHARE_ROOM_FULL,    /* the room holds its whole share */
	FAIR_SHARE_POOL_FULL,    /* what is left is kept back for others */
};

struct fair_share_room {
	char room[ROOM_ID_MAX + 1];  /* "" = a free entry */
	int held;
};

struct fair_share {
	pthread_mutex_t lock;
	int total, share, held;
	struct fair_share_room *rooms;   /* total entries */
};

/* share is clamped to [1, total]; -1 when out of memory. */
int fair_share_init(struct fair_share *fs, int total, int share);
/* Take one unit for room.  always: count it whatever the share says (a
 * request that ends the room's own activity, such as its cleanup, is never
 * refused); it is refused only when the table itself is full. */
enum fair_share_result fair_share_take(struct fair_share *fs, const char *room, bool always);
/* Give back one unit room took. */
void fair_share_give(struct fair_share *fs, const char *room);

#endif
