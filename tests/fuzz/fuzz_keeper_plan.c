/* Fuzz target: the keeper's protocol reader (sandbox-helper/keeper/plan.c),
 * on any blob.
 *
 * Input: the contents of the memfd the helper passes with KP_EXEC (a
 * struct kp_blob, then argc and envc NUL-terminated strings).
 *
 * Invariants: plan_read refuses a blob shorter than its header, with a
 * wrong magic, with argc outside 1..64, envc over 4096, a `who` that is
 * neither the room's root nor its user, flags other than KP_TOOL (with no
 * environment, detached or not) or KP_DETACH, or with fewer strings than it
 * announces; when it accepts, argv has exactly argc and envp exactly envc
 * strings, NULL-terminated, each a NUL-terminated string
 * inside the blob's copy, in order and back to back from the end of the
 * header, and the header is the blob's first bytes.  plan_free releases
 * what either outcome left (LeakSanitizer checks).
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fuzz.h"
#include "plan.h"

static int blob_fd(const uint8_t *data, size_t size)
{
	static int fd = -1;

	if (fd < 0)
		fd = memfd_create("fuzz-plan", 0);
	FUZZ_ASSERT(fd >= 0, "memfd_create");
	FUZZ_ASSERT(ftruncate(fd, 0) == 0, "ftruncate");
	FUZZ_ASSERT(pwrite(fd, data, size, 0) == (ssize_t)size, "pwrite");
	return fd;
}

/* The strings the blob holds after its header, counted as plan_read must. */
static size_t strings_in(const uint8_t *data, size_t size)
{
	size_t n = 0;
	for (size_t i = sizeof(struct kp_blob); i < size; n++) {
		const uint8_t *z = memchr(data + i, '\0', size - i);
		i = z ? (size_t)(z - data) + 1 : size;
	}
	return n;
}

/* The flags a plan may carry: KP_TOOL without environment (detached or
 * not), KP_DETACH, or none (written here apart from plan.c, as the
 * protocol says). */
static bool flags_ok(const struct kp_blob *h)
{
	return h->flags == 0 || h->flags == KP_DETACH ||
	       ((h->flags == KP_TOOL || h->flags == (KP_TOOL | KP_DETACH)) && h->envc == 0);
}

static void check_accepted(const struct exec_plan *p, const uint8_t *data, size_t size)
{
	struct kp_blob h;

	memcpy(&h, data, sizeof(h));
	FUZZ_ASSERT(memcmp(&p->hdr, &h, sizeof(h)) == 0, "header is not the blob's");
	FUZZ_ASSERT(h.magic == KP_MAGIC && h.argc >= 1 && h.argc <= 64 && h.envc <= 4096 &&
		    (h.who == KP_AS_ROOT || h.who == KP_AS_USER) && flags_ok(&h),
		    "accepted argc %u envc %u magic %#x who %u flags %#x", h.argc, h.envc, h.magic,
		    h.who, h.flags);
	FUZZ_ASSERT(strings_in(data, size) >= (size_t)h.argc + h.envc,
		    "fewer strings than announced");
	const char *at = p->data + sizeof(h), *end = p->data + size;
	for (uint32_t i = 0; i < h.argc + h.envc; i++) {
		const char *s = i < h.argc ? p->argv[i] : p->envp[i - h.argc];
		FUZZ_ASSERT(s == at, "string %u not where the previous ended", i);
		FUZZ_ASSERT(s >= p->data + sizeof(h) && s < end, "string %u outside the blob", i);
		size_t len = strnlen(s, (size_t)(end - s) + 1);
		FUZZ_ASSERT(s + len <= end, "string %u runs past the blob", i);
		FUZZ_ASSERT(memcmp(s, data + (s - p->data), len) == 0, "string %u is not the blob's", i);
		at = s + len + 1;
	}
	FUZZ_ASSERT(p->argv[h.argc] == NULL && p->envp[h.envc] == NULL, "arrays not NULL-terminated");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct exec_plan p = { 0 };
	int rc = plan_read(blob_fd(data, size), &p);

	if (rc == 0)
		check_accepted(&p, data, size);
	else if (size >= sizeof(struct kp_blob)) {
		struct kp_blob h;
		memcpy(&h, data, sizeof(h));
		FUZZ_ASSERT(h.magic != KP_MAGIC || h.argc < 1 || h.argc > 64 || h.envc > 4096 ||
			    (h.who != KP_AS_ROOT && h.who != KP_AS_USER) || !flags_ok(&h) ||
			    strings_in(data, size) < (size_t)h.argc + h.envc,
			    "a well-formed plan refused (argc %u envc %u)", h.argc, h.envc);
	}
	plan_free(&p);
	FUZZ_ASSERT(!p.data && !p.argv && !p.envp, "plan_free left pointers");
	return 0;
}
