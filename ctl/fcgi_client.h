/* The client side of FastCGI (responder role, one request per connection),
 * just enough for roomboxctl to ask roombox-fcgi what a web server would:
 * parameters, a body, and the CGI answer back (Status, headers, body). */
#ifndef ROOMBOX_CTL_FCGI_CLIENT_H
#define ROOMBOX_CTL_FCGI_CLIENT_H

#include <stddef.h>

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

#endif
