/* Preview ports (SPEC §8.5): the API handlers (app.h) and a room's
 * previews ended at its cleanup.  The exposures are kept by
 * preview_store.h, the relay is preview_relay.h. */
#ifndef ROOMBOX_FCGI_PREVIEW_H
#define ROOMBOX_FCGI_PREVIEW_H

#include <stddef.h>

/* End every exposure of a room, its relays and its connector (cleanup);
 * 0 or -1 with err. */
int preview_room_forget(const char *room, char *err, size_t errlen);

#endif
