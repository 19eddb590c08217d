/* Unit tests for sandbox-helper/fdpass.c: a byte and a descriptor over a
 * unix socket pair, as the helper hands a disk mount, a preview connection
 * or an exec's pipes on. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "fdpass.h"
#include "protocol.h"

static void test_byte_and_descriptor_arrive(void **state)
{
	(void)state;
	int sp[2], p[2];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
	assert_int_equal(pipe(p), 0);
	char b = 'm';
	assert_int_equal(fds_send(sp[0], &b, 1, &p[1], 1), 1);
	int got = -2;
	assert_int_equal(fd_recv_byte(sp[1], &got), 'm');
	assert_true(got >= 0 && got != p[1]);
	assert_true(fcntl(got, F_GETFD) & FD_CLOEXEC);
	/* the same pipe: what goes in through the copy comes out of p[0] */
	assert_int_equal(write(got, "x", 1), 1);
	char c = 0;
	assert_int_equal(read(p[0], &c, 1), 1);
	assert_int_equal(c, 'x');
	close(got);
	/* a byte alone: no descriptor */
	b = '-';
	assert_int_equal(fds_send(sp[0], &b, 1, NULL, 0), 1);
	assert_int_equal(fd_recv_byte(sp[1], &got), '-');
	assert_int_equal(got, -1);
	/* the peer gone: 0, and a send fails without SIGPIPE */
	close(sp[0]);
	assert_int_equal(fd_recv_byte(sp[1], &got), 0);
	assert_int_equal(got, -1);
	close(sp[1]);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
	close(sp[1]);
	assert_int_equal(fds_send(sp[0], &b, 1, NULL, 0), -1);
	assert_int_equal(errno, EPIPE);
	close(sp[0]);
	close(p[0]);
	close(p[1]);
}

/* port-connect's batch of sockets (PORT_SOCKETS_MAX) in one message, no
 * more */
static void test_at_most_a_batch_of_descriptors(void **state)
{
	(void)state;
	int sp[2], fds[PORT_SOCKETS_MAX + 1];
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
	for (int i = 0; i <= PORT_SOCKETS_MAX; i++)
		fds[i] = sp[0];
	char b = 'x';
	assert_int_equal(fds_send(sp[0], &b, 1, fds, PORT_SOCKETS_MAX + 1), -1);
	assert_int_equal(errno, EINVAL);
	assert_int_equal(fds_send(sp[0], &b, 1, fds, PORT_SOCKETS_MAX), 1);
	/* all of them arrive, each a descriptor of its own */
	char got_b = 0, ctl[CMSG_SPACE(sizeof(int) * PORT_SOCKETS_MAX)];
	struct iovec iov = { &got_b, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl,
			    .msg_controllen = sizeof(ctl) };
	assert_int_equal(recvmsg(sp[1], &m, MSG_CMSG_CLOEXEC), 1);
	assert_int_equal(got_b, 'x');
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	assert_non_null(c);
	assert_int_equal(c->cmsg_len, CMSG_LEN(sizeof(int) * PORT_SOCKETS_MAX));
	int got[PORT_SOCKETS_MAX];
	memcpy(got, CMSG_DATA(c), sizeof(got));
	for (int i = 0; i < PORT_SOCKETS_MAX; i++)
		close(got[i]);
	close(sp[0]);
	close(sp[1]);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_byte_and_descriptor_arrive),
		cmocka_unit_test(test_at_most_a_batch_of_descriptors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
