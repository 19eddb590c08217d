/* A session file read and written in place, under flock: see
 * session_file.h. */
#include "session_file.h"

#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Read into a buffer of the file's size, not of max: the session, read on
 * every exec, would otherwise cost a 120 KiB allocation each time. */
char *session_file_read(int fd, size_t max)
{
	struct stat st;
	flock(fd, LOCK_SH);
	if (fstat(fd, &st) == 0 && st.st_size >= 0 && (unsigned long long)st.st_size < max)
		max = (size_t)st.st_size;
	char *buf = malloc(max + 1);
	size_t n = 0;
	ssize_t k;
	while (buf && n < max && (k = pread(fd, buf + n, max - n, (off_t)n)) > 0)
		n += (size_t)k;
	flock(fd, LOCK_UN);
	if (buf)
		buf[n] = '\0';
	return buf;
}

int session_file_write(int fd, const char *text, size_t len)
{
	if (flock(fd, LOCK_EX) < 0)
		return -1;
	size_t off = 0;
	int rc = 0;
	while (off < len && rc == 0) {
		ssize_t k = pwrite(fd, text + off, len - off, (off_t)off);
		if (k <= 0)
			rc = -1;
		else
			off += (size_t)k;
	}
	if (rc == 0)
		rc = ftruncate(fd, (off_t)len);
	flock(fd, LOCK_UN);
	return rc;
}
