/* libFuzzer target: the export archive's importer (fcgi-app/rooms/room_archive.c,
 * archive_to_tree), the one place an untrusted room archive is parsed.
 *
 * Input: byte 0: bit 0 set, the rest is a bare tar that this target first
 * compresses with zstd (so mutations reach the tar reader, not only the
 * decompressor); clear, the rest is the archive as sent.  Whatever it is,
 * the importer stays in its buffers and, when it refuses, hands out no
 * parts and leaves a tree stream no reader accepts; when it accepts, the
 * tree stream it wrote decodes whole under the same budget and every part
 * has a part's name. */
#include <archive.h>
#include <archive_entry.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "room_archive.h"
#include "treestream.h"

#define BUDGET (64u << 20)

static int compressed(const uint8_t *data, size_t size)
{
	int fd = memfd_create("in", 0);
	struct archive *a = archive_write_new();
	struct archive_entry *e = archive_entry_new();
	FUZZ_ASSERT(fd >= 0 && a && e, "setup");
	archive_write_add_filter_zstd(a);
	archive_write_set_format_raw(a);
	archive_write_open_fd(a, fd);
	archive_entry_set_filetype(e, AE_IFREG);
	archive_write_header(a, e);
	if (size)
		archive_write_data(a, data, size);
	archive_write_close(a);
	archive_write_free(a);
	archive_entry_free(e);
	lseek(fd, 0, SEEK_SET);
	return fd;
}

static int plain(const uint8_t *data, size_t size)
{
	int fd = memfd_create("in", 0);
	FUZZ_ASSERT(fd >= 0 && write(fd, data, size) == (ssize_t)size, "memfd");
	lseek(fd, 0, SEEK_SET);
	return fd;
}

/* 0 when the whole stream on fd decodes, else -1. */
static int decode_all(int fd)
{
	struct ts_limits lim = ts_limits_for_disk(BUDGET);
	struct ts_reader r;
	char err[512];
	int rc;
	lseek(fd, 0, SEEK_SET);
	FUZZ_ASSERT(ts_reader_init(&r, fd, &lim) == 0, "reader init");
	while ((rc = ts_read_record(&r, err, sizeof err)) > 0)
		;
	ts_reader_free(&r);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	int in = data[0] & 1 ? compressed(data + 1, size - 1) : plain(data + 1, size - 1);
	int tree = memfd_create("tree", 0);
	struct room_parts parts;
	char err[512];
	int rc = archive_to_tree(in, tree, BUDGET, NULL, &parts, err, sizeof err);
	if (rc < 0) {
		FUZZ_ASSERT(parts.n == 0 && parts.v == NULL, "refused (%s) but parts handed out", err);
		FUZZ_ASSERT(strncmp(err, "import: ", 8) == 0, "refusal without a reason: %s", err);
		FUZZ_ASSERT(decode_all(tree) < 0, "refused (%s) yet its tree stream is whole", err);
	} else {
		FUZZ_ASSERT(decode_all(tree) == 0, "accepted, but its tree stream is not whole");
		for (size_t i = 0; i < parts.n; i++)
			FUZZ_ASSERT(room_part_name_ok(parts.v[i].name) == 0, "part %s", parts.v[i].name);
		room_parts_free(&parts);
	}
	close(in);
	close(tree);
	return 0;
}
