/* Unit tests for fcgi-app/rooms/room_archive.c: a real tree exported (walk, then
 * archive_from_tree) and imported (archive_to_tree, then applied) comes
 * back the same, parts and all, and tar opens the export; every hostile
 * archive, built here with libarchive or spoilt from a good one, is
 * refused with the member and the reason, its tree stream left without an
 * end record (so the keeper would refuse it) and no parts handed out. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <archive.h>
#include <archive_entry.h>
#include <sys/sysmacros.h>

#include <openssl/evp.h>

#include "room_archive.h"
#include "tree_fixture.h"
#include <xxhash.h>

static const unsigned char key_bytes[] = "a key of thirty-two bytes, or so";
static const struct room_key key = { key_bytes, sizeof key_bytes - 1 };
static const struct room_key other_key = { (const unsigned char *)"another key", 11 };

static const char *const part_names[] = {
	"session/root", "session/user", "exposures", "processes/p1.json",
	"processes/p1.stdout", "messages/room.jsonl",
};
static const char *const part_texts[] = {
	"export PATH=/usr/bin\ncd /root\n", "cd /home/user\n", "abcdefghijklmnop 8080\n",
	"{\"id\":\"p1\",\"status\":\"exited\"}\n", "hello\n", "{\"role\":\"user\",\"content\":\"hi\"}\n",
};
#define NPARTS (sizeof part_names / sizeof *part_names)

static void fill_parts(struct room_part *p)
{
	for (size_t i = 0; i < NPARTS; i++)
		p[i] = (struct room_part){ (char *)part_names[i], (unsigned char *)part_texts[i],
					   strlen(part_texts[i]) };
}

/* An export of dir into a memfd, rewound. */
static int export_dir(const char *dir, const struct room_key *k)
{
	char err[512];
	struct treewalk_stats st;
	struct room_part parts[NPARTS];
	int tree = walk_to_memfd(dir, &st), out = memfd_create("archive", 0);
	fill_parts(parts);
	if (archive_from_tree(tree, out, parts, NPARTS, k, err, sizeof err) < 0)
		fail_msg("export: %s", err);
	close(tree);
	assert_int_equal(lseek(out, 0, SEEK_SET), 0);
	return out;
}

/* A tree stream with no end record stops any reader short of its end. */
static void assert_stream_unvouched(int tree)
{
	struct ts_reader r;
	struct ts_limits lim = { UINT64_MAX, UINT64_MAX };
	char err[512];
	int rc;
	assert_int_equal(lseek(tree, 0, SEEK_SET), 0);
	assert_int_equal(ts_reader_init(&r, tree, &lim), 0);
	while ((rc = ts_read_record(&r, err, sizeof err)) > 0)
		;
	assert_int_equal(rc, -1);
	ts_reader_free(&r);
}

/* Imports the archive held in (p, len): 0 or -1 with err.  A refusal must
 * leave no parts and an unvouched tree stream. */
static int import_bytes(const void *p, size_t len, uint64_t budget, const struct room_key *k,
			char *err, size_t errlen)
{
	int in = memfd_create("in", 0), tree = memfd_create("tree", 0);
	struct room_parts parts = { (void *)1, 99 };
	assert_int_equal(write(in, p, len), (ssize_t)len);
	assert_int_equal(lseek(in, 0, SEEK_SET), 0);
	int rc = archive_to_tree(in, tree, budget, k, &parts, err, errlen);
	if (rc < 0) {
		assert_int_equal(parts.n, 0);
		assert_null(parts.v);
		assert_stream_unvouched(tree);
	}
	room_parts_free(&parts);
	close(in);
	close(tree);
	return rc;
}

static void expect_refused(const void *p, size_t len, uint64_t budget, const struct room_key *k,
			   const char *needle)
{
	char err[512] = "";
	if (import_bytes(p, len, budget, k, err, sizeof err) == 0)
		fail_msg("accepted, expected \"%s\"", needle);
	if (!strstr(err, needle))
		fail_msg("error \"%s\" lacks \"%s\"", err, needle);
}

static void test_round_trip(void **state)
{
	char err[512];
	char *src = mkdtemp_in_tmp(), *dst = mkdtemp_in_tmp();
	make_tree(src);
	int a = export_dir(src, &key), tree = memfd_create("tree", 0);
	struct room_parts parts;
	if (archive_to_tree(a, tree, 2 * GIB, &key, &parts, err, sizeof err) < 0)
		fail_msg("import: %s", err);
	assert_int_equal(parts.n, NPARTS);
	for (size_t i = 0; i < NPARTS; i++) {
		assert_string_equal(parts.v[i].name, part_names[i]);
		assert_int_equal(parts.v[i].len, strlen(part_texts[i]));
		assert_memory_equal(parts.v[i].data, part_texts[i], parts.v[i].len);
	}
	room_parts_free(&parts);
	assert_int_equal(lseek(tree, 0, SEEK_SET), 0);
	struct ts_limits lim = ts_limits_for_disk(2 * GIB);
	if (apply_stream(tree, dst, &lim, err, sizeof err) < 0)
		fail_msg("apply: %s", err);
	assert_same_tree(src, dst);

	struct stat sb;
	char p[512];
	snprintf(p, sizeof p, "%s/sparse.img", dst);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_size, GIB);
	assert_true(sb.st_blocks * 512 < 1 << 20);
	if (fixture_caps_ok) {
		unsigned char cap[32];
		snprintf(p, sizeof p, "%s/cap-bin", dst);
		assert_int_equal(getxattr(p, "security.capability", cap, sizeof cap), 20);
		assert_int_equal(cap[3], 0x02);
		assert_int_equal(cap[5], 0x04);
	} else {
		printf("note: no file capability in this run (not root, or the file system refused it)\n");
	}
	/* the export itself stays small: the holes are not in it */
	assert_int_equal(fstat(a, &sb), 0);
	assert_true(sb.st_size < 1 << 20);
	close(a);
	close(tree);
	rm_tree(src);
	rm_tree(dst);
	free(src);
	free(dst);
}

/* tar and zstd, as a user has them, list the export. */
static void test_tar_opens_it(void **state)
{
	char *src = mkdtemp_in_tmp(), cmd[256], line[512];
	make_tree(src);
	int a = export_dir(src, NULL);
	snprintf(cmd, sizeof cmd, "zstd -dc < /proc/%d/fd/%d | tar -t 2>&1", (int)getpid(), a);
	FILE *f = popen(cmd, "r");
	bool version = false, sparse = false, manifest = false;
	assert_non_null(f);
	while (fgets(line, sizeof line, f)) {
		version |= strcmp(line, "roombox/version\n") == 0;
		sparse |= strcmp(line, "state/sparse.img\n") == 0;
		manifest |= strcmp(line, "roombox/manifest\n") == 0;
	}
	assert_int_equal(pclose(f), 0);
	assert_true(version && sparse && manifest);
	close(a);
	rm_tree(src);
	free(src);
}

/* ---- spoilt exports ---- */

static unsigned char *good_export(size_t *len, const struct room_key *k, char **dir)
{
	*dir = mkdtemp_in_tmp();
	make_tree(*dir);
	int a = export_dir(*dir, k);
	unsigned char *p = slurp(a, len);
	close(a);
	return p;
}

static void test_truncated(void **state)
{
	char *dir;
	size_t len;
	unsigned char *p = good_export(&len, &key, &dir);
	char err[512];
	assert_int_equal(import_bytes(p, len, 2 * GIB, &key, err, sizeof err), 0);
	for (size_t cut = 0; cut < len; cut += len / 37 + 1)
		expect_refused(p, cut, 2 * GIB, &key, "import: ");
	expect_refused(p, len - 1, 2 * GIB, &key, "import: ");
	free(p);
	rm_tree(dir);
	free(dir);
}

static void test_flipped_bytes(void **state)
{
	char *dir;
	size_t len;
	unsigned char *p = good_export(&len, &key, &dir);
	for (size_t at = 0; at < len; at += len / 53 + 1) {
		p[at] ^= 0x20;
		expect_refused(p, len, 2 * GIB, &key, "import: ");
		p[at] ^= 0x20;
	}
	free(p);
	rm_tree(dir);
	free(dir);
}

static void test_hmac(void **state)
{
	char *dir, err[512];
	size_t len;
	unsigned char *p = good_export(&len, &key, &dir);
	expect_refused(p, len, 2 * GIB, &other_key, "roombox/manifest.hmac: wrong HMAC");
	/* no key here: the HMAC cannot be checked, the digests still are */
	assert_int_equal(import_bytes(p, len, 2 * GIB, NULL, err, sizeof err), 0);
	free(p);
	rm_tree(dir);
	free(dir);
	p = good_export(&len, NULL, &dir);
	expect_refused(p, len, 2 * GIB, &key, "roombox/manifest.hmac: missing, and a key is set");
	free(p);
	rm_tree(dir);
	free(dir);
}

/* ---- the versions ---- */

/* in through `cmd` (a shell filter reading stdin): its output. */
static unsigned char *filter(const char *cmd, const unsigned char *in, size_t len, size_t *outlen)
{
	char sh[512];
	int fd = memfd_create("filter-in", 0);
	assert_int_equal(write(fd, in, len), (ssize_t)len);
	snprintf(sh, sizeof sh, "%s < /proc/%d/fd/%d", cmd, (int)getpid(), fd);
	FILE *f = popen(sh, "r");
	assert_non_null(f);
	unsigned char *out = NULL;
	size_t n = 0, cap = 0, k;
	do {
		if (n == cap) {
			cap = cap ? 2 * cap : 1 << 16;
			out = realloc(out, cap);
			assert_non_null(out);
		}
		k = fread(out + n, 1, cap - n, f);
		n += k;
	} while (k > 0);
	assert_int_equal(pclose(f), 0);
	close(fd);
	*outlen = n;
	return out;
}

static void replace_once(unsigned char *p, size_t len, const char *from, const char *to)
{
	unsigned char *at = memmem(p, len, from, strlen(from));
	assert_non_null(at);
	assert_int_equal(strlen(from), strlen(to));
	memcpy(at, to, strlen(to));
}

static void sha256_hex(const void *p, size_t n, char hex[65])
{
	unsigned char d[32];
	unsigned dn;
	EVP_Digest(p, n, d, &dn, EVP_sha256(), NULL);
	for (int i = 0; i < 32; i++)
		sprintf(hex + 2 * i, "%02x", d[i]);
}

#define LEAD "\x5e\x2a\x4d\x18\x0f\x00\x00\x00roombox-room 2\n"
#define LEAD_N 23
#define SEAL2_N 40

/* A version 2 export made into the version 1 archive the same room made
 * before: no lead frame, "roombox-room 1" (and its digest in the
 * manifest), recompressed, sealed with the SHA-256 of every byte.  Only
 * for an export without a key (the HMAC would change). */
static unsigned char *as_version_1(const unsigned char *p, size_t len, size_t *outlen)
{
	char h2[65], h1[65];
	size_t tlen, zlen;
	assert_true(len > LEAD_N + SEAL2_N);
	assert_memory_equal(p, LEAD, LEAD_N);
	unsigned char *tar = filter("zstd -q -dc", p + LEAD_N, len - LEAD_N - SEAL2_N, &tlen);
	replace_once(tar, tlen, "roombox-room 2\n", "roombox-room 1\n");
	sha256_hex("roombox-room 2\n", 15, h2);
	sha256_hex("roombox-room 1\n", 15, h1);
	replace_once(tar, tlen, h2, h1);
	unsigned char *z = filter("zstd -q -1 -c", tar, tlen, &zlen);
	free(tar);
	z = realloc(z, zlen + 88);
	assert_non_null(z);
	char hex[65];
	sha256_hex(z, zlen, hex);
	memcpy(z + zlen, "\x5e\x2a\x4d\x18\x50\x00\x00\x00roombox-seal 1\n", 23);
	memcpy(z + zlen + 23, hex, 64);
	z[zlen + 87] = '\n';
	*outlen = zlen + 88;
	return z;
}

/* An export opens with the lead frame and ends in the version 2 seal:
 * "roombox-seal 2", the XXH64 of every byte before it. */
static void test_version_2_lead_and_seal(void **state)
{
	char *dir, want[64];
	size_t len;
	unsigned char *p = good_export(&len, NULL, &dir);
	assert_memory_equal(p, LEAD, LEAD_N);
	snprintf(want, sizeof want, "roombox-seal 2\n%016llx\n",
		 (unsigned long long)XXH64(p, len - SEAL2_N, 0));
	assert_memory_equal(p + len - SEAL2_N, "\x5e\x2a\x4d\x18\x20\x00\x00\x00", 8);
	assert_memory_equal(p + len - SEAL2_N + 8, want, SEAL2_N - 8);
	free(p);
	rm_tree(dir);
	free(dir);
}

/* An old backup (version 1) still imports, whole; a version 1 archive
 * cannot pass for 2 or the other way round. */
static void test_version_1_imports(void **state)
{
	char err[512], *dir, *dst = mkdtemp_in_tmp();
	size_t len, l1;
	unsigned char *p = good_export(&len, NULL, &dir);
	unsigned char *v1 = as_version_1(p, len, &l1);
	int in = memfd_create("in", 0), tree = memfd_create("tree", 0);
	struct room_parts parts;
	assert_int_equal(write(in, v1, l1), (ssize_t)l1);
	assert_int_equal(lseek(in, 0, SEEK_SET), 0);
	if (archive_to_tree(in, tree, 2 * GIB, NULL, &parts, err, sizeof err) < 0)
		fail_msg("import of version 1: %s", err);
	assert_int_equal(parts.n, NPARTS);
	room_parts_free(&parts);
	assert_int_equal(lseek(tree, 0, SEEK_SET), 0);
	struct ts_limits lim = ts_limits_for_disk(2 * GIB);
	if (apply_stream(tree, dst, &lim, err, sizeof err) < 0)
		fail_msg("apply: %s", err);
	assert_same_tree(dir, dst);
	close(in);
	close(tree);
	/* spoilt as a version 2 would be: refused the same */
	v1[l1 / 3] ^= 0x20;
	expect_refused(v1, l1, 2 * GIB, NULL, "import: ");
	v1[l1 / 3] ^= 0x20;
	expect_refused(v1, l1 - 1, 2 * GIB, NULL, "import: ");
	/* a lead frame before a version 1 archive */
	unsigned char *led = malloc(LEAD_N + l1);
	assert_non_null(led);
	memcpy(led, LEAD, LEAD_N);
	memcpy(led + LEAD_N, v1, l1);
	expect_refused(led, LEAD_N + l1, 2 * GIB, NULL, "roombox/version: not a version this reads");
	/* a version 2 archive without its lead */
	expect_refused(p + LEAD_N, len - LEAD_N, 2 * GIB, NULL, "roombox/version: not a version this reads");
	free(led);
	free(v1);
	free(p);
	rm_tree(dir);
	rm_tree(dst);
	free(dir);
	free(dst);
}

/* ---- archives built by hand ---- */

struct hand {
	struct archive *a;
	struct archive_entry *e;
	int fd;
};

static void hand_open(struct hand *h)
{
	h->fd = memfd_create("hand", 0);
	h->a = archive_write_new();
	h->e = archive_entry_new();
	assert_int_equal(archive_write_add_filter_zstd(h->a), ARCHIVE_OK);
	assert_int_equal(archive_write_set_format_pax(h->a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_fd(h->a, h->fd), ARCHIVE_OK);
}

static void hand_entry(struct hand *h, const char *name, mode_t type, mode_t perm, const char *link,
		       int64_t size, const void *data, size_t dlen)
{
	archive_entry_clear(h->e);
	archive_entry_set_pathname(h->e, name);
	archive_entry_set_filetype(h->e, type);
	archive_entry_set_perm(h->e, perm);
	archive_entry_set_size(h->e, size);
	if (link && type == AE_IFLNK)
		archive_entry_set_symlink(h->e, link);
	else if (link)
		archive_entry_set_hardlink(h->e, link);
	if (type == AE_IFCHR)
		archive_entry_set_rdev(h->e, perm == 0 ? makedev(0, 0) : makedev(1, 3));
	assert_int_equal(archive_write_header(h->a, h->e), ARCHIVE_OK);
	if (dlen)
		assert_int_equal(archive_write_data(h->a, data, dlen), (la_ssize_t)dlen);
}

/* The version and the root, as every archive starts (version 1: no lead
 * frame before the zstd stream). */
static void hand_start(struct hand *h)
{
	hand_open(h);
	hand_entry(h, "roombox/version", AE_IFREG, 0600, NULL, strlen(ROOM_ARCHIVE_VERSION_1),
		   ROOM_ARCHIVE_VERSION_1, strlen(ROOM_ARCHIVE_VERSION_1));
	hand_entry(h, "state/", AE_IFDIR, 0755, NULL, 0, NULL, 0);
}

static unsigned char *hand_close(struct hand *h, size_t *len)
{
	assert_int_equal(archive_write_close(h->a), ARCHIVE_OK);
	archive_write_free(h->a);
	archive_entry_free(h->e);
	unsigned char *p = slurp(h->fd, len);
	close(h->fd);
	return p;
}

static void refuse_hand(struct hand *h, uint64_t budget, const char *needle)
{
	size_t len;
	unsigned char *p = hand_close(h, &len);
	expect_refused(p, len, budget, NULL, needle);
	free(p);
}

static void test_paths_outside(void **state)
{
	struct hand h;
	hand_start(&h);
	hand_entry(&h, "state/../../etc/cron.d/x", AE_IFREG, 0644, NULL, 0, NULL, 0);
	refuse_hand(&h, GIB, "import: state/../../etc/cron.d/x: \"..\" component");
	hand_start(&h);
	hand_entry(&h, "/etc/passwd", AE_IFREG, 0644, NULL, 0, NULL, 0);
	refuse_hand(&h, GIB, "import: /etc/passwd: not a member of a room archive");
	hand_start(&h);
	hand_entry(&h, "state//etc/passwd", AE_IFREG, 0644, NULL, 0, NULL, 0);
	refuse_hand(&h, GIB, "absolute path");
	hand_start(&h);
	hand_entry(&h, "state/lnk", AE_IFLNK, 0777, "/etc", 0, NULL, 0);
	hand_entry(&h, "state/lnk/passwd", AE_IFREG, 0644, NULL, 5, "root\n", 5);
	refuse_hand(&h, GIB, "import: state/lnk/passwd: parent is symlink");
	hand_start(&h);
	hand_entry(&h, "state/h", AE_IFREG, 0644, "/etc/shadow", 0, NULL, 0);
	refuse_hand(&h, GIB, "import: state/h: hard link to /etc/shadow, outside the room");
	hand_start(&h);
	hand_entry(&h, "state/h", AE_IFREG, 0644, "state/../../etc/shadow", 0, NULL, 0);
	refuse_hand(&h, GIB, "import: state/h: hard link target ../../etc/shadow: \"..\" component");
	hand_start(&h);
	hand_entry(&h, "state/h", AE_IFREG, 0644, "state/nothing", 0, NULL, 0);
	refuse_hand(&h, GIB, "import: state/h: hard link to nothing, not an earlier file");
}

static void test_devices_and_order(void **state)
{
	struct hand h;
	hand_start(&h);
	hand_entry(&h, "state/null", AE_IFCHR, 0666, NULL, 0, NULL, 0);
	refuse_hand(&h, GIB, "import: state/null: a device node is not allowed");
	hand_start(&h);
	hand_entry(&h, "state/sda", AE_IFBLK, 0660, NULL, 0, NULL, 0);
	refuse_hand(&h, GIB, "import: state/sda: a device node is not allowed");
	/* a character device 0/0 is an overlay whiteout, no device: it gets
	 * past its member (to be refused only at the missing manifest) */
	hand_start(&h);
	hand_entry(&h, "state/gone", AE_IFCHR, 0, NULL, 0, NULL, 0);
	refuse_hand(&h, GIB, "import: the archive ends before its manifest");
	/* the version must come first, the root before the rest */
	hand_open(&h);
	hand_entry(&h, "state/", AE_IFDIR, 0755, NULL, 0, NULL, 0);
	refuse_hand(&h, GIB, "import: state/: the archive must start with roombox/version");
	hand_open(&h);
	hand_entry(&h, "roombox/version", AE_IFREG, 0600, NULL, strlen(ROOM_ARCHIVE_VERSION_1),
		   ROOM_ARCHIVE_VERSION_1, strlen(ROOM_ARCHIVE_VERSION_1));
	hand_entry(&h, "state/x", AE_IFREG, 0644, NULL, 0, NULL, 0);
	refuse_hand(&h, GIB, "import: state/x: the root directory");
	/* a bare tar, though all else were right */
	h.fd = memfd_create("hand", 0);
	h.a = archive_write_new();
	h.e = archive_entry_new();
	assert_int_equal(archive_write_set_format_pax(h.a), ARCHIVE_OK);
	assert_int_equal(archive_write_open_fd(h.a, h.fd), ARCHIVE_OK);
	hand_entry(&h, "roombox/version", AE_IFREG, 0600, NULL, strlen(ROOM_ARCHIVE_VERSION_1),
		   ROOM_ARCHIVE_VERSION_1, strlen(ROOM_ARCHIVE_VERSION_1));
	refuse_hand(&h, GIB, "import: not a zstd-compressed archive");
	/* no manifest at all */
	hand_start(&h);
	hand_entry(&h, "state/x", AE_IFREG, 0644, NULL, 0, NULL, 0);
	refuse_hand(&h, GIB, "the archive ends before its manifest");
	/* a manifest that lists nothing the archive holds */
	hand_start(&h);
	hand_entry(&h, "roombox/manifest", AE_IFREG, 0600, NULL, 19, "roombox-manifest 1\n", 19);
	refuse_hand(&h, GIB, "roombox/manifest");
}

static void test_sizes(void **state)
{
	struct hand h;
	static char blob[2 << 20];
	/* larger than the whole budget: refused at its header */
	hand_start(&h);
	hand_entry(&h, "state/big", AE_IFREG, 0644, NULL, sizeof blob, blob, sizeof blob);
	refuse_hand(&h, 1 << 20, "import: state/big: size 2097152 larger than the budget of 1048576");
	/* small files adding up past the budget: refused at the one that crosses */
	hand_start(&h);
	for (int i = 0; i < 8; i++) {
		char n[32];
		snprintf(n, sizeof n, "state/f%d", i);
		hand_entry(&h, n, AE_IFREG, 0644, NULL, 300000, blob, 300000);
	}
	refuse_hand(&h, 1 << 20, "over the byte budget of 1048576");
	/* a sparse member of 1 TiB apparent size */
	hand_start(&h);
	archive_entry_clear(h.e);
	archive_entry_set_pathname(h.e, "state/huge");
	archive_entry_set_filetype(h.e, AE_IFREG);
	archive_entry_set_perm(h.e, 0644);
	archive_entry_set_size(h.e, 1ll << 40);
	archive_entry_sparse_add_entry(h.e, 0, 4096);
	archive_entry_sparse_add_entry(h.e, 1ll << 40, 0);
	assert_int_equal(archive_write_header(h.a, h.e), ARCHIVE_OK);
	assert_int_equal(archive_write_data(h.a, blob, 4096), 4096);
	refuse_hand(&h, GIB, "import: state/huge: size 1099511627776 larger than the budget of 1073741824");
}

static void test_many_entries(void **state)
{
	struct hand h;
	hand_start(&h);
	hand_entry(&h, "state/d", AE_IFDIR, 0755, NULL, 0, NULL, 0);
	for (int i = 0; i < 100000; i++) {
		char n[32];
		snprintf(n, sizeof n, "state/d/%d", i);
		hand_entry(&h, n, AE_IFREG, 0644, NULL, 1, "x", 1);
	}
	/* a 1 GiB room disk has 65536 inodes */
	refuse_hand(&h, GIB, "import: state/d/65534: more than 65536 entries");
}

static void test_setuid_lands_harmlessly(void **state)
{
	/* kept as it was: the room's root owns it, its ids are the room's,
	 * and the room's file systems are mounted nosuid */
	char err[512], *src = mkdtemp_in_tmp(), *dst = mkdtemp_in_tmp(), p[512];
	make_tree(src);
	int a = export_dir(src, NULL), tree = memfd_create("tree", 0);
	struct room_parts parts;
	if (archive_to_tree(a, tree, 2 * GIB, NULL, &parts, err, sizeof err) < 0)
		fail_msg("import: %s", err);
	room_parts_free(&parts);
	assert_int_equal(lseek(tree, 0, SEEK_SET), 0);
	struct ts_limits lim = ts_limits_for_disk(2 * GIB);
	assert_int_equal(apply_stream(tree, dst, &lim, err, sizeof err), 0);
	struct stat sb;
	snprintf(p, sizeof p, "%s/suid-root", dst);
	assert_int_equal(stat(p, &sb), 0);
	assert_int_equal(sb.st_mode & 07777, 04755);
	close(a);
	close(tree);
	rm_tree(src);
	rm_tree(dst);
	free(src);
	free(dst);
}

static void test_part_names(void **state)
{
	assert_int_equal(room_part_name_ok("session/root"), 0);
	assert_int_equal(room_part_name_ok("processes/p1.stdout.1"), 0);
	assert_int_equal(room_part_name_ok("messages/room.jsonl"), 0);
	assert_int_equal(room_part_name_ok("processes/../x"), -1);
	assert_int_equal(room_part_name_ok("processes/.hidden"), -1);
	assert_int_equal(room_part_name_ok("session/other"), -1);
	assert_int_equal(room_part_name_ok("state/x"), -1);
	struct hand h;
	hand_start(&h);
	hand_entry(&h, "messages/m.jsonl", AE_IFREG, 0600, NULL, 1, "x", 1);
	hand_entry(&h, "session/root", AE_IFREG, 0600, NULL, 1, "x", 1);
	refuse_hand(&h, GIB, "import: session/root: out of order");
	hand_start(&h);
	hand_entry(&h, "processes/../../x", AE_IFREG, 0600, NULL, 1, "x", 1);
	refuse_hand(&h, GIB, "import: processes/../../x: not a member of a room archive");
}

/* The manifest line the format defines for a regular file of one data
 * extent with no xattrs, computed here from its bytes. */
static void file_line(const char *dir, const char *name, const unsigned char *data, size_t n,
		      char *line, size_t linelen)
{
	char path[512], meta[256], hex[65];
	unsigned char dd[32], dm[32], dg[32];
	unsigned dn;
	struct stat sb;
	snprintf(path, sizeof path, "%s/%s", dir, name);
	assert_int_equal(stat(path, &sb), 0);
	int ml = snprintf(meta, sizeof meta, "2 %o %u %u %lld.%09ld %zu\n", (unsigned)(sb.st_mode & 07777),
			  (unsigned)sb.st_uid, (unsigned)sb.st_gid, (long long)sb.st_mtim.tv_sec,
			  sb.st_mtim.tv_nsec, n);
	memcpy(meta + ml, name, strlen(name) + 1);
	ml += (int)strlen(name) + 1;
	meta[ml++] = '\0';   /* no link target */
	char map[64];
	int mapl = snprintf(map, sizeof map, "0 %zu\n", n);
	EVP_Digest(data, n, dd, &dn, EVP_sha256(), NULL);
	EVP_Digest(map, (size_t)mapl, dm, &dn, EVP_sha256(), NULL);
	EVP_MD_CTX *c = EVP_MD_CTX_new();
	EVP_DigestInit_ex(c, EVP_sha256(), NULL);
	EVP_DigestUpdate(c, meta, (size_t)ml);
	EVP_DigestUpdate(c, dd, 32);
	EVP_DigestUpdate(c, dm, 32);
	EVP_DigestFinal_ex(c, dg, &dn);
	EVP_MD_CTX_free(c);
	for (int i = 0; i < 32; i++)
		sprintf(hex + 2 * i, "%02x", dg[i]);
	snprintf(line, linelen, "%s state/%s\n", hex, name);
}

/* A room with more data than the manifest hashes inline (its digests then
 * taken on a thread of their own, through a ring the big files wrap many
 * times), files before, between and after them: every line as the format
 * defines it, in archive order, and the import agrees. */
static void test_large_manifest(void **state)
{
	char err[512], line[600];
	char *src = mkdtemp_in_tmp(), *dst = mkdtemp_in_tmp();
	size_t big = 13u << 20;
	unsigned char *data = malloc(big);
	assert_non_null(data);
	for (size_t i = 0; i < big; i++)
		data[i] = (unsigned char)(i * 2654435761u >> 13);
	int d = open(src, O_RDONLY | O_DIRECTORY);
	assert_true(d >= 0);
	put_file(d, "a-first", "before the big ones\n", 0644);
	int fd = openat(d, "big-1", O_WRONLY | O_CREAT | O_TRUNC, 0644);
	assert_int_equal(write(fd, data, big), (ssize_t)big);
	close(fd);
	for (int i = 0; i < 300; i++) {
		char name[32], text[64];
		snprintf(name, sizeof name, "c-small-%03d", i);
		snprintf(text, sizeof text, "small file %d\n", i);
		put_file(d, name, text, 0600);
	}
	fd = openat(d, "d-big-2", O_WRONLY | O_CREAT | O_TRUNC, 0640);
	assert_int_equal(write(fd, data + 1, big - 1), (ssize_t)(big - 1));
	close(fd);
	put_file(d, "z-last", "after them\n", 0644);
	close(d);

	int a = export_dir(src, &key);
	struct stat sb;
	assert_int_equal(fstat(a, &sb), 0);
	unsigned char *arch = malloc((size_t)sb.st_size);
	assert_int_equal(read(a, arch, (size_t)sb.st_size), sb.st_size);
	size_t mlen;
	unsigned char *manifest = filter("(zstd -q -dc | tar -xOf - roombox/manifest)", arch, (size_t)sb.st_size,
					 &mlen);
	manifest = realloc(manifest, mlen + 1);
	manifest[mlen] = '\0';
	const char *at = (const char *)manifest;
	file_line(src, "big-1", data, big, line, sizeof line);
	assert_non_null(at = strstr(at, line));
	for (int i = 0; i < 300; i++) {
		char needle[48];
		snprintf(needle, sizeof needle, " state/c-small-%03d\n", i);
		assert_non_null(at = strstr(at, needle));
	}
	file_line(src, "d-big-2", data + 1, big - 1, line, sizeof line);
	assert_non_null(at = strstr(at, line));
	assert_non_null(strstr(at, " state/z-last\n"));

	int tree = memfd_create("tree", 0);
	struct room_parts parts;
	assert_int_equal(lseek(a, 0, SEEK_SET), 0);
	if (archive_to_tree(a, tree, 2 * GIB, &key, &parts, err, sizeof err) < 0)
		fail_msg("import: %s", err);
	room_parts_free(&parts);
	assert_int_equal(lseek(tree, 0, SEEK_SET), 0);
	struct ts_limits lim = ts_limits_for_disk(2 * GIB);
	if (apply_stream(tree, dst, &lim, err, sizeof err) < 0)
		fail_msg("apply: %s", err);
	assert_same_tree(src, dst);
	free(manifest);
	free(arch);
	free(data);
	close(a);
	close(tree);
	rm_tree(src);
	rm_tree(dst);
	free(src);
	free(dst);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_tar_opens_it),
		cmocka_unit_test(test_truncated),
		cmocka_unit_test(test_flipped_bytes),
		cmocka_unit_test(test_hmac),
		cmocka_unit_test(test_version_2_lead_and_seal),
		cmocka_unit_test(test_version_1_imports),
		cmocka_unit_test(test_paths_outside),
		cmocka_unit_test(test_devices_and_order),
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_many_entries),
		cmocka_unit_test(test_setuid_lands_harmlessly),
		cmocka_unit_test(test_part_names),
		cmocka_unit_test(test_large_manifest),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
