/* The export archive's two codecs (room_archive.h), over libarchive (pax
 * tar, zstd) and OpenSSL's libcrypto (SHA-256, HMAC-SHA256).
 *
 * Why it is built this way:
 *
 * - The archive is a standard one, so a user can open an export with tar;
 *   libarchive reads and writes it, so no tar or zstd parser of our own
 *   stands between an attacker and the importer.  Only the tar reader and
 *   the zstd filter are enabled on import: nothing else is parsed.
 * - Every member's digest covers what the member means to a room, not its
 *   tar bytes: the entry's type, mode, owners, mtime, size, name, link
 *   target and xattrs, a SHA-256 of its data bytes and one of its data map
 *   (the extents holding data, adjacent ones joined).  Both codecs compute
 *   it from the tree stream record, so a digest does not depend on how
 *   libarchive cut the data into blocks.  A part's digest is its content's.
 *   The digests are taken on a thread beside the codec's (member_digest.c):
 *   the SHA-256 of every data byte was the largest cost of its pass.
 * - The manifest is the list of "<digest> <member>" lines in archive
 *   order.  The importer builds the list it expects from what it read and
 *   requires the manifest to be exactly that text: a member missing,
 *   added, moved or changed makes a line differ, and the first differing
 *   line names the member.  The HMAC covers the manifest's bytes, hence
 *   every member.
 * - Import streams: a room's files go to the tree stream as they are read
 *   (a room may be larger than memory), and only the end record, written
 *   last, says the stream was vouched for.  Parts are held in memory
 *   (bounded by ROOM_PART_MAX and ROOM_PARTS_MAX) and handed over only on
 *   success. */
#include "room_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <xxhash.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "errbuf.h"
#include "member_digest.h"
#include "treestream.h"

#define STATE_PREFIX  "state/"
#define ZERO_CHUNK    (1u << 20)
#define HMAC_HEX      64
/* The seal: a zstd skippable frame closing the archive (zstd and tar pass
 * over it) holding a checksum of every byte before it: version 1, their
 * SHA-256; version 2, their XXH64 (the manifest's SHA-256 digests already
 * vouch for every member, so the seal needs only to catch damage, and a
 * second SHA-256 pass over every byte was a third of an export's CPU).
 * A version 2 archive opens with a skippable frame of its own, the lead,
 * so that whoever hashes its bytes knows from the first 23 which seal to
 * take, before any member is parsed. */
#define SEAL_MAGIC    0x184D2A5Eu
#define SEAL1_HEAD    "roombox-seal 1\n"
#define SEAL1_PAYLOAD (sizeof SEAL1_HEAD - 1 + 64 + 1)
#define SEAL1_LEN     (8 + SEAL1_PAYLOAD)
#define SEAL2_HEAD    "roombox-seal 2\n"
#define SEAL2_PAYLOAD (sizeof SEAL2_HEAD - 1 + 16 + 1)
#define SEAL2_LEN     (8 + SEAL2_PAYLOAD)
#define SEAL_HOLD     SEAL1_LEN          /* the longer: held back on import */
#define LEAD_TEXT     "roombox-room 2\n"
#define LEAD_LEN      (8 + sizeof LEAD_TEXT - 1)
#define SOURCE_BUF    (1u << 20)

/* ---- parts ---- */

void room_parts_free(struct room_parts *p)
{
	for (size_t i = 0; i < p->n; i++) {
		free(p->v[i].name);
		free(p->v[i].data);
	}
	free(p->v);
	p->v = NULL;
	p->n = 0;
}

/* The rank of a part's kind (the order kinds come in), or -1. */
static int part_rank(const char *name)
{
	static const char *const fixed[] = { "session/root", "session/user", "exposures" };
	for (int i = 0; i < 3; i++)
		if (strcmp(name, fixed[i]) == 0)
			return i;
	if (strcmp(name, "settings") == 0)
		return 5;   /* after the messages: a move's labels and own limits */
	const char *f;
	int rank;
	if (strncmp(name, "processes/", 10) == 0) {
		f = name + 10;
		rank = 3;
	} else if (strncmp(name, "messages/", 9) == 0) {
		f = name + 9;
		rank = 4;
	} else {
		return -1;
	}
	size_t n = strlen(f);
	if (n == 0 || n > 128 || f[0] == '.' || strspn(f, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
						     "abcdefghijklmnopqrstuvwxyz0123456789._-") != n)
		return -1;
	return rank;
}

int room_part_name_ok(const char *name)
{
	return part_rank(name) < 0 ? -1 : 0;
}

/* The seal frame of a version for the digest of the bytes before it (v1:
 * a SHA-256; v2: an XXH64, big-endian in dg's first 8 bytes); its length. */
static size_t seal_bytes(int version, const unsigned char dg[32], unsigned char out[SEAL_HOLD])
{
	const char *head = version == 2 ? SEAL2_HEAD : SEAL1_HEAD;
	size_t hlen = strlen(head), dlen = version == 2 ? 8 : 32;
	uint32_t payload = (uint32_t)(hlen + 2 * dlen + 1);
	char hex[65];
	for (int i = 0; i < 4; i++) {
		out[i] = (unsigned char)(SEAL_MAGIC >> (8 * i));
		out[4 + i] = (unsigned char)(payload >> (8 * i));
	}
	md_hex(dg, dlen, hex);
	memcpy(out + 8, head, hlen);
	memcpy(out + 8 + hlen, hex, 2 * dlen);
	out[8 + payload - 1] = '\n';
	return 8 + payload;
}

/* The lead frame that opens a version 2 archive. */
static void lead_bytes(unsigned char out[LEAD_LEN])
{
	for (int i = 0; i < 4; i++) {
		out[i] = (unsigned char)(SEAL_MAGIC >> (8 * i));
		out[4 + i] = (unsigned char)((uint32_t)(sizeof LEAD_TEXT - 1) >> (8 * i));
	}
	memcpy(out + 8, LEAD_TEXT, sizeof LEAD_TEXT - 1);
}

/* ---- the seal's digest (room_archive.h) ---- */

_Static_assert(SEAL_HOLD == ROOM_SEAL_LEN, "the longest seal's length");
_Static_assert(SEAL2_LEN <= SEAL1_LEN, "the seals' lengths");

struct room_sealer {
	int version;                     /* 0 until the first bytes tell */
	unsigned char lead[LEAD_LEN];    /* those first bytes, until then */
	size_t lead_len;
	EVP_MD_CTX *md;                  /* version 1 */
	XXH64_state_t *xx;               /* version 2 (libxxhash) */
	unsigned char tail[SEAL_HOLD];   /* import: held back, maybe the seal */
	size_t tail_len;
};

struct room_sealer *room_sealer_new(void)
{
	struct room_sealer *s = calloc(1, sizeof *s);
	if (s && (!(s->md = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(s->md, EVP_sha256(), NULL) ||
		  !(s->xx = XXH64_createState()) || XXH64_reset(s->xx, 0) != XXH_OK)) {
		room_sealer_free(s);
		s = NULL;
	}
	return s;
}

void room_sealer_free(struct room_sealer *s)
{
	if (s) {
		EVP_MD_CTX_free(s->md);
		XXH64_freeState(s->xx);
		free(s);
	}
}

int room_sealer_version(const struct room_sealer *s)
{
	return s->version;
}

static void hash_update(struct room_sealer *s, const void *p, size_t n)
{
	if (n == 0)
		return;
	if (s->version == 2)
		XXH64_update(s->xx, p, n);
	else
		EVP_DigestUpdate(s->md, p, n);
}

/* (tail, new bytes): all but the last SEAL_HOLD hashed (when hash), those
 * kept. */
static void tail_feed(struct room_sealer *s, const unsigned char *p, size_t n, bool hash)
{
	size_t total = s->tail_len + n;
	size_t hashable = total > SEAL_HOLD ? total - SEAL_HOLD : 0;
	size_t from_tail = hashable < s->tail_len ? hashable : s->tail_len;
	if (hash) {
		hash_update(s, s->tail, from_tail);
		hash_update(s, p, hashable - from_tail);
	}
	unsigned char keep[SEAL_HOLD];
	size_t k = total - hashable, kt = s->tail_len - from_tail;
	memcpy(keep, s->tail + from_tail, kt);
	memcpy(keep + kt, p + (hashable - from_tail), k - kt);
	memcpy(s->tail, keep, k);
	s->tail_len = k;
}

/* Version 2 when the bytes open with the lead, else 1: decided as soon
 * as they differ from it or hold all of it (or at the end); the bytes
 * held until then are passed on. */
static void decide(struct room_sealer *s, bool hold, bool hash, bool at_end)
{
	unsigned char want[LEAD_LEN];
	lead_bytes(want);
	if (memcmp(s->lead, want, s->lead_len) != 0)
		s->version = 1;
	else if (s->lead_len == LEAD_LEN)
		s->version = 2;
	else if (at_end)
		s->version = 1;
	else
		return;
	if (hold)
		tail_feed(s, s->lead, s->lead_len, hash);
	else if (hash)
		hash_update(s, s->lead, s->lead_len);
}

static void sealer_in(struct room_sealer *s, const unsigned char *p, size_t n, bool hold, bool hash)
{
	if (!s->version) {
		size_t k = LEAD_LEN - s->lead_len < n ? LEAD_LEN - s->lead_len : n;
		memcpy(s->lead + s->lead_len, p, k);
		s->lead_len += k;
		p += k;
		n -= k;
		decide(s, hold, hash, false);
		if (!s->version)
			return;
	}
	if (hold)
		tail_feed(s, p, n, hash);
	else if (hash)
		hash_update(s, p, n);
}

void room_sealer_add(struct room_sealer *s, const void *p, size_t n)
{
	sealer_in(s, p, n, false, true);
}

void room_sealer_feed(struct room_sealer *s, const void *p, size_t n)
{
	sealer_in(s, p, n, true, true);
}

/* The digest of what was added, or of all that was fed but the seal its
 * version ends in (the last bytes held back: a version 2 seal is shorter
 * than the hold). */
void room_sealer_digest(struct room_sealer *s, unsigned char out[32])
{
	unsigned dn;
	if (!s->version)
		decide(s, true, true, true);
	memset(out, 0, 32);
	if (s->version == 2) {
		if (s->tail_len > SEAL2_LEN)
			XXH64_update(s->xx, s->tail, s->tail_len - SEAL2_LEN);
		uint64_t h = XXH64_digest(s->xx);
		for (int i = 0; i < 8; i++)
			out[i] = (unsigned char)(h >> (56 - 8 * i));
		return;
	}
	EVP_DigestFinal_ex(s->md, out, &dn);
}

size_t room_sealer_seal(struct room_sealer *s, unsigned char out[ROOM_SEAL_LEN])
{
	unsigned char dg[32];
	if (!s->version)
		decide(s, false, true, true);
	int version = s->version;
	room_sealer_digest(s, dg);
	return seal_bytes(version, dg, out);
}

/* The member name of a tree path. */
static void state_name(char *out, size_t n, const char *path)
{
	snprintf(out, n, STATE_PREFIX "%s", strcmp(path, ".") == 0 ? "" : path);
}

/* ---- export ---- */

struct exporter {
	room_sink_fn *sink;         /* where the archive's bytes go */
	void *sink_ctx;
	bool led;                   /* the lead frame went out */
	struct room_sealer *whole;  /* every byte written, for the seal; NULL:
				     * the caller seals */
	struct archive *a;
	struct archive_entry *e;
	struct ts_reader r;
	struct md_queue *md;        /* the members' digests: the manifest */
	unsigned char *chunk, *zeros;
	char name[TS_PATH_MAX + 16], link[TS_PATH_MAX + 16];
	char *err;
	size_t errlen;
};

static int write_fd(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

static int fd_sink(void *ctx, const void *p, size_t n)
{
	return write_fd(*(int *)ctx, p, n);
}

/* The lead frame goes out with libarchive's first block, no sooner: until
 * then a failure (the helper's, say) can still be answered as one. */
static la_ssize_t sink_write(struct archive *a, void *client, const void *p, size_t n)
{
	struct exporter *x = client;
	if (!x->led) {
		unsigned char lead[LEAD_LEN];
		lead_bytes(lead);
		x->led = true;
		if (sink_write(a, client, lead, sizeof lead) < 0)
			return -1;
	}
	if (x->sink(x->sink_ctx, p, n) < 0) {
		archive_set_error(a, errno, "write: %s", strerror(errno));
		return -1;
	}
	if (x->whole)
		room_sealer_add(x->whole, p, n);
	return (la_ssize_t)n;
}

static int ar_fail(struct exporter *x, const char *what)
{
	return errorf(x->err, x->errlen, "export: %s: %s", what, archive_error_string(x->a)
			      ? archive_error_string(x->a) : "archive error");
}

static int write_all_data(struct exporter *x, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		la_ssize_t w = archive_write_data(x->a, c, n);
		if (w <= 0)
			return ar_fail(x, x->name);
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* A whole-file member (the version, a part, the manifest) and its line. */
static int export_blob(struct exporter *x, const char *name, const void *p, size_t n, bool listed)
{
	archive_entry_clear(x->e);
	archive_entry_set_pathname(x->e, name);
	archive_entry_set_filetype(x->e, AE_IFREG);
	archive_entry_set_perm(x->e, 0600);
	archive_entry_set_size(x->e, (la_int64_t)n);
	archive_entry_set_mtime(x->e, time(NULL), 0);
	snprintf(x->name, sizeof x->name, "%s", name);
	if (archive_write_header(x->a, x->e) != ARCHIVE_OK || write_all_data(x, p, n) < 0)
		return ar_fail(x, name);
	if (listed)
		md_blob(x->md, name, p, n);
	return 0;
}

/* Holes: bytes the pax writer counts off and never writes. */
static int skip_hole(struct exporter *x, uint64_t n)
{
	while (n > 0) {
		size_t k = n < ZERO_CHUNK ? (size_t)n : ZERO_CHUNK;
		if (write_all_data(x, x->zeros, k) < 0)
			return -1;
		n -= k;
	}
	return 0;
}

static int export_entry(struct exporter *x, const struct ts_record *rec)
{
	struct archive_entry *e = x->e;
	state_name(x->name, sizeof x->name, rec->path);
	archive_entry_clear(e);
	archive_entry_set_pathname(e, x->name);
	archive_entry_set_perm(e, rec->mode);
	archive_entry_set_uid(e, rec->uid);
	archive_entry_set_gid(e, rec->gid);
	archive_entry_set_mtime(e, (time_t)rec->mtime_sec, rec->mtime_nsec);
	for (unsigned i = 0; i < rec->xattr_count; i++)
		archive_entry_xattr_add_entry(e, rec->xattrs[i].name, rec->xattrs[i].value, rec->xattrs[i].len);
	switch (rec->type) {
	case TS_DIR:
		archive_entry_set_filetype(e, AE_IFDIR);
		break;
	case TS_SYMLINK:
		archive_entry_set_filetype(e, AE_IFLNK);
		archive_entry_set_symlink(e, rec->link);
		break;
	case TS_HARDLINK:
		archive_entry_set_filetype(e, AE_IFREG);
		state_name(x->link, sizeof x->link, rec->link);
		archive_entry_set_hardlink(e, x->link);
		archive_entry_set_size(e, 0);
		break;
	case TS_FIFO:
		archive_entry_set_filetype(e, AE_IFIFO);
		break;
	case TS_WHITEOUT:
		archive_entry_set_filetype(e, AE_IFCHR);
		archive_entry_set_rdev(e, 0);
		break;
	case TS_FILE:
		archive_entry_set_filetype(e, AE_IFREG);
		archive_entry_set_size(e, (la_int64_t)rec->size);
		if (rec->has_map) {
			uint64_t end = 0;
			for (unsigned i = 0; i < rec->map_count; i++) {
				archive_entry_sparse_add_entry(e, (la_int64_t)rec->map[i].offset,
							       (la_int64_t)rec->map[i].len);
				end = rec->map[i].offset + rec->map[i].len;
			}
			/* libarchive (as GNU tar) writes no sparse member without
			 * data: a file all hole ends in one zero byte of data,
			 * which the importer leaves a hole again */
			if (rec->map_count == 0 && rec->size > 0)
				archive_entry_sparse_add_entry(e, (la_int64_t)rec->size - 1, 1);
			/* a file ending in a hole says where it ends */
			else if (end < rec->size)
				archive_entry_sparse_add_entry(e, (la_int64_t)rec->size, 0);
		}
		break;
	case TS_END:
		break;
	}
	if (archive_write_header(x->a, e) != ARCHIVE_OK)
		return ar_fail(x, x->name);
	md_record(x->md, rec);
	if (rec->type == TS_FILE) {
		uint64_t off, len, pos = 0;
		int rc;
		while ((rc = ts_read_extent(&x->r, &off, &len, x->err, x->errlen)) > 0) {
			if (off > pos && skip_hole(x, off - pos) < 0)
				return -1;
			pos = off;
			ssize_t n;
			const void *p;
			while ((n = ts_read_data_ptr(&x->r, &p, x->err, x->errlen)) > 0) {
				if (write_all_data(x, p, (size_t)n) < 0)
					return -1;
				md_data(x->md, pos, p, (size_t)n);
				pos += (uint64_t)n;
			}
			if (n < 0)
				return -1;
		}
		if (rc < 0)
			return -1;
		if (rec->has_map && rec->map_count == 0 && rec->size > 0) {
			if (skip_hole(x, rec->size - 1) < 0 || write_all_data(x, x->zeros, 1) < 0)
				return -1;
			md_data(x->md, rec->size - 1, x->zeros, 1);
		}
	}
	md_member_end(x->md, x->name);
	return 0;
}

static int hmac_hex(const struct room_key *key, const void *p, size_t n, char out[HMAC_HEX + 1])
{
	unsigned char mac[32];
	unsigned len = 0;
	if (!HMAC(EVP_sha256(), key->bytes, (int)key->len, p, n, mac, &len) || len != 32)
		return -1;
	md_hex(mac, 32, out);
	return 0;
}

static int parts_check(const struct room_part *parts, size_t nparts, char *err, size_t errlen)
{
	int last_rank = -1;
	for (size_t i = 0; i < nparts; i++) {
		int rank = part_rank(parts[i].name);
		if (rank < 0 || rank < last_rank || parts[i].len > ROOM_PART_MAX)
			return errorf(err, errlen, "export: part %.200s: bad name, order or size", parts[i].name);
		if (rank <= 2 && rank == last_rank)
			return errorf(err, errlen, "export: part %s twice", parts[i].name);
		last_rank = rank;
	}
	return 0;
}

struct given_parts {
	const struct room_part *v;
	size_t n;
};

static int parts_given(void *ctx, const struct room_part **parts, size_t *nparts, char *err, size_t errlen)
{
	const struct given_parts *g = ctx;
	(void)err;
	(void)errlen;
	*parts = g->v;
	*nparts = g->n;
	return 0;
}

int archive_from_tree(int tree_fd, int out_fd, const struct room_part *parts, size_t nparts,
		      const struct room_key *key, char *err, size_t errlen)
{
	struct given_parts g = { parts, nparts };
	if (parts_check(parts, nparts, err, errlen) < 0)
		return -1;
	return archive_from_tree_late(tree_fd, out_fd, parts_given, &g, key, err, errlen);
}

int archive_from_tree_sink(int tree_fd, room_sink_fn *sink, void *sink_ctx, room_parts_fn *get_parts,
			   void *ctx, const struct room_key *key, char *err, size_t errlen)
{
	struct exporter x = { .sink = sink, .sink_ctx = sink_ctx, .err = err, .errlen = errlen };
	/* the keeper's stream is checked as any other, without a budget:
	 * the room's disk already bounds it */
	struct ts_limits lim = { UINT64_MAX, UINT64_MAX };
	const struct room_part *parts = NULL;
	size_t nparts = 0;
	int rc = -1;
	x.chunk = malloc(ZERO_CHUNK);
	x.zeros = calloc(1, ZERO_CHUNK);
	x.a = archive_write_new();
	x.e = archive_entry_new();
	x.whole = room_sealer_new();
	x.md = md_new();
	if (!x.chunk || !x.zeros || !x.a || !x.e || !x.whole || !x.md ||
	    ts_reader_init(&x.r, tree_fd, &lim) < 0) {
		errorf(err, errlen, "export: out of memory");
		goto out;
	}
	if (archive_write_add_filter_zstd(x.a) != ARCHIVE_OK ||
	    archive_write_set_filter_option(x.a, "zstd", "compression-level", "1") != ARCHIVE_OK ||
	    archive_write_set_format_pax(x.a) != ARCHIVE_OK ||
	    /* names are bytes, as the kernel keeps them: no translation
	     * through a locale that may not hold them */
	    archive_write_set_format_option(x.a, "pax", "hdrcharset", "BINARY") != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(x.a, 1 << 20) != ARCHIVE_OK ||
	    archive_write_set_bytes_in_last_block(x.a, 1) != ARCHIVE_OK ||
	    archive_write_open(x.a, &x, NULL, sink_write, NULL) != ARCHIVE_OK) {
		ar_fail(&x, "open");
		goto out;
	}
	if (export_blob(&x, "roombox/version", ROOM_ARCHIVE_VERSION, strlen(ROOM_ARCHIVE_VERSION), true) < 0)
		goto out;
	for (;;) {
		int r = ts_read_record(&x.r, err, errlen);
		if (r < 0)
			goto out;
		if (r == 0)
			break;
		if (export_entry(&x, &x.r.rec) < 0)
			goto out;
	}
	if (get_parts(ctx, &parts, &nparts, err, errlen) < 0 || parts_check(parts, nparts, err, errlen) < 0)
		goto out;
	for (size_t i = 0; i < nparts; i++)
		if (export_blob(&x, parts[i].name, parts[i].data, parts[i].len, true) < 0)
			goto out;
	const char *manifest;
	size_t mlen;
	if (md_manifest(x.md, &manifest, &mlen) < 0) {
		errorf(err, errlen, "export: out of memory");
		goto out;
	}
	if (export_blob(&x, "roombox/manifest", manifest, mlen, false) < 0)
		goto out;
	if (key && key->len) {
		char mac[HMAC_HEX + 2];
		if (hmac_hex(key, manifest, mlen, mac) < 0) {
			errorf(err, errlen, "export: HMAC failed");
			goto out;
		}
		strcat(mac, "\n");
		if (export_blob(&x, "roombox/manifest.hmac", mac, HMAC_HEX + 1, false) < 0)
			goto out;
	}
	if (archive_write_close(x.a) != ARCHIVE_OK) {
		ar_fail(&x, "close");
		goto out;
	}
	unsigned char sealed[SEAL_HOLD];
	size_t n = room_sealer_seal(x.whole, sealed);
	if (sink(sink_ctx, sealed, n) < 0) {
		errorf(err, errlen, "export: write: %s", strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (x.a)
		archive_write_free(x.a);
	if (x.e)
		archive_entry_free(x.e);
	ts_reader_free(&x.r);
	md_free(x.md);
	room_sealer_free(x.whole);
	free(x.chunk);
	free(x.zeros);
	return rc;
}

int archive_from_tree_late(int tree_fd, int out_fd, room_parts_fn *get_parts, void *ctx,
			   const struct room_key *key, char *err, size_t errlen)
{
	return archive_from_tree_sink(tree_fd, fd_sink, &out_fd, get_parts, ctx, key, err, errlen);
}

/* ---- import ---- */

enum stage { ST_VERSION, ST_STATE, ST_PARTS, ST_HMAC, ST_DONE };

/* The archive's bytes on their way to libarchive: all but the last
 * SEAL_HOLD are hashed (those may be the seal); a version 2 archive's
 * lead frame is taken off (libarchive is handed a zstd stream and
 * nothing else). */
struct source {
	int fd;
	struct room_sealer *seal;   /* hashing here unless the caller does */
	room_digest_fn *digest;     /* the caller's: the digest at the end */
	void *digest_ctx;
	unsigned char buf[SOURCE_BUF];
	bool started, eof;
	int read_errno;
};

struct importer {
	struct source src;
	struct archive *a;
	struct ts_validator v;
	struct ts_writer w;
	struct md_queue *md;        /* the manifest expected */
	struct room_parts *parts;
	size_t parts_bytes;
	int last_rank;
	const struct room_key *key;
	enum stage stage;
	bool have_root;
	char path[TS_PATH_MAX + 1], link[TS_PATH_MAX + 1];
	struct ts_xattr xattrs[TS_XATTRS_MAX];
	char *err;
	size_t errlen;
};

static la_ssize_t source_read(struct archive *a, void *client, const void **out)
{
	struct source *s = client;
	ssize_t n;
	size_t got = 0, skip = 0;
	if (s->eof)
		return 0;
	/* the first time, enough bytes to tell a lead frame (or the end) */
	do {
		n = read(s->fd, s->buf + got, sizeof s->buf - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			s->read_errno = errno;
			archive_set_error(a, errno, "read: %s", strerror(errno));
			return -1;
		}
		got += (size_t)n;
	} while (n != 0 && !s->started && got < LEAD_LEN);
	if (got == 0) {
		s->eof = true;
		return 0;
	}
	sealer_in(s->seal, s->buf, got, true, !s->digest);
	if (!s->started && s->seal->version == 2)
		skip = LEAD_LEN;
	s->started = true;
	if (got == skip)
		return source_read(a, client, out);
	*out = s->buf + skip;
	return (la_ssize_t)(got - skip);
}

/* Reads what libarchive left (the seal, at least) and checks the seal. */
static int check_seal(struct importer *m)
{
	const void *p;
	la_ssize_t n;
	while ((n = source_read(m->a, &m->src, &p)) > 0)
		;
	if (n < 0)
		return errorf(m->err, m->errlen, "import: read: %s", strerror(m->src.read_errno));
	unsigned char dg[32], want[SEAL_HOLD];
	struct room_sealer *sl = m->src.seal;
	if (!m->src.digest)
		room_sealer_digest(sl, dg);
	else if (m->src.digest(m->src.digest_ctx, dg) < 0)
		return errorf(m->err, m->errlen, "import: the archive's bytes were not all read");
	size_t wlen = seal_bytes(sl->version == 2 ? 2 : 1, dg, want);
	const unsigned char *tail = sl->tail + sl->tail_len - (sl->tail_len < wlen ? 0 : wlen);
	if (sl->tail_len < wlen || memcmp(tail, want, 8) != 0)
		return errorf(m->err, m->errlen, "import: the archive has no seal at its end (truncated?)");
	if (CRYPTO_memcmp(tail, want, wlen) != 0)
		return errorf(m->err, m->errlen, "import: the seal does not match the archive's bytes (corrupted)");
	return 0;
}

static int in_fail(struct importer *m, const char *member)
{
	const char *e = archive_error_string(m->a);
	return errorf(m->err, m->errlen, "import: %.200s: %s", member, e ? e : "unreadable archive");
}

/* A whole-file member's bytes (at most max). */
static int read_blob(struct importer *m, struct archive_entry *e, const char *name, size_t max,
		     unsigned char **out, size_t *len)
{
	la_int64_t size = archive_entry_size(e);
	if (archive_entry_filetype(e) != AE_IFREG || archive_entry_hardlink(e))
		return errorf(m->err, m->errlen, "import: %s: not a regular file", name);
	if (size < 0 || (uint64_t)size > max)
		return errorf(m->err, m->errlen, "import: %s: larger than %zu bytes", name, max);
	unsigned char *p = malloc((size_t)size + 1);
	if (!p)
		return errorf(m->err, m->errlen, "import: %s: out of memory", name);
	size_t got = 0;
	while (got < (size_t)size) {
		la_ssize_t n = archive_read_data(m->a, p + got, (size_t)size - got);
		if (n < 0) {
			free(p);
			return in_fail(m, name);
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	if (got != (size_t)size) {
		free(p);
		return errorf(m->err, m->errlen, "import: %s: truncated", name);
	}
	p[got] = '\0';
	*out = p;
	*len = got;
	return 0;
}

static int xattr_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ts_xattr *)a)->name, ((const struct ts_xattr *)b)->name);
}

/* The entry's xattrs, sorted; the same one twice (pax has two spellings)
 * counts once, two values for one name refuse. */
static int entry_xattrs(struct importer *m, struct archive_entry *e, const char *name, unsigned *count)
{
	const char *xn;
	const void *xv;
	size_t xl;
	unsigned n = 0;
	archive_entry_xattr_reset(e);
	while (archive_entry_xattr_next(e, &xn, &xv, &xl) == ARCHIVE_OK) {
		if (n == TS_XATTRS_MAX)
			return errorf(m->err, m->errlen, "import: %s: more than %d xattrs", name, TS_XATTRS_MAX);
		if (xl > TS_XATTR_VALUE_MAX)
			return errorf(m->err, m->errlen, "import: %s: xattr %.255s too long", name, xn);
		m->xattrs[n].name = xn;
		m->xattrs[n].value = xv;
		m->xattrs[n].len = (uint32_t)xl;
		n++;
	}
	qsort(m->xattrs, n, sizeof *m->xattrs, xattr_cmp);
	unsigned k = 0;
	for (unsigned i = 0; i < n; i++) {
		if (k > 0 && strcmp(m->xattrs[k - 1].name, m->xattrs[i].name) == 0) {
			if (m->xattrs[k - 1].len != m->xattrs[i].len ||
			    memcmp(m->xattrs[k - 1].value, m->xattrs[i].value, m->xattrs[i].len) != 0)
				return errorf(m->err, m->errlen, "import: %s: xattr %.255s given twice", name,
					      m->xattrs[i].name);
			continue;
		}
		m->xattrs[k++] = m->xattrs[i];
	}
	*count = k;
	return 0;
}

/* The tree path of member `name` ("state/..."), a directory's trailing
 * slash taken off. */
static int tree_path(struct importer *m, const char *name, bool dir, char *out)
{
	size_t n = strlen(name + strlen(STATE_PREFIX));
	const char *p = name + strlen(STATE_PREFIX);
	if (dir && n > 0 && p[n - 1] == '/')
		n--;
	if (n > TS_PATH_MAX)
		return errorf(m->err, m->errlen, "import: %.200s...: path too long", name);
	if (n == 0) {
		strcpy(out, ".");
		return 0;
	}
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

/* The validator's reason without the path it starts with. */
static const char *reason(const char *why, const char *path)
{
	size_t n = strlen(path);
	return strncmp(why, path, n) == 0 && strncmp(why + n, ": ", 2) == 0 ? why + n + 2 : why;
}

static int import_state(struct importer *m, struct archive_entry *e, const char *name)
{
	char why[512], mname[TS_PATH_MAX + 16];
	struct ts_record rec = { .link = "" };
	mode_t ft = archive_entry_filetype(e);
	const char *hl = archive_entry_hardlink(e);

	if (hl)
		rec.type = TS_HARDLINK;
	else if (ft == AE_IFREG)
		rec.type = TS_FILE;
	else if (ft == AE_IFDIR)
		rec.type = TS_DIR;
	else if (ft == AE_IFLNK)
		rec.type = TS_SYMLINK;
	else if (ft == AE_IFIFO)
		rec.type = TS_FIFO;
	else if (ft == AE_IFCHR && archive_entry_rdevmajor(e) == 0 && archive_entry_rdevminor(e) == 0)
		rec.type = TS_WHITEOUT;   /* an overlay whiteout, not a device */
	else if (ft == AE_IFCHR || ft == AE_IFBLK)
		return errorf(m->err, m->errlen, "import: %.200s: a device node is not allowed", name);
	else
		return errorf(m->err, m->errlen, "import: %.200s: type %o is not allowed", name, (unsigned)ft);
	if (tree_path(m, name, rec.type == TS_DIR, m->path) < 0)
		return -1;
	rec.path = m->path;
	state_name(mname, sizeof mname, m->path);

	la_int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
	if (uid < 0 || gid < 0 || uid > TS_ID_MAX || gid > TS_ID_MAX)
		return errorf(m->err, m->errlen, "import: %s: owner %lld:%lld beyond 65535", mname,
			      (long long)uid, (long long)gid);
	la_int64_t size = archive_entry_size(e);
	if (size < 0)
		return errorf(m->err, m->errlen, "import: %s: negative size", mname);
	if (rec.type == TS_HARDLINK) {
		if (strncmp(hl, STATE_PREFIX, strlen(STATE_PREFIX)) != 0 || strlen(hl) > TS_PATH_MAX)
			return errorf(m->err, m->errlen, "import: %s: hard link to %.200s, outside the room",
				      mname, hl);
		if (tree_path(m, hl, false, m->link) < 0)
			return -1;
		rec.link = m->link;
	} else {
		rec.mode = archive_entry_perm(e);
		rec.uid = (uint32_t)uid;
		rec.gid = (uint32_t)gid;
		rec.mtime_sec = archive_entry_mtime(e);
		rec.mtime_nsec = (uint32_t)archive_entry_mtime_nsec(e);
		if (rec.type == TS_FILE)
			rec.size = (uint64_t)size;
		if (rec.type == TS_SYMLINK) {
			const char *t = archive_entry_symlink(e);
			if (!t || strlen(t) > TS_LINK_MAX)
				return errorf(m->err, m->errlen, "import: %s: bad symlink target", mname);
			rec.link = t;
		}
		if (entry_xattrs(m, e, mname, &rec.xattr_count) < 0)
			return -1;
		rec.xattrs = m->xattrs;
	}
	if (ts_validate_record(&m->v, &rec, why, sizeof why) < 0)
		return errorf(m->err, m->errlen, "import: %s: %s", mname, reason(why, rec.path));
	if (ts_write_record(&m->w, &rec, m->err, m->errlen) < 0)
		return -1;
	md_record(m->md, &rec);

	const void *buf;
	size_t len;
	la_int64_t off;
	int r;
	while ((r = archive_read_data_block(m->a, &buf, &len, &off)) == ARCHIVE_OK) {
		if (len == 0)
			continue;
		if (rec.type != TS_FILE)
			return errorf(m->err, m->errlen, "import: %s: a %s with data", mname,
				      rec.type == TS_HARDLINK ? "hard link" : "non-file");
		md_data(m->md, (uint64_t)off, buf, len);
		if (off >= 0 && (uint64_t)off == rec.size - 1 && len == 1 && *(const char *)buf == 0)
			continue;  /* an all-hole file's last byte (export_entry) */
		if (off < 0 || ts_validate_extent(&m->v, (uint64_t)off, len, why, sizeof why) < 0)
			return errorf(m->err, m->errlen, "import: %s: %s", mname,
				      off < 0 ? "negative offset" : reason(why, rec.path));
		if (ts_write_extent(&m->w, (uint64_t)off, buf, len, m->err, m->errlen) < 0)
			return -1;
	}
	if (r != ARCHIVE_EOF)
		return in_fail(m, mname);
	if (rec.type == TS_FILE) {
		if (ts_validate_extent(&m->v, rec.size, 0, why, sizeof why) < 0)
			return errorf(m->err, m->errlen, "import: %s: %s", mname, reason(why, rec.path));
		if (ts_write_file_end(&m->w, m->err, m->errlen) < 0)
			return -1;
	}
	md_member_end(m->md, mname);
	return 0;
}

static int import_part(struct importer *m, struct archive_entry *e, const char *name)
{
	int rank = part_rank(name);
	if (rank < 0)
		return errorf(m->err, m->errlen, "import: %.200s: not a member of a room archive", name);
	if (rank < m->last_rank || (rank <= 2 && rank == m->last_rank))
		return errorf(m->err, m->errlen, "import: %s: out of order", name);
	for (size_t i = 0; i < m->parts->n; i++)
		if (strcmp(m->parts->v[i].name, name) == 0)
			return errorf(m->err, m->errlen, "import: %s: appears twice", name);
	if (m->parts->n == ROOM_PARTS_COUNT)
		return errorf(m->err, m->errlen, "import: %s: more than %d parts", name, ROOM_PARTS_COUNT);
	m->last_rank = rank;
	unsigned char *p;
	size_t len;
	size_t left = ROOM_PARTS_MAX - m->parts_bytes;
	if (read_blob(m, e, name, left < ROOM_PART_MAX ? left : ROOM_PART_MAX, &p, &len) < 0)
		return -1;
	struct room_part *v = realloc(m->parts->v, (m->parts->n + 1) * sizeof *v);
	char *n = strdup(name);
	if (!v || !n) {
		if (v)
			m->parts->v = v;
		free(p);
		free(n);
		return errorf(m->err, m->errlen, "import: out of memory");
	}
	m->parts->v = v;
	v[m->parts->n++] = (struct room_part){ n, p, len };
	m->parts_bytes += len;
	md_blob(m->md, name, p, len);
	return 0;
}

/* The manifest read against the one expected; the first line that
 * differs names the member. */
static int check_manifest(struct importer *m, const unsigned char *got, size_t len)
{
	const char *exp;
	size_t elen, i = 0, line = 0;
	if (md_manifest(m->md, &exp, &elen) < 0)
		return errorf(m->err, m->errlen, "import: out of memory");
	if (len == elen && memcmp(got, exp, len) == 0)
		return 0;
	while (i < elen && i < len && exp[i] == (char)got[i]) {
		if (exp[i] == '\n')
			line = i + 1;
		i++;
	}
	if (line >= elen)
		return errorf(m->err, m->errlen, "import: roombox/manifest lists a member the archive lacks");
	const char *nl = memchr(exp + line, '\n', elen - line);
	int n = (int)(nl - exp - line);
	if (n > 65)
		return errorf(m->err, m->errlen, "import: roombox/manifest: member %.*s does not match",
			      n - 65 > 300 ? 300 : n - 65, exp + line + 65);
	return errorf(m->err, m->errlen, "import: roombox/manifest does not match the archive");
}

static int import_manifest(struct importer *m, struct archive_entry *e)
{
	unsigned char *p;
	size_t len;
	const char *exp;
	size_t elen;
	if (md_manifest(m->md, &exp, &elen) < 0)
		return errorf(m->err, m->errlen, "import: out of memory");
	if (read_blob(m, e, "roombox/manifest", elen + 1, &p, &len) < 0)
		return -1;
	int rc = check_manifest(m, p, len);
	free(p);
	return rc;
}

static int import_hmac(struct importer *m, struct archive_entry *e)
{
	unsigned char *p;
	size_t len;
	char want[HMAC_HEX + 1];
	if (read_blob(m, e, "roombox/manifest.hmac", HMAC_HEX + 1, &p, &len) < 0)
		return -1;
	int rc = 0;
	if (m->key && m->key->len) {
		const char *manifest;
		size_t mlen;
		if (md_manifest(m->md, &manifest, &mlen) < 0 || hmac_hex(m->key, manifest, mlen, want) < 0)
			rc = errorf(m->err, m->errlen, "import: HMAC failed");
		else if (len != HMAC_HEX + 1 || p[HMAC_HEX] != '\n' || CRYPTO_memcmp(p, want, HMAC_HEX) != 0)
			rc = errorf(m->err, m->errlen, "import: roombox/manifest.hmac: wrong HMAC");
	}
	free(p);
	return rc;
}

static int import_member(struct importer *m, struct archive_entry *e)
{
	const char *name = archive_entry_pathname(e);
	if (!name)
		return errorf(m->err, m->errlen, "import: a member without a name");
	bool is_state = strncmp(name, STATE_PREFIX, strlen(STATE_PREFIX)) == 0;
	switch (m->stage) {
	case ST_VERSION: {
		unsigned char *p;
		size_t len;
		/* checked before a byte of the room's files is passed on */
		if (archive_filter_code(m->a, 0) != ARCHIVE_FILTER_ZSTD)
			return errorf(m->err, m->errlen, "import: not a zstd-compressed archive");
		if (strcmp(name, "roombox/version") != 0)
			return errorf(m->err, m->errlen, "import: %.200s: the archive must start with roombox/version", name);
		if (read_blob(m, e, name, 64, &p, &len) < 0)
			return -1;
		/* the version the lead frame said (none: 1) */
		const char *want = m->src.seal->version == 2 ? ROOM_ARCHIVE_VERSION : ROOM_ARCHIVE_VERSION_1;
		bool ok = len == strlen(want) && memcmp(p, want, len) == 0;
		if (ok)
			md_blob(m->md, name, p, len);
		free(p);
		if (!ok)
			return errorf(m->err, m->errlen, "import: roombox/version: not a version this reads, or not the one its first frame says");
		m->stage = ST_STATE;
		return 0;
	}
	case ST_STATE:
		if (is_state)
			return import_state(m, e, name);
		m->stage = ST_PARTS;
		/* fall through */
	case ST_PARTS:
		if (is_state)
			return errorf(m->err, m->errlen, "import: %.200s: after the room's other parts", name);
		if (strcmp(name, "roombox/manifest") == 0) {
			if (import_manifest(m, e) < 0)
				return -1;
			m->stage = ST_HMAC;
			return 0;
		}
		return import_part(m, e, name);
	case ST_HMAC:
		if (strcmp(name, "roombox/manifest.hmac") != 0)
			return errorf(m->err, m->errlen, "import: %.200s: after the manifest", name);
		if (import_hmac(m, e) < 0)
			return -1;
		m->stage = ST_DONE;
		return 0;
	case ST_DONE:
		break;
	}
	return errorf(m->err, m->errlen, "import: %.200s: after the manifest", name);
}

int archive_to_tree(int in_fd, int tree_fd, uint64_t budget, const struct room_key *key,
		    struct room_parts *parts, char *err, size_t errlen)
{
	return archive_to_tree_digested(in_fd, tree_fd, budget, key, NULL, NULL, parts, err, errlen);
}

int archive_to_tree_digested(int in_fd, int tree_fd, uint64_t budget, const struct room_key *key,
			     room_digest_fn *digest, void *digest_ctx, struct room_parts *parts,
			     char *err, size_t errlen)
{
	/* on the heap: the source's buffer is large */
	struct importer *m = calloc(1, sizeof *m);
	if (!m)
		return errorf(err, errlen, "import: out of memory");
	*m = (struct importer){ .parts = parts, .key = key, .last_rank = -1, .err = err, .errlen = errlen };
	struct ts_limits lim = ts_limits_for_disk(budget);
	struct archive_entry *e;
	int rc = -1;

	parts->v = NULL;
	parts->n = 0;
	m->src.fd = in_fd;
	m->src.seal = room_sealer_new();
	m->src.digest = digest;
	m->src.digest_ctx = digest_ctx;
	m->a = archive_read_new();
	if (!m->a || !m->src.seal ||
	    !(m->md = md_new()) || ts_validator_init(&m->v, &lim) < 0 ||
	    ts_writer_init(&m->w, tree_fd) < 0) {
		errorf(err, errlen, "import: out of memory");
		goto out;
	}
	if (archive_read_support_filter_zstd(m->a) != ARCHIVE_OK ||
	    archive_read_support_format_tar(m->a) != ARCHIVE_OK ||
	    archive_read_open(m->a, &m->src, NULL, source_read, NULL) != ARCHIVE_OK) {
		in_fail(m, "(start)");
		goto out;
	}
	for (;;) {
		int r = archive_read_next_header(m->a, &e);
		if (r == ARCHIVE_EOF)
			break;
		if (r != ARCHIVE_OK) {
			/* a warning is as bad: it means libarchive guessed */
			in_fail(m, m->stage == ST_VERSION ? "(start)" : "after the last good member");
			goto out;
		}
		if (import_member(m, e) < 0)
			goto out;
	}
	if (m->stage < ST_HMAC) {
		errorf(err, errlen, "import: the archive ends before its manifest (truncated?)");
		goto out;
	}
	if (m->stage == ST_HMAC && key && key->len) {
		errorf(err, errlen, "import: roombox/manifest.hmac: missing, and a key is set");
		goto out;
	}
	if (check_seal(m) < 0)
		goto out;
	char why[512];
	if (ts_validate_end(&m->v, why, sizeof why) < 0) {
		errorf(err, errlen, "import: %s", why);
		goto out;
	}
	if (ts_write_end(&m->w, err, errlen) < 0)
		goto out;
	rc = 0;
out:
	if (rc < 0)
		room_parts_free(parts);
	if (m->a)
		archive_read_free(m->a);
	ts_writer_free(&m->w);
	ts_validator_free(&m->v);
	md_free(m->md);
	room_sealer_free(m->src.seal);
	free(m);
	return rc;
}
