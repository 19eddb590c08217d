/* Fuzz target: the stderr scanner of managed processes (proc_stderr_scan),
 * which reads a room's output -- bytes the room chooses.
 *
 * Input: a byte that picks the piece sizes, then the stream.  Invariants:
 * fed in pieces or all at once, the scanner gives the same output bytes and
 * the same control lines; output plus control lines (with their prefix and
 * newline) add up to the input exactly; no control line is longer than
 * PROC_MARK_MAX; the scanner never holds more than PROC_MARK_MAX bytes. */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "process_scan.h"

#define PREFIX "\036rbx:0123456789abcdef0123456789abcdef "

struct seen {
	char *out, *ctl;
	size_t nout, nctl, lines;
};

static void grow(char **buf, size_t *len, const char *d, size_t n)
{
	*buf = realloc(*buf, *len + n + 1);
	FUZZ_ASSERT(*buf, "out of memory");
	memcpy(*buf + *len, d, n);
	*len += n;
}

static void on_out(void *ctx, const char *d, size_t n)
{
	struct seen *s = ctx;

	FUZZ_ASSERT(n > 0, "empty output piece");
	grow(&s->out, &s->nout, d, n);
}

static void on_ctl(void *ctx, const char *line, size_t n)
{
	struct seen *s = ctx;

	FUZZ_ASSERT(n + strlen(PREFIX) < PROC_MARK_MAX, "control line of %zu bytes", n);
	FUZZ_ASSERT(!memchr(line, '\n', n), "newline inside a control line");
	grow(&s->ctl, &s->nctl, line, n);
	grow(&s->ctl, &s->nctl, "\n", 1);
	s->lines++;
}

static struct seen run(const uint8_t *data, size_t size, size_t step)
{
	struct seen s = { 0 };
	struct proc_scan st = { 0 };

	for (size_t i = 0; i < size; i += step) {
		proc_stderr_scan(&st, PREFIX, (const char *)data + i, size - i < step ? size - i : step,
				 false, on_out, on_ctl, &s);
		FUZZ_ASSERT(st.nhold <= PROC_MARK_MAX, "holds %zu bytes", st.nhold);
	}
	proc_stderr_scan(&st, PREFIX, "", 0, true, on_out, on_ctl, &s);
	FUZZ_ASSERT(st.nhold == 0, "bytes left after the end");
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct seen whole, pieces;
	size_t step;

	if (size < 1)
		return 0;
	step = (size_t)data[0] % 17 + 1;
	data++;
	size--;
	whole = run(data, size, size ? size : 1);
	pieces = run(data, size, step);
	FUZZ_ASSERT(whole.nout == pieces.nout && !memcmp(whole.out ?: "", pieces.out ?: "", whole.nout),
		    "output differs with pieces of %zu", step);
	FUZZ_ASSERT(whole.nctl == pieces.nctl && !memcmp(whole.ctl ?: "", pieces.ctl ?: "", whole.nctl),
		    "control lines differ with pieces of %zu", step);
	FUZZ_ASSERT(whole.nout + whole.nctl + whole.lines * strlen(PREFIX) == size,
		    "%zu output + %zu control bytes for %zu in", whole.nout, whole.nctl, size);
	free(whole.out);
	free(whole.ctl);
	free(pieces.out);
	free(pieces.ctl);
	return 0;
}
