/* FastCGI 1.0 records, client side: see fcgi_client.h.
 *
 * Every record is an 8-byte header (version 1, type, request id, content
 * length, padding length) and its content.  We send BEGIN_REQUEST, the
 * parameters as name-value pairs in PARAMS records and an empty one, the
 * body in STDIN records and an empty one; then read STDOUT records until
 * END_REQUEST.  What the server writes to STDERR is passed on to ours. */
#include <errno.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "fcgi_client.h"

enum { BEGIN_REQUEST = 1, END_REQUEST = 3, PARAMS = 4, STDIN = 5, STDOUT = 6, STDERR = 7 };
#define RESPONDER 1
#define RECORD_MAX 65535
#define REQUEST_ID 1

struct buf {
	char *data;
	size_t len, cap;
};

static int buf_add(struct buf *b, const void *p, size_t n)
{
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		char *d;

		while (cap < b->len + n + 1)
			cap *= 2;
		d = realloc(b->data, cap);
		if (!d)
			return -1;
		b->data = d;
		b->cap = cap;
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

static void set_err(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* One record of `type` with content p[0..n) (n <= RECORD_MAX) onto out. */
static int record(struct buf *out, int type, const void *p, size_t n)
{
	uint8_t h[8] = { 1, (uint8_t)type, 0, REQUEST_ID,
			 (uint8_t)(n >> 8), (uint8_t)n, 0, 0 };

	return buf_add(out, h, 8) < 0 || buf_add(out, p, n) < 0 ? -1 : 0;
}

/* A stream (PARAMS, STDIN): its bytes in records, then the empty record. */
static int stream(struct buf *out, int type, const char *p, size_t n)
{
	while (n) {
		size_t chunk = n < RECORD_MAX ? n : RECORD_MAX;

		if (record(out, type, p, chunk) < 0)
			return -1;
		p += chunk;
		n -= chunk;
	}
	return record(out, type, "", 0);
}

static int name_value_len(struct buf *b, size_t n)
{
	uint8_t l[4] = { (uint8_t)(n >> 24 | 0x80), (uint8_t)(n >> 16), (uint8_t)(n >> 8), (uint8_t)n };

	if (n < 128) {
		uint8_t one = (uint8_t)n;
		return buf_add(b, &one, 1);
	}
	return buf_add(b, l, 4);
}

static int encode_params(struct buf *b, const char *const *params)
{
	for (; params[0] && params[1]; params += 2) {
		size_t nl = strlen(params[0]), vl = strlen(params[1]);

		if (name_value_len(b, nl) < 0 || name_value_len(b, vl) < 0 ||
		    buf_add(b, params[0], nl) < 0 || buf_add(b, params[1], vl) < 0)
			return -1;
	}
	return 0;
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Exactly n bytes; 0, or -1 (error, end of stream or timeout: errno). */
static int read_all(int fd, void *p, size_t n)
{
	char *c = p;

	while (n) {
		ssize_t r = read(fd, c, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r == 0)
			errno = ECONNRESET;
		if (r <= 0)
			return -1;
		c += r;
		n -= (size_t)r;
	}
	return 0;
}

static int connect_unix(const char *path, int timeout_s, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { timeout_s, 0 };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		set_err(err, errlen, "%s: socket path too long", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		set_err(err, errlen, "socket: %s", strerror(errno));
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		set_err(err, errlen, "connect %s: %s", path, strerror(errno));
		close(fd);
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	return fd;
}

/* Read records until END_REQUEST; STDOUT into out.  All records together
 * (STDERR ones too) are bounded, so no peer keeps us reading for ever. */
static int read_answer(int fd, struct buf *out, char *err, size_t errlen)
{
	uint8_t h[8];
	char content[RECORD_MAX + 255];
	size_t total = 0;

	for (;;) {
		size_t n, pad;

		if (read_all(fd, h, 8) < 0) {
			set_err(err, errlen, "reading the answer: %s", strerror(errno));
			return -1;
		}
		n = (size_t)h[4] << 8 | h[5];
		pad = h[6];
		total += 8 + n + pad;
		if (total > 2 * (size_t)FCGI_CLIENT_ANSWER_MAX) {
			set_err(err, errlen, "answer larger than %u bytes", 2 * FCGI_CLIENT_ANSWER_MAX);
			return -1;
		}
		if (h[0] != 1 || read_all(fd, content, n + pad) < 0) {
			set_err(err, errlen, "reading the answer: bad or short record");
			return -1;
		}
		if (h[1] == END_REQUEST)
			return 0;
		if (h[1] == STDERR)
			fwrite(content, 1, n, stderr);
		if (h[1] != STDOUT)
			continue;
		if (out->len + n > FCGI_CLIENT_ANSWER_MAX) {
			set_err(err, errlen, "answer larger than %u bytes", FCGI_CLIENT_ANSWER_MAX);
			return -1;
		}
		if (buf_add(out, content, n) < 0) {
			set_err(err, errlen, "out of memory");
			return -1;
		}
	}
}

/* "Status: 404 Not Found\r\n...\r\n\r\nbody" into ans. */
static int parse_cgi(struct buf *raw, struct fcgi_answer *ans, char *err, size_t errlen)
{
	char *end = raw->data ? strstr(raw->data, "\r\n\r\n") : NULL;
	char *line, *save = NULL;

	if (!end) {
		set_err(err, errlen, "the answer has no header end");
		return -1;
	}
	*end = '\0';
	ans->status = 200;
	for (line = strtok_r(raw->data, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save))
		if (strncasecmp(line, "Status:", 7) == 0)
			ans->status = atoi(line + 7);
	ans->body_len = raw->len - (size_t)(end + 4 - raw->data);
	ans->body = malloc(ans->body_len + 1);
	if (!ans->body) {
		set_err(err, errlen, "out of memory");
		return -1;
	}
	memcpy(ans->body, end + 4, ans->body_len);
	ans->body[ans->body_len] = '\0';
	return 0;
}

int fcgi_request(const char *socket_path, const char *const *params,
		 const char *body, size_t body_len, int timeout_s,
		 struct fcgi_answer *ans, char *err, size_t errlen)
{
	static const uint8_t begin[8] = { 0, RESPONDER, 0 /* no keep-alive */ };
	struct buf req = { 0 }, pairs = { 0 };
	int fd, rc = -1;

	memset(ans, 0, sizeof(*ans));
	if (record(&req, BEGIN_REQUEST, begin, sizeof(begin)) < 0 ||
	    encode_params(&pairs, params) < 0 ||
	    stream(&req, PARAMS, pairs.data ? pairs.data : "", pairs.len) < 0 ||
	    stream(&req, STDIN, body ? body : "", body_len) < 0) {
		set_err(err, errlen, "out of memory");
		goto out;
	}
	fd = connect_unix(socket_path, timeout_s, err, errlen);
	if (fd < 0)
		goto out;
	if (write_all(fd, req.data, req.len) < 0)
		set_err(err, errlen, "sending the request: %s", strerror(errno));
	else
		rc = fcgi_read_answer(fd, ans, err, errlen);
	close(fd);
out:
	free(req.data);
	free(pairs.data);
	return rc;
}

int fcgi_read_answer(int fd, struct fcgi_answer *ans, char *err, size_t errlen)
{
	struct buf raw = { 0 };
	int rc = -1;

	memset(ans, 0, sizeof(*ans));
	if (read_answer(fd, &raw, err, errlen) == 0)
		rc = parse_cgi(&raw, ans, err, errlen);
	free(raw.data);
	return rc;
}

void fcgi_answer_free(struct fcgi_answer *ans)
{
	free(ans->body);
	ans->body = NULL;
}

/* ---- streamed: a room's export and import ---- */

/* One STDIN record of p[0..n) straight to the socket. */
static int send_record(int fd, int type, const char *p, size_t n)
{
	uint8_t h[8] = { 1, (uint8_t)type, 0, REQUEST_ID, (uint8_t)(n >> 8), (uint8_t)n, 0, 0 };

	return write_all(fd, (const char *)h, 8) < 0 || (n && write_all(fd, p, n) < 0) ? -1 : 0;
}

int fcgi_request_stream(const char *socket_path, const char *const *params, int in_fd,
			fcgi_sink *sink, void *ctx, int timeout_s, struct fcgi_stream_answer *ans,
			char *err, size_t errlen)
{
	static const uint8_t begin[8] = { 0, RESPONDER, 0 };
	struct buf req = { 0 }, pairs = { 0 }, head = { 0 };
	char *chunk = malloc(RECORD_MAX + 255);
	int fd = -1, rc = -1;
	bool in_body = false;

	memset(ans, 0, sizeof(*ans));
	if (!chunk || record(&req, BEGIN_REQUEST, begin, sizeof(begin)) < 0 ||
	    encode_params(&pairs, params) < 0 ||
	    stream(&req, PARAMS, pairs.data ? pairs.data : "", pairs.len) < 0) {
		set_err(err, errlen, "out of memory");
		goto out;
	}
	fd = connect_unix(socket_path, timeout_s, err, errlen);
	if (fd < 0)
		goto out;
	if (write_all(fd, req.data, req.len) < 0) {
		set_err(err, errlen, "sending the request: %s", strerror(errno));
		goto out;
	}
	/* the body as it comes; a server that stopped reading (a refusal)
	 * ends the sending, and its answer is read all the same */
	for (ssize_t n = 1; in_fd >= 0 && n > 0;) {
		n = read(in_fd, chunk, RECORD_MAX);
		if (n < 0 && errno == EINTR) {
			n = 1;
			continue;
		}
		if (n < 0) {
			set_err(err, errlen, "reading the body: %s", strerror(errno));
			goto out;
		}
		ans->sent += (uint64_t)n;
		if (send_record(fd, STDIN, chunk, (size_t)n) < 0)
			break;
	}
	if (in_fd < 0)
		send_record(fd, STDIN, "", 0);
	/* the answer: its head read here, its body to out_fd on a 2xx
	 * (else kept, for the error's words) */
	for (;;) {
		uint8_t h[8];
		if (read_all(fd, h, 8) < 0) {
			set_err(err, errlen, "reading the answer: %s", strerror(errno));
			goto out;
		}
		size_t n = (size_t)h[4] << 8 | h[5], pad = h[6];
		if (h[0] != 1 || read_all(fd, chunk, n + pad) < 0) {
			set_err(err, errlen, "reading the answer: bad or short record");
			goto out;
		}
		if (h[1] == END_REQUEST)
			break;
		if (h[1] == STDERR)
			fwrite(chunk, 1, n, stderr);
		if (h[1] != STDOUT)
			continue;
		if (in_body) {
			if (ans->status / 100 == 2 && sink) {
				if (sink(ctx, chunk, n) < 0) {
					set_err(err, errlen, "writing the answer: %s", strerror(errno));
					goto out;
				}
				ans->received += n;
				continue;
			}
		}
		if (head.len + n > FCGI_CLIENT_ANSWER_MAX / 64 && !(in_body && ans->status / 100 == 2)) {
			set_err(err, errlen, "answer too large");
			goto out;
		}
		if (buf_add(&head, chunk, n) < 0) {
			set_err(err, errlen, "out of memory");
			goto out;
		}
		char *end = in_body ? NULL : strstr(head.data, "\r\n\r\n");
		if (end) {
			struct buf raw = { 0 };
			struct fcgi_answer a;
			size_t rest = head.len - (size_t)(end + 4 - head.data);
			/* the head parsed as a whole answer's; what came after it
			 * is the body's start */
			if (buf_add(&raw, head.data, head.len) < 0 || parse_cgi(&raw, &a, err, errlen) < 0) {
				free(raw.data);
				goto out;
			}
			free(raw.data);
			ans->status = a.status;
			in_body = true;
			head.len = 0;
			if (ans->status / 100 == 2 && sink) {
				if (rest && sink(ctx, a.body, rest) < 0) {
					fcgi_answer_free(&a);
					set_err(err, errlen, "writing the answer: %s", strerror(errno));
					goto out;
				}
				ans->received += rest;
			} else if (buf_add(&head, a.body, rest) < 0) {
				fcgi_answer_free(&a);
				goto out;
			}
			fcgi_answer_free(&a);
		}
	}
	if (!in_body) {
		set_err(err, errlen, "the answer has no header end");
		goto out;
	}
	ans->body = head.data;
	ans->body_len = head.len;
	head.data = NULL;
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(chunk);
	free(req.data);
	free(pairs.data);
	free(head.data);
	return rc;
}
