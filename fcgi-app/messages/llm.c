/* One call to the model: see llm.h.
 *
 * Why it is written this way:
 * - libcurl from Debian does the HTTP (TLS, proxies, chunked answers,
 *   IPv6); this file only builds the request and reads the answer.
 * - CURLOPT_NOSIGNAL: curl must not use SIGALRM for its timeouts in a
 *   threaded program.  CURLOPT_TIMEOUT_MS bounds the whole call (connect,
 *   send, the model's thinking, the last byte) by llm_timeout.
 * - Only http and https, no redirects: llm_url names the server, and an
 *   answer cannot send the key somewhere else.
 * - "Expect:" is sent empty: curl would otherwise wait up to a second for a
 *   "100 Continue" some servers never send, on every call with a long
 *   history.
 * - The answer's status decides what its bytes are: 2xx goes to the parser
 *   (server-sent events when the server says text/event-stream, else one
 *   JSON object); anything else is an error whose first 64 KiB are kept to
 *   say why. */
#include "llm.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <curl/curl.h>

#define ERROR_BODY_MAX (64u << 10)

struct call_state {
	const struct llm_call *call;
	CURL *curl;
	bool started;             /* the first byte of the answer was seen */
	long status;
	struct llm_parser parser;
	char *error_body;         /* a non-2xx answer's first bytes */
	size_t error_len;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;

static void curl_init(void)
{
	curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

int llm_init(char *err, size_t errlen)
{
	pthread_once(&curl_once, curl_init);
	if (curl_init_rc != CURLE_OK) {
		snprintf(err, errlen, "libcurl: %s", curl_easy_strerror(curl_init_rc));
		return -1;
	}
	return 0;
}

/* The connection to the model is this process's alone: close-on-exec, so
 * no helper spawned meanwhile by another thread inherits it. */
static curl_socket_t socket_cloexec(void *unused, curlsocktype purpose,
				    struct curl_sockaddr *a)
{
	return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

/* {"model":..., "messages":..., "stream":...} */
static char *request_body(const struct llm_call *call)
{
	json_object *req = json_object_new_object();
	char *body;

	json_object_object_add(req, "model", json_object_new_string(call->cfg->llm_model));
	json_object_object_add(req, "messages", json_object_get(call->messages));
	json_object_object_add(req, "stream", json_object_new_boolean(call->stream));
	body = strdup(json_object_to_json_string_ext(req, JSON_C_TO_STRING_PLAIN |
						     JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(req);
	return body;
}

static bool is_event_stream(CURL *curl)
{
	char *type = NULL;

	curl_easy_getinfo(curl, CURLINFO_CONTENT_TYPE, &type);
	return type && strncasecmp(type, "text/event-stream", 17) == 0;
}

static void answer_start(struct call_state *st)
{
	st->started = true;
	curl_easy_getinfo(st->curl, CURLINFO_RESPONSE_CODE, &st->status);
	llm_parser_init(&st->parser, is_event_stream(st->curl) ? LLM_SSE : LLM_JSON,
			st->call->on_token, st->call->ctx);
}

static size_t on_answer_bytes(char *buf, size_t size, size_t nmemb, void *arg)
{
	struct call_state *st = arg;
	size_t n = size * nmemb;

	if (!st->started)
		answer_start(st);
	if (st->status >= 200 && st->status < 300)
		return llm_parser_feed(&st->parser, buf, n) == 0 ? n : 0;
	if (st->error_len < ERROR_BODY_MAX) {
		size_t take = n < ERROR_BODY_MAX - st->error_len ? n : ERROR_BODY_MAX - st->error_len;
		char *nb = realloc(st->error_body, st->error_len + take + 1);

		if (nb) {
			memcpy(nb + st->error_len, buf, take);
			st->error_len += take;
			nb[st->error_len] = '\0';
			st->error_body = nb;
		}
	}
	return n;
}

void llm_scrub_key(char *s, const char *key)
{
	size_t klen = key ? strlen(key) : 0;
	char *from = s, *to = s, *hit;

	if (klen == 0)
		return;
	/* never longer than the key, so the text only shrinks; the scan goes
	 * on after each replacement, which may itself hold the key */
	while ((hit = strstr(from, key)) != NULL) {
		memmove(to, from, (size_t)(hit - from));
		to += hit - from;
		if (klen >= 5)
			memcpy(to, "[key]", 5);
		else
			memset(to, '*', klen);
		to += klen >= 5 ? 5 : klen;
		from = hit + klen;
	}
	memmove(to, from, strlen(from) + 1);
}

static struct curl_slist *request_headers(const struct llm_call *call)
{
	struct curl_slist *h = NULL, *next;
	char *auth = NULL;
	const char *list[] = {
		"Content-Type: application/json",
		call->stream ? "Accept: text/event-stream" : "Accept: application/json",
		"Expect:",
	};

	for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) {
		next = curl_slist_append(h, list[i]);
		if (!next)
			goto fail;
		h = next;
	}
	if (call->key && *call->key) {
		if (asprintf(&auth, "Authorization: Bearer %s", call->key) < 0)
			goto fail;
		next = curl_slist_append(h, auth);
		explicit_bzero(auth, strlen(auth));
		free(auth);
		if (!next)
			goto fail;
		h = next;
	}
	return h;
fail:
	curl_slist_free_all(h);
	return NULL;
}

static void setup_handle(CURL *curl, const struct llm_call *call, const char *url,
			 const char *body, struct curl_slist *headers,
			 struct call_state *st, char *curl_err)
{
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_OPENSOCKETFUNCTION, socket_cloexec);
	curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, (long)call->cfg->llm_timeout_ms);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_answer_bytes);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, st);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_err);
	curl_easy_setopt(curl, CURLOPT_USERAGENT, "roombox/" ROOMBOX_VERSION);
}

/* After the transfer: the reply, or NULL with err. */
static char *call_result(struct call_state *st, CURLcode rc, const char *curl_err,
			 size_t *len, char *err, size_t errlen)
{
	char text[256];
	char *reply;

	if (rc == CURLE_WRITE_ERROR && st->parser.failed) {
		snprintf(err, errlen, "%s", st->parser.error);
		return NULL;
	}
	if (rc == CURLE_OPERATION_TIMEDOUT) {
		snprintf(err, errlen, "no complete answer within llm_timeout (%llu ms)",
			 (unsigned long long)st->call->cfg->llm_timeout_ms);
		return NULL;
	}
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "%s", curl_err[0] ? curl_err : curl_easy_strerror(rc));
		return NULL;
	}
	if (!st->started)
		answer_start(st);   /* an empty answer */
	if (st->status < 200 || st->status >= 300) {
		llm_error_text(st->error_body, st->error_len, text, sizeof(text));
		snprintf(err, errlen, "HTTP %ld%s%s", st->status, text[0] ? ": " : "", text);
		return NULL;
	}
	if (llm_parser_finish(&st->parser) < 0) {
		snprintf(err, errlen, "%s", st->parser.error);
		return NULL;
	}
	reply = st->parser.text;
	*len = st->parser.text_len;
	st->parser.text = NULL;
	return reply;
}

char *llm_complete(const struct llm_call *call, size_t *len, char *err, size_t errlen)
{
	struct call_state st = { .call = call };
	char curl_err[CURL_ERROR_SIZE] = "", *url = NULL, *body = NULL, *reply = NULL;
	const char *base = call->cfg->llm_url;
	size_t blen = strlen(base);
	struct curl_slist *headers = NULL;
	CURLcode rc;

	if (llm_init(err, errlen) < 0)
		return NULL;
	while (blen && base[blen - 1] == '/')
		blen--;
	st.curl = curl_easy_init();
	headers = request_headers(call);
	body = request_body(call);
	if (!st.curl || !headers || !body ||
	    asprintf(&url, "%.*s/chat/completions", (int)blen, base) < 0) {
		url = NULL;
		snprintf(err, errlen, "out of memory");
		goto out;
	}
	setup_handle(st.curl, call, url, body, headers, &st, curl_err);
	rc = curl_easy_perform(st.curl);
	reply = call_result(&st, rc, curl_err, len, err, errlen);
out:
	if (!reply)
		llm_scrub_key(err, call->key);
	if (st.started)
		llm_parser_free(&st.parser);
	free(st.error_body);
	curl_slist_free_all(headers);
	curl_easy_cleanup(st.curl);
	free(body);
	free(url);
	return reply;
}
