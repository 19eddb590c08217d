/* The tree stream's encoder and its decoder/validator (treestream.h).
 *
 * libc only: the keeper, a static musl program, links it.  Both ends
 * buffer their fd in 1 MiB so a stream of many small records costs few
 * system calls; a file's data can go from its fd to a pipe by splice
 * (the export's walk), with no copy through the walker's memory.  The decoder holds every path it has seen (in one arena
 * behind an open-addressing table) to check parents, duplicates and hard
 * link targets; TS_PATHS_MAX and the entry limit bound that memory. */
#include "treestream.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errbuf.h"

#define TS_IO_BUF (1u << 20)

struct ts_limits ts_limits_for_disk(uint64_t disk_bytes)
{
	struct ts_limits l = { disk_bytes, disk_bytes / TS_BYTES_PER_INODE };
	return l;
}

/* ---- little-endian fields ---- */

static void put32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void put64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static uint64_t get64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

/* ---- shared checks ---- */

int ts_check_path(const char *path, size_t len, char *err, size_t errlen)
{
	if (len == 0 || len > TS_PATH_MAX)
		return errorf(err, errlen, "path length %zu out of range", len);
	if (memchr(path, '\0', len))
		return errorf(err, errlen, "path holds a NUL byte");
	if (len == 1 && path[0] == '.')
		return 0;
	if (path[0] == '/')
		return errorf(err, errlen, "absolute path");
	size_t start = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i < len && path[i] != '/')
			continue;
		size_t n = i - start;
		if (n == 0)
			return errorf(err, errlen, "empty path component");
		if (n == 1 && path[start] == '.')
			return errorf(err, errlen, "\".\" component");
		if (n == 2 && path[start] == '.' && path[start + 1] == '.')
			return errorf(err, errlen, "\"..\" component");
		if (n > 255)
			return errorf(err, errlen, "path component longer than 255 bytes");
		start = i + 1;
	}
	return 0;
}

int ts_check_xattr_name(const char *name)
{
	size_t n = strlen(name);
	if (n == 0 || n > TS_XATTR_NAME_MAX)
		return -1;
	/* user data, file capabilities and ACLs: what a room's root can set
	 * in its own user namespace; trusted.* and security.* modules' labels
	 * are the host's business. */
	if (strncmp(name, "user.", 5) == 0 && n > 5)
		return 0;
	if (strcmp(name, "security.capability") == 0 || strcmp(name, TS_XATTR_OPAQUE) == 0 ||
	    strcmp(name, "system.posix_acl_access") == 0 ||
	    strcmp(name, "system.posix_acl_default") == 0)
		return 0;
	return -1;
}

static const char *type_name(enum ts_type t)
{
	switch (t) {
	case TS_END: return "end";
	case TS_DIR: return "directory";
	case TS_FILE: return "file";
	case TS_SYMLINK: return "symlink";
	case TS_HARDLINK: return "hard link";
	case TS_FIFO: return "fifo";
	case TS_WHITEOUT: return "whiteout";
	}
	return "unknown";
}

/* ---- encoder ---- */

int ts_writer_init(struct ts_writer *w, int fd)
{
	memset(w, 0, sizeof *w);
	w->fd = fd;
	w->cap = TS_IO_BUF;
	w->buf = malloc(w->cap);
	return w->buf ? 0 : -1;
}

void ts_writer_free(struct ts_writer *w)
{
	free(w->buf);
	w->buf = NULL;
}

int ts_writer_flush(struct ts_writer *w, char *err, size_t errlen)
{
	size_t off = 0;
	while (off < w->len) {
		ssize_t n = write(w->fd, w->buf + off, w->len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			int e = n < 0 ? errno : EIO;
			w->len = 0;
			return errorf(err, errlen, "tree stream: write: %s", strerror(e));
		}
		off += (size_t)n;
	}
	w->len = 0;
	return 0;
}

static int put_bytes(struct ts_writer *w, const void *p, size_t n, char *err, size_t errlen)
{
	const unsigned char *s = p;
	if (n >= w->cap) {
		/* a large extent goes out as it is, not through the buffer */
		if (ts_writer_flush(w, err, errlen) < 0)
			return -1;
		while (n > 0) {
			ssize_t k = write(w->fd, s, n);
			if (k < 0 && errno == EINTR)
				continue;
			if (k <= 0)
				return errorf(err, errlen, "tree stream: write: %s", strerror(k < 0 ? errno : EIO));
			s += k;
			n -= (size_t)k;
		}
		return 0;
	}
	while (n > 0) {
		if (w->len == w->cap && ts_writer_flush(w, err, errlen) < 0)
			return -1;
		size_t k = w->cap - w->len < n ? w->cap - w->len : n;
		memcpy(w->buf + w->len, s, k);
		w->len += k;
		s += k;
		n -= k;
	}
	return 0;
}

int ts_write_record(struct ts_writer *w, const struct ts_record *rec, char *err, size_t errlen)
{
	char why[128];
	size_t plen = strlen(rec->path), llen = strlen(rec->link);
	if (w->in_file)
		return errorf(err, errlen, "%s: file data not ended", w->path);
	if (ts_check_path(rec->path, plen, why, sizeof why) < 0)
		return errorf(err, errlen, "%s: %s", rec->path, why);
	if (rec->type < TS_DIR || rec->type > TS_TYPE_LAST)
		return errorf(err, errlen, "%s: unknown type %d", rec->path, (int)rec->type);
	if (rec->mode > 07777 || rec->uid > TS_ID_MAX || rec->gid > TS_ID_MAX)
		return errorf(err, errlen, "%s: mode or owner out of range", rec->path);
	if (llen > TS_LINK_MAX || (llen == 0) != (rec->type != TS_SYMLINK && rec->type != TS_HARDLINK))
		return errorf(err, errlen, "%s: bad link target", rec->path);
	if (rec->xattr_count > TS_XATTRS_MAX)
		return errorf(err, errlen, "%s: more than %d xattrs", rec->path, TS_XATTRS_MAX);
	uint32_t xbytes = 0;
	for (unsigned i = 0; i < rec->xattr_count; i++) {
		const struct ts_xattr *x = &rec->xattrs[i];
		if (ts_check_xattr_name(x->name) < 0 || x->len > TS_XATTR_VALUE_MAX)
			return errorf(err, errlen, "%s: xattr %s not allowed", rec->path, x->name);
		if (i > 0 && strcmp(rec->xattrs[i - 1].name, x->name) >= 0)
			return errorf(err, errlen, "%s: xattrs not sorted", rec->path);
		xbytes += 8 + (uint32_t)strlen(x->name) + x->len;
	}

	unsigned char h[TS_HEADER_SIZE] = { 0 };
	put32(h, TS_MAGIC);
	h[4] = (unsigned char)rec->type;
	put32(h + 8, rec->mode);
	put32(h + 12, rec->uid);
	put32(h + 16, rec->gid);
	put32(h + 20, (uint32_t)plen);
	put32(h + 24, (uint32_t)llen);
	put32(h + 28, rec->xattr_count);
	put64(h + 32, (uint64_t)rec->mtime_sec);
	put32(h + 40, rec->mtime_nsec);
	put32(h + 44, xbytes);
	put64(h + 48, rec->type == TS_FILE ? rec->size : 0);
	if (rec->type == TS_FILE && rec->has_map) {
		if (rec->map_count > TS_MAP_MAX)
			return errorf(err, errlen, "%s: more than %d extents", rec->path, TS_MAP_MAX);
		h[5] = TS_F_MAP;
		put32(h + 56, rec->map_count);
	}
	if (put_bytes(w, h, sizeof h, err, errlen) < 0 ||
	    put_bytes(w, rec->path, plen, err, errlen) < 0 ||
	    put_bytes(w, rec->link, llen, err, errlen) < 0)
		return -1;
	for (unsigned i = 0; i < rec->xattr_count; i++) {
		const struct ts_xattr *x = &rec->xattrs[i];
		unsigned char l[8];
		put32(l, (uint32_t)strlen(x->name));
		put32(l + 4, x->len);
		if (put_bytes(w, l, 8, err, errlen) < 0 ||
		    put_bytes(w, x->name, strlen(x->name), err, errlen) < 0 ||
		    put_bytes(w, x->value, x->len, err, errlen) < 0)
			return -1;
	}
	for (unsigned i = 0; rec->type == TS_FILE && rec->has_map && i < rec->map_count; i++) {
		unsigned char e[16];
		put64(e, rec->map[i].offset);
		put64(e + 8, rec->map[i].len);
		if (put_bytes(w, e, sizeof e, err, errlen) < 0)
			return -1;
	}
	if (rec->type == TS_FILE) {
		w->in_file = true;
		w->file_size = rec->size;
		w->file_pos = 0;
		memcpy(w->path, rec->path, plen + 1);
	}
	return 0;
}

static int put_frame(struct ts_writer *w, uint64_t offset, uint64_t len, char *err, size_t errlen)
{
	unsigned char f[16];
	put64(f, offset);
	put64(f + 8, len);
	return put_bytes(w, f, sizeof f, err, errlen);
}

/* An extent may be written: 1 yes, 0 nothing to write, -1 with err. */
static int extent_ok(const struct ts_writer *w, uint64_t offset, size_t len, char *err, size_t errlen)
{
	if (!w->in_file)
		return errorf(err, errlen, "tree stream: data outside a file");
	if (len == 0)
		return 0;
	if (offset < w->file_pos || offset > w->file_size || len > w->file_size - offset)
		return errorf(err, errlen, "%s: extent %llu+%zu out of order or past the size",
			      w->path, (unsigned long long)offset, len);
	return 1;
}

int ts_write_extent(struct ts_writer *w, uint64_t offset, const void *data, size_t len,
		    char *err, size_t errlen)
{
	int ok = extent_ok(w, offset, len, err, errlen);
	if (ok <= 0)
		return ok;
	if (put_frame(w, offset, len, err, errlen) < 0 || put_bytes(w, data, len, err, errlen) < 0)
		return -1;
	w->file_pos = offset + len;
	return 0;
}

/* len raw bytes of fd from off into the stream's fd, spliced while it
 * can be; then read through w->buf (empty: just flushed), zeros once fd
 * ends.  0, or -1 with err. */
static int copy_from(struct ts_writer *w, int fd, uint64_t off, size_t len, char *err, size_t errlen)
{
	bool at_end = false;
	while (len > 0) {
		ssize_t n;
		if (w->to_pipe > 0 && !at_end) {
			loff_t o = (loff_t)off;
			n = splice(fd, &o, w->fd, NULL, len, SPLICE_F_MORE);
			if (n > 0) {
				off += (uint64_t)n;
				len -= (size_t)n;
				continue;
			}
			if (n == 0) {
				at_end = true;
				continue;
			}
			if (errno == EINTR)
				continue;
			if (errno != EINVAL && errno != ENOSYS)
				return errorf(err, errlen, "%s: splice: %s", w->path, strerror(errno));
			w->to_pipe = -1;   /* this file system cannot: read it */
		}
		size_t k = len < w->cap ? len : w->cap;
		n = at_end ? 0 : pread(fd, w->buf, k, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errorf(err, errlen, "%s: read: %s", w->path, strerror(errno));
		if (n == 0) {
			at_end = true;
			memset(w->buf, 0, k);
			n = (ssize_t)k;
		}
		w->len = (size_t)n;
		if (ts_writer_flush(w, err, errlen) < 0)
			return -1;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int ts_write_extent_from(struct ts_writer *w, uint64_t offset, int fd, size_t len,
			 char *err, size_t errlen)
{
	int ok = extent_ok(w, offset, len, err, errlen);
	if (ok <= 0)
		return ok;
	if (!w->to_pipe) {
		struct stat st;
		w->to_pipe = fstat(w->fd, &st) == 0 && S_ISFIFO(st.st_mode) ? 1 : -1;
	}
	if (put_frame(w, offset, len, err, errlen) < 0 || ts_writer_flush(w, err, errlen) < 0 ||
	    copy_from(w, fd, offset, len, err, errlen) < 0)
		return -1;
	w->file_pos = offset + len;
	return 0;
}

int ts_write_file_end(struct ts_writer *w, char *err, size_t errlen)
{
	if (!w->in_file)
		return errorf(err, errlen, "tree stream: no file to end");
	w->in_file = false;
	return put_frame(w, w->file_size, 0, err, errlen);
}

int ts_write_end(struct ts_writer *w, char *err, size_t errlen)
{
	unsigned char h[TS_HEADER_SIZE] = { 0 };
	if (w->in_file)
		return errorf(err, errlen, "%s: file data not ended", w->path);
	put32(h, TS_MAGIC);
	if (put_bytes(w, h, sizeof h, err, errlen) < 0)
		return -1;
	return ts_writer_flush(w, err, errlen);
}

/* ---- the decoder's set of paths ---- */

struct ts_slot {
	uint64_t hash;
	uint32_t off, len;     /* in the arena; len 0: empty slot */
	uint8_t type;
};

struct ts_pathset {
	struct ts_slot *slots;
	size_t nslots, used;
	char *arena;
	size_t alen, acap;
};

static uint64_t hash_bytes(const char *s, size_t n)
{
	uint64_t h = 14695981039346656037ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
	return h;
}

static struct ts_slot *set_find(struct ts_pathset *s, const char *p, size_t n, uint64_t h)
{
	size_t mask = s->nslots - 1;
	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct ts_slot *e = &s->slots[i];
		if (e->len == 0)
			return e;
		if (e->hash == h && e->len == n && memcmp(s->arena + e->off, p, n) == 0)
			return e;
	}
}

static int set_grow(struct ts_pathset *s)
{
	size_t n = s->nslots ? s->nslots * 2 : 1024;
	struct ts_slot *ns = calloc(n, sizeof *ns), *old = s->slots;
	size_t oldn = s->nslots;
	if (!ns)
		return -1;
	s->slots = ns;
	s->nslots = n;
	for (size_t i = 0; i < oldn; i++)
		if (old[i].len)
			*set_find(s, s->arena + old[i].off, old[i].len, old[i].hash) = old[i];
	free(old);
	return 0;
}

/* The type recorded for p, or -1 when p was not seen. */
static int set_lookup(struct ts_pathset *s, const char *p, size_t n)
{
	if (!s->nslots)
		return -1;
	struct ts_slot *e = set_find(s, p, n, hash_bytes(p, n));
	return e->len ? e->type : -1;
}

static int set_add(struct ts_pathset *s, const char *p, size_t n, enum ts_type t)
{
	if ((s->used + 1) * 2 > s->nslots && set_grow(s) < 0)
		return -1;
	if (s->alen + n > TS_PATHS_MAX)
		return -1;
	if (s->alen + n > s->acap) {
		size_t c = s->acap ? s->acap : 65536;
		while (c < s->alen + n)
			c *= 2;
		char *a = realloc(s->arena, c);
		if (!a)
			return -1;
		s->arena = a;
		s->acap = c;
	}
	memcpy(s->arena + s->alen, p, n);
	uint64_t h = hash_bytes(p, n);
	struct ts_slot *e = set_find(s, p, n, h);
	e->hash = h;
	e->off = (uint32_t)s->alen;
	e->len = (uint32_t)n;
	e->type = (uint8_t)t;
	s->alen += n;
	s->used++;
	return 0;
}

static void set_free(struct ts_pathset *s)
{
	if (!s)
		return;
	free(s->slots);
	free(s->arena);
	free(s);
}

/* ---- validator ---- */

int ts_validator_init(struct ts_validator *v, const struct ts_limits *lim)
{
	memset(v, 0, sizeof *v);
	v->lim = *lim;
	v->seen = calloc(1, sizeof *v->seen);
	return v->seen ? 0 : -1;
}

void ts_validator_free(struct ts_validator *v)
{
	set_free(v->seen);
	free(v->map);
	v->seen = NULL;
	v->map = NULL;
}

static int charge(struct ts_validator *v, uint64_t bytes, char *err, size_t errlen)
{
	if (bytes > v->lim.bytes - v->used_bytes)
		return errorf(err, errlen, "%s: over the byte budget of %llu", v->path,
			      (unsigned long long)v->lim.bytes);
	v->used_bytes += bytes;
	return 0;
}

/* The parent of path (len bytes) must be an earlier directory. */
static int check_parent(struct ts_validator *v, const char *path, size_t len, char *err, size_t errlen)
{
	const char *slash = NULL;
	for (size_t i = len; i-- > 0;)
		if (path[i] == '/') {
			slash = path + i;
			break;
		}
	int t = slash ? set_lookup(v->seen, path, (size_t)(slash - path)) : set_lookup(v->seen, ".", 1);
	if (t != TS_DIR)
		return errorf(err, errlen, "%s: parent is %s", path,
			      t < 0 ? "not an earlier entry" : type_name((enum ts_type)t));
	return 0;
}

static int check_xattrs(const struct ts_record *rec, uint64_t *bytes, char *err, size_t errlen)
{
	*bytes = 0;
	if (rec->xattr_count > TS_XATTRS_MAX)
		return errorf(err, errlen, "%s: more than %d xattrs", rec->path, TS_XATTRS_MAX);
	for (unsigned i = 0; i < rec->xattr_count; i++) {
		const struct ts_xattr *x = &rec->xattrs[i];
		if (ts_check_xattr_name(x->name) < 0)
			return errorf(err, errlen, "%s: xattr \"%.255s\" not allowed", rec->path, x->name);
		if (x->len > TS_XATTR_VALUE_MAX)
			return errorf(err, errlen, "%s: xattr %s longer than %d bytes", rec->path, x->name,
				      TS_XATTR_VALUE_MAX);
		/* the overlay's own mark: "y" on a directory, nothing else, so
		 * no other meaning of it (a redirect, an origin) can come in */
		if (strcmp(x->name, TS_XATTR_OPAQUE) == 0 &&
		    (rec->type != TS_DIR || x->len != 1 || x->value[0] != 'y'))
			return errorf(err, errlen, "%s: xattr %s other than \"y\" on a directory", rec->path,
				      x->name);
		if (i > 0 && strcmp(rec->xattrs[i - 1].name, x->name) >= 0)
			return errorf(err, errlen, "%s: xattrs not sorted or repeated", rec->path);
		*bytes += 8 + strlen(x->name) + x->len;
	}
	return 0;
}

static int check_map(const struct ts_record *rec, char *err, size_t errlen)
{
	uint64_t end = 0;
	if (rec->type != TS_FILE)
		return errorf(err, errlen, "%s: an extent map on a %s", rec->path, type_name(rec->type));
	if (rec->map_count > TS_MAP_MAX)
		return errorf(err, errlen, "%s: more than %d extents", rec->path, TS_MAP_MAX);
	for (unsigned i = 0; i < rec->map_count; i++) {
		const struct ts_extent *e = &rec->map[i];
		if (e->len == 0 || e->offset < end || e->offset > rec->size || e->len > rec->size - e->offset)
			return errorf(err, errlen, "%s: extent map entry %u out of order or past the size",
				      rec->path, i);
		end = e->offset + e->len;
	}
	return 0;
}

int ts_validate_record(struct ts_validator *v, const struct ts_record *rec, char *err, size_t errlen)
{
	char why[128];
	size_t plen = strnlen(rec->path, TS_PATH_MAX + 1), llen = strnlen(rec->link, TS_LINK_MAX + 1);
	enum ts_type t = rec->type;
	uint64_t xbytes;

	if (v->ended)
		return errorf(err, errlen, "tree stream: an entry after its end");
	if (v->in_file)
		return errorf(err, errlen, "%s: file data not ended", v->path);
	if (ts_check_path(rec->path, plen, why, sizeof why) < 0)
		return errorf(err, errlen, "%.200s: %s", rec->path, why);
	memcpy(v->path, rec->path, plen + 1);
	if (t < TS_DIR || t > TS_TYPE_LAST)
		return errorf(err, errlen, "%s: unknown type %d", rec->path, (int)t);
	if (rec->mode > 07777)
		return errorf(err, errlen, "%s: mode %o has bits beyond 07777", rec->path, rec->mode);
	if (rec->uid > TS_ID_MAX || rec->gid > TS_ID_MAX)
		return errorf(err, errlen, "%s: owner %u:%u beyond 65535", rec->path, rec->uid, rec->gid);
	if (rec->mtime_nsec >= 1000000000u)
		return errorf(err, errlen, "%s: bad mtime", rec->path);
	if (t != TS_FILE && rec->size)
		return errorf(err, errlen, "%s: a %s with a size", rec->path, type_name(t));
	bool is_root = plen == 1 && rec->path[0] == '.';
	if (is_root != (v->entries == 0) || (is_root && t != TS_DIR))
		return errorf(err, errlen, "%s: the root directory \".\" must come first, once", rec->path);
	bool linked = t == TS_SYMLINK || t == TS_HARDLINK;
	if (linked ? (llen == 0 || llen > TS_LINK_MAX) : llen != 0)
		return errorf(err, errlen, "%s: link target length %zu", rec->path, llen);
	if (check_xattrs(rec, &xbytes, err, errlen) < 0)
		return -1;
	if (v->entries >= v->lim.entries)
		return errorf(err, errlen, "%s: more than %llu entries", rec->path,
			      (unsigned long long)v->lim.entries);
	if (!is_root) {
		if (set_lookup(v->seen, rec->path, plen) >= 0)
			return errorf(err, errlen, "%s: appears twice", rec->path);
		if (check_parent(v, rec->path, plen, err, errlen) < 0)
			return -1;
	}
	if (t == TS_HARDLINK) {
		if (ts_check_path(rec->link, llen, why, sizeof why) < 0)
			return errorf(err, errlen, "%s: hard link target %.200s: %s", rec->path, rec->link, why);
		if (set_lookup(v->seen, rec->link, llen) != TS_FILE)
			return errorf(err, errlen, "%s: hard link to %.200s, not an earlier file",
				      rec->path, rec->link);
	}
	if (rec->has_map && check_map(rec, err, errlen) < 0)
		return -1;
	if (t == TS_FILE && rec->size > v->lim.bytes)
		return errorf(err, errlen, "%s: size %llu larger than the budget of %llu", rec->path,
			      (unsigned long long)rec->size, (unsigned long long)v->lim.bytes);
	/* every entry takes an inode and a block at least; a symlink's target
	 * and the xattrs take room too */
	if (charge(v, TS_BLOCK + (t == TS_SYMLINK ? llen : 0) + xbytes, err, errlen) < 0)
		return -1;
	if (set_add(v->seen, rec->path, plen, t) < 0)
		return errorf(err, errlen, "%s: paths exceed %u bytes", rec->path, TS_PATHS_MAX);
	v->entries++;
	if (t == TS_FILE) {
		v->in_file = true;
		v->file_size = rec->size;
		v->file_pos = 0;
		v->last_block = 0;
		v->map_count = rec->has_map ? rec->map_count : 0;
		v->map_at = rec->has_map ? 0 : UINT32_MAX;
		if (v->map_count > v->map_cap) {
			struct ts_extent *m = realloc(v->map, v->map_count * sizeof *m);
			if (!m)
				return errorf(err, errlen, "%s: out of memory", rec->path);
			v->map = m;
			v->map_cap = v->map_count;
		}
		if (v->map_count)
			memcpy(v->map, rec->map, v->map_count * sizeof *v->map);
	}
	return 0;
}

int ts_validate_extent(struct ts_validator *v, uint64_t o, uint64_t l, char *err, size_t errlen)
{
	if (!v->in_file)
		return errorf(err, errlen, "tree stream: file data outside a file");
	bool mapped = v->map_at != UINT32_MAX;
	if (l == 0) {
		if (o != v->file_size)
			return errorf(err, errlen, "%s: data ends at %llu, size is %llu", v->path,
				      (unsigned long long)o, (unsigned long long)v->file_size);
		if (mapped && v->map_at != v->map_count)
			return errorf(err, errlen, "%s: data ends before its extent map", v->path);
		v->in_file = false;
		return 0;
	}
	if (mapped) {
		/* the frames follow the map exactly: each starts where the data
		 * so far ends (or at the next extent) and stays inside it */
		if (v->map_at < v->map_count && v->file_pos == v->map[v->map_at].offset + v->map[v->map_at].len)
			v->map_at++;
		const struct ts_extent *e = v->map_at < v->map_count ? &v->map[v->map_at] : NULL;
		uint64_t at = e && v->file_pos < e->offset ? e->offset : v->file_pos;
		if (!e || o != at || l > e->offset + e->len - o)
			return errorf(err, errlen, "%s: extent %llu+%llu not in the file's map", v->path,
				      (unsigned long long)o, (unsigned long long)l);
		if (o + l == e->offset + e->len)
			v->map_at++;
	}
	if (o < v->file_pos || o > v->file_size || l > v->file_size - o)
		return errorf(err, errlen, "%s: extent %llu+%llu out of order or past the size %llu",
			      v->path, (unsigned long long)o, (unsigned long long)l,
			      (unsigned long long)v->file_size);
	/* the blocks this extent adds: extents ascend, so only a block shared
	 * with the one before is already counted */
	uint64_t first = o / TS_BLOCK, end = o / TS_BLOCK + (l + o % TS_BLOCK + TS_BLOCK - 1) / TS_BLOCK;
	if (first < v->last_block)
		first = v->last_block;
	if (end > first && charge(v, (end - first) * TS_BLOCK, err, errlen) < 0)
		return -1;
	if (end > v->last_block)
		v->last_block = end;
	v->file_pos = o + l;
	return 0;
}

int ts_validate_end(struct ts_validator *v, char *err, size_t errlen)
{
	if (v->in_file)
		return errorf(err, errlen, "%s: file data not ended", v->path);
	if (set_lookup(v->seen, ".", 1) != TS_DIR)
		return errorf(err, errlen, "tree stream: ends without a root directory");
	v->ended = true;
	return 0;
}

/* ---- decoder ---- */

int ts_reader_init(struct ts_reader *r, int fd, const struct ts_limits *lim)
{
	memset(r, 0, sizeof *r);
	r->fd = fd;
	r->cap = TS_IO_BUF;
	r->buf = malloc(r->cap);
	r->path = malloc(TS_PATH_MAX + 1);
	r->link = malloc(TS_LINK_MAX + 1);
	if (!r->buf || !r->path || !r->link || ts_validator_init(&r->v, lim) < 0) {
		ts_reader_free(r);
		return -1;
	}
	return 0;
}

void ts_reader_free(struct ts_reader *r)
{
	free(r->buf);
	free(r->path);
	free(r->link);
	free(r->xbuf);
	free(r->map);
	r->map = NULL;
	ts_validator_free(&r->v);
	r->buf = NULL;
	r->path = r->link = NULL;
	r->xbuf = NULL;
}

/* At least one byte in the buffer: 1, or 0 at end of input, -1 on error. */
static int fill(struct ts_reader *r, char *err, size_t errlen)
{
	if (r->pos < r->len)
		return 1;
	for (;;) {
		ssize_t n = read(r->fd, r->buf, r->cap);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errorf(err, errlen, "tree stream: read: %s", strerror(errno));
		r->pos = 0;
		r->len = (size_t)n;
		return n > 0;
	}
}

/* Exactly n bytes, or -1 ("truncated" when the input ends first). */
static int get_bytes(struct ts_reader *r, void *p, size_t n, const char *what,
		     char *err, size_t errlen)
{
	unsigned char *d = p;
	while (n > 0) {
		int f = fill(r, err, errlen);
		if (f < 0)
			return -1;
		if (f == 0)
			return errorf(err, errlen, "tree stream truncated in %.200s", what);
		size_t k = r->len - r->pos < n ? r->len - r->pos : n;
		memcpy(d, r->buf + r->pos, k);
		r->pos += k;
		d += k;
		n -= k;
	}
	return 0;
}

static int drain_extent(struct ts_reader *r, char *err, size_t errlen)
{
	unsigned char tmp[16384];
	ssize_t n;
	while ((n = ts_read_data(r, tmp, sizeof tmp, err, errlen)) > 0)
		;
	return n < 0 ? -1 : 0;
}

static int read_xattrs(struct ts_reader *r, uint32_t count, uint32_t bytes, char *err, size_t errlen)
{
	unsigned char *p = r->xbuf;
	uint64_t total = 0;
	for (uint32_t i = 0; i < count; i++) {
		unsigned char l[8];
		if (get_bytes(r, l, 8, r->path, err, errlen) < 0)
			return -1;
		uint32_t nl = get32(l), vl = get32(l + 4);
		if (nl == 0 || nl > TS_XATTR_NAME_MAX || vl > TS_XATTR_VALUE_MAX)
			return errorf(err, errlen, "%s: xattr sizes out of range", r->path);
		total += 8ull + nl + vl;
		if (total > bytes)
			return errorf(err, errlen, "%s: xattrs longer than announced", r->path);
		char *name = (char *)p;
		if (get_bytes(r, name, nl, r->path, err, errlen) < 0)
			return -1;
		if (memchr(name, '\0', nl))
			return errorf(err, errlen, "%s: xattr name holds a NUL byte", r->path);
		name[nl] = '\0';
		p += nl + 1;
		if (get_bytes(r, p, vl, r->path, err, errlen) < 0)
			return -1;
		r->xattrs[i].name = name;
		r->xattrs[i].value = p;
		r->xattrs[i].len = vl;
		p += vl;
	}
	if (total != bytes)
		return errorf(err, errlen, "%s: xattrs shorter than announced", r->path);
	return 0;
}

int ts_read_record(struct ts_reader *r, char *err, size_t errlen)
{
	unsigned char h[TS_HEADER_SIZE];
	static const unsigned char zero[TS_HEADER_SIZE];
	uint64_t o, l;
	int rc;

	if (r->v.ended)
		return errorf(err, errlen, "tree stream: read after its end");
	while (r->v.in_file && (rc = ts_read_extent(r, &o, &l, err, errlen)) != 0)
		if (rc < 0 || drain_extent(r, err, errlen) < 0)
			return -1;
	if (get_bytes(r, h, sizeof h, "a record header", err, errlen) < 0)
		return -1;
	if (get32(h) != TS_MAGIC)
		return errorf(err, errlen, "tree stream: bad record magic after %llu entries",
			      (unsigned long long)r->v.entries);
	if ((h[5] & ~TS_F_MAP) || h[6] || h[7] || get32(h + 60) || (!(h[5] & TS_F_MAP) && get32(h + 56)))
		return errorf(err, errlen, "tree stream: reserved bytes set after %llu entries",
			      (unsigned long long)r->v.entries);

	enum ts_type t = (enum ts_type)h[4];
	uint32_t plen = get32(h + 20), llen = get32(h + 24);
	uint32_t xcount = get32(h + 28), xbytes = get32(h + 44);
	struct ts_record *rec = &r->rec;
	memset(rec, 0, sizeof *rec);
	if (t == TS_END) {
		if (memcmp(h + 4, zero, sizeof h - 4) != 0)
			return errorf(err, errlen, "tree stream: end record with fields set");
		if (ts_validate_end(&r->v, err, errlen) < 0)
			return -1;
		int f = fill(r, err, errlen);
		if (f != 0)
			return f < 0 ? -1 : errorf(err, errlen, "tree stream: bytes after its end");
		rec->type = TS_END;
		return 0;
	}
	if (plen == 0 || plen > TS_PATH_MAX)
		return errorf(err, errlen, "tree stream: path length %u out of range", plen);
	if (get_bytes(r, r->path, plen, "a path", err, errlen) < 0)
		return -1;
	r->path[plen] = '\0';
	if (memchr(r->path, '\0', plen))
		return errorf(err, errlen, "tree stream: a path holds a NUL byte");
	if (llen > TS_LINK_MAX)
		return errorf(err, errlen, "%s: link target length %u", r->path, llen);
	if (get_bytes(r, r->link, llen, r->path, err, errlen) < 0)
		return -1;
	r->link[llen] = '\0';
	if (memchr(r->link, '\0', llen))
		return errorf(err, errlen, "%s: link target holds a NUL byte", r->path);
	if (xcount > TS_XATTRS_MAX || xbytes > TS_XATTRS_MAX * (8u + TS_XATTR_NAME_MAX + TS_XATTR_VALUE_MAX))
		return errorf(err, errlen, "%s: too many xattrs", r->path);
	/* room for the xattrs and a NUL after each name */
	if (xbytes + xcount > r->xcap) {
		unsigned char *x = realloc(r->xbuf, xbytes + xcount);
		if (!x)
			return errorf(err, errlen, "%s: out of memory", r->path);
		r->xbuf = x;
		r->xcap = xbytes + xcount;
	}
	if (read_xattrs(r, xcount, xbytes, err, errlen) < 0)
		return -1;
	uint32_t mcount = get32(h + 56);
	if (mcount > TS_MAP_MAX)
		return errorf(err, errlen, "%s: more than %d extents", r->path, TS_MAP_MAX);
	if (mcount > r->map_cap) {
		struct ts_extent *m = realloc(r->map, mcount * sizeof *m);
		if (!m)
			return errorf(err, errlen, "%s: out of memory", r->path);
		r->map = m;
		r->map_cap = mcount;
	}
	for (uint32_t i = 0; i < mcount; i++) {
		unsigned char e[16];
		if (get_bytes(r, e, sizeof e, r->path, err, errlen) < 0)
			return -1;
		r->map[i].offset = get64(e);
		r->map[i].len = get64(e + 8);
	}

	rec->type = t;
	rec->mode = get32(h + 8);
	rec->uid = get32(h + 12);
	rec->gid = get32(h + 16);
	rec->mtime_sec = (int64_t)get64(h + 32);
	rec->mtime_nsec = get32(h + 40);
	rec->size = get64(h + 48);
	rec->path = r->path;
	rec->link = r->link;
	rec->xattrs = r->xattrs;
	rec->xattr_count = xcount;
	rec->has_map = h[5] & TS_F_MAP;
	rec->map_count = mcount;
	rec->map = r->map;
	if (ts_validate_record(&r->v, rec, err, errlen) < 0)
		return -1;
	r->in_extent = false;
	return 1;
}

int ts_read_extent(struct ts_reader *r, uint64_t *offset, uint64_t *len, char *err, size_t errlen)
{
	unsigned char f[16];
	if (!r->v.in_file)
		return errorf(err, errlen, "tree stream: no file data to read");
	if (r->in_extent && drain_extent(r, err, errlen) < 0)
		return -1;
	if (get_bytes(r, f, sizeof f, r->path, err, errlen) < 0)
		return -1;
	uint64_t o = get64(f), l = get64(f + 8);
	if (ts_validate_extent(&r->v, o, l, err, errlen) < 0)
		return -1;
	r->extent_left = l;
	r->in_extent = l > 0;
	*offset = o;
	*len = l;
	return l > 0;
}

ssize_t ts_read_data_ptr(struct ts_reader *r, const void **p, char *err, size_t errlen)
{
	if (!r->in_extent || r->extent_left == 0) {
		r->in_extent = false;
		return 0;
	}
	int f = fill(r, err, errlen);
	if (f < 0)
		return -1;
	if (f == 0)
		return errorf(err, errlen, "tree stream truncated in %s", r->path);
	size_t k = r->len - r->pos;
	if (k > r->extent_left)
		k = (size_t)r->extent_left;
	*p = r->buf + r->pos;
	r->pos += k;
	r->extent_left -= k;
	return (ssize_t)k;
}

ssize_t ts_read_data(struct ts_reader *r, void *buf, size_t n, char *err, size_t errlen)
{
	if (!r->in_extent || r->extent_left == 0) {
		r->in_extent = false;
		return 0;
	}
	if (n > r->extent_left)
		n = (size_t)r->extent_left;
	int f = fill(r, err, errlen);
	if (f < 0)
		return -1;
	if (f == 0)
		return errorf(err, errlen, "tree stream truncated in %s", r->path);
	size_t k = r->len - r->pos < n ? r->len - r->pos : n;
	memcpy(buf, r->buf + r->pos, k);
	r->pos += k;
	r->extent_left -= k;
	return (ssize_t)k;
}
