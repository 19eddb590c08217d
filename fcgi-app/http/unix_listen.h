/* The unix sockets roombox-fcgi listens on beside its FastCGI socket for
 * what FastCGI cannot carry: preview.sock (preview_relay.c) and term.sock
 * (term_ws.c), each proxied to by the web server. */
#ifndef ROOMBOX_FCGI_UNIX_LISTEN_H
#define ROOMBOX_FCGI_UNIX_LISTEN_H

#include <stddef.h>

#include "config.h"

/* <dirname of the FastCGI socket>/<name> into out; 0, or -1 when too long. */
int unix_socket_beside(const struct config *cfg, const char *name, char *out, size_t outlen);

/* Listen on path (a stale socket of a crashed run replaced, a live one
 * refused), mode 0660, its group the FastCGI socket's (which the web
 * server can already reach).  The descriptor, or -1 with a message on
 * stderr naming what (e.g. "preview socket"). */
int unix_listen(const struct config *cfg, const char *path, const char *what);

#endif
