/* The helper's request reader (see request.h).
 *
 * Bounded by size before anything is allocated: the header is read into a
 * record on the stack and its size checked against the caller's max_body
 * plus the protocol's slack; only then is that many bytes allocated, once.
 * Nothing the request says makes the helper allocate more (its strings are
 * used where they lie), so no input makes the setuid helper grow.
 */
#include "request.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "errbuf.h"
#include "roomid.h"

/* The kernel takes at most MAX_ARG_STRLEN (32 pages) in one environment
 * string, and every env pair of a request goes into one (the session
 * variable, exec.c): more cannot run, so it is refused before anything is
 * built from it. */
#define REQUEST_ENV_MAX (32 * 4096 - 1)

static ssize_t read_full(int fd, char *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t k = read(fd, buf + got, len - got);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		if (k == 0)
			break;
		got += (size_t)k;
	}
	return (ssize_t)got;
}

int request_read(int fd, uint64_t max_body, char **buf, size_t *len, char *err, size_t errlen)
{
	struct helper_req head;
	uint64_t max = helper_request_max(max_body);
	*buf = NULL;
	*len = 0;
	ssize_t n = read_full(fd, (char *)&head, sizeof(head));
	if (n < 0)
		return errorf(err, errlen, "request could not be read: %s", strerror(errno));
	if ((size_t)n < sizeof(head))
		return errorf(err, errlen, "request truncated: %zd bytes, a request record is %zu",
			      n, sizeof(head));
	if (head.magic != HELPER_MAGIC)
		return errorf(err, errlen, "request has the wrong magic (0x%08x, not a roombox request)",
			      head.magic);
	if (head.version != HELPER_VERSION)
		return errorf(err, errlen, "request version %u, this helper speaks version %u",
			      head.version, HELPER_VERSION);
	if (head.size < sizeof(head) || head.size > max)
		return errorf(err, errlen, "request size %u out of range (%zu to %llu bytes)",
			      head.size, sizeof(head), (unsigned long long)max);
	char *b = malloc(head.size);
	if (!b)
		return errorf(err, errlen, "request: out of memory");
	memcpy(b, &head, sizeof(head));
	n = read_full(fd, b + sizeof(head), head.size - sizeof(head));
	if (n < 0 || (size_t)n < head.size - sizeof(head)) {
		int e = errno;
		free(b);
		if (n < 0)
			return errorf(err, errlen, "request could not be read: %s", strerror(e));
		return errorf(err, errlen, "request truncated: %zu of its %u bytes",
			      sizeof(head) + (size_t)n, head.size);
	}
	char extra;
	n = read_full(fd, &extra, 1);
	if (n != 0) {
		free(b);
		return errorf(err, errlen, "request longer than its declared %u bytes", head.size);
	}
	*buf = b;
	*len = head.size;
	return 0;
}

/* exec: the strings are cmd or ntool tool arguments, cwd with HX_CWD, then
 * nenv pairs. */
static int exec_shape(const struct request *rq, char *err, size_t errlen)
{
	const struct helper_exec_args *a = rq->args;
	if (a->flags & ~HX_ALL)
		return errorf(err, errlen, "exec: unknown flags 0x%x", a->flags & ~HX_ALL);
	bool tool = a->flags & HX_TOOL;
	if (tool ? a->ntool < 1 || a->ntool > TOOL_ARGS_MAX : a->ntool != 0)
		return errorf(err, errlen, "exec: a tool takes 1 to %d arguments, a command none",
			      TOOL_ARGS_MAX);
	if (tool && (a->nenv || (a->flags & HX_CWD)))
		return errorf(err, errlen, "exec: a tool takes no env or cwd");
	if (a->reserved)
		return errorf(err, errlen, "exec: reserved field not 0");
	uint64_t want = (uint64_t)(tool ? a->ntool : 1) + ((a->flags & HX_CWD) ? 1 : 0) + a->nenv;
	if (want != rq->nstrings)
		return errorf(err, errlen, "exec: %llu strings expected, the request has %u",
			      (unsigned long long)want, rq->nstrings);
	return 0;
}

int request_decode(const char *buf, size_t len, const struct request_shape *shapes,
		   struct request *rq, char *err, size_t errlen)
{
	const struct helper_req *h = (const void *)buf;
	memset(rq, 0, sizeof(*rq));
	if (len < sizeof(*h))
		return errorf(err, errlen, "request truncated: %zu bytes, a request record is %zu",
			      len, sizeof(*h));
	if (h->magic != HELPER_MAGIC)
		return errorf(err, errlen, "request has the wrong magic (0x%08x, not a roombox request)",
			      h->magic);
	if (h->version != HELPER_VERSION)
		return errorf(err, errlen, "request version %u, this helper speaks version %u",
			      h->version, HELPER_VERSION);
	if (h->size != len)
		return errorf(err, errlen, "request size %u, but %zu bytes came", h->size, len);
	if (h->op == 0 || h->op >= HOP_COUNT || !shapes[h->op].known)
		return errorf(err, errlen, "unknown op %u", h->op);
	const struct request_shape *s = &shapes[h->op];
	const char *name = helper_op_name(h->op);
	rq->op = h->op;
	if (h->reserved)
		return errorf(err, errlen, "%s: reserved field not 0", name);
	if (len - sizeof(*h) < s->args_size)
		return errorf(err, errlen, "%s: request truncated: its argument record is %u bytes, %zu came",
			      name, s->args_size, len - sizeof(*h));
	/* the room: a valid id, NUL-padded, where the op takes one; empty
	 * where it does not */
	size_t rl = strnlen(h->room, sizeof(h->room));
	if (rl == sizeof(h->room))
		return errorf(err, errlen, "%s: room id not NUL-terminated", name);
	for (size_t i = rl; i < sizeof(h->room); i++)
		if (h->room[i])
			return errorf(err, errlen, "%s: room field not NUL-padded", name);
	if (s->room && !room_id_valid(h->room))
		return errorf(err, errlen, "%s: invalid room id", name);
	if (!s->room && rl)
		return errorf(err, errlen, "%s takes no room", name);
	rq->room = s->room ? h->room : NULL;
	rq->args = buf + sizeof(*h);
	rq->strings = buf + sizeof(*h) + s->args_size;
	rq->nstrings = h->nstrings;
	const char *end = buf + len;
	if (h->op == HOP_EXEC && exec_shape(rq, err, errlen) < 0)
		return -1;
	/* exactly nstrings strings, each NUL-terminated, filling the rest */
	const char *p = rq->strings;
	for (uint32_t i = 0; i < h->nstrings; i++) {
		const char *nul = p < end ? memchr(p, '\0', (size_t)(end - p)) : NULL;
		if (!nul)
			return errorf(err, errlen, "%s: string %u of %u is not NUL-terminated "
				      "within the request", name, i + 1, h->nstrings);
		p = nul + 1;
	}
	if (p != end)
		return errorf(err, errlen, "%s: %zu bytes after its %u strings", name,
			      (size_t)(end - p), h->nstrings);
	if (h->op == HOP_STOP_IDLE) {
		const struct helper_keep_args *k = rq->args;
		if (k->nkeep != h->nstrings || k->reserved)
			return errorf(err, errlen, "%s: %u rooms to keep, %u strings", name,
				      k->nkeep, h->nstrings);
		for (const char *id = rq->strings; id < end; id = request_next(id))
			if (!room_id_valid(id))
				return errorf(err, errlen, "%s: invalid room id in keep", name);
	} else if (h->op != HOP_EXEC && h->nstrings) {
		return errorf(err, errlen, "%s takes no strings", name);
	}
	if (h->op == HOP_PORT_CONNECT) {
		const struct helper_port_args *pa = rq->args;
		if (pa->serve > 1 || (pa->serve ? pa->port != 0 : pa->port < 1 || pa->port > 65535))
			return errorf(err, errlen, "room %s: port must be a whole number from 1 to 65535 "
				      "(or 0 to serve)", h->room);
	}
	return 0;
}

int request_exec_order(const struct request *rq, const struct config *cfg,
		       struct exec_order *q, char *err, size_t errlen)
{
	const struct helper_exec_args *a = rq->args;
	const char *s = rq->strings;
	memset(q, 0, sizeof(*q));
	if (a->flags & HX_TOOL) {
		for (uint32_t i = 0; i < a->ntool; i++, s = request_next(s)) {
			if (strlen(s) >= PATH_MAX)
				return errorf(err, errlen, "tool: argument %u is not a path-sized string", i),
				       HELPER_E_INVALID;
			q->tool[i] = s;
		}
		q->tool[a->ntool] = NULL;
		q->is_tool = true;
		q->cmd = q->tool[0];
	} else {
		q->cmd = s;
		s = request_next(s);
	}
	if (!*q->cmd)
		return errorf(err, errlen, "cmd missing"), HELPER_E_INVALID;
	q->timeout_ms = a->timeout_ms ? a->timeout_ms : cfg->exec_timeout_ms;
	/* the most any room may have; the room's own is checked by exec */
	if (q->timeout_ms > config_room_limits_max(cfg).exec_timeout_max_ms)
		return errorf(err, errlen, "timeout_ms out of range"), HELPER_E_INVALID;
	if (a->flags & HX_CWD) {
		q->cwd = s;
		s = request_next(s);
		if (q->cwd[0] != '/')
			return errorf(err, errlen, "cwd must be absolute"), HELPER_E_INVALID;
	}
	size_t total = 0;
	q->env = a->nenv ? s : NULL;
	q->nenv = a->nenv;
	for (uint32_t i = 0; i < a->nenv; i++, s = request_next(s)) {
		const char *eq = strchr(s, '=');
		if (!eq || eq == s)
			return errorf(err, errlen, "env: \"NAME=value\" expected"), HELPER_E_INVALID;
		total += strlen(s) + 1;
		if (total > REQUEST_ENV_MAX)
			return errorf(err, errlen, "room %s: the environment (session and env) is larger than "
				      "a shell can take (%d bytes in one variable)", rq->room, REQUEST_ENV_MAX),
			       HELPER_E_FAILED;
	}
	q->as_user = (a->flags & HX_USER_SET) ? (a->flags & HX_AS_USER) != 0
		: cfg->exec_user == EXEC_USER_USER;
	q->existing = a->flags & HX_EXISTING;
	q->running_only = a->flags & HX_RUNNING;
	q->detach = a->flags & HX_DETACH;
	return 0;
}
