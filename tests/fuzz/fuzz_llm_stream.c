/* libFuzzer target: the model's answer (fcgi-app/messages/llm_stream.c), streamed or
 * whole, fed in pieces whose size the input chooses, and the error-text
 * reader of failed answers.
 *
 * Input: byte 0 picks the format (bit 0: SSE or JSON) and the piece size
 * (the other bits, 1..128); the rest is the answer.  The parser must never
 * read or write out of bounds, leak, or hand out a reply longer than its
 * bound, whatever it is given. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "llm_stream.h"

static void on_token(void *ctx, const char *text, size_t len)
{
	size_t *total = ctx;

	if (len && !text)
		abort();
	*total += len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct llm_parser p;
	size_t total = 0, step, i;
	char err[256];
	const char *s;
	int rc = 0;

	if (size < 1)
		return 0;
	step = (size_t)(data[0] >> 1) + 1;
	s = (const char *)data + 1;
	size--;
	llm_parser_init(&p, (data[0] & 1) ? LLM_SSE : LLM_JSON, on_token, &total);
	for (i = 0; i < size && rc == 0; i += step)
		rc = llm_parser_feed(&p, s + i, size - i < step ? size - i : step);
	if (rc == 0 && llm_parser_finish(&p) == 0) {
		if (!p.text || p.text_len > LLM_REPLY_MAX || p.text[p.text_len] != '\0')
			abort();
		if (total != p.text_len)
			abort();
	} else if (!p.failed || !memchr(p.error, '\0', sizeof(p.error))) {
		abort();
	}
	llm_parser_free(&p);

	llm_error_text(s, size, err, sizeof(err));
	if (strlen(err) >= sizeof(err))
		abort();
	return 0;
}
