/* The preview relay: carries a browser's HTTP and WebSocket
 * bytes from the web servers' preview.sock into a server in the room; see
 * preview_relay.c.  It looks exposures up in preview_store.c; the API
 * (preview.c) ends its relays when an exposure ends. */
#ifndef ROOMBOX_FCGI_PREVIEW_RELAY_H
#define ROOMBOX_FCGI_PREVIEW_RELAY_H

#include <stddef.h>

#include "app.h"

/* Relays running at once; a connection past it gets 503. */
#define PREVIEW_RELAYS_MAX 256
/* A room's share of them: more of one room's at once get 503, and other
 * rooms' previews go on (fair_share.h also keeps some back for rooms that
 * have none). */
#define PREVIEW_ROOM_RELAYS (PREVIEW_RELAYS_MAX / 4)
/* A relay with no byte either way for this long is closed. */
#define PREVIEW_IDLE_MS (10 * 60 * 1000)
/* Kept connections into one room waiting for a request (preview_relay.c,
 * "kept connections"), and how long one waits at most.  Enough for the
 * exchanges of one room a web server runs at once in practice; with the
 * connectors' pools they bound the descriptors the relay keeps. */
#define PREVIEW_ROOM_KEPT 16
#define PREVIEW_ROOM_KEEP_MS (60 * 1000)
/* The client's request head must be whole within this. */
#define PREVIEW_HEAD_MS (15 * 1000)
/* A kept connection waits this long for the web server's next request
 * (longer than the keepalive_timeout nginx.conf.example gives nginx for
 * it, so that nginx, not the relay, closes an idle one). */
#define PREVIEW_KEEP_MS (120 * 1000)

/* <dirname of socket>/preview.sock: where the web servers proxy /preview/. */
int preview_socket_path(const struct config *cfg, char *out, size_t outlen);
/* Listen there and start the accepting thread; -1 with a message on stderr. */
int preview_relay_start(struct app *app);
void preview_relay_stop(void);
/* End the room's connector, if any (cleanup: no helper stays for it). */
void preview_connector_forget(const char *room);
/* Close every running relay of a token (the exposure has ended). */
void preview_relay_revoke(const char *token);

/* End every exposure of a room, its relays and its connector (cleanup);
 * 0 or -1 with err. */
int preview_room_forget(const char *room, char *err, size_t errlen);

#endif
