/* Export, import and backup of rooms: see room_io.h.
 *
 * roomboxctl checks an export's seal itself (a checksum of every byte
 * before it, in the closing skippable frame: the XXH64 in a version 2
 * archive, which opens with a lead frame saying so, the SHA-256 in a
 * version 1): an answer cut short by a failure behind it still says 200,
 * and only the seal tells a whole archive from a part of one.  The last
 * SEAL_FRAME bytes (the longer seal's) are held back until the end, so
 * what reaches out_fd before the check is never a whole-looking
 * archive. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <json-c/json.h>
#include <xxhash.h>

#include "fcgi_client.h"
#include "room_io.h"
#include "sha256.h"

#define SEAL_TEXT_LEN 80            /* "roombox-seal 1\n", 64 hex, "\n" */
#define SEAL_FRAME (8 + SEAL_TEXT_LEN)
#define SEAL2_TEXT_LEN 32           /* "roombox-seal 2\n", 16 hex, "\n" */
#define SEAL2_FRAME (8 + SEAL2_TEXT_LEN)
#define SEAL_MAGIC 0x184D2A5Eu
#define LEAD "\x5e\x2a\x4d\x18\x0f\x00\x00\x00roombox-room 2\n"
#define LEAD_LEN 23
#define TIMEOUT_S (60 * 60)

struct sealed_out {
	int fd;
	int version;                /* 0 until the first bytes are hashed */
	struct sha256_ctx sha;      /* version 1 */
	XXH64_state_t *xx;          /* version 2 (libxxhash) */
	unsigned char lead[LEAD_LEN];
	unsigned char held[SEAL_FRAME];
	size_t nheld;
	uint64_t bytes;
};

/* Into the seal's checksum; the lead is whole by the first call (the
 * first SEAL_FRAME bytes are held). */
static void seal_hash(struct sealed_out *o, const void *p, size_t n)
{
	if (!o->version) {
		o->version = memcmp(o->lead, LEAD, LEAD_LEN) == 0 ? 2 : 1;
	}
	if (o->version == 2)
		XXH64_update(o->xx, p, n);
	else
		sha256_update(&o->sha, p, n);
}

static int write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n) {
		ssize_t w = write(fd, c, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Everything but the last SEAL_FRAME bytes goes on (and into the hash). */
static int sealed_sink(void *ctx, const char *p, size_t n)
{
	struct sealed_out *o = ctx;
	if (o->bytes < LEAD_LEN)
		memcpy(o->lead + o->bytes, p, LEAD_LEN - o->bytes < n ? LEAD_LEN - o->bytes : n);
	o->bytes += n;
	if (o->nheld + n <= SEAL_FRAME) {
		memcpy(o->held + o->nheld, p, n);
		o->nheld += n;
		return 0;
	}
	/* of held + p, all but the last SEAL_FRAME bytes go out */
	size_t out = o->nheld + n - SEAL_FRAME;
	size_t from_held = out < o->nheld ? out : o->nheld;
	seal_hash(o, o->held, from_held);
	if (write_all(o->fd, o->held, from_held) < 0)
		return -1;
	memmove(o->held, o->held + from_held, o->nheld - from_held);
	o->nheld -= from_held;
	size_t from_p = out - from_held;
	seal_hash(o, p, from_p);
	if (from_p && write_all(o->fd, p, from_p) < 0)
		return -1;
	memcpy(o->held + o->nheld, p + from_p, n - from_p);
	o->nheld += n - from_p;
	return 0;
}

/* The held bytes are the seal of what went before: 0, or -1. */
static int seal_check(struct sealed_out *o)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t d[32];
	char want[SEAL_TEXT_LEN + 1];
	const unsigned char *h = o->held;

	if (o->nheld != SEAL_FRAME)
		return -1;
	if (o->version == 2) {
		char want2[SEAL2_TEXT_LEN + 1];
		seal_hash(o, h, SEAL_FRAME - SEAL2_FRAME);
		h += SEAL_FRAME - SEAL2_FRAME;
		snprintf(want2, sizeof(want2), "roombox-seal 2\n%016llx\n",
			 (unsigned long long)XXH64_digest(o->xx));
		if (memcmp(h, "\x5e\x2a\x4d\x18\x20\x00\x00\x00", 8) != 0 ||
		    memcmp(h + 8, want2, SEAL2_TEXT_LEN) != 0)
			return -1;
		return write_all(o->fd, o->held, SEAL_FRAME);
	}
	uint32_t magic = (uint32_t)h[0] | (uint32_t)h[1] << 8 | (uint32_t)h[2] << 16 | (uint32_t)h[3] << 24;
	uint32_t size = (uint32_t)h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 24;
	sha256_final(&o->sha, d);
	memcpy(want, "roombox-seal 1\n", 15);
	for (int i = 0; i < 32; i++) {
		want[15 + 2 * i] = hex[d[i] >> 4];
		want[16 + 2 * i] = hex[d[i] & 15];
	}
	want[79] = '\n';
	if (magic != SEAL_MAGIC || size != SEAL_TEXT_LEN || memcmp(h + 8, want, SEAL_TEXT_LEN) != 0)
		return -1;
	return write_all(o->fd, h, SEAL_FRAME);
}

static void params_of(const struct room_io *io, const char *method, const char *uri,
		      const char *length, char *auth, size_t authlen, const char *params[24])
{
	int i = 0;
	if (io->token)
		snprintf(auth, authlen, "Bearer %s", io->token);
	const char *p[] = { "REQUEST_METHOD", method, "REQUEST_URI", uri, "SCRIPT_NAME", uri,
			    "CONTENT_TYPE", "application/x-roombox-room",
			    "SERVER_PROTOCOL", "HTTP/1.1", "GATEWAY_INTERFACE", "CGI/1.1",
			    "SERVER_SOFTWARE", "roomboxctl", "REMOTE_ADDR", "127.0.0.1" };
	for (size_t k = 0; k < sizeof(p) / sizeof(p[0]); k++)
		params[i++] = p[k];
	if (length) {
		params[i++] = "CONTENT_LENGTH";
		params[i++] = length;
	}
	if (io->token) {
		params[i++] = "HTTP_AUTHORIZATION";
		params[i++] = auth;
	}
	params[i++] = NULL;
	params[i] = NULL;
}

/* The service's words for a refusal: its JSON "error", else the body. */
static void say_refusal(const char *what, const char *room, const struct fcgi_stream_answer *a)
{
	json_object *j = a->body ? json_tokener_parse(a->body) : NULL, *e;
	const char *why = j && json_object_object_get_ex(j, "error", &e) ? json_object_get_string(e)
		: a->body ? a->body : "";
	fprintf(stderr, "roomboxctl: %s %s: %d %s\n", what, room, a->status, why);
	json_object_put(j);
}

int room_io_export(const struct room_io *io, const char *room, int out_fd)
{
	char uri[160], auth[600], err[512];
	const char *params[24];
	struct sealed_out o = { .fd = out_fd };
	struct fcgi_stream_answer a;

	snprintf(uri, sizeof(uri), "/api/rooms/%s/export", room);
	params_of(io, "GET", uri, "0", auth, sizeof(auth), params);
	sha256_init(&o.sha);
	if (!(o.xx = XXH64_createState()) || XXH64_reset(o.xx, 0) != XXH_OK) {
		fprintf(stderr, "roomboxctl: export %s: out of memory\n", room);
		XXH64_freeState(o.xx);
		return 1;
	}
	if (fcgi_request_stream(io->socket, params, -1, sealed_sink, &o, TIMEOUT_S, &a, err,
				sizeof(err)) < 0) {
		fprintf(stderr, "roomboxctl: export %s: %s\n", room, err);
		XXH64_freeState(o.xx);
		return 1;
	}
	int rc = 0;
	if (a.status != 200) {
		say_refusal("export", room, &a);
		rc = 1;
	} else if (seal_check(&o) < 0) {
		fprintf(stderr, "roomboxctl: export %s: the archive came without its seal or with a "
			"wrong one (cut short: see the service's log)\n", room);
		rc = 1;
	}
	free(a.body);
	XXH64_freeState(o.xx);
	return rc;
}

int room_io_import(const struct room_io *io, const char *room, int in_fd)
{
	char uri[160], auth[600], err[512], length[24];
	const char *params[24];
	struct fcgi_stream_answer a;
	struct stat st;
	bool known = fstat(in_fd, &st) == 0 && S_ISREG(st.st_mode);

	snprintf(uri, sizeof(uri), "/api/rooms/%s/import", room);
	snprintf(length, sizeof(length), "%lld", known ? (long long)(st.st_size - lseek(in_fd, 0, SEEK_CUR)) : 0LL);
	params_of(io, "PUT", uri, known ? length : NULL, auth, sizeof(auth), params);
	if (fcgi_request_stream(io->socket, params, in_fd, NULL, NULL, TIMEOUT_S, &a, err,
				sizeof(err)) < 0) {
		fprintf(stderr, "roomboxctl: import %s: %s\n", room, err);
		return 1;
	}
	int rc = 0;
	if (a.status != 201) {
		say_refusal("import", room, &a);
		rc = 1;
	} else {
		printf("room %s: imported\n", room);
	}
	free(a.body);
	return rc;
}

int room_io_backup(const struct room_io *io, const char *dir, char **rooms, int n)
{
	int failed = 0;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0) {
		fprintf(stderr, "roomboxctl: backup: %s: %s\n", dir, strerror(errno));
		return 1;
	}
	for (int i = 0; i < n; i++) {
		char name[160], tmp[200];
		snprintf(name, sizeof(name), "%s.roombox", rooms[i]);
		snprintf(tmp, sizeof(tmp), ".%s.roombox.%ld.tmp", rooms[i], (long)getpid());
		int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
		if (fd < 0) {
			fprintf(stderr, "roomboxctl: backup %s: %s/%s: %s\n", rooms[i], dir, tmp, strerror(errno));
			failed++;
			continue;
		}
		int rc = room_io_export(io, rooms[i], fd);
		if (rc == 0 && fsync(fd) < 0) {
			fprintf(stderr, "roomboxctl: backup %s: fsync: %s\n", rooms[i], strerror(errno));
			rc = 1;
		}
		close(fd);
		/* complete and on disk, then under its name: a backup file is
		 * whole or absent, whatever stops this half-way */
		if (rc == 0 && (renameat(dfd, tmp, dfd, name) < 0 || fsync(dfd) < 0)) {
			fprintf(stderr, "roomboxctl: backup %s: rename: %s\n", rooms[i], strerror(errno));
			rc = 1;
		}
		if (rc != 0) {
			unlinkat(dfd, tmp, 0);
			failed++;
		} else {
			printf("room %s: %s/%s\n", rooms[i], dir, name);
		}
	}
	close(dfd);
	return failed ? 1 : 0;
}
