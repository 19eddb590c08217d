/* libFuzzer target: the tree stream decoder (common/treestream.c), the
 * last check before the keeper writes into a room.
 *
 * Input: a tree stream.  Whatever it is, the decoder stays in its buffers;
 * every record it hands out has a clean relative path, mode bits within
 * 07777 and owners within 0-65535; a file's frames ascend inside its size
 * and never bring more data than the input held; and a stream it accepts
 * whole, written again by the encoder, is byte for byte the input (the
 * encoding has one form), so what the keeper applies is what was checked. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "treestream.h"

static int memfd_with(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz", 0);
	FUZZ_ASSERT(fd >= 0, "memfd_create");
	FUZZ_ASSERT(write(fd, data, size) == (ssize_t)size, "write");
	lseek(fd, 0, SEEK_SET);
	return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static unsigned char buf[4096];
	struct ts_limits lim = { 64u << 20, 4096 };
	struct ts_reader r;
	struct ts_writer w;
	char err[512], why[128];
	int in = memfd_with(data, size), out = memfd_create("again", 0), rc;
	uint64_t data_bytes = 0;

	FUZZ_ASSERT(ts_reader_init(&r, in, &lim) == 0, "reader init");
	FUZZ_ASSERT(ts_writer_init(&w, out) == 0, "writer init");
	while ((rc = ts_read_record(&r, err, sizeof err)) > 0) {
		const struct ts_record *rec = &r.rec;
		FUZZ_ASSERT(ts_check_path(rec->path, strlen(rec->path), why, sizeof why) == 0,
			    "path %s handed out: %s", rec->path, why);
		FUZZ_ASSERT(rec->mode <= 07777 && rec->uid <= TS_ID_MAX && rec->gid <= TS_ID_MAX,
			    "%s: mode %o owner %u:%u", rec->path, rec->mode, rec->uid, rec->gid);
		FUZZ_ASSERT(ts_write_record(&w, rec, err, sizeof err) == 0, "re-encode %s: %s", rec->path, err);
		if (rec->type != TS_FILE)
			continue;
		uint64_t off, len, end = 0;
		int e;
		while ((e = ts_read_extent(&r, &off, &len, err, sizeof err)) > 0) {
			FUZZ_ASSERT(off >= end && len > 0 && off + len <= rec->size, "%s: extent %llu+%llu",
				    rec->path, (unsigned long long)off, (unsigned long long)len);
			end = off + len;
			ssize_t n;
			uint64_t at = off;
			while ((n = ts_read_data(&r, buf, sizeof buf, err, sizeof err)) > 0) {
				FUZZ_ASSERT(ts_write_extent(&w, at, buf, (size_t)n, err, sizeof err) == 0,
					    "re-encode data: %s", err);
				at += (uint64_t)n;
				data_bytes += (uint64_t)n;
			}
			if (n < 0)
				break;
		}
		FUZZ_ASSERT(data_bytes <= size, "more data than input");
		if (e == 0)
			FUZZ_ASSERT(ts_write_file_end(&w, err, sizeof err) == 0, "re-encode end: %s", err);
		else
			break;
	}
	if (rc == 0) {
		FUZZ_ASSERT(ts_write_end(&w, err, sizeof err) == 0, "re-encode: %s", err);
		off_t n = lseek(out, 0, SEEK_END);
		FUZZ_ASSERT(n == (off_t)size, "accepted stream of %zu bytes re-encodes to %lld", size,
			    (long long)n);
		unsigned char *again = malloc(size ? size : 1);
		FUZZ_ASSERT(pread(out, again, size, 0) == (ssize_t)size, "read back");
		FUZZ_ASSERT(memcmp(again, data, size) == 0, "accepted stream re-encodes differently");
		free(again);
	}
	ts_writer_free(&w);
	ts_reader_free(&r);
	close(in);
	close(out);
	return 0;
}
