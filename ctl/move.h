/* roomboxctl's mover: a room from its host to another (the hosts' side is
 * roombox-fcgi's: the signed export and import, the tombstone). */
#ifndef ROOMBOX_CTL_MOVE_H
#define ROOMBOX_CTL_MOVE_H

#include <stdbool.h>

#include "etcd.h"

/* Called with the room and a host just before the commit (the new host)
 * and after an abort (the old one): the router's map flipped there, so
 * that no request reaches the old host after the commit (it would answer
 * 421); while the move is in flight every host answers 503 anyway. */
typedef void move_flip(void *ctx, const char *room, const char *host);

/* Move room to host `to`, signing with the key in key_file.  0 moved (or
 * already there), 1 not moved (the reason on stderr; before the commit
 * nothing changed), 2 not moved and the moving key could not be deleted
 * (said). */
int move_room(struct etcd *e, const char *key_file, const char *room, const char *to,
	      move_flip *flip, void *ctx);

/* The abort of a move whose mover died: /roombox/moving/ROOM deleted (the
 * mover's commit can no longer happen), the router's map set back to the
 * record's host.  The record's host serves the room again; the target
 * removes whatever it imported.  0 done (or no move in flight), 1 not
 * (said). */
int move_abort(struct etcd *e, const char *room, move_flip *flip, void *ctx);

/* Restore room onto host `to` from a backup file (an export): the room's
 * host is lost.  Refused while that host is still registered unless force
 * (the operator's word that it is gone for good).  The file goes through
 * the signed move import, and the commit bumps the epoch, so the old host,
 * if it comes back, never serves the room again.  0 restored, else 1 or 2
 * as move_room. */
int restore_room(struct etcd *e, const char *key_file, const char *room, const char *to,
		 const char *file, bool force, move_flip *flip, void *ctx);

#endif
