/* XXH64: see xxh64.h.  The algorithm as xxHash's reference specifies it
 * (doc/xxhash_spec.md there): four lanes over 32-byte stripes, then the
 * tail in 8, 4 and 1-byte steps, then the avalanche. */
#include "xxh64.h"

#include <string.h>

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

static inline uint64_t rotl(uint64_t x, int r)
{
	return (x << r) | (x >> (64 - r));
}

/* little-endian loads, whatever the host */
static inline uint64_t le64(const unsigned char *p)
{
	return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
	       (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 | (uint64_t)p[7] << 56;
}

static inline uint32_t le32(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t round64(uint64_t acc, uint64_t in)
{
	acc += in * P2;
	acc = rotl(acc, 31);
	return acc * P1;
}

static inline uint64_t merge(uint64_t acc, uint64_t v)
{
	acc ^= round64(0, v);
	return acc * P1 + P4;
}

void xxh64_init(struct xxh64 *s, uint64_t seed)
{
	memset(s, 0, sizeof(*s));
	s->seed = seed;
	s->v[0] = seed + P1 + P2;
	s->v[1] = seed + P2;
	s->v[2] = seed;
	s->v[3] = seed - P1;
}

static void stripes(uint64_t v[4], const unsigned char *p, size_t n)
{
	uint64_t a = v[0], b = v[1], c = v[2], d = v[3];
	for (; n >= 32; p += 32, n -= 32) {
		a = round64(a, le64(p));
		b = round64(b, le64(p + 8));
		c = round64(c, le64(p + 16));
		d = round64(d, le64(p + 24));
	}
	v[0] = a;
	v[1] = b;
	v[2] = c;
	v[3] = d;
}

void xxh64_update(struct xxh64 *s, const void *data, size_t n)
{
	const unsigned char *p = data;
	s->total += n;
	if (s->nbuf) {
		size_t k = 32 - s->nbuf < n ? 32 - s->nbuf : n;
		memcpy(s->buf + s->nbuf, p, k);
		s->nbuf += k;
		p += k;
		n -= k;
		if (s->nbuf < 32)
			return;
		stripes(s->v, s->buf, 32);
		s->nbuf = 0;
	}
	size_t whole = n & ~(size_t)31;
	stripes(s->v, p, whole);
	memcpy(s->buf, p + whole, n - whole);
	s->nbuf = n - whole;
}

uint64_t xxh64_digest(const struct xxh64 *s)
{
	uint64_t h;
	if (s->total >= 32) {
		h = rotl(s->v[0], 1) + rotl(s->v[1], 7) + rotl(s->v[2], 12) + rotl(s->v[3], 18);
		for (int i = 0; i < 4; i++)
			h = merge(h, s->v[i]);
	} else {
		h = s->seed + P5;
	}
	h += s->total;
	const unsigned char *p = s->buf;
	size_t n = s->nbuf;
	for (; n >= 8; p += 8, n -= 8) {
		h ^= round64(0, le64(p));
		h = rotl(h, 27) * P1 + P4;
	}
	if (n >= 4) {
		h ^= (uint64_t)le32(p) * P1;
		h = rotl(h, 23) * P2 + P3;
		p += 4;
		n -= 4;
	}
	for (; n > 0; p++, n--) {
		h ^= (uint64_t)*p * P5;
		h = rotl(h, 11) * P1;
	}
	h ^= h >> 33;
	h *= P2;
	h ^= h >> 29;
	h *= P3;
	h ^= h >> 32;
	return h;
}

uint64_t xxh64(const void *p, size_t n, uint64_t seed)
{
	struct xxh64 s;
	xxh64_init(&s, seed);
	xxh64_update(&s, p, n);
	return xxh64_digest(&s);
}
