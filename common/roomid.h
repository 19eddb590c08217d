#ifndef ROOMBOX_ROOMID_H
#define ROOMBOX_ROOMID_H
#include <stdbool.h>
#include <stddef.h>

#define ROOM_ID_MAX 64

/* ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$ */
bool room_id_valid(const char *s);
/* Same rule for a buffer that may hold NUL bytes. */
bool room_id_valid_n(const char *s, size_t len);

#endif
