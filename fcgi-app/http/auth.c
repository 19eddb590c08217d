/* Bearer tokens: see auth.h. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"

#define TOKENS_FILE_MAX (1u << 20)

struct auth_tokens {
	pthread_mutex_t lock;
	char *path;
	/* what the last load saw; a change of any of these means re-read */
	bool loaded;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	bool racy;           /* changed too recently for its times to be trusted */
	char *data;          /* the file, tokens NUL-separated in place */
	char **tokens;
	size_t *lens;
	int count;           /* -1: unreadable */
	char last_problem[256];
};

struct auth_tokens *auth_tokens_new(const char *path)
{
	struct auth_tokens *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->path = strdup(path);
	if (!t->path) {
		free(t);
		return NULL;
	}
	pthread_mutex_init(&t->lock, NULL);
	t->count = -1;
	return t;
}

static void tokens_clear(struct auth_tokens *t)
{
	free(t->data);
	free(t->tokens);
	free(t->lens);
	t->data = NULL;
	t->tokens = NULL;
	t->lens = NULL;
}

void auth_tokens_free(struct auth_tokens *t)
{
	if (!t)
		return;
	tokens_clear(t);
	pthread_mutex_destroy(&t->lock);
	free(t->path);
	free(t);
}

/* Log a problem (or its end) once, not on every request. */
static void tokens_report(struct auth_tokens *t, const char *problem)
{
	if (strcmp(t->last_problem, problem) == 0)
		return;
	if (problem[0])
		fprintf(stderr, "roombox-fcgi: tokens %s: %s; every request is refused (401)\n",
			t->path, problem);
	else if (t->last_problem[0])
		fprintf(stderr, "roombox-fcgi: tokens %s: %d token(s) loaded\n",
			t->path, t->count);
	snprintf(t->last_problem, sizeof(t->last_problem), "%s", problem);
}

static bool is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

/* Split data (len bytes, NUL-terminated) into lines, trimmed. */
static int tokens_split(struct auth_tokens *t, size_t len)
{
	size_t lines = 1, i;
	char *p = t->data, *end = t->data + len;

	for (i = 0; i < len; i++)
		lines += t->data[i] == '\n';
	t->tokens = calloc(lines, sizeof(*t->tokens));
	t->lens = calloc(lines, sizeof(*t->lens));
	if (!t->tokens || !t->lens)
		return -1;
	t->count = 0;
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p));
		char *e = nl ? nl : end;

		while (p < e && is_space(*p))
			p++;
		while (e > p && is_space(e[-1]))
			e--;
		if (e > p) {
			*e = '\0';
			t->tokens[t->count] = p;
			t->lens[t->count] = (size_t)(e - p);
			t->count++;
		}
		p = nl ? nl + 1 : end;
	}
	return 0;
}

/* Called with the lock held. */
static void tokens_refresh(struct auth_tokens *t)
{
	struct stat st;
	char problem[256];
	ssize_t n;
	int fd;

	if (stat(t->path, &st) < 0) {
		snprintf(problem, sizeof(problem), "stat: %s", strerror(errno));
		goto fail;
	}
	if (t->loaded && !t->racy && st.st_dev == t->dev && st.st_ino == t->ino &&
	    st.st_size == t->size &&
	    st.st_mtim.tv_sec == t->mtime.tv_sec && st.st_mtim.tv_nsec == t->mtime.tv_nsec &&
	    st.st_ctim.tv_sec == t->ctime.tv_sec && st.st_ctim.tv_nsec == t->ctime.tv_nsec)
		return;
	fd = open(t->path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0) {
		snprintf(problem, sizeof(problem), "open: %s", strerror(errno));
		goto fail;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > TOKENS_FILE_MAX) {
		close(fd);
		snprintf(problem, sizeof(problem), "not a regular file of at most %u bytes",
			 TOKENS_FILE_MAX);
		goto fail;
	}
	tokens_clear(t);
	t->data = malloc((size_t)st.st_size + 1);
	if (!t->data) {
		close(fd);
		snprintf(problem, sizeof(problem), "out of memory");
		goto fail;
	}
	do
		n = pread(fd, t->data, (size_t)st.st_size, 0);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n < 0) {
		snprintf(problem, sizeof(problem), "read: %s", strerror(errno));
		goto fail;
	}
	t->data[n] = '\0';
	if (tokens_split(t, (size_t)n) < 0) {
		snprintf(problem, sizeof(problem), "out of memory");
		goto fail;
	}
	t->loaded = true;
	t->dev = st.st_dev;
	t->ino = st.st_ino;
	t->size = st.st_size;
	t->mtime = st.st_mtim;
	t->ctime = st.st_ctim;
	/* File times tick in jiffies: a second write within the same tick as
	 * the one just read would leave them (and maybe the size) unchanged.
	 * So a file changed in the last two seconds is read again each time
	 * (as git does with its "racily clean" entries). */
	t->racy = st.st_ctim.tv_sec + 2 > time(NULL);
	tokens_report(t, t->count ? "" : "the file holds no token");
	return;
fail:
	tokens_clear(t);
	t->loaded = false;
	t->count = -1;
	tokens_report(t, problem);
}

bool auth_token_equal(const char *given, size_t given_len,
		      const char *known, size_t known_len)
{
	volatile unsigned char diff = given_len != known_len;
	size_t i;

	/* Walk all of `given`, reading `known` cyclically, so neither the
	 * position of the first difference nor known's length shows. */
	for (i = 0; i < given_len; i++)
		diff |= (unsigned char)given[i] ^
			(unsigned char)(known_len ? known[i % known_len] : 0);
	return diff == 0 && known_len != 0;
}

const char *auth_bearer_token(const char *h, size_t *len)
{
	const char *tok, *end;

	if (!h || strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t'))
		return NULL;
	for (tok = h + 6; *tok == ' ' || *tok == '\t'; tok++)
		;
	for (end = tok + strlen(tok); end > tok && is_space(end[-1]); end--)
		;
	if (end == tok)
		return NULL;
	*len = (size_t)(end - tok);
	return tok;
}

bool auth_tokens_check(struct auth_tokens *t, const char *authorization)
{
	const char *given;
	size_t given_len = 0;
	bool ok = false;
	int i;

	given = auth_bearer_token(authorization, &given_len);
	pthread_mutex_lock(&t->lock);
	tokens_refresh(t);
	/* every listed token is compared, a match does not end the loop */
	for (i = 0; given && i < t->count; i++)
		ok |= auth_token_equal(given, given_len, t->tokens[i], t->lens[i]);
	pthread_mutex_unlock(&t->lock);
	return ok;
}

int auth_tokens_count(struct auth_tokens *t)
{
	int n;

	pthread_mutex_lock(&t->lock);
	tokens_refresh(t);
	n = t->count;
	pthread_mutex_unlock(&t->lock);
	return n;
}
