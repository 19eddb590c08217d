/* The exposures of preview ports: which token opens which port
 * of which room.  The API (preview.c) makes and ends them, the relay
 * (preview_relay.c) looks them up; this file alone knows how they are kept.
 *
 * Why it is built this way:
 *
 * - One file per exposure, named by its token: "<state_dir>/previews/<t>"
 *   holding "<room> <port>\n".  A preview request carries only the token,
 *   so finding its exposure is one open() of a name that has been checked
 *   to be 16 of [a-z0-9] (no path can be smuggled in), with no index in
 *   memory to keep in step.  A room's list is a scan of the directory
 *   (exposures are few).
 * - The files belong to roombox-fcgi, beside the message store, outside
 *   every room and every room's run directory: a room's stop, restart or
 *   the service's restart leave them; only unexpose and cleanup remove them.
 * - A file is written whole under a temporary name, synced, then renamed,
 *   so a crash leaves an exposure either absent or complete.  Exposing and
 *   unexposing take one mutex, so one port of a room has one token.
 * - A token is 16 characters drawn with getrandom() (rejection sampling,
 *   no bias): 82 bits, and it is the URL's only secret.
 *   A moved room keeps its tokens (preview_expose_as), unless a token
 *   already names an exposure here: its URLs are how the router finds it.
 * - Every preview request looks its token up, and an open, a read and a
 *   close per request were a sizeable part of the relay's work: the tokens
 *   looked up lately are remembered (a small table, one entry a hash
 *   slot).  The files stay the truth: an entry is dropped when its file is
 *   removed (preview_unexpose, before the relays are told), and a lookup
 *   that read a file remembers it only if no exposure ended meanwhile, so
 *   a token never outlives its exposure.  Misses are not remembered. */
#include "preview_store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "errbuf.h"

#define PREVIEW_FILE_MAX 128
#define PREVIEW_LIST_MAX 1024    /* exposures of one room */

#define CACHE_SLOTS 256

static int preview_dirfd = -1;

struct cached {
	char token[PREVIEW_TOKEN_LEN + 1];   /* "" = empty */
	char room[ROOM_ID_MAX + 1];
	int port;
};
static struct cached cache[CACHE_SLOTS];
static unsigned long cache_gen;          /* bumped by every removal */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;

static struct cached *cache_slot(const char *token)
{
	uint32_t h = 2166136261u;   /* FNV-1a */
	for (const char *p = token; *p; p++)
		h = (h ^ (unsigned char)*p) * 16777619u;
	return &cache[h % CACHE_SLOTS];
}

/* The token's exposure is gone (its file removed): not remembered. */
static void cache_forget(const char *token)
{
	struct cached *c = cache_slot(token);
	pthread_mutex_lock(&cache_lock);
	cache_gen++;
	if (strcmp(c->token, token) == 0)
		c->token[0] = '\0';
	pthread_mutex_unlock(&cache_lock);
}
static pthread_mutex_t preview_lock = PTHREAD_MUTEX_INITIALIZER;
static struct preview_exposure list[PREVIEW_LIST_MAX];   /* under preview_lock */

int preview_store_init(const char *dir, char *err, size_t errlen)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return errorf(err, errlen, "previews store %s: create: %m", dir);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errorf(err, errlen, "previews store %s: open: %m", dir);
	if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) < 0) {
		close(fd);
		return errorf(err, errlen, "previews store %s: not writable: %m", dir);
	}
	preview_dirfd = fd;
	return 0;
}

static int token_new(char *out)
{
	static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	size_t n = 0;
	while (n < PREVIEW_TOKEN_LEN) {
		unsigned char b[32];
		if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
			return -1;
		for (size_t i = 0; i < sizeof(b) && n < PREVIEW_TOKEN_LEN; i++)
			if (b[i] < 252)   /* 252 = 7 * 36 */
				out[n++] = alphabet[b[i] % 36];
	}
	out[n] = '\0';
	return 0;
}

/* Read an exposure file: 0 with room and port, -1 if none or malformed. */
static int exposure_read(const char *token, char *room, size_t roomlen, int *port)
{
	char text[PREVIEW_FILE_MAX + 1], id[PREVIEW_FILE_MAX + 1];
	int fd = openat(preview_dirfd, token, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, text, PREVIEW_FILE_MAX);
	close(fd);
	if (n <= 0)
		return -1;
	text[n] = '\0';
	if (sscanf(text, "%128s %d", id, port) != 2 || !room_id_valid(id) ||
	    *port < 1 || *port > 65535 || strlen(id) >= roomlen)
		return -1;
	strcpy(room, id);
	return 0;
}

int preview_lookup(const char *token, char *room, size_t roomlen, int *port)
{
	if (preview_dirfd < 0 || !preview_token_valid(token, strlen(token)))
		return -1;
	struct cached *c = cache_slot(token);
	pthread_mutex_lock(&cache_lock);
	if (strcmp(c->token, token) == 0 && strlen(c->room) < roomlen) {
		strcpy(room, c->room);
		*port = c->port;
		pthread_mutex_unlock(&cache_lock);
		return 0;
	}
	unsigned long gen = cache_gen;
	pthread_mutex_unlock(&cache_lock);
	if (exposure_read(token, room, roomlen, port) < 0)
		return -1;
	pthread_mutex_lock(&cache_lock);
	if (gen == cache_gen && strlen(room) < sizeof(c->room)) {
		snprintf(c->token, sizeof(c->token), "%s", token);
		strcpy(c->room, room);
		c->port = *port;
	}
	pthread_mutex_unlock(&cache_lock);
	return 0;
}

static int exposure_write(const char *token, const char *room, int port)
{
	char tmp[PREVIEW_TOKEN_LEN + 8], text[PREVIEW_FILE_MAX];
	int len = snprintf(text, sizeof(text), "%s %d\n", room, port);
	snprintf(tmp, sizeof(tmp), ".%s.tmp", token);
	int fd = openat(preview_dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	int ok = write(fd, text, (size_t)len) == len && fsync(fd) == 0;
	close(fd);
	if (!ok || renameat(preview_dirfd, tmp, preview_dirfd, token) < 0) {
		unlinkat(preview_dirfd, tmp, 0);
		return -1;
	}
	fsync(preview_dirfd);
	return 0;
}

static int exposure_cmp(const void *a, const void *b)
{
	return ((const struct preview_exposure *)a)->port - ((const struct preview_exposure *)b)->port;
}

/* The room's exposures, by port; their count (at most max), -1 on error. */
static int room_exposures(const char *room, struct preview_exposure *out, int max)
{
	int fd = dup(preview_dirfd), n = 0;
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	if (!d) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	rewinddir(d);
	struct dirent *e;
	while ((e = readdir(d)) && n < max) {
		char id[ROOM_ID_MAX + 1];
		int port;
		if (!preview_token_valid(e->d_name, strlen(e->d_name)) ||
		    exposure_read(e->d_name, id, sizeof(id), &port) < 0 || strcmp(id, room) != 0)
			continue;
		snprintf(out[n].token, sizeof(out[n].token), "%s", e->d_name);
		out[n++].port = port;
	}
	closedir(d);
	qsort(out, (size_t)n, sizeof(*out), exposure_cmp);
	return n;
}

/* A token no exposure file here holds, so it may be given to a new one. */
static bool token_free(const char *token)
{
	return preview_token_valid(token, strlen(token)) &&
	       faccessat(preview_dirfd, token, F_OK, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT;
}

static int expose(const char *room, int port, const char *keep, struct preview_exposure *e,
		  char *why, size_t whylen)
{
	int made = 1;
	*e = (struct preview_exposure){ .port = port };
	pthread_mutex_lock(&preview_lock);
	int n = room_exposures(room, list, PREVIEW_LIST_MAX);
	for (int i = 0; i < n; i++)
		if (list[i].port == port) {
			*e = list[i];
			made = 0;
		}
	if (made && keep && token_free(keep))
		snprintf(e->token, sizeof(e->token), "%s", keep);
	else if (made && n >= 0 && n < PREVIEW_LIST_MAX && token_new(e->token) < 0)
		n = -1;
	if (n < 0 || (made && (n >= PREVIEW_LIST_MAX || exposure_write(e->token, room, port) < 0))) {
		snprintf(why, whylen, "%s", n >= PREVIEW_LIST_MAX ? "too many exposures" : strerror(errno));
		pthread_mutex_unlock(&preview_lock);
		return -1;
	}
	pthread_mutex_unlock(&preview_lock);
	return made;
}

int preview_expose(const char *room, int port, struct preview_exposure *e, char *why, size_t whylen)
{
	return expose(room, port, NULL, e, why, whylen);
}

int preview_expose_as(const char *room, int port, const char *token, struct preview_exposure *e,
		      char *why, size_t whylen)
{
	return expose(room, port, token, e, why, whylen);
}

int preview_exposures(const char *room, preview_exposure_fn *each, void *ctx)
{
	pthread_mutex_lock(&preview_lock);
	int n = room_exposures(room, list, PREVIEW_LIST_MAX);
	for (int i = 0; i < n; i++)
		each(&list[i], ctx);
	pthread_mutex_unlock(&preview_lock);
	return n;
}

int preview_unexpose(const char *room, int port, void (*ended)(const char *token), int *found,
		     char *err, size_t errlen)
{
	int rc = 0;

	*found = 0;
	if (preview_dirfd < 0)
		return 0;
	pthread_mutex_lock(&preview_lock);
	int n = room_exposures(room, list, PREVIEW_LIST_MAX);
	if (n < 0)
		rc = errorf(err, errlen, "room %s: previews: list: %m", room);
	for (int i = 0; i < n; i++) {
		if (port && list[i].port != port)
			continue;
		(*found)++;
		if (unlinkat(preview_dirfd, list[i].token, 0) < 0 && errno != ENOENT)
			rc = errorf(err, errlen, "room %s: previews: remove port %d: %m", room, list[i].port);
		cache_forget(list[i].token);
		ended(list[i].token);
	}
	if (*found)
		fsync(preview_dirfd);
	pthread_mutex_unlock(&preview_lock);
	return rc;
}
