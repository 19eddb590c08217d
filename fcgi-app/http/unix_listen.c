/* Listening unix sockets beside the FastCGI socket; see unix_listen.h. */
#include "unix_listen.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int unix_socket_beside(const struct config *cfg, const char *name, char *out, size_t outlen)
{
	char dir[sizeof(cfg->socket)];
	snprintf(dir, sizeof(dir), "%s", cfg->socket);
	int n = snprintf(out, outlen, "%s/%s", dirname(dir), name);
	return n > 0 && (size_t)n < outlen ? 0 : -1;
}

int unix_listen(const struct config *cfg, const char *path, const char *what)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "roombox-fcgi: %s path too long: %s\n", what, path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fprintf(stderr, "roombox-fcgi: %s: %s\n", what, strerror(errno)), -1;
	/* a stale socket from a crash: nobody answers on it */
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
		close(fd);
		fprintf(stderr, "roombox-fcgi: %s: another process is listening there\n", path);
		return -1;
	}
	struct stat st;
	if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode))
		unlink(path);
	mode_t old = umask(0117);
	int rc = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
	umask(old);
	if (rc < 0 || listen(fd, 128) < 0) {
		fprintf(stderr, "roombox-fcgi: %s %s: %s\n", what, path, strerror(errno));
		close(fd);
		return -1;
	}
	chmod(path, 0660);
	if (stat(cfg->socket, &st) == 0 && chown(path, (uid_t)-1, st.st_gid) < 0)
		fprintf(stderr, "roombox-fcgi: chgrp %s: %s\n", path, strerror(errno));
	return fd;
}
