/* Preview ports: a TCP connection to a port on a room's own
 * loopback, made inside the room's network namespace and handed to the
 * caller, who relays an HTTP client's bytes over it. */
#ifndef ROOMBOX_PORTCONN_H
#define ROOMBOX_PORTCONN_H

#include <stddef.h>
#include "room.h"

/* What portconn_open returns besides a descriptor. */
#define PORTCONN_REFUSED (-2)   /* room not running, or nothing listens */

/* Connect to 127.0.0.1:port in the network namespace of r's keeper.
 * Returns the connected socket (close-on-exec), PORTCONN_REFUSED with err
 * saying why, or -1 with err on any other failure. */
int portconn_open(const struct room *r, int port, char *err, size_t errlen);

/* port-connect serve (common/protocol.h): join the room's network
 * namespace once, call joined() (the caller drops the privilege the join
 * took; non-zero: stop there), then answer requests from `via` until it
 * closes, the keeper exits or PORT_SERVE_IDLE_MS pass without one.  0
 * then, or PORTCONN_REFUSED / -1 with err when the namespace cannot be
 * joined. */
int portconn_serve(const struct room *r, int via, int (*joined)(char *err, size_t errlen),
		   char *err, size_t errlen);

/* Send fd over the unix socket `via` (SCM_RIGHTS).  0, or -1 with err. */
int portconn_send(const struct room *r, int via, int fd, char *err, size_t errlen);

#endif
