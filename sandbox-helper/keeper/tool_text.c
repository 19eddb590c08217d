/* The text the keeper's tools answer with (common/protocol.h): pure
 * functions, kept apart from tools.c so that unit tests and a fuzz target
 * run them without a room. */
#include "tool_text.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "protocol.h"

const char *tool_errno_kind(int err)
{
	switch (err) {
	case ENOENT:
		return TOOL_KIND_NOTFOUND;
	case EACCES:
	case EPERM:
	case EROFS:
		return TOOL_KIND_DENIED;
	case ENOSPC:
	case EDQUOT:
		return TOOL_KIND_NOSPACE;
	case EISDIR:
		return TOOL_KIND_ISDIR;
	case ENOTDIR:
		return TOOL_KIND_NOTDIR;
	case ENOTEMPTY:
		return TOOL_KIND_NOTEMPTY;
	case EEXIST:
		return TOOL_KIND_EXISTS;
	default:
		return NULL;
	}
}

static char type_letter(mode_t m)
{
	return S_ISREG(m) ? 'f' : S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'l' : S_ISFIFO(m) ? 'p'
		: S_ISSOCK(m) ? 's' : S_ISCHR(m) ? 'c' : S_ISBLK(m) ? 'b' : 'U';
}

size_t tool_entry_record(char *buf, size_t len, const struct stat *st, const char *rel)
{
	size_t rl = strlen(rel);
	int n = snprintf(buf, len, "%c\t%llu\t%o\t%lld.%09ld\t", type_letter(st->st_mode),
			 (unsigned long long)st->st_size, (unsigned)(st->st_mode & 07777),
			 (long long)st->st_mtim.tv_sec, (long)st->st_mtim.tv_nsec);

	if (n < 0 || (size_t)n + rl + 1 > len)
		return 0;
	memcpy(buf + n, rel, rl + 1);   /* its NUL ends the record */
	return (size_t)n + rl + 1;
}

int tool_put_end_check(const char *mark, const char *nonce, uint64_t stored, uint64_t *len)
{
	uint64_t v = 0;
	unsigned diff = 0;

	if (strlen(nonce) != TOOL_NONCE_LEN || stored < TOOL_PUT_END_LEN ||
	    memcmp(mark, TOOL_PUT_END, 7) != 0 || mark[TOOL_PUT_END_LEN - 1] != '\n')
		return -1;
	for (int i = 0; i < TOOL_NONCE_LEN; i++)   /* in constant time */
		diff |= (unsigned char)(mark[7 + i] ^ nonce[i]);
	if (diff)
		return -1;
	for (int i = 7 + TOOL_NONCE_LEN; i < TOOL_PUT_END_LEN - 1; i++) {
		char c = mark[i];
		int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;

		if (d < 0)
			return -1;
		v = v << 4 | (uint64_t)d;
	}
	if (v != stored - TOOL_PUT_END_LEN)
		return -1;
	*len = v;
	return 0;
}

int tool_mode_parse(const char *text, mode_t *mode)
{
	unsigned v = 0;
	size_t n = strlen(text);

	if (n < 1 || n > 4 || strspn(text, "01234567") != n)
		return -1;
	for (size_t i = 0; i < n; i++)
		v = v * 8 + (unsigned)(text[i] - '0');
	*mode = (mode_t)v;
	return 0;
}
