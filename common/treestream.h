/* The tree stream: a room's files as a flat sequence of fixed, size-checked
 * binary records, the one form in which a file tree crosses between
 * roombox-fcgi (which alone parses the untrusted export archive) and the
 * keeper (which alone writes inside the room, as the room's root).
 *
 * Why a format of our own beside the tar archive: the keeper is a static
 * libc-only program and must never parse a tar; what reaches it has already
 * been checked, and is checked again here by a decoder small enough to
 * read at once and to fuzz.  docs/export-format.md describes the bytes.
 *
 *   record  = header (TS_HEADER_SIZE bytes, little-endian)
 *             path (path_len bytes), link (link_len bytes),
 *             xattrs (xattr_count times: u32 name_len, u32 value_len,
 *                     name, value; xattr_bytes in all, names sorted),
 *             for a file with TS_F_MAP: map_count times u64 offset,
 *             u64 length (its data extents, ascending, none empty)
 *   file    = record, then extent frames: u64 offset, u64 length, then
 *             length bytes; a frame of length 0 at offset == size ends it
 *   stream  = "." (the root directory) first, then records, then TS_END
 *
 * File data comes as frames because the archive reader learns a sparse
 * member's map only while it reads the member's data; the map up front is
 * optional for that reason, and the walker sends it because the archive
 * writer needs it before the data.  With a map, the frames must cover its
 * extents exactly, in order.
 *
 * The decoder refuses, naming the path and the reason: a bad magic or
 * reserved field, an unknown type, a path that is absolute, holds "..",
 * "." (but the root), an empty component or a NUL, a path whose parent is
 * not an earlier directory record (so a symlink can never be walked
 * through), a path seen before, a hard link to anything but an earlier
 * regular file, mode bits outside 07777, ids above 65535, an xattr outside
 * the allowed names, frames out of order or past the size, more entries or
 * bytes than its limits, and a stream that ends before TS_END (or goes on
 * after it).  An applier that stops at the first error and saw no TS_END
 * has been handed a refused stream.  An applier sets owners, then mode,
 * then xattrs: a chown drops file capabilities and setuid bits. */
#ifndef ROOMBOX_TREESTREAM_H
#define ROOMBOX_TREESTREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TS_MAGIC        0x31544252u  /* "RBT1" little-endian */
#define TS_HEADER_SIZE  64
#define TS_PATH_MAX     4096         /* bytes of a path, without NUL */
#define TS_LINK_MAX     4095         /* a symlink's target (the kernel's limit) */
#define TS_XATTR_NAME_MAX  255
#define TS_XATTR_VALUE_MAX 65536
#define TS_XATTRS_MAX   64           /* per record */
#define TS_ID_MAX       65535u       /* owners are room-relative */
#define TS_BLOCK        4096u        /* the unit disk use is counted in */
#define TS_BYTES_PER_INODE 16384u    /* mkfs.ext4's default: a room disk's inode count */
#define TS_PATHS_MAX    (64u << 20)  /* all paths of a stream, held to find parents */
#define TS_MAP_MAX      65536        /* extents in a file's map */
#define TS_F_MAP        1u           /* header flag: the file's map follows */

enum ts_type {
	TS_END = 0,
	TS_DIR = 1,
	TS_FILE = 2,
	TS_SYMLINK = 3,
	TS_HARDLINK = 4,   /* link: the path of an earlier TS_FILE */
	TS_FIFO = 5,
	/* an overlay upper layer's whiteout (a character device 0/0 there):
	 * the name is deleted from the lower layer; the only device a stream
	 * carries */
	TS_WHITEOUT = 6,
};
#define TS_TYPE_LAST TS_WHITEOUT
/* the one host xattr a stream carries: an overlay upper directory that
 * hides its lower layer's contents; its value is exactly "y" */
#define TS_XATTR_OPAQUE "trusted.overlay.opaque"

struct ts_xattr {
	const char *name;          /* NUL-terminated */
	const unsigned char *value;
	uint32_t len;
};

struct ts_extent {
	uint64_t offset, len;
};

struct ts_record {
	enum ts_type type;
	uint32_t mode;             /* permission bits, 07777 at most */
	uint32_t uid, gid;         /* 0-65535 */
	int64_t mtime_sec;
	uint32_t mtime_nsec;
	uint64_t size;             /* TS_FILE: apparent size; else 0 */
	const char *path;          /* NUL-terminated; "." is the root */
	const char *link;          /* symlink target or hard link's path; else "" */
	unsigned xattr_count;
	const struct ts_xattr *xattrs;
	bool has_map;              /* TS_FILE: map (map_count extents) given */
	unsigned map_count;
	const struct ts_extent *map;
};

/* What a stream may hold: disk bytes (counted in whole TS_BLOCKs, the
 * data a file really has, not its apparent size) and entries.  No file's
 * apparent size may exceed bytes either: a room's disk could never have
 * filled it, and a sparse member blown up by a careless reader must not
 * be possible. */
struct ts_limits {
	uint64_t bytes;
	uint64_t entries;
};

/* The limits for a room disk of disk_bytes: that many bytes, and as many
 * entries as mkfs.ext4 gives such a disk inodes. */
struct ts_limits ts_limits_for_disk(uint64_t disk_bytes);

/* ---- checks shared by both ends ---- */

/* 0 when path is a valid relative path of the stream ("." or a/b/c),
 * else -1 with the reason. */
int ts_check_path(const char *path, size_t len, char *err, size_t errlen);
/* 0 when name is an extended attribute a room may carry over (and
 * TS_XATTR_OPAQUE, whose value is checked apart). */
int ts_check_xattr_name(const char *name);

/* ---- encoder ---- */

struct ts_writer {
	int fd;
	unsigned char *buf;
	size_t len, cap;
	/* the open file's frames */
	bool in_file;
	uint64_t file_size, file_pos;
	char path[TS_PATH_MAX + 1];
	int to_pipe;                /* 0 not known yet, 1 a pipe, -1 not */
};

int ts_writer_init(struct ts_writer *w, int fd);
/* Writes rec's header, path, link and xattrs.  For TS_FILE the frames
 * follow (ts_write_extent), closed by ts_write_file_end. */
int ts_write_record(struct ts_writer *w, const struct ts_record *rec, char *err, size_t errlen);
int ts_write_extent(struct ts_writer *w, uint64_t offset, const void *data, size_t len,
		    char *err, size_t errlen);
/* The same with the extent's bytes taken from fd (a regular file) at
 * offset: when the stream's fd is a pipe they are spliced into it (the
 * page cache's pages go by reference, not through the caller's memory),
 * else read and written.  A file that ends before offset + len is sent
 * with zeros for the rest, so the frame keeps its length. */
int ts_write_extent_from(struct ts_writer *w, uint64_t offset, int fd, size_t len,
			 char *err, size_t errlen);
int ts_write_file_end(struct ts_writer *w, char *err, size_t errlen);
/* Writes TS_END and flushes: from here the stream is complete. */
int ts_write_end(struct ts_writer *w, char *err, size_t errlen);
int ts_writer_flush(struct ts_writer *w, char *err, size_t errlen);
void ts_writer_free(struct ts_writer *w);

/* ---- validator: every rule of the stream, for a decoder or a producer
 * that wants its output checked as it goes (the archive import) ---- */

struct ts_pathset;

struct ts_validator {
	struct ts_limits lim;
	uint64_t used_bytes, entries;
	struct ts_pathset *seen;
	bool in_file, ended;
	uint64_t file_size, file_pos, last_block;
	struct ts_extent *map;     /* the current file's, copied */
	unsigned map_count, map_at, map_cap;
	char path[TS_PATH_MAX + 1];
};

int ts_validator_init(struct ts_validator *v, const struct ts_limits *lim);
void ts_validator_free(struct ts_validator *v);
/* 0 when rec may come next, else -1 with err naming its path and why. */
int ts_validate_record(struct ts_validator *v, const struct ts_record *rec, char *err, size_t errlen);
/* The current file's next frame: len > 0 data at offset; len 0 its end. */
int ts_validate_extent(struct ts_validator *v, uint64_t offset, uint64_t len, char *err, size_t errlen);
int ts_validate_end(struct ts_validator *v, char *err, size_t errlen);

/* ---- decoder ---- */

struct ts_reader {
	int fd;
	unsigned char *buf;
	size_t pos, len, cap;
	struct ts_validator v;
	/* the record being read */
	struct ts_record rec;
	char *path, *link;
	unsigned char *xbuf;
	size_t xcap;
	struct ts_xattr xattrs[TS_XATTRS_MAX];
	struct ts_extent *map;
	unsigned map_cap;
	bool in_extent;
	uint64_t extent_left;
};

int ts_reader_init(struct ts_reader *r, int fd, const struct ts_limits *lim);
/* The next record into r->rec: 1, or 0 at TS_END (checked to be the
 * stream's last bytes), or -1 with err naming the path and the reason.
 * What is left of a file's data is read (and checked) first. */
int ts_read_record(struct ts_reader *r, char *err, size_t errlen);
/* For a TS_FILE: the next frame's offset and length: 1, or 0 when the
 * file's data has ended.  Its bytes are read with ts_read_data. */
int ts_read_extent(struct ts_reader *r, uint64_t *offset, uint64_t *len, char *err, size_t errlen);
/* Up to n bytes of the current frame; 0 when it is all read. */
ssize_t ts_read_data(struct ts_reader *r, void *buf, size_t n, char *err, size_t errlen);
/* The same without a copy: *p points into the reader's buffer, valid
 * until its next call. */
ssize_t ts_read_data_ptr(struct ts_reader *r, const void **p, char *err, size_t errlen);
void ts_reader_free(struct ts_reader *r);

#endif
