/* A bounded history of a stream of bytes, addressed by absolute offset:
 * a terminal's scrollback (a client attaching reads from the oldest byte
 * kept; each client keeps its own offset, so one that reads slowly never
 * holds the writer back -- it finds its bytes gone and is told how many it
 * lost) and a file watch's recent events (an event's id is its offset, so
 * Last-Event-ID resumes exactly, or learns that events were dropped).
 *
 * Memory is the capacity, fixed at init, whatever is written.  Not
 * thread-safe: its owner holds a lock around it. */
#ifndef ROOMBOX_FCGI_BYTE_RING_H
#define ROOMBOX_FCGI_BYTE_RING_H

#include <stddef.h>
#include <stdint.h>

struct byte_ring {
	unsigned char *buf;
	size_t cap;
	uint64_t start, end;   /* offsets of the oldest byte kept and one past the newest */
};

/* 0, or -1 when cap bytes cannot be had (cap > 0). */
int byte_ring_init(struct byte_ring *r, size_t cap);
void byte_ring_free(struct byte_ring *r);

/* Appends len bytes; the oldest go when it is full (of a write longer than
 * the ring only its last cap bytes stay). */
void byte_ring_write(struct byte_ring *r, const void *data, size_t len);

/* Copies up to max bytes from offset *at into out and advances *at by
 * what it copied; returns that count.  An *at older than the oldest byte
 * kept first moves to it, and *lost says by how much (else 0); an *at past
 * the end is taken as the end. */
size_t byte_ring_read(const struct byte_ring *r, uint64_t *at, void *out, size_t max, uint64_t *lost);

#endif
