/* One call to the model: POST {llm_url}/chat/completions of any
 * OpenAI-compatible server (Ollama, llama.cpp's llama-server, vLLM,
 * OpenAI), through libcurl, the answer read by llm_stream.c.
 *
 * Thread-safe: every call has its own curl handle; nothing is shared but
 * the configuration.  A call blocks its thread for at most llm_timeout. */
#ifndef ROOMBOX_FCGI_LLM_H
#define ROOMBOX_FCGI_LLM_H

#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>

#include "config.h"
#include "llm_stream.h"

struct llm_call {
	const struct config *cfg;   /* llm_url, llm_model, llm_timeout */
	const char *key;            /* bearer token, or NULL for none */
	json_object *messages;      /* [{"role","content"}...], system first */
	bool stream;                /* ask for server-sent events */
	llm_token_fn *on_token;     /* each piece of the reply as it comes */
	void *ctx;
};

/* libcurl's global set-up: once, at start, before any thread calls.  0, or
 * -1 with err. */
int llm_init(char *err, size_t errlen);

/* The reply's text (malloc'd, NUL-terminated, *len bytes; the model's bytes
 * as they came, not checked as UTF-8), or NULL with err set to why the call
 * failed, e.g. "HTTP 500: overloaded" (the caller prefixes "model request
 * failed: ").  The key never appears in err: a server that echoes it has
 * it replaced by "[key]". */
char *llm_complete(const struct llm_call *call, size_t *len, char *err, size_t errlen);

/* Every occurrence of key in s (NUL-terminated, changed in place) replaced:
 * by "[key]", or by as many '*' for a key shorter than that, so that s
 * never grows.  A server may quote what it was sent. */
void llm_scrub_key(char *s, const char *key);

#endif
