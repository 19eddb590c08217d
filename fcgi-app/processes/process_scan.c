/* The wrapper's control lines out of a managed process's stderr: one pass over untrusted bytes, bounded by PROC_MARK_MAX held
 * between pieces and one 64 KiB slice at a time.  The logger
 * (process_log.c) feeds it; the unit tests and a fuzz target check that
 * how the stream is cut changes nothing of what comes out. */
#include <string.h>

#include "process_scan.h"

/* One slice (at most 64 KiB) of proc_stderr_scan's input. */
static void scan_slice(struct proc_scan *st, const char *prefix, const char *data, size_t n,
		       bool eof, void (*out)(void *, const char *, size_t),
		       void (*ctl)(void *, const char *, size_t), void *ctx)
{
	static _Thread_local char buf[PROC_MARK_MAX + 65536];
	size_t len, i = 0, plen = strlen(prefix);

	memcpy(buf, st->hold, st->nhold);
	len = st->nhold;
	memcpy(buf + len, data, n);
	len += n;
	st->nhold = 0;
	while (i < len) {
		char *mark = memchr(buf + i, '\036', len - i);
		size_t at = mark ? (size_t)(mark - buf) : len, room_left;
		char *nl;

		if (at > i)
			out(ctx, buf + i, at - i);
		i = at;
		if (!mark)
			break;
		room_left = len - at < PROC_MARK_MAX ? len - at : PROC_MARK_MAX;
		nl = memchr(buf + at, '\n', room_left);
		if (!nl && room_left < PROC_MARK_MAX && !eof) {   /* may be ours: wait */
			memcpy(st->hold, buf + at, len - at);
			st->nhold = len - at;
			return;
		}
		if (nl && (size_t)(nl - (buf + at)) >= plen && !memcmp(buf + at, prefix, plen)) {
			ctl(ctx, buf + at + plen, (size_t)(nl - (buf + at)) - plen);
			i = (size_t)(nl - buf) + 1;
			continue;
		}
		out(ctx, buf + at, 1);   /* not ours */
		i = at + 1;
	}
}

void proc_stderr_scan(struct proc_scan *st, const char *prefix, const char *data, size_t n,
		      bool eof, void (*out)(void *ctx, const char *d, size_t n),
		      void (*ctl)(void *ctx, const char *line, size_t n), void *ctx)
{
	do {
		size_t k = n > 65536 ? 65536 : n;

		scan_slice(st, prefix, data, k, eof && k == n, out, ctl, ctx);
		data += k;
		n -= k;
	} while (n);
}
