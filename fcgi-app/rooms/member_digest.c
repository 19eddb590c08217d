/* The manifest's digests on a thread of their own (member_digest.h).
 *
 * One producer (the codec), one consumer (the hasher): the bytes a digest
 * covers go into a ring, each piece announced by a job (what it is, where
 * in the ring, the file offset of data), in member order.  Ring positions
 * are counted from the start and never wrap in the counters, only in the
 * index; a piece that must be contiguous (a member's name) skips to the
 * ring's start, and the hasher frees up to the end of each job it is done
 * with, skipped bytes included.  Until MD_THREAD_AT bytes of data have
 * come, each job runs at once in the caller (no copy, no thread): most
 * archives a test or a fuzzer makes, and small rooms, never start one. */
#include "member_digest.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MANIFEST_HEAD "roombox-manifest 1\n"
#define MD_RING       (8u << 20)   /* bytes queued for the hasher */
#define MD_JOBS       1024         /* jobs queued */
#define MD_PIECE      (1u << 20)   /* the most one job carries */
#define MD_THREAD_AT  (4u << 20)   /* data bytes before the hasher starts */

/* ---- the manifest's text ---- */

struct buf {
	char *p;
	size_t len, cap;
};

static int buf_add(struct buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t c = b->cap ? b->cap : 65536;
		while (c < b->len + n)
			c *= 2;
		char *q = realloc(b->p, c);
		if (!q)
			return -1;
		b->p = q;
		b->cap = c;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
	return 0;
}

void md_hex(const unsigned char *p, size_t n, char *out)
{
	static const char hx[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hx[p[i] >> 4];
		out[2 * i + 1] = hx[p[i] & 15];
	}
	out[2 * n] = '\0';
}

/* "<hex> <name>\n", the name's control bytes and backslashes as \xHH so a
 * line is a line whatever a file is called. */
static int manifest_add(struct buf *m, const unsigned char dg[32], const char *name, size_t nlen)
{
	char hex[65], esc[8];
	md_hex(dg, 32, hex);
	if (buf_add(m, hex, 64) < 0 || buf_add(m, " ", 1) < 0)
		return -1;
	for (size_t i = 0; i < nlen; i++) {
		unsigned char c = (unsigned char)name[i];
		int r;
		if (c < 0x20 || c == 0x7f || c == '\\') {
			snprintf(esc, sizeof esc, "\\x%02x", c);
			r = buf_add(m, esc, 4);
		} else {
			r = buf_add(m, &c, 1);
		}
		if (r < 0)
			return -1;
	}
	return buf_add(m, "\n", 1);
}

/* ---- one member's digest (the format's definition) ---- */

struct digest {
	EVP_MD_CTX *meta, *data, *map;
	bool in_extent;
	uint64_t ext_off, ext_end;
};

static void digest_begin(struct digest *d)
{
	EVP_DigestInit_ex(d->meta, EVP_sha256(), NULL);
	EVP_DigestInit_ex(d->data, EVP_sha256(), NULL);
	EVP_DigestInit_ex(d->map, EVP_sha256(), NULL);
	d->in_extent = false;
}

static void digest_close_extent(struct digest *d)
{
	char line[48];
	if (!d->in_extent)
		return;
	int n = snprintf(line, sizeof line, "%llu %llu\n", (unsigned long long)d->ext_off,
			 (unsigned long long)(d->ext_end - d->ext_off));
	EVP_DigestUpdate(d->map, line, (size_t)n);
	d->in_extent = false;
}

static void digest_data(struct digest *d, uint64_t off, const void *p, size_t len)
{
	if (len == 0)
		return;
	if (d->in_extent && off != d->ext_end)
		digest_close_extent(d);
	if (!d->in_extent) {
		d->in_extent = true;
		d->ext_off = off;
	}
	d->ext_end = off + len;
	EVP_DigestUpdate(d->data, p, len);
}

static void digest_final(struct digest *d, unsigned char out[32])
{
	unsigned char h[32];
	unsigned n;
	digest_close_extent(d);
	EVP_DigestFinal_ex(d->data, h, &n);
	EVP_DigestUpdate(d->meta, h, sizeof h);
	EVP_DigestFinal_ex(d->map, h, &n);
	EVP_DigestUpdate(d->meta, h, sizeof h);
	EVP_DigestFinal_ex(d->meta, out, &n);
}

/* What a record means to a room, as its digest starts: type, mode,
 * owners, mtime, size, path, link target, xattrs by name. */
static int record_meta(struct buf *b, const struct ts_record *rec)
{
	char line[160];
	int n = snprintf(line, sizeof line, "%d %o %u %u %lld.%09u %llu\n", (int)rec->type, rec->mode,
			 rec->uid, rec->gid, (long long)rec->mtime_sec, rec->mtime_nsec,
			 (unsigned long long)rec->size);
	b->len = 0;
	if (buf_add(b, line, (size_t)n) < 0 || buf_add(b, rec->path, strlen(rec->path) + 1) < 0 ||
	    buf_add(b, rec->link, strlen(rec->link) + 1) < 0)
		return -1;
	for (unsigned i = 0; i < rec->xattr_count; i++) {
		n = snprintf(line, sizeof line, "%u\n", rec->xattrs[i].len);
		if (buf_add(b, rec->xattrs[i].name, strlen(rec->xattrs[i].name) + 1) < 0 ||
		    buf_add(b, line, (size_t)n) < 0 ||
		    buf_add(b, rec->xattrs[i].value, rec->xattrs[i].len) < 0)
			return -1;
	}
	return 0;
}

/* ---- the queue ---- */

enum job_kind { J_BEGIN, J_META, J_DATA, J_END };

struct job {
	enum job_kind kind;
	uint64_t pos;     /* where its bytes start in the ring (a count from 0) */
	size_t len;
	uint64_t off;     /* J_DATA: the bytes' offset in the file */
};

struct md_queue {
	struct digest d;
	struct buf manifest, scratch;
	bool oom;
	uint64_t data_seen;
	/* the hasher, once started */
	bool threaded, stop;
	pthread_t th;
	pthread_mutex_t lock;
	pthread_cond_t work, space;
	unsigned char *ring;
	uint64_t head, tail;      /* bytes given, bytes freed */
	struct job jobs[MD_JOBS];
	uint64_t jhead, jtail;    /* jobs given, jobs done */
};

static void run_job(struct md_queue *q, const struct job *j, const unsigned char *p)
{
	unsigned char dg[32];
	switch (j->kind) {
	case J_BEGIN:
		digest_begin(&q->d);
		break;
	case J_META:
		EVP_DigestUpdate(q->d.meta, p, j->len);
		break;
	case J_DATA:
		digest_data(&q->d, j->off, p, j->len);
		break;
	case J_END:
		digest_final(&q->d, dg);
		if (manifest_add(&q->manifest, dg, (const char *)p, j->len) < 0)
			q->oom = true;
		break;
	}
}

static void *hasher(void *arg)
{
	struct md_queue *q = arg;
	pthread_mutex_lock(&q->lock);
	for (;;) {
		while (q->jtail == q->jhead && !q->stop)
			pthread_cond_wait(&q->work, &q->lock);
		if (q->jtail == q->jhead)
			break;
		struct job j = q->jobs[q->jtail % MD_JOBS];
		pthread_mutex_unlock(&q->lock);
		run_job(q, &j, q->ring + j.pos % MD_RING);
		pthread_mutex_lock(&q->lock);
		q->jtail++;
		q->tail = j.pos + j.len;
		pthread_cond_signal(&q->space);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

static void start_hasher(struct md_queue *q)
{
	q->ring = malloc(MD_RING);
	if (!q->ring)
		return;   /* inline, then */
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->work, NULL);
	pthread_cond_init(&q->space, NULL);
	if (pthread_create(&q->th, NULL, hasher, q) != 0) {
		pthread_mutex_destroy(&q->lock);
		pthread_cond_destroy(&q->work);
		pthread_cond_destroy(&q->space);
		free(q->ring);
		q->ring = NULL;
		return;
	}
	q->threaded = true;
}

/* One job with len bytes from p (at most MD_PIECE), contiguous in the
 * ring: inline, or queued once there is room. */
static void push(struct md_queue *q, enum job_kind kind, uint64_t off, const void *p, size_t len)
{
	struct job j = { kind, 0, len, off };
	if (!q->threaded) {
		run_job(q, &j, p);
		return;
	}
	uint64_t pos = q->head;
	if (pos % MD_RING + len > MD_RING)
		pos += MD_RING - pos % MD_RING;   /* to the ring's start */
	pthread_mutex_lock(&q->lock);
	while (q->jhead - q->jtail == MD_JOBS || pos + len - q->tail > MD_RING)
		pthread_cond_wait(&q->space, &q->lock);
	pthread_mutex_unlock(&q->lock);
	/* the hasher reads only what jobs announce: these bytes are ours */
	memcpy(q->ring + pos % MD_RING, p, len);
	j.pos = pos;
	pthread_mutex_lock(&q->lock);
	q->jobs[q->jhead % MD_JOBS] = j;
	q->jhead++;
	q->head = pos + len;
	pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->lock);
}

/* Bytes in pieces: no piece wraps the ring or exceeds MD_PIECE. */
static void push_bytes(struct md_queue *q, enum job_kind kind, uint64_t off, const unsigned char *p,
		       size_t len)
{
	while (len > 0) {
		size_t k = len < MD_PIECE ? len : MD_PIECE;
		if (q->threaded && MD_RING - q->head % MD_RING < k)
			k = MD_RING - q->head % MD_RING;
		push(q, kind, off, p, k);
		p += k;
		off += k;
		len -= k;
	}
}

struct md_queue *md_new(void)
{
	struct md_queue *q = calloc(1, sizeof *q);
	if (!q)
		return NULL;
	q->d.meta = EVP_MD_CTX_new();
	q->d.data = EVP_MD_CTX_new();
	q->d.map = EVP_MD_CTX_new();
	if (!q->d.meta || !q->d.data || !q->d.map ||
	    buf_add(&q->manifest, MANIFEST_HEAD, strlen(MANIFEST_HEAD)) < 0) {
		md_free(q);
		return NULL;
	}
	return q;
}

/* Every job given so far done (the hasher idle after). */
static void drain(struct md_queue *q)
{
	if (!q->threaded)
		return;
	pthread_mutex_lock(&q->lock);
	while (q->jtail != q->jhead)
		pthread_cond_wait(&q->space, &q->lock);
	pthread_mutex_unlock(&q->lock);
}

void md_free(struct md_queue *q)
{
	if (!q)
		return;
	if (q->threaded) {
		pthread_mutex_lock(&q->lock);
		q->stop = true;
		pthread_cond_signal(&q->work);
		pthread_mutex_unlock(&q->lock);
		pthread_join(q->th, NULL);
		pthread_mutex_destroy(&q->lock);
		pthread_cond_destroy(&q->work);
		pthread_cond_destroy(&q->space);
	}
	EVP_MD_CTX_free(q->d.meta);
	EVP_MD_CTX_free(q->d.data);
	EVP_MD_CTX_free(q->d.map);
	free(q->ring);
	free(q->manifest.p);
	free(q->scratch.p);
	free(q);
}

void md_record(struct md_queue *q, const struct ts_record *rec)
{
	push(q, J_BEGIN, 0, NULL, 0);
	if (record_meta(&q->scratch, rec) < 0) {
		q->oom = true;
		return;
	}
	push_bytes(q, J_META, 0, (const unsigned char *)q->scratch.p, q->scratch.len);
}

void md_data(struct md_queue *q, uint64_t off, const void *p, size_t len)
{
	if (len == 0)
		return;
	q->data_seen += len;
	if (!q->threaded && q->data_seen >= MD_THREAD_AT)
		start_hasher(q);
	push_bytes(q, J_DATA, off, p, len);
}

void md_member_end(struct md_queue *q, const char *name)
{
	push(q, J_END, 0, name, strlen(name));
}

void md_blob(struct md_queue *q, const char *name, const void *p, size_t len)
{
	unsigned char dg[32];
	unsigned n;
	drain(q);   /* the manifest is this thread's now */
	EVP_Digest(p, len, dg, &n, EVP_sha256(), NULL);
	if (manifest_add(&q->manifest, dg, name, strlen(name)) < 0)
		q->oom = true;
}

int md_manifest(struct md_queue *q, const char **manifest, size_t *len)
{
	drain(q);
	*manifest = q->manifest.p;
	*len = q->manifest.len;
	return q->oom ? -1 : 0;
}
