/* Fuzz target: run tags (runtags_process), the seed's executeCommands.
 *
 * Input: a message's content.  The product only sees valid UTF-8 there
 * (the JSON parser refuses anything else), so the bytes are first made
 * valid with utf8_sanitize.  The sandbox is this harness's stand-in: a
 * callback that answers at once with a canned result chosen from the
 * command (a failure with and without a message, long output with astral
 * characters and a <run> tag in it, stderr only, nothing at all).
 *
 * Invariants: each command handed to the callback is non-empty, NUL-
 * terminated at its length, valid UTF-8 and trimmed; the result is valid
 * UTF-8, NUL-terminated at its length; a text without "<run>" comes back
 * as a substring of itself (only trimmed). */
#include <stdint.h>
#include <string.h>

#include "fuzz.h"
#include "runtags.h"
#include "textenc.h"

static char *dup_bytes(const char *s, size_t n)
{
	char *p = malloc(n + 1);

	FUZZ_ASSERT(p, "out of memory");
	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

/* Long output: the command again and again with a 4-byte character,
 * past the 500 UTF-16 units that are kept. */
static char *long_output(const char *cmd, size_t len, size_t *outlen)
{
	size_t cap = 2048, n = 0;
	char *p = malloc(cap + 1);

	FUZZ_ASSERT(p, "out of memory");
	while (n + len + 4 <= cap) {
		memcpy(p + n, cmd, len);
		n += len;
		memcpy(p + n, "\xF0\x9F\x98\x80", 4);	/* U+1F600 */
		n += 4;
	}
	p[n] = '\0';
	*outlen = n;
	return p;
}

static int canned_exec(void *ctx, const char *cmd, size_t len,
		       struct runtags_exec_result *res)
{
	static const char tag[] = "<run>never run</run> tagged output";
	unsigned *calls = ctx;

	(*calls)++;
	FUZZ_ASSERT(len > 0 && cmd[len] == '\0', "command empty or not terminated");
	FUZZ_ASSERT(fuzz_utf8_valid(cmd, len), "command not UTF-8");
	FUZZ_ASSERT(cmd[0] != ' ' && cmd[len - 1] != ' ' && cmd[0] != '\n' &&
		    cmd[len - 1] != '\n', "command not trimmed");
	switch ((unsigned char)cmd[0] % 6) {
	case 0:
		return -1;	/* no message: "unknown error" */
	case 1:
		res->error = dup_bytes(cmd, len);
		res->error_len = len;
		return -1;
	case 2:
		res->out = long_output(cmd, len, &res->out_len);
		return 0;
	case 3:
		res->err = dup_bytes(cmd, len);
		res->err_len = len;
		return 0;
	case 4:
		res->out = dup_bytes(tag, sizeof(tag) - 1);
		res->out_len = sizeof(tag) - 1;
		return 0;
	default:
		return 0;	/* "[no output]" */
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len = 0, outlen = 0;
	unsigned calls = 0;
	char *text = utf8_sanitize((const char *)data, size, &len);
	char *out;

	FUZZ_ASSERT(text, "out of memory");
	out = runtags_process(text, len, canned_exec, &calls, &outlen);
	FUZZ_ASSERT(out, "runtags_process failed");
	FUZZ_ASSERT(out[outlen] == '\0', "result not terminated at its length");
	FUZZ_ASSERT(fuzz_utf8_valid(out, outlen), "result not UTF-8");
	if (!memmem(text, len, "<run>", 5)) {
		FUZZ_ASSERT(calls == 0, "a command ran from a text without <run>");
		FUZZ_ASSERT(outlen == 0 || memmem(text, len, out, outlen),
			    "a text without tags came back changed beyond a trim");
	}
	free(out);
	free(text);
	return 0;
}
