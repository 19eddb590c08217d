/* Receiving descriptors passed over a unix socket (SCM_RIGHTS): a
 * download's file from the room (exec_stream.c), a connector's sockets
 * (preview_relay.c). */
#ifndef ROOMBOX_FCGI_FDRECV_H
#define ROOMBOX_FCGI_FDRECV_H

#include <stddef.h>
#include <sys/types.h>

/* Most descriptors one message may bring (a connector's batch). */
#define FDRECV_MAX 32

/* recvmsg() of up to len bytes into buf (flags as recvmsg's), which also
 * takes the descriptors sent with them, close-on-exec: the first max
 * (≤ FDRECV_MAX) into fds, their count in *nfds; any more are closed.
 * Returns what recvmsg returned (*nfds is 0 on an error). */
ssize_t recv_with_fds(int sock, void *buf, size_t len, int flags, int *fds, int max, int *nfds);

#endif
