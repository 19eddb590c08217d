/* ISO-8601 timestamps as JavaScript's Date.prototype.toISOString writes
 * them: the helper stamps a room's creation with it, roombox-fcgi every
 * time a client sees. */
#ifndef ROOMBOX_TIMEFMT_H
#define ROOMBOX_TIMEFMT_H
#include <stddef.h>
#include <stdint.h>

struct timespec;
/* "2026-11-29T17:00:00.000Z" from a CLOCK_REALTIME timespec; buf >= 32. */
void iso8601_utc(const struct timespec *ts, char *buf, size_t buflen);
/* The same from milliseconds since the epoch. */
void iso8601_utc_ms(int64_t ms, char *buf, size_t buflen);

#endif
