/* The room-id rule, ^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$, in one place.
 *
 * A room id becomes a directory name, a hostname and part of a cgroup path,
 * so the checks are plain ASCII comparisons: <ctype.h> would follow the
 * locale and could accept bytes above 0x7f. */
#include "roomid.h"

#include <stdio.h>
#include <string.h>

static bool is_alnum_ascii(unsigned char ch)
{
	return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
	       (ch >= '0' && ch <= '9');
}

bool room_id_valid_n(const char *s, size_t len)
{
	const unsigned char *p = (const unsigned char *)s;

	if (!s || len == 0 || len > ROOM_ID_MAX || !is_alnum_ascii(p[0]))
		return false;
	for (size_t i = 1; i < len; i++)
		if (!is_alnum_ascii(p[i]) && p[i] != '_' && p[i] != '-')
			return false;
	return true;
}

bool room_id_valid(const char *s)
{
	/* strnlen: never scan far past the longest valid id. */
	return s && room_id_valid_n(s, strnlen(s, ROOM_ID_MAX + 1));
}

void room_sandbox_name(const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "sandbox-%s", id);
}
