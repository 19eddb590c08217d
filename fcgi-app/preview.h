/* Preview ports (SPEC §8.5): the exposures (which token opens which port
 * of which room), the API handlers (app.h), and the relay that carries a
 * browser's HTTP and WebSocket bytes into the room (preview_relay.c). */
#ifndef ROOMBOX_FCGI_PREVIEW_H
#define ROOMBOX_FCGI_PREVIEW_H

#include <stddef.h>

#include "app.h"
#include "preview_head.h"

/* Relays running at once; a connection past it gets 503. */
#define PREVIEW_RELAYS_MAX 256
/* A relay with no byte either way for this long is closed. */
#define PREVIEW_IDLE_MS (10 * 60 * 1000)
/* The client's request head must be whole within this. */
#define PREVIEW_HEAD_MS (15 * 1000)

/* ---- the exposures, on disk: <state_dir>/previews/<token> = "<room> <port>\n" ---- */
int preview_store_init(const char *dir, char *err, size_t errlen);
/* The exposure a token names: 0 with room and port, -1 if none. */
int preview_lookup(const char *token, char *room, size_t roomlen, int *port);
/* End every exposure of a room (cleanup); 0 or -1 with err. */
int preview_room_forget(const char *room, char *err, size_t errlen);

/* ---- the relay (preview_relay.c) ---- */
/* <dirname of socket>/preview.sock: where the web servers proxy /preview/. */
int preview_socket_path(const struct config *cfg, char *out, size_t outlen);
/* Listen there and start the accepting thread; -1 with a message on stderr. */
int preview_relay_start(struct app *app);
void preview_relay_stop(void);
/* End the room's connector, if any (cleanup: no helper stays for it). */
void preview_connector_forget(const char *room);
/* Close every running relay of a token (the exposure has ended). */
void preview_relay_revoke(const char *token);

#endif
