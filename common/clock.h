/* Milliseconds on the monotonic clock: the one way every part of roombox
 * measures deadlines and durations (wall-clock time is timefmt.h's). */
#ifndef ROOMBOX_CLOCK_H
#define ROOMBOX_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t monotonic_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

#endif
