/* A room's fair share of a pool: see fair_share.h. */
#include "fair_share.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int fair_share_init(struct fair_share *fs, int total, int share)
{
	if (total < 1)
		total = 1;
	fs->total = total;
	fs->share = share < 1 ? 1 : share > total ? total : share;
	fs->held = 0;
	fs->given = NULL;
	fs->waiting = NULL;
	fs->rooms = calloc((size_t)total, sizeof(*fs->rooms));
	pthread_mutex_init(&fs->lock, NULL);
	return fs->rooms ? 0 : -1;
}

/* The room's entry; with make, a free one becomes it.  Under lock. */
static struct fair_share_room *entry(struct fair_share *fs, const char *room, bool make)
{
	struct fair_share_room *free_one = NULL;

	for (int i = 0; i < fs->total; i++) {
		if (fs->rooms[i].held && strcmp(fs->rooms[i].room, room) == 0)
			return &fs->rooms[i];
		if (!fs->rooms[i].held && !free_one)
			free_one = &fs->rooms[i];
	}
	if (make && free_one)
		snprintf(free_one->room, sizeof(free_one->room), "%s", room);
	return make ? free_one : NULL;
}

/* Units that must stay free after one more is taken by a room holding
 * `held` already (see fair_share.h).  A pool of two keeps nothing back: it
 * would leave one room request for the whole service. */
static int kept_back(const struct fair_share *fs, int held, bool ends_room)
{
	int for_no_room = fs->total > 2 ? 1 : 0;
	int for_new_rooms = fs->total - fs->share < fs->share ? fs->total - fs->share : fs->share;

	if (fs->total <= 2 || ends_room || !held)
		for_new_rooms = 0;
	return for_no_room + for_new_rooms;
}

enum fair_share_result fair_share_take(struct fair_share *fs, const char *room, bool ends_room)
{
	enum fair_share_result res = FAIR_SHARE_TAKEN;

	pthread_mutex_lock(&fs->lock);
	struct fair_share_room *e = entry(fs, room, true);
	int held = e ? e->held : 0;

	if (!e)
		res = FAIR_SHARE_POOL_FULL;
	else if (held >= fs->share + (ends_room ? 1 : 0))
		res = FAIR_SHARE_ROOM_FULL;
	else if (fs->held + 1 + kept_back(fs, held, ends_room) > fs->total)
		res = FAIR_SHARE_POOL_FULL;
	if (res == FAIR_SHARE_TAKEN) {
		e->held++;
		fs->held++;
	}
	pthread_mutex_unlock(&fs->lock);
	return res;
}

void fair_share_give(struct fair_share *fs, const char *room)
{
	pthread_mutex_lock(&fs->lock);
	struct fair_share_room *e = entry(fs, room, false);

	if (e) {
		e->held--;
		fs->held--;
	}
	pthread_mutex_unlock(&fs->lock);
	if (e && fs->given)
		fs->given(room);
}

int fair_share_held(struct fair_share *fs, const char *room)
{
	pthread_mutex_lock(&fs->lock);
	struct fair_share_room *e = entry(fs, room, false);
	int held = e ? e->held : 0;

	pthread_mutex_unlock(&fs->lock);
	return held;
}

int fair_share_room_max(const struct fair_share *fs)
{
	int max = 1;   /* a room holding none: only the no-room unit is kept */

	while (max < fs->share && max + 1 + kept_back(fs, max, false) <= fs->total)
		max++;
	return max;
}
