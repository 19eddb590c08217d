/* XXH64 (Yann Collet's xxHash, 64-bit; the checksum zstd frames carry),
 * streamed.  The seal of a version 2 room archive (docs/export-format.md)
 * is one: a check of every byte against damage, at a small fraction of a
 * SHA-256 pass (the SHA-256 digests in the archive's manifest, under its
 * HMAC, are what vouch for the content). */
#ifndef ROOMBOX_XXH64_H
#define ROOMBOX_XXH64_H

#include <stddef.h>
#include <stdint.h>

struct xxh64 {
	uint64_t v[4];
	uint64_t total;
	unsigned char buf[32];
	size_t nbuf;
	uint64_t seed;
};

void xxh64_init(struct xxh64 *s, uint64_t seed);
void xxh64_update(struct xxh64 *s, const void *p, size_t n);
uint64_t xxh64_digest(const struct xxh64 *s);
uint64_t xxh64(const void *p, size_t n, uint64_t seed);

#endif
