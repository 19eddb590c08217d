/* The model's answer, read as untrusted bytes.
 *
 * An OpenAI-compatible /chat/completions answers either one JSON object
 *   {"choices":[{"message":{"content":"..."}}], ...}
 * or, asked with "stream": true, server-sent events
 *   data: {"choices":[{"delta":{"content":"..."}}]}\n\n ... data: [DONE]\n\n
 * This parser takes either, fed in pieces of any size as they come off the
 * network, and hands out the reply's text as it grows.  It holds no state
 * but its struct and does no I/O, so it runs in unit tests and under
 * libFuzzer as it runs in roombox-fcgi.
 *
 * Bounded: one SSE line (and one event's data) at most LLM_LINE_MAX bytes,
 * a whole JSON answer at most LLM_BODY_MAX, the reply's text at most
 * LLM_REPLY_MAX; past any of them the answer is refused, never cut short
 * silently.  JSON nesting is bounded by the tokener's depth (LLM_JSON_DEPTH).
 */
#ifndef ROOMBOX_FCGI_LLM_STREAM_H
#define ROOMBOX_FCGI_LLM_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#define LLM_LINE_MAX   (256u << 10)
#define LLM_BODY_MAX   (4u << 20)
#define LLM_REPLY_MAX  (1u << 20)
#define LLM_JSON_DEPTH 32

enum llm_format {
	LLM_JSON,   /* one JSON object (Content-Type application/json, or anything else) */
	LLM_SSE,    /* text/event-stream */
};

/* A piece of the reply, as the model sent it (bytes of a JSON string:
 * usually UTF-8, not checked here). */
typedef void llm_token_fn(void *ctx, const char *text, size_t len);

struct llm_parser {
	enum llm_format format;
	llm_token_fn *on_token;
	void *ctx;
	char *line;            /* SSE: the line being read; JSON: the body */
	size_t line_len, line_cap;
	char *data;            /* SSE: the current event's data lines */
	size_t data_len, data_cap;
	bool have_data;        /* a data: line came since the last dispatch */
	bool after_cr;         /* the last line ended in CR: skip one LF */
	char *text;            /* the reply so far, NUL-terminated */
	size_t text_len, text_cap;
	bool done;             /* [DONE] (or the whole JSON answer) was read */
	bool finish_seen;      /* a choice's finish_reason was seen */
	bool failed;
	char error[256];       /* why, when failed */
};

void llm_parser_init(struct llm_parser *p, enum llm_format format,
		     llm_token_fn *on_token, void *ctx);
/* Feed n bytes of the answer.  0, or -1 once the answer is refused
 * (p->error says why; every later call fails too). */
int llm_parser_feed(struct llm_parser *p, const char *buf, size_t n);
/* The answer has ended.  0 when it was complete and well-formed (p->text,
 * p->text_len hold the reply), -1 with p->error otherwise. */
int llm_parser_finish(struct llm_parser *p);
void llm_parser_free(struct llm_parser *p);

/* What a model server said in an error answer (HTTP status >= 400):
 * error.message, or error when it is a string, or else the first bytes of
 * the body; as printable text (anything else becomes '?'), at most
 * outlen - 1 bytes. */
void llm_error_text(const char *body, size_t len, char *out, size_t outlen);

#endif
