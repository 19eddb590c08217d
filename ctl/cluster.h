/* roomboxctl's cluster verbs: hosts, where, route-sync, move, drain, undrain.
 * They read and write etcd (common/etcd.c) and the router's runtime API
 * (haproxy.c); none of them talks to roombox-fcgi. */
#ifndef ROOMBOX_CTL_CLUSTER_H
#define ROOMBOX_CTL_CLUSTER_H

#include <stdbool.h>

struct cluster_ctl {
	const char *etcd;            /* client URLs: -e, else cluster_etcd */
	const char *haproxy_socket;  /* -a, else the example's path */
	const char *key_file;        /* cluster_key_file: moves are signed with it */
};

bool cluster_is_verb(const char *verb);
/* argv[0] is the verb.  The process's exit status: 0, 1 refused or
 * failed (said on stderr), 2 bad usage. */
int cluster_verb(const struct cluster_ctl *c, int argc, char **argv);

#endif
