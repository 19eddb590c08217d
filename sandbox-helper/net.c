/* A room's network for network = egress.
 *
 * Theory of operation.  Each room's keeper holds a net namespace of its own
 * (jail.c).  With network = egress, once the keeper is up, the helper
 *
 *   1. makes sure the instance's nftables table is loaded as this
 *      configuration and the host's own networks make it (table_ensure:
 *      netlink questions for the host's addresses and the table; only
 *      when the table is missing, was made from other rules or holds other
 *      networks of the host does it run `nft -f -`, about 25 ms of CPU, so
 *      in practice for the first room after a boot, a configuration change
 *      or a change of the host's networks, which refills their set alone);
 *   2. creates a veth pair over rtnetlink: "rb<instance>-<slot>" on the host,
 *      its peer created straight inside the room's namespace as eth0;
 *   3. numbers the pair as a /31 out of the instance's /16 of 100.64.0.0/10:
 *      host end 100.B.H.L, room end the next address, the room's default
 *      route via the host end; brings both ends up.
 *
 * Every rule is common to all rooms (a room's start adds no element): the
 * anti-spoofing is a strict reverse-path check (the host routes a room's /31
 * to its veth alone), the egress_conns cap a dynamic set counting tracked
 * connections per (checked) source address, and the conntrack mark is the
 * source address, so a room's connections are found by its address.
 *
 * The room's packets are forwarded and masqueraded (NAT) to whatever
 * interface the host's routing table picks: the default route or any more
 * specific one.  The filter, per packet leaving a room:
 *
 *   not IPv4, or not the room's own source address on its interface: dropped;
 *   egress_deny: refused; the name servers on port 53: accepted; egress_allow:
 *   accepted; the forbidden ranges (private, loopback, link-local, CGNAT,
 *   benchmark, multicast, reserved, other rooms, and the networks of the
 *   host's own addresses whatever their range): refused; the rest accepted.
 *   Anything addressed to the host itself goes to the input hook, where only
 *   the name servers on 53 and egress_allow pass.  Nothing reaches a room
 *   but answers to its own connections: not from outside (forward), nor
 *   from the host's own processes (output).
 *
 * The room has no CAP_NET_ADMIN, so it cannot change its addresses or
 * routes or load rules; a packet with a forged source (CAP_NET_RAW) is
 * dropped by the host end's filter.
 *
 * Nothing is left behind: the veth pair goes with the room's namespace (and
 * the helper deletes the host end itself when stopping a room, so a restart
 * never meets the old one), and net_room_down removes the room's counter
 * from the cap's set (nf_tables netlink) and flushes the connection
 * tracker's entries of the room's connections (ctnetlink, by mark); a
 * crashed keeper's leftovers go at the room's next start, stop or destroy.
 * The instance's table goes when the last room is destroyed or the service
 * stops (stop-all), if no room's interface is left on the host.
 *
 * All of it happens in PID 1's network namespace (the packaged unit gives
 * roombox-fcgi, and so this helper, a private one with only lo).
 *
 * Instance names: FNV-1a of state_dir (as cgroup_set_instance), giving the
 * table "roombox_<8 hex>", the interface prefix "rb<6 hex>-" and the /16
 * 100.(64 + hash % 64).0.0/16.
 */
#include "net.h"
#include "errbuf.h"
#include "fnv.h"
#include "netlink.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef RESOLVE_NO_SYMLINKS
#include <linux/openat2.h>
#endif

#define ERR(...) errorf(err, errlen, __VA_ARGS__)

/* glibc reads three name servers; more would only be noise */
#define RESOLV_MAX 3
/* A room's /31 is 2 * (slot + 1) into the instance's /16. */
#define NET_SLOTS 32767

struct ip4net {
	uint32_t addr;       /* host byte order, host bits clear */
	unsigned prefix;
};

#define IP4(a, b, c, d) (((uint32_t)(a) << 24) | ((uint32_t)(b) << 16) | ((uint32_t)(c) << 8) | (d))

/* Never reachable from a room unless egress_allow opens them, nor are the
 * networks of the host's own addresses (host_nets);
 * 240.0.0.0/4 holds 255.255.255.255, 100.64.0.0/10 every room. */
static const struct ip4net forbidden[] = {
	{ IP4(0, 0, 0, 0), 8 }, { IP4(10, 0, 0, 0), 8 }, { IP4(100, 64, 0, 0), 10 },
	{ IP4(127, 0, 0, 0), 8 }, { IP4(169, 254, 0, 0), 16 }, { IP4(172, 16, 0, 0), 12 },
	{ IP4(192, 168, 0, 0), 16 }, { IP4(198, 18, 0, 0), 15 }, { IP4(224, 0, 0, 0), 4 },
	{ IP4(240, 0, 0, 0), 4 },
};
#define N_FORBIDDEN (sizeof(forbidden) / sizeof(forbidden[0]))
/* more networks of its own than any host has; past it a room does not start */
#define HOST_NETS_MAX 256

/* The room's /etc/resolv.conf, made by net_prepare in the helper before the
 * keeper is cloned (the keeper sees the host's files only until pivot). */
static char resolv_text[512];

struct names {
	char table[32];      /* roombox_<8 hex> */
	char prefix[12];     /* rb<6 hex>- */
	char host_if[IFNAMSIZ];
	uint32_t block;      /* 100.B.0.0, host byte order */
	uint32_t host_addr;  /* host end of the room's /31 */
	uint32_t room_addr;
	uint32_t ct_mark;    /* on the room's connections, to flush them */
};

static uint32_t instance_hash(const struct config *cfg)
{
	return fnv1a32(cfg->state_dir);   /* as cgroup_set_instance */
}

void net_table_name(const struct config *cfg, char *buf, size_t len)
{
	snprintf(buf, len, "roombox_%08x", instance_hash(cfg));
}

static void names_instance(const struct config *cfg, struct names *n)
{
	uint32_t h = instance_hash(cfg);
	memset(n, 0, sizeof(*n));
	net_table_name(cfg, n->table, sizeof(n->table));
	snprintf(n->prefix, sizeof(n->prefix), "rb%06x-", h & 0xffffff);
	n->block = (100u << 24) | ((64u + h % 64) << 16);
}

static int names_room(const struct room *r, struct names *n, char *err, size_t errlen)
{
	names_instance(r->cfg, n);
	int slot = r->slot;
	if (slot < 0) {
		/* stop and destroy may come without the meta loaded */
		struct room copy = *r;
		char why[256];
		if (room_load(&copy, why, sizeof(why)) != 1)
			return ERR("room %s: network: no slot (%s)", r->id, why[0] ? why : "no meta");
		slot = copy.slot;
	}
	if (slot >= NET_SLOTS)
		return ERR("room %s: network: slot %d is past the %d rooms the instance's "
			   "address block holds", r->id, slot, NET_SLOTS);
	snprintf(n->host_if, sizeof(n->host_if), "%s%d", n->prefix, slot);
	n->host_addr = n->block + 2u * ((uint32_t)slot + 1u);
	n->room_addr = n->host_addr + 1u;
	/* the rules mark with the raw bytes of the source address */
	n->ct_mark = htonl(n->room_addr);
	return 0;
}

static void ip4_text(uint32_t a, char *buf, size_t len)
{
	snprintf(buf, len, "%u.%u.%u.%u", a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
}

/* ---- name servers ------------------------------------------------------ */

/* Loopback, "this network", multicast and reserved addresses mean nothing
 * from inside a room (its 127.0.0.53 is its own lo). */
static bool dns_usable(uint32_t a)
{
	uint8_t top = (uint8_t)(a >> 24);
	return top != 0 && top != 127 && top < 224;
}

/* The host's name servers: "nameserver a.b.c.d" lines of /etc/resolv.conf
 * (at most 64 KiB read); IPv6 ones count as unusable. */
static int host_resolv(uint32_t *out, int max, int *unusable)
{
	char buf[65536];
	int fd = open("/etc/resolv.conf", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		return 0;
	buf[len] = '\0';
	int n = 0;
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		char addr[64];
		uint32_t a;
		if (sscanf(line, " nameserver %63s", addr) != 1)
			continue;
		if (config_parse_ipv4(addr, strlen(addr), &a) < 0 || !dns_usable(a))
			(*unusable)++;
		else if (n < max)
			out[n++] = a;
	}
	return n;
}

int net_dns_servers(const struct config *cfg, uint32_t *out, int max, int *unusable)
{
	*unusable = 0;
	if (cfg->dns.count == 0)
		return host_resolv(out, max, unusable);
	int n = 0;
	for (int i = 0; i < cfg->dns.count; i++) {
		if (!dns_usable(cfg->dns.items[i]))
			(*unusable)++;
		else if (n < max)
			out[n++] = cfg->dns.items[i];
	}
	return n;
}

/* The name servers of the starting room, read once by net_prepare: its
 * resolv.conf and the rules that let it reach them on port 53. */
static uint32_t room_dns[CONFIG_LIST_MAX];
static int room_dns_n;

static void resolv_prepare(const struct config *cfg)
{
	int unusable;
	int n = room_dns_n = net_dns_servers(cfg, room_dns, CONFIG_LIST_MAX, &unusable);
	size_t len = (size_t)snprintf(resolv_text, sizeof(resolv_text),
				      "# written by roombox at each start (network = egress)\n");
	if (n == 0)
		snprintf(resolv_text + len, sizeof(resolv_text) - len,
			 "# no name server is usable from a room (see /api/health)\n");
	for (int i = 0; i < n && i < RESOLV_MAX; i++) {
		char a[16];
		ip4_text(room_dns[i], a, sizeof(a));
		len += (size_t)snprintf(resolv_text + len, sizeof(resolv_text) - len, "nameserver %s\n", a);
	}
}

/* After pivot_root, in the keeper, before anything of the room runs: the
 * room's own /etc/resolv.conf.  The room may have made /etc or the file a
 * symlink in an earlier life; no symlink is followed (openat2), and then the
 * file is simply not written (nor in a rootfs = /path tree without /etc). */
int net_keeper_setup(const struct room *r, char *err, size_t errlen)
{
	if (r->cfg->network != NETWORK_EGRESS)
		return 0;
	struct open_how how = { .flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW,
				.mode = 0644, .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS };
	int fd = (int)syscall(SYS_openat2, AT_FDCWD, "/etc/resolv.conf", &how, sizeof(how));
	if (fd < 0)
		return errno == ELOOP || errno == ENOENT || errno == ENOTDIR ? 0
			: ERR("room %s: write /etc/resolv.conf: %s", r->id, strerror(errno));
	size_t len = strlen(resolv_text);
	ssize_t w = write(fd, resolv_text, len);
	close(fd);
	return w == (ssize_t)len ? 0 : ERR("room %s: write /etc/resolv.conf: short write", r->id);
}

/* ---- rtnetlink ----------------------------------------------------------- */

/* host_if in the helper's namespace, eth0 in the namespace ns_fd. */
static int veth_create(int nl, const char *host_if, int ns_fd)
{
	struct nlreq q;
	nl_init(&q, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
	nl_tail(&q, sizeof(struct ifinfomsg));
	nl_attr(&q, IFLA_IFNAME, host_if, strlen(host_if) + 1);
	struct rtattr *info = nl_attr(&q, IFLA_LINKINFO, NULL, 0);
	nl_attr(&q, IFLA_INFO_KIND, "veth", 5);
	struct rtattr *data = nl_attr(&q, IFLA_INFO_DATA, NULL, 0);
	struct rtattr *peer = nl_attr(&q, VETH_INFO_PEER, NULL, 0);
	nl_tail(&q, sizeof(struct ifinfomsg));
	nl_attr(&q, IFLA_IFNAME, "eth0", 5);
	uint32_t fd = (uint32_t)ns_fd;
	nl_attr(&q, IFLA_NET_NS_FD, &fd, sizeof(fd));
	nl_nest_end(&q, peer);
	nl_nest_end(&q, data);
	nl_nest_end(&q, info);
	return nl_talk(nl, &q);
}

static int link_delete(int nl, const char *name)
{
	struct nlreq q;
	nl_init(&q, RTM_DELLINK, 0);
	nl_tail(&q, sizeof(struct ifinfomsg));
	nl_attr(&q, IFLA_IFNAME, name, strlen(name) + 1);
	int rc = nl_talk(nl, &q);
	return rc == -ENODEV ? 0 : rc;
}

static int link_up(int nl, int ifindex)
{
	struct nlreq q;
	nl_init(&q, RTM_NEWLINK, 0);
	struct ifinfomsg *i = nl_tail(&q, sizeof(*i));
	i->ifi_index = ifindex;
	i->ifi_flags = IFF_UP;
	i->ifi_change = IFF_UP;
	return nl_talk(nl, &q);
}

static int addr_add(int nl, int ifindex, uint32_t addr)
{
	struct nlreq q;
	nl_init(&q, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
	struct ifaddrmsg *a = nl_tail(&q, sizeof(*a));
	a->ifa_family = AF_INET;
	a->ifa_prefixlen = 31;
	a->ifa_index = (uint32_t)ifindex;
	uint32_t be = htonl(addr);
	nl_attr(&q, IFA_LOCAL, &be, 4);
	nl_attr(&q, IFA_ADDRESS, &be, 4);
	return nl_talk(nl, &q);
}

static int route_default(int nl, int ifindex, uint32_t gw)
{
	struct nlreq q;
	nl_init(&q, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
	struct rtmsg *m = nl_tail(&q, sizeof(*m));
	m->rtm_family = AF_INET;
	m->rtm_table = RT_TABLE_MAIN;
	m->rtm_protocol = RTPROT_STATIC;
	m->rtm_scope = RT_SCOPE_UNIVERSE;
	m->rtm_type = RTN_UNICAST;
	uint32_t be = htonl(gw), oif = (uint32_t)ifindex;
	nl_attr(&q, RTA_GATEWAY, &be, 4);
	nl_attr(&q, RTA_OIF, &oif, 4);
	return nl_talk(nl, &q);
}

/* The index of `name` as seen by socket s (whose namespace it names). */
static int if_index(int s, const char *name)
{
	struct ifreq ifr = { 0 };
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	return ioctl(s, SIOCGIFINDEX, &ifr) < 0 ? -errno : ifr.ifr_ifindex;
}

/* A netlink and an inet socket living in the keeper's net namespace: made
 * there, used from here (a socket keeps the namespace it was made in). */
static int room_sockets(pid_t keeper, int *ns_fd, int *nl, int *s)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)keeper);
	int self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	*ns_fd = open(path, O_RDONLY | O_CLOEXEC);
	*nl = *s = -1;
	if (self < 0 || *ns_fd < 0 || setns(*ns_fd, CLONE_NEWNET) < 0) {
		int e = errno;
		if (self >= 0)
			close(self);
		return -e;
	}
	*nl = nl_open(NETLINK_ROUTE);
	*s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int e = errno;
	/* back home: failing that, nothing else of this helper may run */
	if (setns(self, CLONE_NEWNET) < 0)
		abort();
	close(self);
	return *nl < 0 || *s < 0 ? -e : 0;
}

/* ---- the host's own networks ---------------------------------------------- */

/* A LAN the host sits on is closed to rooms whatever its addresses (a
 * public or documentation range as well as a private one): the network of
 * each IPv4 address the host holds, read once per room start with one
 * netlink dump of the addresses (no links: with a thousand rooms' veths
 * that dump would be far larger; it takes ~0.4 ms).  Networks inside a
 * range already forbidden (the rooms' own /31s among them) add nothing;
 * nor does a /32, only the host's address, which the input hook closes
 * anyway; a /0 would close everything and is taken as no network.  What
 * the host reaches through a gateway is no network of its own addresses,
 * and stays open.  They are a set of their own in the table (host_nets),
 * refilled when they change without touching the rest (table_ensure). */

static uint32_t prefix_mask(unsigned prefix)
{
	return prefix ? ~0u << (32 - prefix) : 0;
}

static bool net_contains(const struct ip4net *outer, const struct ip4net *inner)
{
	return outer->prefix <= inner->prefix && (inner->addr & prefix_mask(outer->prefix)) == outer->addr;
}

/* Add net to the list (*n of them), unless a forbidden range or a network
 * already there holds it; one there that net holds goes (networks either
 * nest or are apart, so no two of the list overlap, as an nftables
 * interval set requires).  -1 when the list is full. */
static int host_net_add(struct ip4net *nets, int *n, struct ip4net net)
{
	if (net.prefix == 0 || net.prefix >= 32)
		return 0;
	for (size_t i = 0; i < N_FORBIDDEN; i++)
		if (net_contains(&forbidden[i], &net))
			return 0;
	int kept = 0;
	for (int i = 0; i < *n; i++) {
		if (net_contains(&nets[i], &net))
			return 0;
		if (!net_contains(&net, &nets[i]))
			nets[kept++] = nets[i];
	}
	if (kept >= HOST_NETS_MAX)
		return -1;
	nets[kept++] = net;
	*n = kept;
	return 0;
}

/* One RTM_NEWADDR of the dump into the list. */
static int host_net_of(struct nlmsghdr *h, struct ip4net *nets, int *n)
{
	struct ifaddrmsg *a = NLMSG_DATA(h);
	if (h->nlmsg_len < NLMSG_LENGTH(sizeof(*a)) || a->ifa_family != AF_INET)
		return 0;
	uint32_t addr = 0;
	bool found = false;
	int len = (int)IFA_PAYLOAD(h);
	for (struct rtattr *t = IFA_RTA(a); RTA_OK(t, len); t = RTA_NEXT(t, len)) {
		/* IFA_LOCAL is the host's own end of a point-to-point link */
		if ((t->rta_type == IFA_LOCAL || (t->rta_type == IFA_ADDRESS && !found)) &&
		    RTA_PAYLOAD(t) == 4) {
			memcpy(&addr, RTA_DATA(t), 4);
			found = true;
		}
	}
	if (!found)
		return 0;
	addr = ntohl(addr);
	unsigned p = a->ifa_prefixlen;
	return host_net_add(nets, n, (struct ip4net){ addr & prefix_mask(p), p });
}

static int ip4net_order(const void *a, const void *b)
{
	const struct ip4net *x = a, *y = b;
	return x->addr != y->addr ? (x->addr < y->addr ? -1 : 1) : (int)x->prefix - (int)y->prefix;
}

/* The networks of the host's IPv4 addresses (see above), sorted, so that
 * the same host makes the same rules: their count, or -errno (-ENOSPC:
 * more than HOST_NETS_MAX). */
static int host_nets(struct ip4net *nets)
{
	int fd = nl_open(NETLINK_ROUTE);
	if (fd < 0)
		return -errno;
	struct nlreq q;
	nl_init(&q, RTM_GETADDR, NLM_F_DUMP);
	q.h.nlmsg_flags &= (uint16_t)~NLM_F_ACK;
	struct ifaddrmsg *m = nl_tail(&q, sizeof(*m));
	m->ifa_family = AF_INET;
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	int n = 0, rc = 0;
	static char buf[32768];
	if (sendto(fd, &q.h, q.h.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		rc = -errno;
	while (rc == 0) {
		ssize_t k = recv(fd, buf, sizeof(buf), 0);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			rc = k < 0 ? -errno : -EIO;
			break;
		}
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; rc == 0 && NLMSG_OK(h, (size_t)k);
		     h = NLMSG_NEXT(h, k)) {
			if (h->nlmsg_type == NLMSG_DONE)
				rc = 1;
			else if (h->nlmsg_type == NLMSG_ERROR)
				rc = ((struct nlmsgerr *)NLMSG_DATA(h))->error ?: -EIO;
			else if (h->nlmsg_type == RTM_NEWADDR && host_net_of(h, nets, &n) < 0)
				rc = -ENOSPC;
		}
	}
	close(fd);
	if (rc < 0)
		return rc;
	qsort(nets, (size_t)n, sizeof(*nets), ip4net_order);
	return n;
}

/* ---- nftables ------------------------------------------------------------ */

/* Run NET_NFT -f - with `script` on stdin (written whole at once: scripts
 * are far below a pipe's capacity).  The program must be root's and
 * writable by root alone, and runs with an empty environment.  0, or -1
 * with why (the first bytes nft printed, or what failed). */
static int nft_run(const char *script, char *why, size_t whylen)
{
	struct stat st;
	int in[2] = { -1, -1 }, out[2] = { -1, -1 };
	pid_t pid = -1;
	why[0] = '\0';
	if (stat(NET_NFT, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022))
		snprintf(why, whylen, "%s: missing, or not root's and writable by root alone "
			 "(install nftables)", NET_NFT);
	else if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		snprintf(why, whylen, "pipe: %s", strerror(errno));
	else if ((pid = fork()) < 0)
		snprintf(why, whylen, "fork: %s", strerror(errno));
	if (pid == 0) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if (dup2(in[0], 0) < 0 || dup2(null, 1) < 0 || dup2(out[1], 2) < 0)
			_exit(126);
		char *argv[] = { "nft", "-f", "-", NULL };
		char *envp[] = { NULL };
		execve(NET_NFT, argv, envp);
		_exit(127);
	}
	for (int i = 0; i < 2; i++) {
		if (in[i] >= 0 && (i == 0 || pid < 0))
			close(in[i]);
		if (out[i] >= 0 && (i == 1 || pid < 0))
			close(out[i]);
	}
	if (pid < 0)
		return -1;
	size_t len = strlen(script), off = 0;
	while (off < len) {
		ssize_t w = write(in[1], script + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;   /* nft died early: its status says so */
		off += (size_t)w;
	}
	close(in[1]);
	/* read to the end (keeping the first bytes): a full pipe would block
	 * nft, and this helper waiting for it, for ever */
	size_t got = 0;
	ssize_t k;
	char sink[4096];
	while ((k = got < whylen - 1 ? read(out[0], why + got, whylen - 1 - got)
				     : read(out[0], sink, sizeof(sink))) > 0 || (k < 0 && errno == EINTR))
		if (k > 0 && got < whylen - 1)
			got += (size_t)k;
	why[got] = '\0';
	close(out[0]);
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	for (char *c = why; *c; c++)
		if (*c == '\n')
			*c = ' ';
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

struct script {
	char text[24576];
	size_t len;
	bool full;
};

static void __attribute__((format(printf, 2, 3))) say(struct script *s, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(s->text + s->len, sizeof(s->text) - s->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(s->text) - s->len)
		s->full = true;
	else
		s->len += (size_t)n;
}

static void cidr_text(const struct config_cidr *c, char *buf, size_t len)
{
	char a[16];
	ip4_text(c->addr, a, sizeof(a));
	snprintf(buf, len, "%s/%u", a, c->prefix);
}

/* One rule per entry of a CIDR[:port] list into chain `chain`. */
static void say_list(struct script *s, const struct names *n, const char *chain,
		     const struct config_cidr_list *l, const char *verdict)
{
	for (int i = 0; i < l->count; i++) {
		char c[24];
		cidr_text(&l->items[i], c, sizeof(c));
		if (l->items[i].port)
			say(s, "add rule inet %s %s ip daddr %s meta l4proto { tcp, udp } th dport %u %s\n",
			    n->table, chain, c, l->items[i].port, verdict);
		else
			say(s, "add rule inet %s %s ip daddr %s %s\n", n->table, chain, c, verdict);
	}
}

/* deny, then the name servers on 53 (those net_prepare read for the room's
 * resolv.conf), then allow: into both policy chains. */
static void say_policy(struct script *s, const struct config *cfg, const struct names *n,
		       const char *chain)
{
	static const char refuse[] = "reject with icmpx type admin-prohibited";
	const uint32_t *dns = room_dns;
	int nd = room_dns_n;

	say(s, "add rule inet %s %s ct state established,related accept\n", n->table, chain);
	say_list(s, n, chain, &cfg->egress_deny, refuse);
	for (int i = 0; i < nd; i++) {
		char a[16];
		ip4_text(dns[i], a, sizeof(a));
		say(s, "add rule inet %s %s ip daddr %s meta l4proto { tcp, udp } th dport 53 accept\n",
		    n->table, chain, a);
	}
	say_list(s, n, chain, &cfg->egress_allow, "accept");
}

/* The instance's table, whole: every rule is common to the rooms, so a
 * room's start adds nothing to it.  Loaded as one transaction that first
 * deletes the table as it was (a changed configuration, or a table of an
 * earlier version), so no packet ever meets half a policy.
 *
 *   anti-spoofing: a room's packet must come from an address routed back
 *     through the interface it came in on (a strict reverse-path check: the
 *     host routes a room's /31 to its veth and nothing else there);
 *   the connection cap: a dynamic set keyed by the (so checked) source
 *     address counts each room's tracked connections;
 *   the conntrack mark: the source address itself (@nh,96,32 is it, raw),
 *     so net_room_down flushes a room's entries by its address alone. */
static void say_nets(struct script *s, const struct ip4net *nets, int count)
{
	for (int i = 0; i < count; i++) {
		char a[16];
		ip4_text(nets[i].addr, a, sizeof(a));
		say(s, "%s%s/%u", i ? ", " : "", a, nets[i].prefix);
	}
}

static void say_instance(struct script *s, const struct config *cfg, const struct names *n)
{
	char block[24];
	ip4_text(n->block, block, sizeof(block));
	const char *t = n->table, *p = n->prefix;

	say(s, "add table inet %s\ndelete table inet %s\nadd table inet %s\n", t, t, t);
	say(s, "add chain inet %s forward { type filter hook forward priority filter - 5; policy accept; }\n", t);
	say(s, "add chain inet %s input { type filter hook input priority filter - 5; policy accept; }\n", t);
	say(s, "add chain inet %s output { type filter hook output priority filter - 5; policy accept; }\n", t);
	say(s, "add chain inet %s postrouting { type nat hook postrouting priority srcnat + 5; policy accept; }\n", t);
	say(s, "add chain inet %s from_room\nadd chain inet %s out\nadd chain inet %s to_host\n", t, t, t);
	say(s, "add set inet %s conns { type ipv4_addr; size 65536; flags dynamic; }\n", t);
	say(s, "add set inet %s forbidden { type ipv4_addr; flags interval; }\n", t);
	say(s, "add element inet %s forbidden { ", t);
	say_nets(s, forbidden, (int)N_FORBIDDEN);
	say(s, " }\n");
	/* filled by say_host_nets; host_gen holds the hash of what it holds */
	say(s, "add set inet %s host_nets { type ipv4_addr; flags interval; }\n", t);
	say(s, "add set inet %s host_gen { type ipv4_addr; }\n", t);

	say(s, "add rule inet %s from_room meta nfproto != ipv4 drop\n", t);
	say(s, "add rule inet %s from_room fib saddr . iif oif missing drop\n", t);
	say(s, "add rule inet %s from_room ct state new add @conns { ip saddr ct count over %d } reject\n",
	    t, cfg->egress_conns);
	say(s, "add rule inet %s from_room ct state new ct mark set @nh,96,32\n", t);
	say(s, "add rule inet %s forward iifname \"%s*\" jump from_room\n", t, p);
	say(s, "add rule inet %s forward iifname \"%s*\" jump out\n", t, p);
	say(s, "add rule inet %s forward oifname \"%s*\" ct state established,related accept\n", t, p);
	say(s, "add rule inet %s forward oifname \"%s*\" drop\n", t, p);
	say(s, "add rule inet %s input iifname \"%s*\" jump from_room\n", t, p);
	say(s, "add rule inet %s input iifname \"%s*\" jump to_host\n", t, p);
	/* nor does the host open connections into a room (any local user could) */
	say(s, "add rule inet %s output oifname \"%s*\" ct state established,related accept\n", t, p);
	say(s, "add rule inet %s output oifname \"%s*\" reject with icmpx type admin-prohibited\n", t, p);
	say(s, "add rule inet %s postrouting ip saddr %s/16 oifname != \"%s*\" masquerade\n", t, block, p);

	say_policy(s, cfg, n, "out");
	say(s, "add rule inet %s out ip daddr @forbidden reject with icmpx type admin-prohibited\n", t);
	say(s, "add rule inet %s out ip daddr @host_nets reject with icmpx type admin-prohibited\n", t);
	say(s, "add rule inet %s out accept\n", t);
	say_policy(s, cfg, n, "to_host");
	say(s, "add rule inet %s to_host reject with icmpx type admin-prohibited\n", t);
}

/* ---- nf_tables over netlink: a room's start and stop run no program ------ */

static void nft_msg(struct nlreq *q, uint16_t msg, uint16_t flags, const struct names *n,
		    unsigned short table_attr)
{
	nl_init(q, (NFNL_SUBSYS_NFTABLES << 8) | msg, flags);
	struct nfgenmsg *g = nl_tail(q, sizeof(*g));
	g->nfgen_family = NFPROTO_INET;
	g->version = NFNETLINK_V0;
	nl_attr(q, table_attr, n->table, strlen(n->table) + 1);
}

/* One request over a fresh NETLINK_NETFILTER socket: 0 or -errno. */
static int nf_talk(struct nlreq *q, bool batch)
{
	int fd = nl_open(NETLINK_NETFILTER);
	if (fd < 0)
		return -errno;
	int rc = batch ? nl_talk_batch(fd, q, NFNL_SUBSYS_NFTABLES) : nl_talk(fd, q);
	close(fd);
	return rc;
}

/* 1 if the instance's table has the chain `chain`, 0 if not (or no such
 * table), or -errno. */
static int nft_chain_exists(const struct names *n, const char *chain)
{
	struct nlreq q;
	nft_msg(&q, NFT_MSG_GETCHAIN, 0, n, NFTA_CHAIN_TABLE);
	nl_attr(&q, NFTA_CHAIN_NAME, chain, strlen(chain) + 1);
	int rc = nf_talk(&q, false);
	return rc == 0 ? 1 : rc == -ENOENT ? 0 : rc;
}

static int nft_table_delete(const struct names *n)
{
	struct nlreq q;
	nft_msg(&q, NFT_MSG_DELTABLE, 0, n, NFTA_TABLE_NAME);
	int rc = nf_talk(&q, true);
	return rc == -ENOENT ? 0 : rc;
}

static int nft_set_holds(const struct names *n, const char *set, uint32_t a);

/* The room's counter in the conns set (made by the kernel at its first
 * connection): gone with the room, none left for the next holder of its
 * address.  No table, set or element: nothing to do.  Asked first (a
 * plain get): a batch the kernel refuses, as a delete of an element that
 * is not there, ends in nf_tables_abort, which waits out an RCU grace
 * period -- 4-30 ms on this kind of VM, at every room's start and stop
 * (bpftrace: 20 of 20 such calls over 4 ms).  Nothing can add the
 * element between the two: at a start the room has no link yet, at a
 * stop its host end is already deleted. */
static int nft_conns_forget(const struct names *n)
{
	int held = nft_set_holds(n, "conns", n->room_addr);
	if (held <= 0)
		return held;
	struct nlreq q;
	nft_msg(&q, NFT_MSG_DELSETELEM, 0, n, NFTA_SET_ELEM_LIST_TABLE);
	nl_attr(&q, NFTA_SET_ELEM_LIST_SET, "conns", 6);
	struct rtattr *list = nl_attr(&q, NLA_F_NESTED | NFTA_SET_ELEM_LIST_ELEMENTS, NULL, 0);
	struct rtattr *elem = nl_attr(&q, NLA_F_NESTED | NFTA_LIST_ELEM, NULL, 0);
	struct rtattr *key = nl_attr(&q, NLA_F_NESTED | NFTA_SET_ELEM_KEY, NULL, 0);
	uint32_t be = htonl(n->room_addr);
	nl_attr(&q, NFTA_DATA_VALUE, &be, 4);
	nl_nest_end(&q, key);
	nl_nest_end(&q, elem);
	nl_nest_end(&q, list);
	int rc = nf_talk(&q, true);
	return rc == -ENOENT ? 0 : rc;
}

/* 1 if the set `set` of the instance's table holds the address a, 0 if
 * not (or no such set), or -errno. */
static int nft_set_holds(const struct names *n, const char *set, uint32_t a)
{
	struct nlreq q;
	nft_msg(&q, NFT_MSG_GETSETELEM, 0, n, NFTA_SET_ELEM_LIST_TABLE);
	nl_attr(&q, NFTA_SET_ELEM_LIST_SET, set, strlen(set) + 1);
	struct rtattr *list = nl_attr(&q, NLA_F_NESTED | NFTA_SET_ELEM_LIST_ELEMENTS, NULL, 0);
	struct rtattr *elem = nl_attr(&q, NLA_F_NESTED | NFTA_LIST_ELEM, NULL, 0);
	struct rtattr *key = nl_attr(&q, NLA_F_NESTED | NFTA_SET_ELEM_KEY, NULL, 0);
	uint32_t be = htonl(a);
	nl_attr(&q, NFTA_DATA_VALUE, &be, 4);
	nl_nest_end(&q, key);
	nl_nest_end(&q, elem);
	nl_nest_end(&q, list);
	int rc = nf_talk(&q, false);
	return rc == 0 ? 1 : rc == -ENOENT ? 0 : rc;
}

/* host_nets refilled with the host's networks, and host_gen with gen, the
 * hash of them. */
static void say_host_nets(struct script *s, const struct names *n, const struct ip4net *nets,
			  int count, uint32_t gen)
{
	char g[16];
	ip4_text(gen, g, sizeof(g));
	say(s, "flush set inet %s host_nets\n", n->table);
	if (count) {
		say(s, "add element inet %s host_nets { ", n->table);
		say_nets(s, nets, count);
		say(s, " }\n");
	}
	say(s, "flush set inet %s host_gen\nadd element inet %s host_gen { %s }\n", n->table, n->table, g);
}

/* The instance's table as this configuration makes it: loaded by nft only
 * when the kernel has no table, or one made from other rules.  The table
 * says which: it holds an empty chain named after the hash of the rules it
 * was loaded with.  The host's networks are not part of those rules: when
 * only they changed (host_gen does not hold their hash), nft refills
 * their set alone, and the rooms' connection counts stay.  So a room's
 * start usually runs no program at all.  The caller holds the state lock. */
static int table_ensure(const struct config *cfg, const struct names *n, char *why, size_t whylen)
{
	static struct script s;
	static struct ip4net nets[HOST_NETS_MAX];
	char gen[24];
	int count = host_nets(nets);
	if (count < 0)
		return snprintf(why, whylen, "read the host's addresses: %s",
				count == -ENOSPC ? "more networks than the rules take" : strerror(-count)), -1;
	memset(&s, 0, sizeof(s));
	say_nets(&s, nets, count);
	uint32_t host_gen = fnv1a32(s.text);
	memset(&s, 0, sizeof(s));
	say_instance(&s, cfg, n);
	snprintf(gen, sizeof(gen), "g%016llx", (unsigned long long)fnv1a64(s.text));
	say(&s, "add chain inet %s %s\n", n->table, gen);
	if (nft_chain_exists(n, gen) == 1) {
		if (nft_set_holds(n, "host_gen", host_gen) == 1)
			return 0;
		memset(&s, 0, sizeof(s));
	}
	say_host_nets(&s, n, nets, count, host_gen);
	if (s.full)
		return snprintf(why, whylen, "rules too long"), -1;
	return nft_run(s.text, why, whylen);
}

/* The connection tracker's entries of a room's connections (marked with its
 * address by the rules): flushed with one ctnetlink request, so a stopped
 * room leaves none behind and a room that gets its address later inherits
 * none. */
static int conntrack_flush(uint32_t mark)
{
	int fd = nl_open(NETLINK_NETFILTER);
	if (fd < 0)
		return errno == EPROTONOSUPPORT ? 0 : -errno;   /* no netfilter: nothing tracked */
	struct nlreq q;
	nl_init(&q, (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE, 0);
	struct nfgenmsg *g = nl_tail(&q, sizeof(*g));
	g->nfgen_family = AF_INET;
	g->version = NFNETLINK_V0;
	uint32_t be = htonl(mark), all = 0xffffffffu;
	nl_attr(&q, CTA_MARK, &be, 4);
	nl_attr(&q, CTA_MARK_MASK, &all, 4);
	int rc = nl_talk(fd, &q);
	close(fd);
	/* nothing of the room tracked, or no conntrack netlink in this kernel */
	return rc == -ENOENT || rc == -EOPNOTSUPP ? 0 : rc;
}

/* ---- the room ------------------------------------------------------------ */

/* Everything here happens in the host's network namespace, PID 1's, whatever
 * the caller's: the packaged unit runs roombox-fcgi (and so this helper)
 * with PrivateNetwork=yes, whose namespace has nothing but lo.  Where PID 1's
 * namespace cannot be opened at all (a sandbox that hides PID 1 even from
 * root), the helper's own is the only one it can know, and is used. */
static int enter_host_net(char *why, size_t whylen)
{
	int fd = open("/proc/1/ns/net", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == EACCES || errno == EPERM || errno == ENOENT ? 0
			: (snprintf(why, whylen, "open /proc/1/ns/net: %s", strerror(errno)), -1);
	int rc = setns(fd, CLONE_NEWNET);   /* the same namespace: a no-op */
	if (rc < 0)
		snprintf(why, whylen, "%s", strerror(errno));
	close(fd);
	return rc;
}

/* Forwarding is what egress is: the host routes the rooms' packets. */
static int forwarding_on(char *why, size_t whylen)
{
	int fd = open("/proc/sys/net/ipv4/ip_forward", O_RDWR | O_CLOEXEC);
	char c = '0';
	if (fd < 0 || pread(fd, &c, 1, 0) != 1 || (c != '1' && pwrite(fd, "1", 1, 0) != 1)) {
		snprintf(why, whylen, "%s", strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* Rooms have IPv4 only: the host end takes no IPv6 address either (best
 * effort: the filter drops the rooms' IPv6 anyway). */
static void ipv6_off(const char *ifname)
{
	char path[96];
	snprintf(path, sizeof(path), "/proc/sys/net/ipv6/conf/%s/disable_ipv6", ifname);
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (write(fd, "1", 1) != 1) {
			/* nothing to do: see above */
		}
		close(fd);
	}
}

/* Whether addr is already one of the host's addresses (bind succeeds only
 * for a local one).  Unknowable with net.ipv4.ip_nonlocal_bind on: false. */
static bool addr_in_use(uint32_t addr)
{
	char c = '0';
	int fd = open("/proc/sys/net/ipv4/ip_nonlocal_bind", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		if (read(fd, &c, 1) != 1)
			c = '0';
		close(fd);
	}
	int s = c == '0' ? socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0) : -1;
	if (s < 0)
		return false;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(addr) };
	bool used = bind(s, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(s);
	return used;
}

static int links_up(const struct room *r, const struct names *n, pid_t keeper, char *err, size_t errlen)
{
	int ns_fd, rnl, rs, rc;
	int nl = nl_open(NETLINK_ROUTE);
	if (nl < 0)
		return ERR("room %s: network: netlink socket: %s", r->id, strerror(errno));
	if ((rc = room_sockets(keeper, &ns_fd, &rnl, &rs)) < 0) {
		ERR("room %s: network: enter the room's net namespace: %s", r->id, strerror(-rc));
		goto out;
	}
	int hs = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	/* a host end left by the room's previous life would block the name */
	link_delete(nl, n->host_if);
	if (addr_in_use(n->host_addr)) {
		char a[16];
		ip4_text(n->host_addr, a, sizeof(a));
		ERR("room %s: network: %s is already an address of this host (another roombox "
		    "instance whose state_dir hashes to the same /16?): refusing to share it", r->id, a);
		rc = -1;
		goto done;
	}
	const char *step = "create veth";
	if ((rc = veth_create(nl, n->host_if, ns_fd)) < 0)
		goto fail;
	int hi = if_index(hs, n->host_if), ri = if_index(rs, "eth0");
	step = "find the interfaces";
	if ((rc = hi < 0 ? hi : ri) < 0)
		goto fail;
	step = "host address";
	if ((rc = addr_add(nl, hi, n->host_addr)) < 0)
		goto fail;
	ipv6_off(n->host_if);
	step = "room address";
	if ((rc = addr_add(rnl, ri, n->room_addr)) < 0)
		goto fail;
	step = "bring the interfaces up";
	if ((rc = link_up(nl, hi)) < 0 || (rc = link_up(rnl, ri)) < 0)
		goto fail;
	step = "room route";
	if ((rc = route_default(rnl, ri, n->host_addr)) < 0)
		goto fail;
	rc = 0;
	goto done;
fail:
	ERR("room %s: network: %s %s: %s", r->id, step, n->host_if, strerror(-rc));
	link_delete(nl, n->host_if);
done:
	if (hs >= 0)
		close(hs);
out:
	close(nl);
	if (ns_fd >= 0)
		close(ns_fd);
	if (rnl >= 0)
		close(rnl);
	if (rs >= 0)
		close(rs);
	return rc < 0 ? -1 : 0;
}

/* The room's connection counter, then its tracked connections: at its stop,
 * and at its start (a keeper killed from outside left both behind, the
 * counter still counting them against the new life's cap).  0 or -errno. */
static int forget_connections(const struct names *n)
{
	int rc = nft_conns_forget(n);
	return rc < 0 ? rc : conntrack_flush(n->ct_mark);
}

/* Why net_prepare could not make the host ready, for net_room_up to say. */
static char prepare_err[512];

void net_prepare(const struct room *r)
{
	char why[512];
	prepare_err[0] = '\0';
	if (r->cfg->network != NETWORK_EGRESS)
		return;
	resolv_prepare(r->cfg);
	if (enter_host_net(why, sizeof(why)) < 0)
		snprintf(prepare_err, sizeof(prepare_err),
			 "room %s: network: enter the host's net namespace: %s", r->id, why);
	else if (forwarding_on(why, sizeof(why)) < 0)
		snprintf(prepare_err, sizeof(prepare_err),
			 "room %s: network: turn on net.ipv4.ip_forward: %s", r->id, why);
}

int net_room_up(const struct room *r, pid_t keeper, char *err, size_t errlen)
{
	struct names n;
	char why[512];
	if (r->cfg->network != NETWORK_EGRESS)
		return 0;
	if (prepare_err[0])
		return ERR("%s", prepare_err);
	if (names_room(r, &n, err, errlen) < 0)
		return -1;
	/* under the state lock: net_instance_remove (under it too) must not
	 * delete the table between this check and the room's veth, which is
	 * what tells it a room uses the table */
	int lock = room_state_lock(r->cfg);
	if (lock < 0)
		return ERR("room %s: network: state lock: %s", r->id, strerror(errno));
	int rc = table_ensure(r->cfg, &n, why, sizeof(why));
	if (rc < 0)
		ERR("room %s: network: load the firewall rules (%s): %s", r->id, NET_NFT, why);
	else if ((rc = forget_connections(&n)) < 0)
		ERR("room %s: network: clear what a crashed keeper left: %s", r->id, strerror(-rc));
	else
		rc = links_up(r, &n, keeper, err, errlen);
	close(lock);
	return rc;
}

int net_room_down(const struct room *r, char *err, size_t errlen)
{
	struct names n;
	char why[512];
	if (r->cfg->network != NETWORK_EGRESS)
		return 0;
	if (names_room(r, &n, err, errlen) < 0)
		return -1;
	if (enter_host_net(why, sizeof(why)) < 0)
		return ERR("room %s: network: enter the host's net namespace: %s", r->id, why);
	/* the namespace takes the pair with it, but asynchronously: delete the
	 * host end now so a restart (or a check of the host) finds it gone */
	int nl = nl_open(NETLINK_ROUTE);
	int rc = nl < 0 ? -errno : link_delete(nl, n.host_if);
	if (nl >= 0)
		close(nl);
	if (rc < 0)
		return ERR("room %s: network: delete %s: %s", r->id, n.host_if, strerror(-rc));
	/* no packet of the room can come now */
	if ((rc = forget_connections(&n)) < 0)
		return ERR("room %s: network: forget its connections: %s", r->id, strerror(-rc));
	return 0;
}

/* Whether an interface of the instance's rooms is on the host: a room that
 * runs, or one starting (net_room_up makes it under the state lock). */
static bool instance_links(const struct names *n)
{
	struct if_nameindex *all = if_nameindex();
	bool found = all == NULL;   /* unknown: keep the table */
	for (struct if_nameindex *i = all; i && i->if_index; i++)
		if (strncmp(i->if_name, n->prefix, strlen(n->prefix)) == 0)
			found = true;
	if (all)
		if_freenameindex(all);
	return found;
}

/* With egress, only when no room's interface is on the host: a room whose
 * keeper died lost its interface with its namespace, and its next start
 * loads the table again.  With network = none (egress was switched off)
 * whatever an earlier egress life left goes: no room of this mode uses it,
 * and the callers run when no room runs (stop-all) or none is left
 * (destroy).  Without nftables installed no table was ever loaded. */
void net_instance_remove(const struct config *cfg)
{
	struct names n;
	struct stat st;
	char why[256];
	names_instance(cfg, &n);
	if (stat(NET_NFT, &st) < 0 || enter_host_net(why, sizeof(why)) < 0)
		return;
	if (cfg->network == NETWORK_EGRESS && instance_links(&n))
		return;
	nft_table_delete(&n);
}
