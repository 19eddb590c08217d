/* Run tags: the original service's executeCommands, reproduced to the
 * character, with the sandbox behind a callback.
 *
 *   matches = every /<run>([\s\S]*?)<\/run>/g in the ORIGINAL text, in order
 *   for each: cmd = inner.trim(); skip when empty; run it, then append
 *     "\n\nOutput (" cmd "):\n" (stdout.slice(0,500) || stderr.slice(0,500)
 *                                 || "[no output]")
 *   or, when the sandbox itself failed, "\n\nError (" cmd "):\n" message
 *   return (result with every <run>...</run> removed).trim()
 *
 * The callback is the seam between this pure text transformation and the
 * sandbox: the route supplies one that calls the helper, the unit tests one
 * that fakes it.  This module holds no state; it is safe to call from any
 * number of threads at once (as long as the callback is). */
#ifndef ROOMBOX_FCGI_RUNTAGS_H
#define ROOMBOX_FCGI_RUNTAGS_H

#include <stddef.h>

/* What one command gave.  The callback fills it with malloc'd buffers
 * (NULL means empty) and runtags_process frees them. */
struct runtags_exec_result {
	char *out;         /* stdout: valid UTF-8, already U+FFFD-sanitised */
	size_t out_len;
	char *err;         /* stderr: likewise */
	size_t err_len;
	char *error;       /* sandbox failure message (valid UTF-8) */
	size_t error_len;
};

/* Run `cmd` (cmd_len bytes, NUL-terminated; it may hold a NUL byte before
 * cmd_len, which a shell cannot take: the callback decides, e.g. by failing)
 * in the room's sandbox.  Return 0 when the command ran, whatever its exit
 * status, with out/err set; or -1 when the sandbox could not run it, with
 * error set (NULL gives "unknown error", as the original service's String(e) fallback
 * would give something). */
typedef int runtags_exec_fn(void *ctx, const char *cmd, size_t cmd_len,
			    struct runtags_exec_result *res);

/* The most commands one message runs: each adds its output (up to ~3 KB
 * as JSON) to what is stored, and they run one after another.  An
 * assistant message with more is refused before any runs; a model's
 * reply runs its first RUNTAGS_MAX (agent.c). */
#define RUNTAGS_MAX 32

/* How many commands runtags_process would run for text (the tags whose
 * trimmed inner text is not empty). */
size_t runtags_count(const char *text, size_t len);

/* How many UTF-16 code units of output the original service keeps (stdout.slice(0, 500)). */
#define RUNTAGS_SUMMARY_UNITS 500

/* Process `text` (len bytes of UTF-8, may hold NUL bytes): run every tag's
 * command through exec, in order, one at a time, and return the final text,
 * malloc'd and NUL-terminated, its length in *outlen (may be NULL).
 * NULL only when memory runs out. */
char *runtags_process(const char *text, size_t len, runtags_exec_fn *exec,
		      void *ctx, size_t *outlen);

/* What follows "Output (cmd):\n" (rc 0) or "Error (cmd):\n" (rc -1) for a
 * command whose callback returned rc and filled res: the first
 * RUNTAGS_SUMMARY_UNITS of stdout, else of stderr, else "[no output]"; or
 * the error.  malloc'd, NUL-terminated, length in *outlen (may be NULL);
 * NULL when memory runs out.  The agent (agent.c) shows it as it comes. */
char *runtags_summary(int rc, const struct runtags_exec_result *res, size_t *outlen);

/* JavaScript's String.prototype.trim on UTF-8: the bounds of s[0..len)
 * without leading and trailing WhiteSpace and LineTerminator characters
 * (TAB LF VT FF CR SPACE, U+00A0, U+1680, U+2000-U+200A, U+2028, U+2029,
 * U+202F, U+205F, U+3000, U+FEFF).  Exposed for tests. */
void runtags_js_trim(const char *s, size_t len, size_t *start, size_t *trimmed_len);

#endif
