/* httpbench -- the HTTP client of `make bench`.
 *
 *   httpbench [options] PATH-TEMPLATE
 *     -P PORT      nginx on 127.0.0.1:PORT (required)
 *     -A ADDR      another IPv4 address than 127.0.0.1 (make bench-cluster: a host)
 *     -T FILE      token file: "Authorization: Bearer <first line>"
 *     -m METHOD    GET, POST (default) or DELETE
 *     -b BODY      request body (POST; sent as application/json)
 *     -n N         measured requests (default 1)
 *     -w W         unmeasured warm-up requests first (default 0)
 *     -c C         C connections, one thread each (default 1)
 *     -o OFFSET    first value of {i} (default 0)
 *     -s STATUS    the expected status (default 200)
 *     -k TEXT      the body must also contain TEXT
 *
 * {i} in PATH-TEMPLATE becomes the request's number (OFFSET, OFFSET+1, ...;
 * warm-up requests use the numbers of the first measured ones).  Each
 * connection is an HTTP/1.1 keep-alive connection, re-opened only when the
 * server closes it.  Latency is client-side wall time, from just before the
 * request is written to the last byte of the answer.  Prints one line:
 *   n=.. ok=.. bad=.. p50_ms=.. p90_ms=.. p99_ms=.. mean_ms=.. max_ms=.. wall_s=.. per_s=..
 * and, on stderr, the status and start of the first few unexpected answers.
 * Exit 0 when every request got an answer (whatever its status), 1 if not.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"

static struct in_addr addr = { .s_addr = 0 };
static int port, nreq = 1, nwarm, nconn = 1, offset, want_status = 200;
static const char *method = "POST", *body, *tmpl, *must_contain;
static char token[512];
static double *lat;
static atomic_int next_req, next_warm, n_ok, n_bad, n_io, shown;

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct conn {
	int fd;
	char buf[65536];
	size_t len, pos;
	char *resp;          /* the body of the last answer */
	size_t resp_len, resp_cap;
};

static int conn_open(struct conn *c)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	a.sin_addr.s_addr = addr.s_addr ? addr.s_addr : htonl(INADDR_LOOPBACK);
	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0)
		return -1;
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c->fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
		close(c->fd);
		c->fd = -1;
		return -1;
	}
	c->len = c->pos = 0;
	return 0;
}

static void conn_close(struct conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

/* One byte-range of input; -1 on EOF/error. */
static int fill(struct conn *c)
{
	if (c->pos < c->len)
		return 0;
	ssize_t n;
	do
		n = read(c->fd, c->buf, sizeof(c->buf));
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return -1;
	c->len = (size_t)n;
	c->pos = 0;
	return 0;
}

/* A line without its CRLF into out (truncated to outlen-1). */
static int read_line(struct conn *c, char *out, size_t outlen)
{
	size_t k = 0;
	for (;;) {
		if (fill(c) < 0)
			return -1;
		char ch = c->buf[c->pos++];
		if (ch == '\n')
			break;
		if (k + 1 < outlen)
			out[k++] = ch;
	}
	if (k > 0 && out[k - 1] == '\r')
		k--;
	out[k] = '\0';
	return 0;
}

static int read_body(struct conn *c, size_t n)
{
	while (n > 0) {
		if (fill(c) < 0)
			return -1;
		size_t take = c->len - c->pos;
		if (take > n)
			take = n;
		if (c->resp_len + take + 1 > c->resp_cap) {
			c->resp_cap = (c->resp_len + take + 1) * 2;
			c->resp = realloc(c->resp, c->resp_cap);
			if (!c->resp)
				abort();
		}
		memcpy(c->resp + c->resp_len, c->buf + c->pos, take);
		c->resp_len += take;
		c->pos += take;
		n -= take;
	}
	c->resp[c->resp_len] = '\0';
	return 0;
}

/* Send one request and read its answer; the status, or -1 on I/O error. */
static int do_request(struct conn *c, const char *path)
{
	char req[8192];
	int blen = body ? (int)strlen(body) : 0;
	int n = snprintf(req, sizeof(req),
			 "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s%s%s"
			 "%s"
			 "Content-Length: %d\r\n\r\n%s",
			 method, path, port,
			 token[0] ? "Authorization: Bearer " : "", token, token[0] ? "\r\n" : "",
			 blen ? "Content-Type: application/json\r\n" : "",
			 blen, blen ? body : "");
	if (n <= 0 || n >= (int)sizeof(req))
		return -1;
	for (int off = 0; off < n;) {
		ssize_t w = write(c->fd, req + off, (size_t)(n - off));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		off += (int)w;
	}
	char line[8192];
	if (read_line(c, line, sizeof(line)) < 0)
		return -1;
	int status = 0;
	if (sscanf(line, "HTTP/%*s %d", &status) != 1)
		return -1;
	long clen = -1;
	int chunked = 0, close_after = 0;
	for (;;) {
		if (read_line(c, line, sizeof(line)) < 0)
			return -1;
		if (!line[0])
			break;
		if (strncasecmp(line, "Content-Length:", 15) == 0)
			clen = atol(line + 15);
		else if (strncasecmp(line, "Transfer-Encoding:", 18) == 0 && strcasestr(line, "chunked"))
			chunked = 1;
		else if (strncasecmp(line, "Connection:", 11) == 0 && strcasestr(line, "close"))
			close_after = 1;
	}
	c->resp_len = 0;
	if (!c->resp) {
		c->resp_cap = 4096;
		c->resp = malloc(c->resp_cap);
	}
	c->resp[0] = '\0';
	if (chunked) {
		for (;;) {
			if (read_line(c, line, sizeof(line)) < 0)
				return -1;
			size_t sz = strtoul(line, NULL, 16);
			if (sz == 0) {
				do
					if (read_line(c, line, sizeof(line)) < 0)
						return -1;
				while (line[0]);
				break;
			}
			if (read_body(c, sz) < 0 || read_line(c, line, sizeof(line)) < 0)
				return -1;
		}
	} else if (clen >= 0) {
		if (read_body(c, (size_t)clen) < 0)
			return -1;
	} else {
		close_after = 1;
		while (fill(c) == 0)
			if (read_body(c, c->len - c->pos) < 0)
				break;
	}
	if (close_after)
		conn_close(c);
	return status;
}

static void make_path(char *out, size_t outlen, int i)
{
	const char *p = strstr(tmpl, "{i}");
	if (!p)
		snprintf(out, outlen, "%s", tmpl);
	else
		snprintf(out, outlen, "%.*s%d%s", (int)(p - tmpl), tmpl, i, p + 3);
}

/* One request with reconnects; records the outcome. */
static double one(struct conn *c, int i, int measured)
{
	char path[4096];
	make_path(path, sizeof(path), i);
	double t0 = now_s();
	int status = -1;
	for (int attempt = 0; attempt < 2 && status < 0; attempt++) {
		if (c->fd < 0 && conn_open(c) < 0)
			break;
		status = do_request(c, path);
		if (status < 0)
			conn_close(c);
	}
	double dt = now_s() - t0;
	if (!measured)
		return dt;
	if (status < 0) {
		atomic_fetch_add(&n_io, 1);
		atomic_fetch_add(&n_bad, 1);
		if (atomic_fetch_add(&shown, 1) < 5)
			fprintf(stderr, "httpbench: %s %s: no answer (%s)\n", method, path, strerror(errno));
	} else if (status != want_status || (must_contain && !strstr(c->resp, must_contain))) {
		atomic_fetch_add(&n_bad, 1);
		if (atomic_fetch_add(&shown, 1) < 5)
			fprintf(stderr, "httpbench: %s %s: %d %.300s\n", method, path, status, c->resp);
	} else {
		atomic_fetch_add(&n_ok, 1);
	}
	return dt;
}

static void *worker(void *arg)
{
	struct conn c = { .fd = -1 };
	(void)arg;
	for (int w; (w = atomic_fetch_add(&next_warm, 1)) < nwarm;)
		one(&c, offset + w % nreq, 0);
	for (int k; (k = atomic_fetch_add(&next_req, 1)) < nreq;)
		lat[k] = one(&c, offset + k, 1) * 1e3;
	conn_close(&c);
	free(c.resp);
	return NULL;
}

static void usage(void)
{
	fprintf(stderr, "usage: httpbench -P PORT [-T TOKENFILE] [-m METHOD] [-b BODY] [-n N] [-w W]"
			" [-c C] [-o OFFSET] [-s STATUS] [-k TEXT] PATH-TEMPLATE\n");
	exit(2);
}

int main(int argc, char **argv)
{
	int opt;
	while ((opt = getopt(argc, argv, "P:A:T:m:b:n:w:c:o:s:k:")) != -1) {
		switch (opt) {
		case 'P': port = atoi(optarg); break;
		case 'A':
			if (inet_pton(AF_INET, optarg, &addr) != 1) {
				fprintf(stderr, "httpbench: -A %s: not an IPv4 address\n", optarg);
				return 2;
			}
			break;
		case 'T': {
			FILE *f = fopen(optarg, "r");
			if (!f || !fgets(token, sizeof(token), f)) {
				fprintf(stderr, "httpbench: cannot read a token from %s\n", optarg);
				return 2;
			}
			fclose(f);
			token[strcspn(token, "\r\n")] = '\0';
			break;
		}
		case 'm': method = optarg; break;
		case 'b': body = optarg; break;
		case 'n': nreq = atoi(optarg); break;
		case 'w': nwarm = atoi(optarg); break;
		case 'c': nconn = atoi(optarg); break;
		case 'o': offset = atoi(optarg); break;
		case 's': want_status = atoi(optarg); break;
		case 'k': must_contain = optarg; break;
		default: usage();
		}
	}
	if (optind != argc - 1 || port <= 0 || nreq <= 0 || nconn <= 0 || nwarm < 0)
		usage();
	tmpl = argv[optind];
	lat = calloc((size_t)nreq, sizeof(*lat));
	pthread_t th[nconn];
	/* Warm-up first, on every connection, then the measured requests. */
	double t0 = now_s();
	for (int i = 0; i < nconn; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	for (int i = 0; i < nconn; i++)
		pthread_join(th[i], NULL);
	double wall = now_s() - t0;
	double sum = 0;
	for (int k = 0; k < nreq; k++)
		sum += lat[k];
	qsort(lat, (size_t)nreq, sizeof(*lat), cmp_double);
	printf("n=%d ok=%d bad=%d noanswer=%d p50_ms=%.4f p90_ms=%.4f p99_ms=%.4f mean_ms=%.4f max_ms=%.4f wall_s=%.3f per_s=%.1f\n",
	       nreq, atomic_load(&n_ok), atomic_load(&n_bad), atomic_load(&n_io),
	       pct(lat, nreq, 50), pct(lat, nreq, 90), pct(lat, nreq, 99), sum / nreq,
	       lat[nreq - 1], wall, nreq / wall);
	return atomic_load(&n_io) ? 1 : 0;
}
