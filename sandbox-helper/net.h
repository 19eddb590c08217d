/* A room's network for network = egress (net.c).  network = none: every
 * function here does nothing and the room keeps only lo. */
#ifndef ROOMBOX_NET_H
#define ROOMBOX_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include "config.h"
#include "room.h"

/* The firewall program the helper runs to load an instance's table, when
 * the kernel has none made from the current configuration (Debian's
 * nftables); a room's start and stop speak netlink only. */
#define NET_NFT "/usr/sbin/nft"

/* In the helper, before the keeper is cloned: work out the name servers the
 * room's /etc/resolv.conf will list (kept for net_keeper_setup), and turn
 * on IPv4 forwarding (a failure is said by net_room_up). */
void net_prepare(const struct room *r);

/* In the keeper, after pivot_root: write /etc/resolv.conf. 0 or -1. */
int net_keeper_setup(const struct room *r, char *err, size_t errlen);

/* In the helper, once the keeper is up: the instance's firewall table
 * (loaded if missing or made from another configuration), the veth pair
 * (one end moved into the keeper's net namespace), addresses and route.
 * Takes the state lock.  0, or -1 with err naming the room and the step. */
int net_room_up(const struct room *r, pid_t keeper, char *err, size_t errlen);

/* Remove what net_room_up put on the host (also after a crashed keeper).
 * 0, or -1 with err. */
int net_room_down(const struct room *r, char *err, size_t errlen);

/* Remove the instance's firewall table if no room's interface is on the
 * host (or, with network = none, at all).  The caller holds the state lock
 * (net_room_up makes a room's interface under it). */
void net_instance_remove(const struct config *cfg);

/* The name servers a room would use (IPv4, host byte order), at most max;
 * *unusable counts those left out (loopback, IPv6, ...). */
int net_dns_servers(const struct config *cfg, uint32_t *out, int max, int *unusable);

/* Names derived from the instance (exposed for tests and messages). */
void net_table_name(const struct config *cfg, char *buf, size_t len);

#endif
