/* Unit tests for common/treestream.c and common/treewalk.c: a real
 * temporary tree walks into a stream that, applied to an empty directory,
 * gives back the same tree (sparse files staying sparse); and every stream
 * the keeper must not apply is refused by the decoder with the path and
 * the reason, before anything after the fault is handed out. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <sys/wait.h>

#include "tree_fixture.h"

static const struct ts_limits big = { 8 * GIB, 1000000 };

static void test_walk_round_trip(void **state)
{
	char err[512];
	char *src = mkdtemp_in_tmp(), *dst = mkdtemp_in_tmp();
	struct treewalk_stats st;
	make_tree(src);
	int fd = walk_to_memfd(src, &st);
	/* the 1 GiB sparse file sends its three extents, not its holes */
	assert_true(st.data_bytes < 1 << 20);
	if (apply_stream(fd, dst, &big, err, sizeof err) != 0)
		fail_msg("apply: %s", err);
	assert_same_tree(src, dst);

	struct stat sb;
	char p[512];
	snprintf(p, sizeof p, "%s/sparse.img", dst);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_size, GIB);
	assert_true(sb.st_blocks * 512 < 1 << 20);
	snprintf(p, sizeof p, "%s/suid-root", dst);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 04755);
	if (fixture_overlay_ok) {
		char v[8];
		snprintf(p, sizeof p, "%s/home/gone", dst);
		assert_int_equal(lstat(p, &sb), 0);
		assert_true(S_ISCHR(sb.st_mode) && sb.st_rdev == 0);
		snprintf(p, sizeof p, "%s/home/user", dst);
		assert_int_equal(getxattr(p, "trusted.overlay.opaque", v, sizeof v), 1);
		assert_int_equal(getxattr(p, "trusted.overlay.origin", v, sizeof v), -1);
	}
	snprintf(p, sizeof p, "%s/home/hosts-hard", dst);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_nlink, 2);
	if (fixture_owners_ok) {
		snprintf(p, sizeof p, "%s/home/fifo", dst);
		assert_int_equal(lstat(p, &sb), 0);
		assert_true(S_ISFIFO(sb.st_mode));
		assert_int_equal(sb.st_uid, 65535);
		assert_int_equal(sb.st_gid, 65534);
	}
	close(fd);
	rm_tree(src);
	rm_tree(dst);
	free(src);
	free(dst);
}

/* Into a pipe the walk splices the files' data (no copy through its
 * memory): the stream is byte for byte the one written to a file. */
static void test_walk_into_a_pipe(void **state)
{
	char err[512];
	char *src = mkdtemp_in_tmp();
	struct treewalk_stats st;
	int p[2];
	make_tree(src);
	int want = walk_to_memfd(src, &st);
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		struct ts_writer w;
		int d = open(src, O_RDONLY | O_DIRECTORY);
		close(p[0]);
		if (d < 0 || ts_writer_init(&w, p[1]) < 0 || tree_walk(d, &w, &st, err, sizeof err) < 0)
			_exit(1);
		_exit(0);
	}
	close(p[1]);
	size_t glen = 0, cap = 1 << 20, wlen;
	unsigned char *got = malloc(cap), *exp = slurp(want, &wlen);
	ssize_t k;
	assert_non_null(got);
	while ((k = read(p[0], got + glen, cap - glen)) > 0)
		if ((glen += (size_t)k) == cap) {
			got = realloc(got, cap *= 2);
			assert_non_null(got);
		}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	assert_int_equal(glen, wlen);
	assert_memory_equal(got, exp, wlen);
	free(got);
	free(exp);
	close(p[0]);
	close(want);
	rm_tree(src);
	free(src);
}

/* A file that ends before the extent asked of it: zeros for the rest,
 * spliced or read. */
static void test_extent_past_the_end(void **state)
{
	char err[512];
	for (int to_pipe = 0; to_pipe < 2; to_pipe++) {
		int f = memfd_create("short", 0), p[2], out;
		assert_int_equal(write(f, "abc", 3), 3);
		if (to_pipe) {
			assert_int_equal(pipe(p), 0);
			out = p[1];
		} else {
			out = memfd_create("stream", 0);
		}
		struct ts_writer w;
		struct ts_record rec = { .type = TS_FILE, .mode = 0644, .path = "f", .link = "", .size = 8 };
		assert_int_equal(ts_writer_init(&w, out), 0);
		assert_int_equal(ts_write_record(&w, &rec, err, sizeof err), 0);
		size_t head = w.len;
		assert_int_equal(ts_writer_flush(&w, err, sizeof err), 0);
		assert_int_equal(ts_write_extent_from(&w, 0, f, 8, err, sizeof err), 0);
		ts_writer_free(&w);
		unsigned char buf[256];
		ssize_t n;
		if (to_pipe) {
			close(p[1]);
			n = read(p[0], buf, sizeof buf);
			close(p[0]);
		} else {
			n = pread(out, buf, sizeof buf, 0);
			close(out);
		}
		assert_int_equal(n, (ssize_t)(head + 16 + 8));
		assert_memory_equal(buf + head + 16, "abc\0\0\0\0\0", 8);
		close(f);
	}
}

static void test_walk_xattrs(void **state)
{
	char err[512], p[512], v[16];
	char *src = mkdtemp_in_tmp(), *dst = mkdtemp_in_tmp();
	struct treewalk_stats st;
	make_tree(src);
	if (!fixture_xattrs_ok) {
		rm_tree(src);
		rm_tree(dst);
		printf("skipped: /tmp takes no user.* xattrs\n");
		skip();
	}
	int fd = walk_to_memfd(src, &st);
	if (apply_stream(fd, dst, &big, err, sizeof err) != 0)
		fail_msg("apply: %s", err);
	snprintf(p, sizeof p, "%s/etc/hosts", dst);
	assert_int_equal(getxattr(p, "user.roombox.test", v, sizeof v), 5);
	assert_memory_equal(v, "value", 5);
	assert_int_equal(getxattr(p, "user.another", v, sizeof v), 3);
	assert_memory_equal(v, "x\0y", 3);
	close(fd);
	rm_tree(src);
	rm_tree(dst);
	free(src);
	free(dst);
}

/* ---- streams built by hand ---- */

struct raw {
	unsigned char *p;
	size_t len, cap;
};

static void raw_add(struct raw *r, const void *p, size_t n)
{
	if (r->len + n > r->cap) {
		r->cap = (r->len + n) * 2 + 4096;
		r->p = realloc(r->p, r->cap);
	}
	memcpy(r->p + r->len, p, n);
	r->len += n;
}

static void le32(unsigned char *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static void le64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

/* A record as its fields say, checked by no one. */
static void raw_rec(struct raw *r, int type, uint32_t mode, uint32_t uid, const char *path,
		    const char *link, uint64_t size)
{
	unsigned char h[TS_HEADER_SIZE] = { 0 };
	le32(h, TS_MAGIC);
	h[4] = (unsigned char)type;
	le32(h + 8, mode);
	le32(h + 12, uid);
	le32(h + 20, (uint32_t)strlen(path));
	le32(h + 24, (uint32_t)strlen(link));
	le64(h + 48, size);
	raw_add(r, h, sizeof h);
	raw_add(r, path, strlen(path));
	raw_add(r, link, strlen(link));
}

static void raw_frame(struct raw *r, uint64_t off, uint64_t len, const char *data)
{
	unsigned char f[16];
	le64(f, off);
	le64(f + 8, len);
	raw_add(r, f, 16);
	if (data)
		raw_add(r, data, len);
}

static void raw_end(struct raw *r)
{
	unsigned char h[TS_HEADER_SIZE] = { 0 };
	le32(h, TS_MAGIC);
	raw_add(r, h, sizeof h);
}

/* Reads the whole stream: 0 when it is accepted, else -1 with err; the
 * number of records handed out in *handed. */
static int decode(const struct raw *raw, const struct ts_limits *lim, char *err, size_t errlen,
		  unsigned *handed)
{
	int fd = memfd_create("ts", 0), rc;
	struct ts_reader r;
	assert_int_equal(write(fd, raw->p, raw->len), (ssize_t)raw->len);
	assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
	assert_int_equal(ts_reader_init(&r, fd, lim), 0);
	*handed = 0;
	while ((rc = ts_read_record(&r, err, errlen)) > 0)
		(*handed)++;
	ts_reader_free(&r);
	close(fd);
	return rc;
}

static void root(struct raw *r)
{
	raw_rec(r, TS_DIR, 0755, 0, ".", "", 0);
}

static void expect_refused(struct raw *r, const char *needle)
{
	char err[512] = "";
	unsigned n;
	if (decode(r, &big, err, sizeof err, &n) == 0)
		fail_msg("accepted, expected \"%s\"", needle);
	if (!strstr(err, needle))
		fail_msg("error \"%s\" lacks \"%s\"", err, needle);
	free(r->p);
	memset(r, 0, sizeof *r);
}

static void test_good_stream(void **state)
{
	struct raw r = { 0 };
	char err[512];
	unsigned n;
	root(&r);
	raw_rec(&r, TS_DIR, 0755, 0, "a", "", 0);
	raw_rec(&r, TS_FILE, 0644, 1000, "a/f", "", 10);
	raw_frame(&r, 2, 3, "abc");
	raw_frame(&r, 10, 0, NULL);
	raw_rec(&r, TS_HARDLINK, 0, 0, "a/g", "a/f", 0);
	raw_rec(&r, TS_SYMLINK, 0777, 0, "s", "/etc/passwd", 0);
	raw_rec(&r, TS_FIFO, 0600, 0, "a/p", "", 0);
	raw_rec(&r, TS_WHITEOUT, 0, 0, "a/w", "", 0);
	raw_end(&r);
	if (decode(&r, &big, err, sizeof err, &n) != 0)
		fail_msg("%s", err);
	assert_int_equal(n, 7);
	free(r.p);
}

static void test_bad_paths(void **state)
{
	struct raw r = { 0 };
	root(&r);
	raw_rec(&r, TS_FILE, 0644, 0, "../escape", "", 0);
	expect_refused(&r, "../escape: \"..\" component");
	root(&r);
	raw_rec(&r, TS_FILE, 0644, 0, "/etc/passwd", "", 0);
	expect_refused(&r, "/etc/passwd: absolute path");
	root(&r);
	raw_rec(&r, TS_DIR, 0755, 0, "a", "", 0);
	raw_rec(&r, TS_FILE, 0644, 0, "a/../../x", "", 0);
	expect_refused(&r, "\"..\" component");
	root(&r);
	raw_rec(&r, TS_FILE, 0644, 0, "a//b", "", 0);
	expect_refused(&r, "empty path component");
	/* no root first */
	raw_rec(&r, TS_FILE, 0644, 0, "x", "", 0);
	expect_refused(&r, "x: the root directory");
	/* a file whose parent was never sent */
	root(&r);
	raw_rec(&r, TS_FILE, 0644, 0, "nodir/x", "", 0);
	expect_refused(&r, "nodir/x: parent is not an earlier entry");
	root(&r);
	raw_rec(&r, TS_FILE, 0644, 0, "x", "", 0);
	raw_frame(&r, 0, 0, NULL);
	raw_rec(&r, TS_FILE, 0644, 0, "x", "", 0);
	expect_refused(&r, "x: appears twice");
}

static void test_symlink_then_through_it(void **state)
{
	struct raw r = { 0 };
	root(&r);
	raw_rec(&r, TS_SYMLINK, 0777, 0, "etc", "/etc", 0);
	raw_rec(&r, TS_FILE, 0644, 0, "etc/passwd", "", 0);
	expect_refused(&r, "etc/passwd: parent is symlink");
	/* the same name again, as a directory, is refused too */
	root(&r);
	raw_rec(&r, TS_SYMLINK, 0777, 0, "etc", "/etc", 0);
	raw_rec(&r, TS_DIR, 0755, 0, "etc", "", 0);
	expect_refused(&r, "etc: appears twice");
}

static void test_bad_hard_links(void **state)
{
	struct raw r = { 0 };
	root(&r);
	raw_rec(&r, TS_HARDLINK, 0, 0, "h", "../../etc/shadow", 0);
	expect_refused(&r, "h: hard link target ../../etc/shadow: \"..\" component");
	root(&r);
	raw_rec(&r, TS_HARDLINK, 0, 0, "h", "/etc/shadow", 0);
	expect_refused(&r, "absolute path");
	root(&r);
	raw_rec(&r, TS_HARDLINK, 0, 0, "h", "later", 0);
	expect_refused(&r, "h: hard link to later, not an earlier file");
	root(&r);
	raw_rec(&r, TS_DIR, 0755, 0, "d", "", 0);
	raw_rec(&r, TS_HARDLINK, 0, 0, "h", "d", 0);
	expect_refused(&r, "not an earlier file");
}

/* The overlay's one trusted.* xattr: "y" on a directory, nothing else;
 * every other trusted.* refused. */
static void test_overlay_marks(void **state)
{
	struct ts_validator v;
	char err[512];
	struct ts_xattr y = { TS_XATTR_OPAQUE, (const unsigned char *)"y", 1 };
	struct ts_xattr x = { TS_XATTR_OPAQUE, (const unsigned char *)"x", 1 };
	struct ts_xattr origin = { "trusted.overlay.origin", (const unsigned char *)"o", 1 };
	struct ts_record rec = { .type = TS_DIR, .mode = 0755, .path = ".", .link = "" };
	assert_int_equal(ts_validator_init(&v, &big), 0);
	assert_int_equal(ts_validate_record(&v, &rec, err, sizeof err), 0);
	rec = (struct ts_record){ .type = TS_DIR, .mode = 0755, .path = "d", .link = "",
				  .xattr_count = 1, .xattrs = &y };
	assert_int_equal(ts_validate_record(&v, &rec, err, sizeof err), 0);
	rec.path = "e";
	rec.xattrs = &x;
	assert_int_equal(ts_validate_record(&v, &rec, err, sizeof err), -1);
	assert_non_null(strstr(err, "other than \"y\" on a directory"));
	rec = (struct ts_record){ .type = TS_FIFO, .mode = 0644, .path = "f", .link = "",
				  .xattr_count = 1, .xattrs = &y };
	assert_int_equal(ts_validate_record(&v, &rec, err, sizeof err), -1);
	rec = (struct ts_record){ .type = TS_DIR, .mode = 0755, .path = "g", .link = "",
				  .xattr_count = 1, .xattrs = &origin };
	assert_int_equal(ts_validate_record(&v, &rec, err, sizeof err), -1);
	assert_non_null(strstr(err, "not allowed"));
	rec = (struct ts_record){ .type = TS_WHITEOUT, .path = "w", .link = "" };
	assert_int_equal(ts_validate_record(&v, &rec, err, sizeof err), 0);
	ts_validator_free(&v);
}

static void test_bad_fields(void **state)
{
	struct raw r = { 0 };
	root(&r);
	raw_rec(&r, 9, 0644, 0, "x", "", 0);
	expect_refused(&r, "x: unknown type 9");
	root(&r);
	raw_rec(&r, 7, 0644, 0, "x", "", 0);
	expect_refused(&r, "x: unknown type 7");
	root(&r);
	raw_rec(&r, TS_FILE, 010644, 0, "x", "", 0);
	expect_refused(&r, "x: mode 10644 has bits beyond 07777");
	root(&r);
	raw_rec(&r, TS_FILE, 0644, 65536, "x", "", 0);
	expect_refused(&r, "x: owner 65536:0 beyond 65535");
	root(&r);
	raw_rec(&r, TS_DIR, 0755, 0, "x", "", 7);
	expect_refused(&r, "x: a directory with a size");
	unsigned char junk[TS_HEADER_SIZE];
	memset(junk, 'g', sizeof junk);
	raw_add(&r, junk, sizeof junk);
	expect_refused(&r, "bad record magic");
	root(&r);
	r.p[5] = 0x80;
	expect_refused(&r, "reserved bytes set");
}

static void test_bad_extents(void **state)
{
	struct raw r = { 0 };
	root(&r);
	raw_rec(&r, TS_FILE, 0644, 0, "f", "", 100);
	raw_frame(&r, 50, 10, "0123456789");
	raw_frame(&r, 40, 5, "abcde");
	expect_refused(&r, "f: extent 40+5 out of order");
	root(&r);
	raw_rec(&r, TS_FILE, 0644, 0, "f", "", 100);
	raw_frame(&r, 95, 10, "0123456789");
	expect_refused(&r, "f: extent 95+10 out of order or past the size");
	root(&r);
	raw_rec(&r, TS_FILE, 0644, 0, "f", "", 100);
	raw_frame(&r, 99, 0, NULL);
	expect_refused(&r, "f: data ends at 99, size is 100");
}

static void test_truncated_and_trailing(void **state)
{
	struct raw r = { 0 };
	root(&r);
	raw_rec(&r, TS_FILE, 0644, 0, "f", "", 10);
	raw_frame(&r, 0, 10, "0123456789");
	raw_frame(&r, 10, 0, NULL);
	raw_end(&r);
	size_t whole = r.len;
	/* every cut short of the whole is refused */
	for (size_t cut = 0; cut < whole; cut++) {
		struct raw c = { 0 };
		char err[512];
		unsigned n;
		raw_add(&c, r.p, cut ? cut : 1);
		c.len = cut;
		assert_int_equal(decode(&c, &big, err, sizeof err, &n), -1);
		free(c.p);
	}
	raw_add(&r, "x", 1);
	expect_refused(&r, "bytes after its end");
}

static void test_limits(void **state)
{
	struct raw r = { 0 };
	char err[512];
	unsigned n;
	struct ts_limits small = { 1 << 20, 10 };
	/* apparent size beyond the budget, though nothing is stored */
	root(&r);
	raw_rec(&r, TS_FILE, 0644, 0, "sparse", "", 1ull << 40);
	raw_frame(&r, 1ull << 40, 0, NULL);
	raw_end(&r);
	assert_int_equal(decode(&r, &small, err, sizeof err, &n), -1);
	assert_non_null(strstr(err, "sparse: size 1099511627776 larger than the budget of 1048576"));
	free(r.p);
	memset(&r, 0, sizeof r);
	/* more entries than allowed */
	root(&r);
	for (int i = 0; i < 20; i++) {
		char p[16];
		snprintf(p, sizeof p, "f%d", i);
		raw_rec(&r, TS_FIFO, 0600, 0, p, "", 0);
	}
	raw_end(&r);
	assert_int_equal(decode(&r, &small, err, sizeof err, &n), -1);
	assert_non_null(strstr(err, "f9: more than 10 entries"));
	assert_int_equal(n, 10);
	free(r.p);
	memset(&r, 0, sizeof r);
	/* data beyond the budget: refused at the extent that crosses it */
	root(&r);
	raw_rec(&r, TS_FILE, 0644, 0, "big", "", 1 << 20);
	char *blob = calloc(1, 1 << 20);
	raw_frame(&r, 0, 1 << 20, blob);
	free(blob);
	raw_frame(&r, 1 << 20, 0, NULL);
	raw_end(&r);
	assert_int_equal(decode(&r, &small, err, sizeof err, &n), -1);
	assert_non_null(strstr(err, "big: over the byte budget of 1048576"));
	free(r.p);
}

static void test_limits_for_disk(void **state)
{
	struct ts_limits l = ts_limits_for_disk(GIB);
	assert_int_equal(l.bytes, GIB);
	assert_int_equal(l.entries, 65536);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_walk_round_trip),
		cmocka_unit_test(test_walk_into_a_pipe),
		cmocka_unit_test(test_extent_past_the_end),
		cmocka_unit_test(test_walk_xattrs),
		cmocka_unit_test(test_good_stream),
		cmocka_unit_test(test_bad_paths),
		cmocka_unit_test(test_symlink_then_through_it),
		cmocka_unit_test(test_bad_hard_links),
		cmocka_unit_test(test_bad_fields),
		cmocka_unit_test(test_overlay_marks),
		cmocka_unit_test(test_bad_extents),
		cmocka_unit_test(test_truncated_and_trailing),
		cmocka_unit_test(test_limits),
		cmocka_unit_test(test_limits_for_disk),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
