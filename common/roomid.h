#ifndef ROOMBOX_ROOMID_H
#define ROOMBOX_ROOMID_H
#include <stdbool.h>
#include <stddef.h>

#define ROOM_ID_MAX 64

/* ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$ */
bool room_id_valid(const char *s);
/* Same rule for a buffer that may hold NUL bytes. */
bool room_id_valid_n(const char *s, size_t len);

/* "sandbox-<id>", the room's sandbox name and its hostname: the
 * one place that spells it.  Cut to len - 1 bytes (a hostname takes 64). */
#define SANDBOX_NAME_MAX (sizeof("sandbox-") - 1 + ROOM_ID_MAX)
void room_sandbox_name(const char *id, char *buf, size_t len);

#endif
