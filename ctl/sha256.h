/* SHA-256 (FIPS 180-4), for token fingerprints: roomboxctl lists and
 * revokes tokens by the first hex digits of their hash, never showing one. */
#ifndef ROOMBOX_CTL_SHA256_H
#define ROOMBOX_CTL_SHA256_H

#include <stddef.h>
#include <stdint.h>

void sha256(const void *data, size_t len, uint8_t out[32]);

/* The same over pieces (roomboxctl checks an export's seal as it streams). */
struct sha256_ctx {
	uint32_t h[8];
	uint8_t buf[64];
	size_t fill;
	uint64_t len;
};
void sha256_init(struct sha256_ctx *c);
void sha256_update(struct sha256_ctx *c, const void *data, size_t len);
void sha256_final(struct sha256_ctx *c, uint8_t out[32]);

#endif
