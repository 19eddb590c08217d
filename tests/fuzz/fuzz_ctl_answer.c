/* Fuzz target: roomboxctl's reader of roombox-fcgi's answer
 * (ctl/fcgi_client.c, fcgi_read_answer): FastCGI records up to
 * END_REQUEST, then the CGI head ("Status: ...\r\n\r\nbody").  The bytes
 * come from the service's socket, i.e. from a less privileged process than
 * the administrator who runs roomboxctl.
 *
 * Input: the bytes the service would send, read from a memfd (read() of a
 * file behaves like a socket's at its end: 0, "connection reset").
 *
 * Invariants: the reader answers exactly when an independent walk of the
 * records (below) finds END_REQUEST after whole records of version 1 and a
 * head end ("\r\n\r\n", before any NUL) in the STDOUT content; then its
 * body is the content after that head end, NUL-terminated; otherwise it
 * fails with a reason. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fcgi_client.h"
#include "fuzz.h"

/* The STDOUT content up to END_REQUEST into out (size bytes at most):
 * its length, or -1 when the records are short, of another version, or
 * never end. */
static long reference_stdout(const uint8_t *d, size_t size, uint8_t *out)
{
	size_t pos = 0, len = 0;
	while (pos + 8 <= size) {
		size_t n = (size_t)d[pos + 4] << 8 | d[pos + 5], pad = d[pos + 6];
		if (d[pos] != 1 || pos + 8 + n + pad > size)
			return -1;
		if (d[pos + 1] == 3)
			return (long)len;
		if (d[pos + 1] == 6) {
			memcpy(out + len, d + pos + 8, n);
			len += n;
		}
		pos += 8 + n + pad;
	}
	return -1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = memfd_create("fuzz-ctl-answer", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (write(fd, data, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return 0;
	}
	/* what STDERR records carry goes to our stderr: not to the terminal */
	struct fcgi_answer ans;
	char err[256];
	memset(err, 'x', sizeof(err));
	int rc = fcgi_read_answer(fd, &ans, err, sizeof(err));
	close(fd);
	uint8_t *ref = malloc(size + 1);
	FUZZ_ASSERT(ref != NULL, "malloc");
	long len = reference_stdout(data, size, ref);
	const uint8_t *body = NULL;
	if (len >= 0) {
		size_t head = strnlen((const char *)ref, (size_t)len);   /* the reader's strstr stops at a NUL */
		const uint8_t *end = memmem(ref, head, "\r\n\r\n", 4);
		body = end ? end + 4 : NULL;
	}
	FUZZ_ASSERT((rc == 0) == (body != NULL), "reader %d, reference %s", rc, body ? "answer" : "failure");
	if (rc == 0) {
		size_t want = (size_t)(ref + len - body);
		FUZZ_ASSERT(ans.body_len == want, "body of %zu bytes, reference %zu", ans.body_len, want);
		FUZZ_ASSERT(memcmp(ans.body, body, want) == 0, "body differs from the reference");
		FUZZ_ASSERT(ans.body[ans.body_len] == '\0', "body not terminated");
		fcgi_answer_free(&ans);
	} else {
		FUZZ_ASSERT(rc == -1, "rc %d", rc);
		FUZZ_ASSERT(memchr(err, '\0', sizeof(err)) != NULL && err[0] != '\0', "no reason");
	}
	free(ref);
	return 0;
}
