/* pageserver -- the small web server of `make bench`'s preview figure
 *.  The same program runs in a room (reached through its
 * preview URL) and on the host (reached through an nginx location that
 * proxies straight to it), so the figure compares the two ways in, not two
 * servers.
 *
 *   pageserver PORT     listen on 127.0.0.1:PORT
 *
 * Answers every request with 200 and the same 1 KiB HTML page; keeps the
 * connection unless the request says "Connection: close" (nginx's preview
 * and reference locations both do) or is HTTP/1.0.  One thread, epoll, so
 * it is far faster than python3 -m http.server and does not hide the cost
 * of the way in.  Request heads over 8 KiB close the connection.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define HEAD_MAX 8192
#define MAX_FD 4096

struct conn {
	char buf[HEAD_MAX];
	size_t len;
};

static struct conn *conns[MAX_FD];
static char page[1024 + 256];
static size_t page_len;

static void make_page(void)
{
	char body[1024];
	int n = snprintf(body, sizeof(body),
		"<!doctype html><html><head><title>roombox bench</title></head><body>\n");
	while (n < (int)sizeof(body) - 16)
		n += snprintf(body + n, sizeof(body) - n, "<p>preview</p>\n");
	n += snprintf(body + n, sizeof(body) - n, "</body>\n");
	page_len = snprintf(page, sizeof(page),
		"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n%s", n, body);
}

static void drop(int ep, int fd)
{
	epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
	close(fd);
	free(conns[fd]);
	conns[fd] = NULL;
}

/* 1 when the head (NUL-terminated, lower-cased) asks for the connection's end. */
static int wants_close(char *head)
{
	for (char *p = head; *p; p++)
		*p = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
	return strstr(head, "\nconnection: close") != NULL || strstr(head, " http/1.0\r") != NULL;
}

/* Answers every complete head in the buffer; 0 to keep the connection. */
static int serve(int fd, struct conn *c)
{
	for (;;) {
		c->buf[c->len] = '\0';
		char *end = strstr(c->buf, "\r\n\r\n");
		if (!end)
			return c->len >= HEAD_MAX - 1 ? -1 : 0;
		end[2] = '\0';
		int close_it = wants_close(c->buf);
		if (write(fd, page, page_len) != (ssize_t)page_len || close_it)
			return -1;
		size_t used = (size_t)(end + 4 - c->buf);
		memmove(c->buf, c->buf + used, c->len - used);
		c->len -= used;
	}
}

static void readable(int ep, int fd)
{
	struct conn *c = conns[fd];
	for (;;) {
		ssize_t n = read(fd, c->buf + c->len, HEAD_MAX - 1 - c->len);
		if (n < 0 && (errno == EAGAIN || errno == EINTR))
			return;
		if (n <= 0) {
			drop(ep, fd);
			return;
		}
		c->len += (size_t)n;
		if (serve(fd, c) < 0) {
			drop(ep, fd);
			return;
		}
	}
}

static void accept_all(int ep, int ls)
{
	for (;;) {
		int fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
		if (fd >= MAX_FD || !(conns[fd] = calloc(1, sizeof(struct conn))) ||
		    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
			if (fd < MAX_FD) {
				free(conns[fd]);
				conns[fd] = NULL;
			}
			close(fd);
		}
	}
}

int main(int argc, char **argv)
{
	if (argc != 2 || atoi(argv[1]) <= 0 || atoi(argv[1]) > 65535) {
		fprintf(stderr, "usage: pageserver PORT\n");
		return 2;
	}
	make_page();
	int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	int one = 1;
	setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(atoi(argv[1])),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 1024) < 0) {
		perror("pageserver: listen on 127.0.0.1");
		return 1;
	}
	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = ls };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev) < 0) {
		perror("pageserver: epoll");
		return 1;
	}
	fprintf(stderr, "pageserver: listening on 127.0.0.1:%s\n", argv[1]);
	struct epoll_event evs[64];
	for (;;) {
		int n = epoll_wait(ep, evs, 64, -1);
		for (int i = 0; i < n; i++) {
			if (evs[i].data.fd == ls)
				accept_all(ep, ls);
			else
				readable(ep, evs[i].data.fd);
		}
	}
}
