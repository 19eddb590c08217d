/* Descriptors over unix sockets (SCM_RIGHTS), for the helper: the exec's
 * pipes to the keeper (exec.c), a preview connection to roombox-fcgi
 * (portconn.c), a room's disk mount to its starting keeper (jail.c). */
#ifndef ROOMBOX_FDPASS_H
#define ROOMBOX_FDPASS_H

#include <stddef.h>
#include <sys/types.h>

/* One message of len bytes carrying fds[0..n-1] (n from 0 to 8), never
 * raising SIGPIPE.  What sendmsg returned: len when it all went. */
ssize_t fds_send(int via, const void *buf, size_t len, const int *fds, int n);

/* One message: its first byte (0 when the peer closed without one) and the
 * one descriptor it carried in *fd (-1 if none; close-on-exec). */
char fd_recv_byte(int via, int *fd);

#endif
