/* roomboxctl's client of HAProxy's runtime API (the `stats socket ... level
 * admin` of conf/haproxy-cluster.cfg.example): the router's map of rooms
 * to hosts, read and changed in place, without a reload. */
#ifndef ROOMBOX_CTL_HAPROXY_H
#define ROOMBOX_CTL_HAPROXY_H

#include <stddef.h>

/* One command (or several joined by ';') on the socket; the answer,
 * malloc'd, in *out.  0, or -1 with a reason in err. */
int haproxy_cmd(const char *socket_path, const char *cmd, char **out, char *err, size_t errlen);

/* The name (its file) of the map loaded from a file whose name ends with
 * suffix, e.g. "/hosts.map": malloc'd, or NULL with err. */
char *haproxy_find_map(const char *socket_path, const char *suffix, char *err, size_t errlen);

#endif
