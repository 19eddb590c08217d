/* The manifest of a room archive (docs/export-format.md): each member's
 * SHA-256 digest, taken on a thread beside the codec that reads or writes
 * the archive.
 *
 * Why a thread: an export or import of a room is one pass over its bytes,
 * and the SHA-256 of every data byte was the largest single cost on that
 * pass (~0.7 ms per MiB with SHA-NI, a third of what the codec's thread
 * spent), serial with zstd, libarchive and the pipes.  The codec hands the
 * bytes a digest covers to a queue, in member order (a copy: the codec's
 * buffers are reused at once, and a copy costs a tenth of the hash), and
 * the hasher builds the manifest in that order.  Small archives (less than
 * MD_THREAD_AT bytes of data so far) are hashed inline, with no thread: the
 * same manifest either way. */
#ifndef ROOMBOX_FCGI_MEMBER_DIGEST_H
#define ROOMBOX_FCGI_MEMBER_DIGEST_H

#include <stddef.h>
#include <stdint.h>

#include "treestream.h"

struct md_queue;

/* A new manifest, "roombox-manifest 1\n" and no member yet; NULL: out of
 * memory. */
struct md_queue *md_new(void);
/* Stops the hasher (if any) and frees everything. */
void md_free(struct md_queue *q);

/* A state/ member: its record (what it means to a room), then its data
 * bytes at their offsets in order, then its line under name. */
void md_record(struct md_queue *q, const struct ts_record *rec);
void md_data(struct md_queue *q, uint64_t off, const void *p, size_t len);
void md_member_end(struct md_queue *q, const char *name);

/* A whole-file member (a part, the version): its content's SHA-256. */
void md_blob(struct md_queue *q, const char *name, const void *p, size_t len);

/* Waits until every member given so far is in the manifest; then
 * *manifest and *len are its text so far (the queue's, valid until the
 * next call).  0, or -1: out of memory on the way. */
int md_manifest(struct md_queue *q, const char **manifest, size_t *len);

/* Lowercase hex of n bytes into out (2n + 1). */
void md_hex(const unsigned char *p, size_t n, char *out);

#endif
