/* The client side of FastCGI (responder role, one request per connection),
 * just enough for roomboxctl to ask roombox-fcgi what a web server would:
 * parameters, a body, and the CGI answer back (Status, headers, body). */
#ifndef ROOMBOX_CTL_FCGI_CLIENT_H
#define ROOMBOX_CTL_FCGI_CLIENT_H

#include <stddef.h>
#include <stdint.h>

/* An answer bigger than this is refused (two streams of output_limit,
 * base64-encoded, fit many times over). */
#define FCGI_CLIENT_ANSWER_MAX (256u << 20)

struct fcgi_answer {
	int status;         /* from the Status: header; 200 when absent */
	char *body;         /* malloc'd, NUL-terminated */
	size_t body_len;
};

/* One request on the FastCGI socket at socket_path.  params: NULL-terminated
 * list of "NAME", "value" pairs.  Returns 0 with *ans filled, or -1 with a
 * reason in err. */
int fcgi_request(const char *socket_path, const char *const *params,
		 const char *body, size_t body_len, int timeout_s,
		 struct fcgi_answer *ans, char *err, size_t errlen);

/* Read one answer from fd (FastCGI records up to END_REQUEST, then the CGI
 * head): the bytes of roombox-fcgi, a less privileged process than the
 * administrator running roomboxctl, so every length is checked and the
 * whole is bounded.  0 with *ans filled, or -1 with a reason in err. */
int fcgi_read_answer(int fd, struct fcgi_answer *ans, char *err, size_t errlen);

void fcgi_answer_free(struct fcgi_answer *ans);

/* A request whose body and answer are streamed (a room's export and
 * import): the body read from in_fd (-1: none) to its end, sent as it is
 * read; a 2xx answer's body given to sink as it comes (sink returns 0, or
 * -1 with errno to stop), any other's kept in body (bounded) for its
 * words.  0 with *ans, or -1 with err. */
typedef int fcgi_sink(void *ctx, const char *p, size_t n);
struct fcgi_stream_answer {
	int status;
	char *body;           /* malloc'd: a non-2xx answer's body */
	size_t body_len;
	uint64_t sent, received;
};
int fcgi_request_stream(const char *socket_path, const char *const *params, int in_fd,
			fcgi_sink *sink, void *ctx, int timeout_s, struct fcgi_stream_answer *ans,
			char *err, size_t errlen);

#endif
