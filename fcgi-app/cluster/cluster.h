/* Cluster mode, the host's side (cluster.c): which rooms this host may
 * serve, from etcd's records.  With cluster_etcd empty every function
 * here is a no-op that says "serve", and nothing is started. */
#ifndef ROOMBOX_CLUSTER_H
#define ROOMBOX_CLUSTER_H

#include <stdbool.h>
#include <json-c/json.h>

#include "app.h"

#define CLUSTER_ROOMS_PREFIX "/roombox/rooms/"
#define CLUSTER_MOVING_PREFIX "/roombox/moving/"
#define CLUSTER_HOSTS_PREFIX "/roombox/hosts/"

/* Register this host under its lease and start the threads that keep the
 * lease alive and the records' cache fed by a watch.  0, or -1 with err
 * (a bad cluster_etcd; an etcd that does not answer yet is retried). */
int cluster_start(struct app *app, char *err, size_t errlen);
bool cluster_enabled(void);
/* cluster_host in cluster mode, else NULL. */
const char *cluster_host_name(void);

/* May this host serve a request for room?  creates: the request makes the
 * room when it does not exist (an exec, a file written...).  true, or
 * false with rs answered: 421 for a room placed on another host, 503 while
 * it moves, or when a new room cannot be placed (etcd has no quorum).
 * A room the cache knows costs no etcd call. */
bool cluster_room_admit(struct app *app, const char *room, bool creates, bool *placed,
			struct response *rs);
/* ... and *placed: this call placed the room on this host (its first
 * request).  Such a request that failed calls cluster_room_unmade
 * (holds_share: it holds one of the room's workers): when nothing made the
 * room (a bad body, no room left, no disk) and nothing else of it runs
 * here (a request, a model call) or is kept (messages), its record goes
 * again, so that no host lists, and no drain moves, a room that never
 * was. */
void cluster_room_unmade(struct app *app, const char *room, bool holds_share);

/* Once a request holds one of its room's workers: is the room still not
 * moving?  A move's export quiesces the room by waiting for the requests
 * that hold its workers; one admitted before the move was known that
 * takes its worker after that wait began must not write behind the
 * export's cut.  false with rs answered (503 + Retry-After). */
bool cluster_room_still_admitted(const char *room, struct response *rs);

/* A new room made here under an id of its own (POST /api/rooms, a fork's
 * target): placed on this host (or placed here already), or false with rs
 * answered: 409 when another host has it, 503 without etcd. */
bool cluster_room_claim(const char *room, struct response *rs);
/* ... and once the claim's room is made or given up (after a true): */
void cluster_room_claim_end(const char *room);

/* The room was cleaned up here: its record goes too.  true once it is
 * gone (or was never this host's), or false with rs answered 503 +
 * Retry-After: etcd did not remove it (unreachable, or the record changed
 * meanwhile), and the cleanup must be asked for again. */
bool cluster_room_ended(const char *room, struct response *rs);

/* GET /api/rooms: would this host list its local room (not a stale copy
 * of a room placed elsewhere)?  And the rooms placed on other hosts, as
 * {"roomId","sandboxName","host"} entries added to list. */
bool cluster_room_listed_here(const char *room);
void cluster_rooms_add_remote(json_object *list);

/* A room's export or import signed as part of a move (X-Roombox-Move,
 * move.c): true with the room's epoch once moved, or false with rs
 * answered.  Stands instead of the token and of the placement check. */
bool cluster_move_admit(struct app *app, const char *room, bool export, const char *header,
			uint64_t *epoch, struct response *rs);

/* A move's export, holding its room's share: true once no other request
 * of the room runs (they were admitted before the move froze the room),
 * or false with rs answered (503) when they do not end in time. */
bool cluster_move_quiesce(struct app *app, const char *room, struct response *rs);

/* The import of a move answered 201: this host's copy is at epoch. */
void cluster_move_imported(const char *room, uint64_t epoch);

/* rooms.c: this host's copy of room removed (every part a cleanup
 * removes) without touching its record in etcd. */
int rooms_remove_local(struct app *app, const char *room, char *err, size_t errlen);

#endif
