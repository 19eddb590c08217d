/* The exposures of preview ports, on disk:
 * <state_dir>/previews/<token> = "<room> <port>\n".  Used by the API
 * (preview.c), which makes and ends them, and by the relay
 * (preview_relay.c), which looks them up.  Thread-safe. */
#ifndef ROOMBOX_FCGI_PREVIEW_STORE_H
#define ROOMBOX_FCGI_PREVIEW_STORE_H

#include <stddef.h>

#include "preview_head.h"

struct preview_exposure {
	char token[PREVIEW_TOKEN_LEN + 1];
	int port;
};

/* At start: open (creating it) the store's directory.  0, or -1 with err. */
int preview_store_init(const char *dir, char *err, size_t errlen);

/* The exposure a token names: 0 with room and port, -1 if none. */
int preview_lookup(const char *token, char *room, size_t roomlen, int *port);

/* Expose room's port: 1 with a new token in *e, 0 with the token it
 * already had (one port of a room has one token), or -1 with why. */
int preview_expose(const char *room, int port, struct preview_exposure *e, char *why, size_t whylen);

/* Call each for every exposure of room, by port, under the store's lock.
 * Their count, or -1 when they cannot be listed. */
/* As preview_expose, but the exposure keeps token (a moved room's
 * address) unless the token is malformed or already names an exposure
 * here: then it gets a new one. */
int preview_expose_as(const char *room, int port, const char *token, struct preview_exposure *e,
		      char *why, size_t whylen);

typedef void preview_exposure_fn(const struct preview_exposure *e, void *ctx);
int preview_exposures(const char *room, preview_exposure_fn *each, void *ctx);

/* End room's exposures of port (of every port: port 0): each one's file
 * removed, then ended(token) called (the relay's revoke), all under the
 * store's lock.  *found: how many there were.  0, or -1 with err naming
 * the room and the step. */
int preview_unexpose(const char *room, int port, void (*ended)(const char *token), int *found,
		     char *err, size_t errlen);

#endif
