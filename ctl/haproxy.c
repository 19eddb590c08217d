/* HAProxy's runtime API (see haproxy.h): one connection per command line,
 * in its non-interactive mode (HAProxy answers and closes).  Several
 * commands go on one line separated by ';' (route-sync sends its changes
 * in batches that way), each answered in turn. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "haproxy.h"

#define ANSWER_MAX (64u << 20)
#define TIMEOUT_MS 10000

int haproxy_cmd(const char *socket_path, const char *cmd, char **out, char *err, size_t errlen)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t len = 0, cap = 0, n = strlen(cmd);
	char *buf = NULL;
	int fd;

	*out = NULL;
	if (strlen(socket_path) >= sizeof(sa.sun_path)) {
		snprintf(err, errlen, "haproxy socket %s: path too long", socket_path);
		return -1;
	}
	strcpy(sa.sun_path, socket_path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		snprintf(err, errlen, "haproxy socket %s: %s", socket_path, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	for (size_t off = 0; off < n;) {
		ssize_t w = write(fd, cmd + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			goto io_error;
		off += (size_t)w;
	}
	if (write(fd, "\n", 1) != 1)
		goto io_error;
	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		if (poll(&p, 1, TIMEOUT_MS) <= 0) {
			snprintf(err, errlen, "haproxy socket %s: no answer within %d s", socket_path,
				 TIMEOUT_MS / 1000);
			goto fail;
		}
		if (len + 4096 + 1 > cap) {
			char *nb;

			cap = cap ? cap * 2 : 16384;
			if (cap > ANSWER_MAX || !(nb = realloc(buf, cap))) {
				snprintf(err, errlen, "haproxy socket %s: answer too large", socket_path);
				goto fail;
			}
			buf = nb;
		}
		r = read(fd, buf + len, cap - len - 1);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			goto io_error;
		if (r == 0)
			break;
		len += (size_t)r;
	}
	close(fd);
	if (!buf)
		buf = calloc(1, 1);
	else
		buf[len] = '\0';
	*out = buf;
	return 0;
io_error:
	snprintf(err, errlen, "haproxy socket %s: %s", socket_path, strerror(errno));
fail:
	free(buf);
	close(fd);
	return -1;
}

/* `show map` lists "<id> (<file>) pattern loaded from file '<file>' ...". */
char *haproxy_find_map(const char *socket_path, const char *suffix, char *err, size_t errlen)
{
	char *ans, *line, *save = NULL, *found = NULL;

	if (haproxy_cmd(socket_path, "show map", &ans, err, errlen) < 0)
		return NULL;
	for (line = strtok_r(ans, "\n", &save); line && !found; line = strtok_r(NULL, "\n", &save)) {
		char *open = strchr(line, '('), *close = open ? strchr(open, ')') : NULL;
		size_t l, sl = strlen(suffix);

		if (line[0] == '#' || !open || !close)
			continue;
		l = (size_t)(close - open - 1);
		if (l >= sl && strncmp(close - sl, suffix, sl) == 0)
			found = strndup(open + 1, l);
	}
	free(ans);
	if (!found)
		snprintf(err, errlen, "haproxy (socket %s) has no map loaded from a file *%s", socket_path,
			 suffix);
	return found;
}
