/* SHA-256 (FIPS 180-4), for token fingerprints: roomboxctl lists and
 * revokes tokens by the first hex digits of their hash, never showing one. */
#ifndef ROOMBOX_CTL_SHA256_H
#define ROOMBOX_CTL_SHA256_H

#include <stddef.h>
#include <stdint.h>

void sha256(const void *data, size_t len, uint8_t out[32]);

#endif
