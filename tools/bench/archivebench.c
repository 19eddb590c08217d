/* archivebench -- throughput of the room export codecs, to hold against
 * `tar --sparse -c | zstd -1` and `zstd -d | tar -x` of the same tree.
 *
 *   archivebench export DIR OUT   walk DIR into a tree stream (a child
 *                                 process, as the keeper will be) and turn it
 *                                 into the archive OUT (archive_from_tree)
 *   archivebench import IN DIR    archive_to_tree of IN into a tree stream
 *                                 that a child process applies under the
 *                                 empty directory DIR
 * Prints "<verb> bytes=<archive bytes> seconds=<wall>".  Built against the
 * project's archives:
 *   cc -O2 -D_GNU_SOURCE -Icommon -Ifcgi-app/rooms tools/bench/archivebench.c \
 *      build/libfcgiapp.a build/libcommon.a -larchive -lcrypto -o archivebench
 * The applier here is a plain one (no namespace, no openat2): it measures
 * the codecs, not the keeper's import tool, which does not exist yet. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "room_archive.h"
#include "treestream.h"
#include "treewalk.h"

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}

static void die(const char *what, const char *err)
{
	fprintf(stderr, "archivebench: %s: %s\n", what, err);
	exit(1);
}

static int apply(int fd, int d)
{
	struct ts_limits lim = { UINT64_MAX, UINT64_MAX };
	struct ts_reader r;
	char err[512];
	static unsigned char buf[1 << 20];
	int got;
	if (ts_reader_init(&r, fd, &lim) < 0)
		die("reader", "out of memory");
	while ((got = ts_read_record(&r, err, sizeof err)) > 0) {
		const struct ts_record *rec = &r.rec;
		int f = -1;
		if (rec->type == TS_DIR && strcmp(rec->path, ".") != 0)
			mkdirat(d, rec->path, 0700);
		else if (rec->type == TS_SYMLINK)
			symlinkat(rec->link, d, rec->path);
		else if (rec->type == TS_HARDLINK)
			linkat(d, rec->link, d, rec->path, 0);
		else if (rec->type == TS_FIFO)
			mkfifoat(d, rec->path, 0600);
		if (rec->type == TS_FILE) {
			uint64_t off, len;
			int e;
			f = openat(d, rec->path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
			while ((e = ts_read_extent(&r, &off, &len, err, sizeof err)) > 0) {
				ssize_t n;
				while ((n = ts_read_data(&r, buf, sizeof buf, err, sizeof err)) > 0) {
					if (pwrite(f, buf, (size_t)n, (off_t)off) != n)
						die(rec->path, "write");
					off += (uint64_t)n;
				}
			}
			if (e < 0)
				die("apply", err);
			if (ftruncate(f, (off_t)rec->size) < 0)
				die(rec->path, "truncate");
			fchmod(f, rec->mode);
			close(f);
		} else if (rec->type != TS_HARDLINK && rec->type != TS_SYMLINK) {
			fchmodat(d, rec->path, rec->mode, 0);
		}
	}
	if (got < 0)
		die("apply", err);
	return 0;
}

int main(int argc, char **argv)
{
	char err[512];
	int p[2];
	if (argc != 4 || (strcmp(argv[1], "export") && strcmp(argv[1], "import"))) {
		fprintf(stderr, "usage: archivebench export DIR OUT | import IN DIR\n");
		return 2;
	}
	bool exporting = strcmp(argv[1], "export") == 0;
	if (pipe(p) < 0)
		die("pipe", "failed");
	double t0 = now();
	pid_t pid = fork();
	if (pid == 0) {
		close(exporting ? p[0] : p[1]);
		if (exporting) {
			struct ts_writer w;
			struct treewalk_stats st;
			int d = open(argv[2], O_RDONLY | O_DIRECTORY);
			if (d < 0 || ts_writer_init(&w, p[1]) < 0 || tree_walk(d, &w, &st, err, sizeof err) < 0)
				die("walk", err);
			_exit(0);
		}
		int d = open(argv[3], O_RDONLY | O_DIRECTORY);
		if (d < 0)
			die(argv[3], "open");
		_exit(apply(p[0], d));
	}
	close(exporting ? p[1] : p[0]);
	int fd, status;
	struct room_key key = { (const unsigned char *)"bench key", 9 };
	if (exporting) {
		fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0600);
		if (fd < 0 || archive_from_tree(p[0], fd, NULL, 0, &key, err, sizeof err) < 0)
			die("export", err);
	} else {
		struct room_parts parts;
		fd = open(argv[2], O_RDONLY);
		if (fd < 0 || archive_to_tree(fd, p[1], 64ull << 30, &key, &parts, err, sizeof err) < 0)
			die("import", err);
		room_parts_free(&parts);
		close(p[1]);
	}
	if (waitpid(pid, &status, 0) < 0 || status != 0)
		die("child", "failed");
	double t = now() - t0;
	struct stat sb;
	fstat(fd, &sb);
	printf("%s bytes=%lld seconds=%.3f\n", argv[1], (long long)sb.st_size, t);
	return 0;
}
