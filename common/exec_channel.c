/* The keeper's reader of exec-channel requests (exec_channel.h): the only
 * code that sees roombox-fcgi's bytes on a channel.  Nothing is trusted:
 * every size, count, flag and string is checked before anything is used,
 * and the first fault refuses the whole request. */
#include "exec_channel.h"

#include <string.h>

#include "errbuf.h"

#define WHY(...) errorf(why, whylen, __VA_ARGS__)

/* The record alone: shape, magic, version, op, flags, sizes. */
static int record_check(const void *rec, size_t rec_len, int nfds, struct kc_req *q,
			char *why, size_t whylen)
{
	if (rec_len != sizeof(*q))
		return WHY("request of %zu bytes, not %zu", rec_len, sizeof(*q));
	memcpy(q, rec, sizeof(*q));
	if (q->magic != KC_MAGIC)
		return WHY("bad magic %#x", (unsigned)q->magic);
	if (q->version != KC_VERSION)
		return WHY("version %u, not %u", (unsigned)q->version, KC_VERSION);
	if (q->op != KC_EXEC)
		return WHY("operation %u is not allowed on an exec channel", (unsigned)q->op);
	if (q->flags & ~KC_ALL)
		return WHY("unknown flags %#x", (unsigned)q->flags);
	bool inl = (q->flags & KC_INLINE) != 0;
	int want_fds = inl ? KC_REQ_FDS - 1 : KC_REQ_FDS;
	uint32_t text_max = inl ? KC_INLINE_MAX : KC_TEXT_MAX;
	if (nfds != want_fds)
		return WHY("%d descriptors, not %d", nfds, want_fds);
	if (q->timeout_ms == 0)
		return WHY("no timeout");
	if (q->text_size < 1 || q->text_size > text_max)
		return WHY("text of %u bytes (1 to %u)", (unsigned)q->text_size, text_max);
	if (q->nenv > KC_ENV_MAX)
		return WHY("%u env strings (at most %u)", (unsigned)q->nenv, KC_ENV_MAX);
	return 0;
}

int kc_parse(const void *rec, size_t rec_len, int nfds, const char *text, size_t text_len,
	     struct kc_order *o, char *why, size_t whylen)
{
	struct kc_req q;
	if (record_check(rec, rec_len, nfds, &q, why, whylen) < 0)
		return -1;
	if (!text || text_len != q.text_size)
		return WHY("text of %zu bytes, but the request says %u", text ? text_len : 0,
			   (unsigned)q.text_size);
	*o = (struct kc_order){ .as_user = (q.flags & KC_AS_USER) != 0,
				.timeout_cap = (q.flags & KC_TIMEOUT_CAP) != 0,
				.timeout_ms = q.timeout_ms, .nenv = q.nenv };
	uint32_t first_env = (q.flags & KC_CWD) ? 2 : 1, want = first_env + q.nenv;
	const char *p = text, *end = text + text_len;
	for (uint32_t i = 0; i < want; i++) {
		const char *nul = p < end ? memchr(p, '\0', (size_t)(end - p)) : NULL;
		if (!nul)
			return WHY("text holds fewer than %u strings", (unsigned)want);
		if (i == 0)
			o->cmd = p;
		else if (i < first_env)
			o->cwd = p;
		else if (!memchr(p, '=', (size_t)(nul - p)))
			return WHY("env string %u is not NAME=value", (unsigned)(i - first_env));
		if (i == first_env)
			o->env = p;
		p = nul + 1;
	}
	if (p != end)
		return WHY("%zu bytes after the last string", (size_t)(end - p));
	if (o->cwd && o->cwd[0] != '/')
		return WHY("cwd is not absolute");
	return 0;
}
