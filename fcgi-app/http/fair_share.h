/* A room's fair share of a pool the service has a fixed number of: its
 * workers (router.c) and its preview relays (preview_relay.c).
 *
 * Why: a room whose requests hang (slow execs, file listings of a hostile
 * room, WebSockets left open) would otherwise hold the whole pool, and
 * every other room and /api/health would wait.  So each use of the pool on
 * behalf of a room is counted per room, and a room may hold at most
 * `share` of it.  Shares alone still let a few busy rooms fill the pool
 * together, so two more things are kept back, in pools of three or more:
 *   - one unit for uses that name no room (/api/health, the room list);
 *   - min(share, total - share) units for rooms that hold none yet: a room
 *     that already holds one gets another only while that many stay free.
 * A pool of two keeps nothing back (two rooms may work at once), so a
 * room's share may be less than configured: fair_share_room_max() says how
 * much a room gets (the service logs it at start).  A use that ends the
 * room's own activity (cleanup, stop, a process killed) may take one more
 * than the share, never the unit kept for uses that name no room.
 * A use refused waits, parked without a worker (main.c), behind the
 * room's earlier ones, until one of its room's uses ends or the pool has
 * room; it gets 503 with Retry-After when nothing of its room has ended for
 * a while.  Many rooms of one client can still fill the pool together; the
 * fair share is between rooms. */
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
	/* optional, set by the owner after init: called after a room's unit
	 * is given back (without the lock); does room have uses waiting for
	 * its share (a fresh one waits behind them)? */
	void (*given)(const char *room);
	bool (*waiting)(const char *room);
};

/* share is clamped to [1, total]; -1 when out of memory. */
int fair_share_init(struct fair_share *fs, int total, int share);
/* Take one unit for room.  ends_room: a use that ends the room's own
 * activity, allowed share + 1 and no keep-back for new rooms (see above). */
enum fair_share_result fair_share_take(struct fair_share *fs, const char *room, bool ends_room);
/* Give back one unit room took. */
void fair_share_give(struct fair_share *fs, const char *room);
/* The units room holds now. */
int fair_share_held(struct fair_share *fs, const char *room);
/* The most units one room gets while no other holds any: its share, or
 * less where the pool keeps units back. */
int fair_share_room_max(const struct fair_share *fs);

#endif
