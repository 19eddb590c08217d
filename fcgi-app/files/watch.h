/* GET /api/rooms/{id}/sandbox/watch: a room's file changes as an event
 * stream; see watch.c. */
#ifndef ROOMBOX_FCGI_WATCH_H
#define ROOMBOX_FCGI_WATCH_H

#include "app.h"

route_handler api_watch_get;

#endif
