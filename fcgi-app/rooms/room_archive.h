/* A room's export archive (docs/export-format.md): pax tar compressed with
 * zstd, its members' SHA-256 in a closing manifest, the manifest under an
 * HMAC-SHA256 when a key is set, every byte under the closing seal.
 *
 * roombox-fcgi is the only place the archive is parsed: it runs
 * unprivileged and never touches a room's files.  The room's files cross to
 * and from the keeper as a tree stream (common/treestream.h); the other
 * parts (session, exposures, process records, messages) are whole files
 * that roombox-fcgi keeps itself. */
#ifndef ROOMBOX_FCGI_ROOM_ARCHIVE_H
#define ROOMBOX_FCGI_ROOM_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>

/* What an export writes; an import takes either (version 1: the seal a
 * SHA-256, no lead frame; docs/export-format.md). */
#define ROOM_ARCHIVE_VERSION "roombox-room 2\n"
#define ROOM_ARCHIVE_VERSION_1 "roombox-room 1\n"
#define ROOM_PART_MAX     (64u << 20)   /* one part's bytes */
#define ROOM_PARTS_MAX    (256u << 20)  /* all parts' bytes */
#define ROOM_PARTS_COUNT  4096          /* parts in one archive */

/* A part beside the room's files: name is "session/root",
 * "session/user", "exposures", "processes/<file>" or "messages/<file>"
 * (<file>: 1-128 of [A-Za-z0-9._-], not starting with '.'); in an archive
 * the parts come in that order of kinds. */
struct room_part {
	char *name;
	unsigned char *data;
	size_t len;
};

struct room_parts {
	struct room_part *v;
	size_t n;
};

void room_parts_free(struct room_parts *p);

/* 0 when name may be a part's name; else -1. */
int room_part_name_ok(const char *name);

/* The HMAC key (export_key_file's bytes); len 0: none. */
struct room_key {
	const unsigned char *bytes;
	size_t len;
};

/* Reads a tree stream from tree_fd (checked as it is read) and writes the
 * archive to out_fd: the version, the room's files, the parts (in the
 * order above; refused otherwise), the manifest and, with a key, its HMAC.
 * 0, or -1 with err; what was written is then to be thrown away. */
int archive_from_tree(int tree_fd, int out_fd, const struct room_part *parts, size_t nparts,
		      const struct room_key *key, char *err, size_t errlen);

/* The same, the parts asked of get_parts once the room's files are all
 * in (an export learns the sessions only when the helper that streamed
 * the files has answered); get_parts returns 0, or -1 with err. */
typedef int room_parts_fn(void *ctx, const struct room_part **parts, size_t *nparts,
			  char *err, size_t errlen);
int archive_from_tree_late(int tree_fd, int out_fd, room_parts_fn *get_parts, void *ctx,
			   const struct room_key *key, char *err, size_t errlen);

/* The same into sink (0, or -1 with errno set: the client is gone), the
 * seal included: the worker that serves an export hands its connection
 * over, so the archive's bytes cross no pipe between two threads. */
typedef int room_sink_fn(void *ctx, const void *p, size_t n);
int archive_from_tree_sink(int tree_fd, room_sink_fn *sink, void *sink_ctx, room_parts_fn *get_parts,
			   void *ctx, const struct room_key *key, char *err, size_t errlen);

/* The seal's checksum (the export takes its own; an import's caller may
 * take it as it passes the body on, on another thread); which one (version 1: SHA-256, 2: XXH64) the archive's first bytes
 * say.  ROOM_SEAL_LEN: the longest seal. */
#define ROOM_SEAL_LEN 88
struct room_sealer;
struct room_sealer *room_sealer_new(void);
void room_sealer_free(struct room_sealer *s);
/* Export: every byte of the archive, then the seal to write after them
 * (its length returned). */
void room_sealer_add(struct room_sealer *s, const void *p, size_t n);
size_t room_sealer_seal(struct room_sealer *s, unsigned char out[ROOM_SEAL_LEN]);
/* Import: every byte of the body; the last ROOM_SEAL_LEN are held back,
 * and the digest leaves out the seal its version ends in. */
void room_sealer_feed(struct room_sealer *s, const void *p, size_t n);
/* The digest so far (once: the sealer is spent after it): a SHA-256, or
 * an XXH64 big-endian in the first 8 bytes and zeros. */
void room_sealer_digest(struct room_sealer *s, unsigned char out[32]);
/* 1 or 2 once the first bytes told, else 0. */
int room_sealer_version(const struct room_sealer *s);

/* Reads an archive from in_fd and writes the room's files to tree_fd as a
 * tree stream, each entry checked (treestream.h) against a room disk of
 * budget bytes; the parts go to *parts.  The tree stream's end record is
 * written only once the whole archive has been read and its manifest (and,
 * with a key, the manifest's HMAC, then required) found right: a refused
 * archive leaves a stream without one, which its reader refuses.
 * 0, or -1 with err naming the member and the reason (*parts then empty). */
int archive_to_tree(int in_fd, int tree_fd, uint64_t budget, const struct room_key *key,
		    struct room_parts *parts, char *err, size_t errlen);

/* The same, with the seal's digest taken by the caller, who feeds every
 * byte it writes to in_fd to a room_sealer (on another thread): once in_fd has ended, digest(ctx, out)
 * gives the SHA-256 of all but the last ROOM_SEAL_LEN bytes (-1: the
 * body did not come whole). */
typedef int room_digest_fn(void *ctx, unsigned char out[32]);
int archive_to_tree_digested(int in_fd, int tree_fd, uint64_t budget, const struct room_key *key,
			     room_digest_fn *digest, void *digest_ctx, struct room_parts *parts,
			     char *err, size_t errlen);

#endif
