/* Unit tests for the mask over the shared host trees (hostmask.c): which
 * modes it hides, the whiteouts and mirrored directories it builds for a
 * tree made here (whole trees below a closed directory), when its key
 * changes, when a full walk makes a new mask, and the removal of builds a
 * killed helper left.  Run as root (the mask copies owners, and reads the
 * tree through a clone of its mount). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmocka.h>

#include "hostmask.h"

static const struct hostmask_tree trees[] = {
	{ "usr", "usr" }, { "lib32", "lib32" }, { "var/lib/dpkg", "var-lib-dpkg" },
};
#define N_TREES (sizeof(trees) / sizeof(trees[0]))

static char top[64];      /* /tmp/rbx-hostmask-XXXXXX: host/ and mask */
static char host[128];

static void path_at(char *p, size_t len, const char *base, const char *rel)
{
	snprintf(p, len, "%s/%s", base, rel);
}

static void make_dir(const char *rel, mode_t mode, uid_t uid, gid_t gid)
{
	char p[512];
	path_at(p, sizeof(p), host, rel);
	assert_int_equal(mkdir(p, 0700), 0);
	assert_int_equal(chown(p, uid, gid), 0);
	assert_int_equal(chmod(p, mode), 0);
}

static void make_file(const char *rel, mode_t mode)
{
	char p[512];
	path_at(p, sizeof(p), host, rel);
	int fd = open(p, O_WRONLY | O_CREAT | O_EXCL, 0600);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x\n", 2), 2);
	close(fd);
	assert_int_equal(chmod(p, mode), 0);
}

static void set_mtime(const char *rel, time_t mtime)
{
	char p[512];
	path_at(p, sizeof(p), host, rel);
	struct timespec t[2] = { { mtime, 0 }, { mtime, 0 } };
	assert_int_equal(utimensat(AT_FDCWD, p, t, AT_SYMLINK_NOFOLLOW), 0);
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static int setup(void **state)
{
	snprintf(top, sizeof(top), "/tmp/rbx-hostmask-XXXXXX");
	if (!mkdtemp(top))
		return -1;
	snprintf(host, sizeof(host), "%s/host", top);
	return mkdir(host, 0755);
}

static int teardown(void **state)
{
	return nftw(top, remove_one, 128, FTW_DEPTH | FTW_PHYS);
}

/* The host tree of the tests: usr/ and var/lib/dpkg/ (no lib32).  Type
 * 'd' directory, 'f' file, 'l' symlink (to target). */
static const struct entry {
	char type;
	const char *rel;
	mode_t mode;
	uid_t uid;
	gid_t gid;
	const char *target;
} host_tree[] = {
	{ 'd', "usr", 0755, 0, 0, NULL }, { 'd', "usr/share", 0755, 0, 0, NULL },
	{ 'f', "usr/share/secret", 0600, 0, 0, NULL }, { 'f', "usr/share/public", 0644, 0, 0, NULL },
	{ 'd', "usr/share/private", 0700, 123, 45, NULL }, { 'f', "usr/share/private/inner", 0644, 0, 0, NULL },
	{ 'd', "usr/share/listonly", 0711, 0, 0, NULL },
	{ 'd', "usr/lib", 0755, 0, 0, NULL }, { 'd', "usr/lib/x", 0775, 7, 8, NULL }, { 'd', "usr/lib/x/y", 02755, 0, 50, NULL },
	{ 'f', "usr/lib/x/y/deep", 0640, 0, 0, NULL }, { 'f', "usr/lib/x/y/open", 0644, 0, 0, NULL },
	{ 'd', "usr/bin", 0755, 0, 0, NULL }, { 'f', "usr/bin/tool", 0711, 0, 0, NULL },
	{ 'l', "usr/bin/link", 0, 0, 0, "../share/secret" },
	{ 'd', "var", 0755, 0, 0, NULL }, { 'd', "var/lib", 0755, 0, 0, NULL }, { 'd', "var/lib/dpkg", 0755, 0, 0, NULL },
	{ 'f', "var/lib/dpkg/lock", 0640, 0, 0, NULL }, { 'f', "var/lib/dpkg/status", 0644, 0, 0, NULL },
};

static void make_host_tree(void)
{
	for (size_t i = 0; i < sizeof(host_tree) / sizeof(host_tree[0]); i++) {
		const struct entry *e = &host_tree[i];
		char p[512];
		path_at(p, sizeof(p), host, e->rel);
		if (e->type == 'd')
			make_dir(e->rel, e->mode, e->uid, e->gid);
		else if (e->type == 'f')
			make_file(e->rel, e->mode);
		else
			assert_int_equal(symlink(e->target, p), 0);
	}
	/* directories' times last: adding to them changed them */
	set_mtime("usr/lib/x/y", 1000000000);
	set_mtime("usr/lib/x", 1100000000);
	set_mtime("usr/share", 1200000000);
}

/* Every entry of the mask, as "path type" lines, sorted by nftw's walk. */
static char listing[4096];
static size_t listing_len;
static char mask_top[256];

static int list_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	const char *rel = path + strlen(mask_top);
	char type = S_ISDIR(st->st_mode) ? 'd' :
		    S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0) ? 'w' : '?';
	listing_len += (size_t)snprintf(listing + listing_len, sizeof(listing) - listing_len,
					"%s %c\n", *rel ? rel : "/", type);
	return 0;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The listing's lines sorted, joined. */
static void sorted_listing(char *out, size_t len)
{
	char *lines[64];
	size_t n = 0;
	for (char *s = strtok(listing, "\n"); s && n < 64; s = strtok(NULL, "\n"))
		lines[n++] = s;
	qsort(lines, n, sizeof(lines[0]), by_name);
	out[0] = '\0';
	for (size_t i = 0; i < n; i++) {
		strncat(out, lines[i], len - strlen(out) - 2);
		strcat(out, "\n");
	}
}

static void test_hides_by_mode(void **state)
{
	static const struct { mode_t mode; int hidden; } cases[] = {
		{ S_IFREG | 0600, 1 }, { S_IFREG | 0640, 1 }, { S_IFREG | 04711, 1 },
		{ S_IFREG | 0644, 0 }, { S_IFREG | 0604, 0 },
		{ S_IFDIR | 0700, 1 }, { S_IFDIR | 0711, 1 }, { S_IFDIR | 0754, 1 },
		{ S_IFDIR | 0755, 0 }, { S_IFDIR | 01777, 0 },
		{ S_IFLNK | 0777, 0 }, { S_IFSOCK | 0660, 1 },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		if (!hostmask_hides(cases[i].mode) != !cases[i].hidden)
			fail_msg("mode %o: hidden %d, wanted %d", cases[i].mode,
				 hostmask_hides(cases[i].mode), cases[i].hidden);
}

/* The mask of the host tree built into mask_top, and its sorted listing. */
static void build_and_list(char *out, size_t len)
{
	char err[512] = "";
	uint64_t sum;
	snprintf(mask_top, sizeof(mask_top), "%s/mask", top);
	if (hostmask_build(host, trees, N_TREES, mask_top, &sum, err, sizeof(err)) < 0)
		fail_msg("build: %s", err);
	listing_len = 0;
	assert_int_equal(nftw(mask_top, list_one, 16, FTW_PHYS), 0);
	sorted_listing(out, len);
}

static void test_mask_hides_what_others_may_not_read(void **state)
{
	char err[512] = "", out[4096];
	uint64_t sum;
	make_host_tree();
	build_and_list(out, sizeof(out));
	/* whiteouts for the secrets, the directories leading to them, nothing
	 * else: no public file, no link, nothing under a hidden directory,
	 * no tree the host lacks */
	assert_string_equal(out,
		"/ d\n"
		"/usr d\n"
		"/usr/bin d\n"
		"/usr/bin/tool w\n"
		"/usr/lib d\n"
		"/usr/lib/x d\n"
		"/usr/lib/x/y d\n"
		"/usr/lib/x/y/deep w\n"
		"/usr/share d\n"
		"/usr/share/listonly w\n"
		"/usr/share/private w\n"
		"/usr/share/secret w\n"
		"/var-lib-dpkg d\n"
		"/var-lib-dpkg/lock w\n");
	/* the copies have the host directories' owner, mode and mtime */
	static const struct { const char *rel; } same[] = {
		{ "usr/lib/x" }, { "usr/lib/x/y" }, { "usr/share" }, { "usr/bin" },
	};
	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		char h[512], m[512];
		struct stat hs, ms;
		path_at(h, sizeof(h), host, same[i].rel);
		path_at(m, sizeof(m), mask_top, same[i].rel);
		assert_int_equal(lstat(h, &hs), 0);
		assert_int_equal(lstat(m, &ms), 0);
		if (hs.st_mode != ms.st_mode || hs.st_uid != ms.st_uid || hs.st_gid != ms.st_gid ||
		    hs.st_mtim.tv_sec != ms.st_mtim.tv_sec || hs.st_mtim.tv_nsec != ms.st_mtim.tv_nsec)
			fail_msg("%s: host %o %d:%d %ld, mask %o %d:%d %ld", same[i].rel,
				 hs.st_mode, (int)hs.st_uid, (int)hs.st_gid, (long)hs.st_mtim.tv_sec,
				 ms.st_mode, (int)ms.st_uid, (int)ms.st_gid, (long)ms.st_mtim.tv_sec);
	}
	/* a second build into the same place is refused: masks never change */
	assert_int_equal(hostmask_build(host, trees, N_TREES, mask_top, &sum, err, sizeof(err)), -1);
}

static uint64_t key_now(void)
{
	uint64_t k;
	assert_int_equal(hostmask_key(host, trees, N_TREES, &k), 0);
	return k;
}

static void test_key_follows_the_top_two_levels(void **state)
{
	make_host_tree();
	uint64_t k0 = key_now();
	assert_true(k0 == key_now());
	/* a new entry in a first-level directory (what the security test
	 * plants in /usr/share) */
	make_file("usr/share/new-secret", 0600);
	uint64_t k1 = key_now();
	assert_true(k1 != k0);
	/* a mode changed directly in a tree's root */
	char p[512];
	path_at(p, sizeof(p), host, "usr/bin");
	assert_int_equal(chmod(p, 0700), 0);
	uint64_t k2 = key_now();
	assert_true(k2 != k1);
	/* dpkg rewriting its status (a new file renamed over it) */
	make_file("var/lib/dpkg/status-new", 0644);
	char q[512];
	path_at(q, sizeof(q), host, "var/lib/dpkg/status");
	path_at(p, sizeof(p), host, "var/lib/dpkg/status-new");
	assert_int_equal(rename(p, q), 0);
	uint64_t k3 = key_now();
	assert_true(k3 != k2);
	/* a directory above a tree (closing it hides the tree whole) */
	path_at(p, sizeof(p), host, "var/lib");
	assert_int_equal(chmod(p, 0700), 0);
	assert_true(key_now() != k3);
}

/* A tree whose root, or a directory above it, others may not list and
 * search is hidden whole: a whiteout for each entry of its root. */
static void test_a_tree_below_a_closed_directory_is_hidden_whole(void **state)
{
	char out[4096], p[512];
	make_host_tree();
	path_at(p, sizeof(p), host, "var/lib");
	assert_int_equal(chmod(p, 0700), 0);
	path_at(p, sizeof(p), host, "usr");
	assert_int_equal(chmod(p, 0750), 0);
	build_and_list(out, sizeof(out));
	assert_string_equal(out,
		"/ d\n"
		"/usr d\n"
		"/usr/bin w\n"
		"/usr/lib w\n"
		"/usr/share w\n"
		"/var-lib-dpkg d\n"
		"/var-lib-dpkg/lock w\n"
		"/var-lib-dpkg/status w\n");
}

static char run[128];

static void current(unsigned max_age, char *out, size_t len)
{
	char err[512] = "";
	if (hostmask_current(host, run, trees, N_TREES, max_age, out, len, err, sizeof(err)) < 0)
		fail_msg("current: %s", err);
}

static int whiteout_in(const char *mask, const char *rel)
{
	char p[512];
	struct stat st;
	path_at(p, sizeof(p), mask, rel);
	return lstat(p, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0);
}

/* A file made owner-only three levels down changes no key: a full walk
 * (due once the last is max_age old) sees it and makes a new mask. */
static void test_a_full_walk_finds_a_change_deep_down(void **state)
{
	char m0[512], m1[512], m2[512], m3[512], p[512];
	make_host_tree();
	snprintf(run, sizeof(run), "%s/run", top);
	assert_int_equal(mkdir(run, 0700), 0);
	current(3600, m0, sizeof(m0));
	assert_true(whiteout_in(m0, "usr/lib/x/y/deep"));
	assert_false(whiteout_in(m0, "usr/lib/x/y/open"));
	path_at(p, sizeof(p), host, "usr/lib/x/y/open");
	assert_int_equal(chmod(p, 0600), 0);
	/* the last full walk is recent: the key alone, unchanged */
	current(3600, m1, sizeof(m1));
	assert_string_equal(m1, m0);
	/* a full walk due */
	current(0, m2, sizeof(m2));
	assert_string_not_equal(m2, m0);
	assert_true(whiteout_in(m2, "usr/lib/x/y/open"));
	struct stat st;
	assert_int_equal(lstat(m0, &st), 0);    /* the old one stays: a room may use it */
	/* nothing changed since: the same mask */
	current(0, m3, sizeof(m3));
	assert_string_equal(m3, m2);
}

/* A build a killed helper left, deeper than any walk with a depth limit
 * of 16 reaches, is removed by the next build. */
static void test_an_unfinished_build_is_removed(void **state)
{
	char p[4096], out[512];
	make_host_tree();
	snprintf(run, sizeof(run), "%s/run", top);
	assert_int_equal(mkdir(run, 0700), 0);
	int n = snprintf(p, sizeof(p), "%s/mask-0123456789abcdef.tmp.0000000042", run);
	assert_int_equal(mkdir(p, 0755), 0);
	for (int i = 0; i < 70; i++) {
		n += snprintf(p + n, sizeof(p) - (size_t)n, "/d");
		assert_int_equal(mkdir(p, 0755), 0);
	}
	snprintf(p + n, sizeof(p) - (size_t)n, "/w");
	assert_int_equal(mknod(p, S_IFCHR | 0600, makedev(0, 0)), 0);
	current(3600, out, sizeof(out));
	snprintf(p, sizeof(p), "%s/mask-0123456789abcdef.tmp.0000000042", run);
	struct stat st;
	assert_int_equal(lstat(p, &st), -1);
	assert_int_equal(errno, ENOENT);
	assert_int_equal(lstat(out, &st), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hides_by_mode),
		cmocka_unit_test_setup_teardown(test_mask_hides_what_others_may_not_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_key_follows_the_top_two_levels, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_tree_below_a_closed_directory_is_hidden_whole, setup, teardown),
		cmocka_unit_test_setup_teardown(test_a_full_walk_finds_a_change_deep_down, setup, teardown),
		cmocka_unit_test_setup_teardown(test_an_unfinished_build_is_removed, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
