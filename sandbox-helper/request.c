/* The helper's request reader (see request.h).
 *
 * Bounded twice: by size here (the caller's max_body plus the protocol's
 * slack, refused past that without reading further) and by memory in the
 * allocator (alloc/bump_malloc.c: a request that would make the helper use
 * more than its budget fails to parse and is answered "request too
 * complex"), so no input makes the setuid helper grow.  minijson adds its
 * own bounds on nesting and on the number of values.
 */
#include "request.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errbuf.h"
#include "protocol.h"

/* The kernel takes at most MAX_ARG_STRLEN (32 pages) in one environment
 * string, and every env pair of a request goes into one (the session
 * variable, exec.c): more cannot run, so it is refused before anything is
 * built from it. */
#define REQUEST_ENV_MAX (32 * 4096 - 1)

/* Room for one more byte than the limit (to see that there is one). */
static int grow(char **buf, size_t *cap, size_t len, size_t limit)
{
	if (len < *cap)
		return 0;
	size_t c = *cap * 2;
	if (c > limit + 1)
		c = limit + 1;
	char *b = realloc(*buf, c + 1);   /* + its NUL */
	if (!b)
		return -1;
	*buf = b;
	*cap = c;
	return 0;
}

int request_read(int fd, uint64_t max_body, char **buf, size_t *len, char *err, size_t errlen)
{
	uint64_t max = helper_request_max(max_body);
	size_t limit = max < SIZE_MAX / 4 ? (size_t)max : SIZE_MAX / 4;
	size_t cap = limit < 65536 ? limit + 1 : 65536, n = 0;
	char *b = malloc(cap + 1);
	*buf = NULL;
	*len = 0;
	while (b && n <= limit) {
		if (grow(&b, &cap, n, limit) < 0)
			break;
		ssize_t k = read(fd, b + n, cap - n);
		if (k == 0) {
			b[n] = '\0';
			*buf = b;
			*len = n;
			return 0;
		}
		if (k < 0 && errno != EINTR) {
			int e = errno;
			free(b);
			return errorf(err, errlen, "request could not be read: %s", strerror(e));
		}
		if (k > 0)
			n += (size_t)k;
	}
	free(b);
	if (n > limit)
		return errorf(err, errlen, "request larger than %zu bytes", limit);
	return errorf(err, errlen, "request too complex: over the helper's %u MiB memory budget",
		      HELPER_MEMORY_MAX >> 20);
}

const struct mj_value *request_parse(const char *buf, size_t len, struct mj_doc **doc,
				     char *err, size_t errlen)
{
	char why[128];
	*doc = mj_parse(buf, len, why, sizeof(why));
	if (!*doc) {
		if (errno == ENOMEM)
			errorf(err, errlen, "request too complex: over the helper's %u MiB memory budget",
			       HELPER_MEMORY_MAX >> 20);
		else if (errno == E2BIG)
			errorf(err, errlen, "request too complex: %s", why);
		else
			errorf(err, errlen, "request is not a JSON object: %s", why);
		return NULL;
	}
	if (mj_root(*doc)->type != MJ_OBJECT) {
		mj_free(*doc);
		*doc = NULL;
		errorf(err, errlen, "request is not a JSON object");
		return NULL;
	}
	return mj_root(*doc);
}

const struct mj_value *request_read_parse(int fd, uint64_t max_body, struct mj_doc **doc,
					  char *err, size_t errlen)
{
	char *buf;
	size_t len;
	*doc = NULL;
	if (request_read(fd, max_body, &buf, &len, err, errlen) < 0)
		return NULL;
	const struct mj_value *req = request_parse(buf, len, doc, err, errlen);
	free(buf);   /* strings are copied into the document */
	return req;
}

/* env: an object of non-empty names to strings, small enough for a shell.
 * The check on the total is exact enough: quoting only adds bytes. */
static const char *env_check(const struct mj_value *env, const char *room, char *err, size_t errlen)
{
	size_t total = 0;
	for (size_t i = 0; i < env->len; i++) {
		const struct mj_member *m = &env->members[i];
		if (m->value.type != MJ_STRING || !m->key_len) {
			errorf(err, errlen, "env values must be strings");
			return HELPER_ERR_INVALID;
		}
		total += m->key_len + m->value.len + 1;
		if (total > REQUEST_ENV_MAX) {
			errorf(err, errlen, "room %s: the environment (session and env) is larger than "
			       "a shell can take (%d bytes in one variable)", room ? room : "?", REQUEST_ENV_MAX);
			return HELPER_ERR_FAILED;
		}
	}
	return NULL;
}

/* tool: 1 to TOOL_ARGS_MAX strings without NUL bytes, in place of cmd
 * (the keeper checks the operation and its arguments). */
static const char *tool_parse(const struct mj_value *v, struct exec_order *q, char *err, size_t errlen)
{
	if (v->type != MJ_ARRAY || v->len < 1 || v->len > TOOL_ARGS_MAX)
		return errorf(err, errlen, "tool must be 1 to %d strings", TOOL_ARGS_MAX), HELPER_ERR_INVALID;
	for (size_t i = 0; i < v->len; i++) {
		const struct mj_value *s = &v->members[i].value;
		if (s->type != MJ_STRING || strlen(s->str) != s->len || s->len >= PATH_MAX)
			return errorf(err, errlen, "tool: argument %zu is not a path-sized string", i),
			       HELPER_ERR_INVALID;
		q->tool[i] = s->str;
	}
	q->tool[v->len] = NULL;
	q->is_tool = true;
	return NULL;
}

const char *request_exec_parse(const struct mj_value *req, const struct config *cfg,
			       struct exec_order *q, char *err, size_t errlen)
{
	const struct mj_value *v;
	const char *code;
	memset(q, 0, sizeof(*q));
	if ((v = mj_get(req, HK_TOOL)) && (code = tool_parse(v, q, err, errlen)))
		return code;
	q->cmd = q->is_tool ? q->tool[0] : mj_get_str(req, HK_CMD);
	if (!q->cmd || !*q->cmd)
		return errorf(err, errlen, "cmd missing"), HELPER_ERR_INVALID;
	q->timeout_ms = cfg->exec_timeout_ms;
	if ((v = mj_get(req, HK_TIMEOUT_MS))) {
		if (v->type != MJ_NUMBER || !v->is_int || v->integer <= 0 ||
		    (uint64_t)v->integer > cfg->exec_timeout_max_ms)
			return errorf(err, errlen, "timeout_ms out of range"), HELPER_ERR_INVALID;
		q->timeout_ms = (uint64_t)v->integer;
	}
	if ((v = mj_get(req, HK_ENV)) && v->type == MJ_OBJECT) {
		if ((code = env_check(v, mj_get_str(req, HK_ROOM), err, errlen)))
			return code;
		q->env = v;
	}
	q->cwd = mj_get_str(req, HK_CWD);
	if (q->cwd && q->cwd[0] != '/')
		return errorf(err, errlen, "cwd must be absolute"), HELPER_ERR_INVALID;
	const char *user = mj_get_str(req, HK_USER);
	if (user && strcmp(user, HK_USER_ROOT) != 0 && strcmp(user, HK_USER_USER) != 0)
		return errorf(err, errlen, "user must be \"%s\" or \"%s\"", HK_USER_ROOT, HK_USER_USER),
		       HELPER_ERR_INVALID;
	q->as_user = user ? strcmp(user, HK_USER_USER) == 0 : cfg->exec_user == EXEC_USER_USER;
	v = mj_get(req, HK_EXISTING);
	q->existing = v && v->type == MJ_BOOL && v->boolean;
	v = mj_get(req, HK_DETACH);
	q->detach = v && v->type == MJ_BOOL && v->boolean;
	if (q->is_tool && (q->detach || q->env || q->cwd))
		return errorf(err, errlen, "a tool takes no detach, env or cwd"), HELPER_ERR_INVALID;
	return NULL;
}

