/* The control lines a managed process's wrapper writes on its stderr,
 * taken out of the stream (see processes.c for who writes
 * them).  Untrusted bytes: bounded, fuzzed (tests/fuzz/fuzz_proc_stderr.c). */
#ifndef ROOMBOX_FCGI_PROCESS_SCAN_H
#define ROOMBOX_FCGI_PROCESS_SCAN_H

#include <stdbool.h>
#include <stddef.h>

/* The control lines ("<prefix><rest>\n", prefix = "\036rbx:<nonce> ")
 * taken out of the stream, a piece at a time: out gets the bytes that are
 * output, ctl the rest of each control line (without prefix and newline).
 * Bytes that may begin a control line not complete yet wait in the scanner
 * (at most PROC_MARK_MAX) for the next piece; eof flushes them as output.
 * How the stream is cut into pieces changes nothing of what comes out. */
#define PROC_MARK_MAX 128
struct proc_scan {
	char hold[PROC_MARK_MAX];
	size_t nhold;
};
void proc_stderr_scan(struct proc_scan *st, const char *prefix, const char *data, size_t n,
		      bool eof, void (*out)(void *ctx, const char *d, size_t n),
		      void (*ctl)(void *ctx, const char *line, size_t n), void *ctx);

#endif
