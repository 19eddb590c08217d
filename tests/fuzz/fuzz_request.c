/* Fuzz target: what an HTTP client controls before a body is read: the
 * method and URI (router_request_path, router_match) and the Authorization
 * header against the tokens file (auth_tokens_check, which reloads the file
 * when it changed).
 *
 * Input: "METHOD\nURI\nAUTHORIZATION\nTOKENS FILE..." (each of the first
 * three cut at a NUL, as a FastCGI parameter would be a C string).
 *
 * Invariants: a route match names the method asked for and, for a {id}
 * route, a room of at most ROOM_ID_MAX + 1 bytes with no '/'; a miss is a
 * 404, or a 405 with an Allow header; auth_tokens_check lets a request in
 * exactly when an independent reading of auth.h's rule does: "Bearer" in
 * any case, spaces or tabs, a token that equals one trimmed non-empty line
 * of the file. */
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "auth.h"
#include "fuzz.h"
#include "router.h"

#define FIXED_TOKEN " fixed-token\t\r\n"

static char base[256], tokens_path[300];
static struct auth_tokens *tokens;

static void cleanup(void)
{
	auth_tokens_free(tokens);
	unlink(tokens_path);
	rmdir(base);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");

	snprintf(base, sizeof(base), "%s/roombox-fuzz-request-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	FUZZ_ASSERT(mkdtemp(base), "mkdtemp %s", base);
	snprintf(tokens_path, sizeof(tokens_path), "%s/tokens", base);
	tokens = auth_tokens_new(tokens_path);
	FUZZ_ASSERT(tokens, "auth_tokens_new");
	atexit(cleanup);
	return 0;
}

/* The next '\n'-ended field of the input, as a C string (cut at a NUL). */
static char *field(const uint8_t **p, const uint8_t *end)
{
	const uint8_t *nl = memchr(*p, '\n', (size_t)(end - *p));
	size_t n = (size_t)((nl ? nl : end) - *p);
	char *s = strndup((const char *)*p, n);

	FUZZ_ASSERT(s, "out of memory");
	*p = nl ? nl + 1 : end;
	return s;
}

static const char *param_uri;
static const char *uri_param(void *ctx, const char *name)
{
	return strcmp(name, "REQUEST_URI") == 0 ? param_uri : NULL;
}

static bool oracle_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* auth.h's rule, read again from its words. */
static bool oracle_allows(const char *header, const uint8_t *file, size_t flen)
{
	const char *tok;
	size_t tlen, i = 0;

	if (strlen(header) < 7 || strncasecmp(header, "bearer", 6) != 0 ||
	    (header[6] != ' ' && header[6] != '\t'))
		return false;
	tok = header + 6;
	while (*tok == ' ' || *tok == '\t')
		tok++;
	tlen = strlen(tok);
	while (tlen > 0 && oracle_space(tok[tlen - 1]))
		tlen--;
	if (tlen == 0)
		return false;
	while (i < flen) {
		size_t a = i, b;

		while (i < flen && file[i] != '\n')
			i++;
		b = i++;
		while (a < b && oracle_space((char)file[a]))
			a++;
		while (b > a && oracle_space((char)file[b - 1]))
			b--;
		if (b - a == tlen && memcmp(file + a, tok, tlen) == 0)
			return true;
	}
	return false;
}

static void check_route(const char *method, const char *uri)
{
	struct http_input in = { uri_param, NULL, NULL };
	struct route_match m;
	struct response rs = { 0 };
	char *path;

	param_uri = uri;
	path = router_request_path(&in);
	FUZZ_ASSERT(path, "router_request_path failed");
	FUZZ_ASSERT(!strchr(path, '?') && (!*uri || strncmp(path, uri, strlen(path)) == 0),
		    "path '%s' is not the URI's part before '?'", path);
	router_match(method, path, &m, &rs);
	if (m.m) {
		FUZZ_ASSERT(strcmp(m.m->method, method) == 0 && !rs.body,
			    "matched %s for %s", m.m->method, method);
		FUZZ_ASSERT(!m.has_room || (strlen(m.room) <= ROOM_ID_MAX + 1 &&
					    !strchr(m.room, '/')),
			    "room segment '%s'", m.room);
	} else {
		FUZZ_ASSERT(rs.body && (rs.status == 404 || (rs.status == 405 && rs.allow[0])),
			    "a miss answered %d, Allow '%s'", rs.status, rs.allow);
	}
	json_object_put(rs.body);
	free(path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *p = data, *end = data + size;
	char *method = field(&p, end), *uri = field(&p, end), *auth = field(&p, end);
	size_t flen = (size_t)(end - p);
	uint8_t *file;
	int fd;

	check_route(method, uri);

	/* One fixed token first: a file holding none would be logged at every
	 * change, thousands of lines a second. */
	file = malloc(sizeof(FIXED_TOKEN) - 1 + flen);
	FUZZ_ASSERT(file, "out of memory");
	memcpy(file, FIXED_TOKEN, sizeof(FIXED_TOKEN) - 1);
	memcpy(file + sizeof(FIXED_TOKEN) - 1, p, flen);
	flen += sizeof(FIXED_TOKEN) - 1;
	fd = open(tokens_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	FUZZ_ASSERT(fd >= 0 && write(fd, file, flen) == (ssize_t)flen, "write the tokens file");
	close(fd);
	FUZZ_ASSERT(auth_tokens_check(tokens, auth) == oracle_allows(auth, file, flen),
		    "auth_tokens_check disagrees with the rule on '%s'", auth);
	FUZZ_ASSERT(!auth_tokens_check(tokens, NULL), "no header let in");
	free(file);
	free(method);
	free(uri);
	free(auth);
	return 0;
}
