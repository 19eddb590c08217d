/* A room out as one archive and in again (room_transfer.c). */
#ifndef ROOMBOX_FCGI_ROOM_TRANSFER_H
#define ROOMBOX_FCGI_ROOM_TRANSFER_H

#include "app.h"

/* GET /api/rooms/{id}/export: 200 application/x-roombox-room, streamed */
route_handler api_rooms_export;
/* PUT /api/rooms/{id}/import: 201 {"roomId"}; 409, 400, 507 */
route_handler api_rooms_import;

#endif
