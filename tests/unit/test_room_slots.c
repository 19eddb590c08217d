/* Unit tests for the uid slots of sandbox-helper/room.c: a room gets the
 * lowest free slot, a freed slot is reused, max_rooms holds, and a slot
 * left by a creation that crashed (a link to a room without meta) is taken
 * over only when no slot is free.  Real files in a temporary state_dir. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "config.h"
#include "room.h"

struct fixture {
	char dir[64];
	struct config cfg;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/rb-slots-XXXXXX");
	if (!mkdtemp(f->dir))
		return -1;
	config_defaults(&f->cfg);
	snprintf(f->cfg.state_dir, sizeof(f->cfg.state_dir), "%s/state", f->dir);
	snprintf(f->cfg.run_dir, sizeof(f->cfg.run_dir), "%s/run", f->dir);
	f->cfg.max_rooms = 4;
	f->cfg.disk_limit = 0;     /* no image: slots are what is tested */
	char err[256];
	if (room_dirs_prepare(&f->cfg, err, sizeof(err)) < 0)
		return -1;
	*state = f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
	int rc = system(cmd);
	free(f);
	return rc == 0 ? 0 : -1;
}

/* creates room `id`; its slot, or the (negative) result */
static int create(struct fixture *f, const char *id)
{
	struct room r;
	char err[256];
	assert_int_equal(room_init(&r, &f->cfg, id), 0);
	int rc = room_create(&r, err, sizeof(err));
	if (rc < 0)
		return rc;
	/* what jail_start does while it makes the keeper */
	assert_int_equal(room_create_files(&r, err, sizeof(err)), 0);
	assert_int_equal(room_create_finish(&r, err, sizeof(err)), 0);
	assert_int_equal(r.create_lock, -1);
	return r.slot;
}

static void release(struct fixture *f, const char *id)
{
	struct room r;
	char err[256];
	assert_int_equal(room_init(&r, &f->cfg, id), 0);
	assert_int_equal(room_load(&r, err, sizeof(err)), 1);
	room_slot_release(&r);
	assert_int_equal(room_forget(&r, err, sizeof(err)), 0);
}

static void test_lowest_free_slot_and_reuse(void **state)
{
	struct fixture *f = *state;
	assert_int_equal(create(f, "a"), 0);
	assert_int_equal(create(f, "b"), 1);
	assert_int_equal(create(f, "c"), 2);
	release(f, "b");
	assert_int_equal(create(f, "d"), 1);
	assert_int_equal(create(f, "e"), 3);
	assert_int_equal(create(f, "f"), ROOM_ELIMIT);
	release(f, "a");
	assert_int_equal(create(f, "f"), 0);
}

static void test_crashed_creation_slot_taken_over_when_full(void **state)
{
	struct fixture *f = *state;
	char link[256];
	/* slot 0 held by a room whose creation crashed (no meta) */
	snprintf(link, sizeof(link), "%s/slots", f->cfg.state_dir);
	assert_int_equal(mkdir(link, 0700), 0);
	snprintf(link, sizeof(link), "%s/slots/0", f->cfg.state_dir);
	assert_int_equal(symlink("ghost", link), 0);
	/* a name that is no slot is ignored */
	snprintf(link, sizeof(link), "%s/slots/01", f->cfg.state_dir);
	assert_int_equal(symlink("x", link), 0);
	assert_int_equal(create(f, "a"), 1);
	assert_int_equal(create(f, "b"), 2);
	assert_int_equal(create(f, "c"), 3);
	assert_int_equal(create(f, "d"), 0);   /* the ghost's */
	assert_int_equal(create(f, "e"), ROOM_ELIMIT);
}

/* A creation given up before its meta holds no slot and no lock. */
static void test_aborted_creation_frees_slot_and_lock(void **state)
{
	struct fixture *f = *state;
	struct room r;
	char err[256];
	assert_int_equal(room_init(&r, &f->cfg, "gone"), 0);
	assert_int_equal(room_create(&r, err, sizeof(err)), 0);
	assert_int_equal(r.slot, 0);
	room_create_abort(&r);
	assert_int_equal(r.create_lock, -1);
	assert_int_equal(room_load(&r, err, sizeof(err)), 0);   /* no such room */
	assert_int_equal(create(f, "a"), 0);                      /* the lock is free */
}

static void test_slot_names(void **state)
{
	(void)state;
	assert_int_equal(room_slot_parse("0", 4), 0);
	assert_int_equal(room_slot_parse("3", 4), 3);
	assert_int_equal(room_slot_parse("4", 4), -1);
	assert_int_equal(room_slot_parse("01", 4), -1);
	assert_int_equal(room_slot_parse("", 4), -1);
	assert_int_equal(room_slot_parse("-1", 4), -1);
	assert_int_equal(room_slot_parse("1a", 4), -1);
	assert_int_equal(room_slot_parse("99999999999999999999", 1 << 20), -1);
	assert_int_equal(room_slot_parse("1023", 1024), 1023);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_lowest_free_slot_and_reuse, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crashed_creation_slot_taken_over_when_full, setup, teardown),
		cmocka_unit_test_setup_teardown(test_aborted_creation_frees_slot_and_lock, setup, teardown),
		cmocka_unit_test(test_slot_names),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
