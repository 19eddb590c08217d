/* Netlink requests built in a fixed buffer, sent, and acknowledged: what the
 * helper needs of rtnetlink (veth, addresses, routes), ctnetlink (flush a
 * room's connections) and nf_tables (a room's firewall state), with no
 * library (the helper is static against musl alone). */
#ifndef ROOMBOX_NETLINK_H
#define ROOMBOX_NETLINK_H

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <stddef.h>
#include <stdint.h>

struct nlreq {
	struct nlmsghdr h;
	char buf[1024];
};

/* A netlink socket of `protocol` (NETLINK_ROUTE, NETLINK_NETFILTER) with a
 * receive timeout: the kernel answers at once.  fd or -1 with errno. */
int nl_open(int protocol);

/* Start a request of `type`, asking for an acknowledgement. */
void nl_init(struct nlreq *q, uint16_t type, uint16_t flags);

/* Append len zeroed bytes (a family header) and return them. */
void *nl_tail(struct nlreq *q, size_t len);

/* Append an attribute; with data NULL and len 0 it opens a nest, closed by
 * nl_nest_end.  Requests are small and fixed: the buffer always holds them. */
struct rtattr *nl_attr(struct nlreq *q, unsigned short type, const void *data, size_t len);
void nl_nest_end(struct nlreq *q, struct rtattr *a);

/* Send the request and read its acknowledgement: 0 or -errno. */
int nl_talk(int fd, struct nlreq *q);

/* The same, the request wrapped in an nfnetlink batch of subsystem
 * `subsys` (nf_tables changes only go in batches, one transaction each). */
int nl_talk_batch(int fd, struct nlreq *q, uint16_t subsys);

#endif
