/* FNV-1a over a C string: names derived from text (an instance's cgroup
 * and nftables table from its state_dir, a rule set's generation, a disk
 * template's contents).  Not for anything an attacker picks. */
#ifndef ROOMBOX_FNV_H
#define ROOMBOX_FNV_H

#include <stdint.h>

static inline uint32_t fnv1a32(const char *t)
{
	uint32_t h = 2166136261u;
	for (; *t; t++)
		h = (h ^ (unsigned char)*t) * 16777619u;
	return h;
}

#define FNV1A64_START 14695981039346656037ull

/* h carried on over t: fnv1a64_more(fnv1a64(a), b) is the hash of a and b
 * written one after the other. */
static inline uint64_t fnv1a64_more(uint64_t h, const char *t)
{
	for (; *t; t++)
		h = (h ^ (unsigned char)*t) * 1099511628211ull;
	return h;
}

static inline uint64_t fnv1a64(const char *t)
{
	return fnv1a64_more(FNV1A64_START, t);
}

#endif
