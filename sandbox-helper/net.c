/* A room's network for network = egress.
 *
 * Theory of operation.  Each room's keeper holds a net namespace of its own
 * (jail.c).  With network = egress the helper starts, before it forks the
 * keeper, the nft transaction of step 3 (nft's start-up is most of the cost
 * and overlaps the keeper's work), and once the keeper is up it
 *
 *   1. creates a veth pair over rtnetlink: "rb<instance>-<slot>" on the host,
 *      its peer created straight inside the room's namespace as eth0;
 *   2. numbers the pair as a /31 out of the instance's /16 of 100.64.0.0/10:
 *      host end 100.B.H.L, room end the next address, the room's default
 *      route via the host end; brings both ends up;
 *   3. waits for the `nft -f -` transaction that loads the instance's
 *      table (its common chains flushed and written again, so a changed
 *      configuration applies at the next room start) and the room's own
 *      elements: a map entry that
 *      sends packets from its interface to its chain (the egress_conns cap,
 *      a conntrack mark) and its (interface, source address) pair for
 *      anti-spoofing.
 *
 * The room's packets are forwarded and masqueraded (NAT) to whatever
 * interface the host's routing table picks: the default route or any more
 * specific one.  The filter, per packet leaving a room:
 *
 *   not IPv4, or not the room's own source address on its interface: dropped;
 *   egress_deny: refused; the name servers on port 53: accepted; egress_allow:
 *   accepted; the forbidden ranges (private, loopback, link-local, CGNAT,
 *   benchmark, multicast, reserved, other rooms): refused; the rest accepted.
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
 * never meets the old one), and net_room_down removes the room's elements
 * and chain, and flushes the connection tracker's entries of the room's
 * connections (ctnetlink, by mark); it is idempotent, so a crashed keeper's
 * leftovers go at the room's next start, stop or destroy.  The instance's
 * table goes when the last room is destroyed or the service stops
 * (stop-all), if no room's elements are left in it.
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

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <linux/netfilter/nfnetlink.h>
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

/* Never reachable from a room unless egress_allow opens them (SPEC §3);
 * 240.0.0.0/4 holds 255.255.255.255, 100.64.0.0/10 every room. */
static const char forbidden[] =
	"0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, 169.254.0.0/16, "
	"172.16.0.0/12, 192.168.0.0/16, 198.18.0.0/15, 224.0.0.0/4, 240.0.0.0/4";

/* The room's /etc/resolv.conf, made by net_prepare in the helper before the
 * keeper is forked (the keeper sees the host's files only until pivot). */
static char resolv_text[512];

struct names {
	char table[32];      /* roombox_<8 hex> */
	char prefix[12];     /* rb<6 hex>- */
	char host_if[IFNAMSIZ];
	char chain[16];      /* r<slot> */
	uint32_t block;      /* 100.B.0.0, host byte order */
	uint32_t host_addr;  /* host end of the room's /31 */
	uint32_t room_addr;
	uint32_t ct_mark;    /* on the room's connections, to flush them */
};

static uint32_t instance_hash(const struct config *cfg)
{
	uint32_t h = 2166136261u;  /* FNV-1a, as cgroup_set_instance */
	for (const char *c = cfg->state_dir; *c; c++)
		h = (h ^ (unsigned char)*c) * 16777619u;
	return h;
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
	snprintf(n->chain, sizeof(n->chain), "r%d", slot);
	n->host_addr = n->block + 2u * ((uint32_t)slot + 1u);
	n->room_addr = n->host_addr + 1u;
	n->ct_mark = (instance_hash(r->cfg) & 0xffff0000u) | (uint32_t)slot;
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

static void resolv_prepare(const struct config *cfg)
{
	uint32_t dns[CONFIG_LIST_MAX];
	int unusable;
	int n = net_dns_servers(cfg, dns, CONFIG_LIST_MAX, &unusable);
	size_t len = (size_t)snprintf(resolv_text, sizeof(resolv_text),
				      "# written by roombox at each start (network = egress)\n");
	if (n == 0)
		snprintf(resolv_text + len, sizeof(resolv_text) - len,
			 "# no name server is usable from a room (see /api/health)\n");
	for (int i = 0; i < n && i < RESOLV_MAX; i++) {
		char a[16];
		ip4_text(dns[i], a, sizeof(a));
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

struct nlreq {
	struct nlmsghdr h;
	char buf[1024];
};

static struct rtattr *nl_attr(struct nlreq *q, unsigned short type, const void *data, size_t len)
{
	struct rtattr *a = (struct rtattr *)((char *)&q->h + NLMSG_ALIGN(q->h.nlmsg_len));
	a->rta_type = type;
	a->rta_len = (unsigned short)RTA_LENGTH(len);
	if (len)
		memcpy(RTA_DATA(a), data, len);
	q->h.nlmsg_len = NLMSG_ALIGN(q->h.nlmsg_len) + RTA_ALIGN(a->rta_len);
	return a;
}

static void nl_nest_end(struct nlreq *q, struct rtattr *a)
{
	a->rta_len = (unsigned short)((char *)&q->h + q->h.nlmsg_len - (char *)a);
}

static void *nl_tail(struct nlreq *q, size_t len)
{
	void *p = (char *)&q->h + NLMSG_ALIGN(q->h.nlmsg_len);
	memset(p, 0, len);
	q->h.nlmsg_len = NLMSG_ALIGN(q->h.nlmsg_len) + (uint32_t)NLMSG_ALIGN(len);
	return p;
}

static void nl_init(struct nlreq *q, uint16_t type, uint16_t flags)
{
	memset(q, 0, sizeof(*q));
	q->h.nlmsg_len = NLMSG_LENGTH(0);
	q->h.nlmsg_type = type;
	q->h.nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
	q->h.nlmsg_seq = 1;
}

/* Send one request and read its acknowledgement: 0 or -errno. */
static int nl_talk(int fd, struct nlreq *q)
{
	struct sockaddr_nl kernel = { .nl_family = AF_NETLINK };
	if (sendto(fd, &q->h, q->h.nlmsg_len, 0, (struct sockaddr *)&kernel, sizeof(kernel)) < 0)
		return -errno;
	char buf[4096];
	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n); h = NLMSG_NEXT(h, n))
			if (h->nlmsg_type == NLMSG_ERROR) {
				struct nlmsgerr *e = NLMSG_DATA(h);
				return e->error;
			}
	}
}

static int nl_open(void)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd >= 0) {
		struct timeval tv = { 5, 0 };   /* the kernel answers at once */
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	return fd;
}

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
	*nl = nl_open();
	*s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int e = errno;
	/* back home: failing that, nothing else of this helper may run */
	if (setns(self, CLONE_NEWNET) < 0)
		abort();
	close(self);
	return *nl < 0 || *s < 0 ? -e : 0;
}

/* ---- nftables ------------------------------------------------------------ */

/* A running `nft -f -`: its pid and the read end of its stderr. */
struct nft_job {
	pid_t pid;
	int out;
};

/* Start NET_NFT -f - with `script` on stdin (written whole before this
 * returns: scripts are far below a pipe's capacity).  The program must be
 * root's and writable by root alone, and runs with an empty environment;
 * hold (a lock descriptor, or -1) is kept open in it as fd 3 until it exits,
 * and closed here.  0, or -1 with why. */
static int nft_spawn(const char *script, bool with_stdout, int hold, struct nft_job *j,
		     char *why, size_t whylen)
{
	struct stat st;
	int in[2] = { -1, -1 }, out[2] = { -1, -1 };
	j->pid = -1;
	j->out = -1;
	if (stat(NET_NFT, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022))
		snprintf(why, whylen, "%s: missing, or not root's and writable by root alone "
			 "(install nftables)", NET_NFT);
	else if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0)
		snprintf(why, whylen, "pipe: %s", strerror(errno));
	else if ((j->pid = fork()) < 0)
		snprintf(why, whylen, "fork: %s", strerror(errno));
	if (j->pid == 0) {
		int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
		if ((hold >= 0 && dup2(hold, 3) < 0) || dup2(in[0], 0) < 0 ||
		    dup2(with_stdout ? out[1] : null, 1) < 0 || dup2(out[1], 2) < 0)
			_exit(126);
		syscall(SYS_close_range, hold >= 0 ? 4 : 3, ~0U, 0);
		char *argv[] = { "nft", "-f", "-", NULL };
		char *envp[] = { NULL };
		execve(NET_NFT, argv, envp);
		_exit(127);
	}
	if (hold >= 0)
		close(hold);
	if (in[0] >= 0)
		close(in[0]);
	if (out[1] >= 0)
		close(out[1]);
	if (j->pid < 0) {
		if (in[1] >= 0)
			close(in[1]);
		if (out[0] >= 0)
			close(out[0]);
		return -1;
	}
	j->out = out[0];
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
	return 0;
}

/* Wait for nft; its output (the first bytes; stdout too when it was asked
 * for) in why.  0 if it succeeded. */
static int nft_finish(struct nft_job *j, char *why, size_t whylen, bool keep_newlines)
{
	/* read to the end (keeping the first bytes): a full pipe would block
	 * nft, and this helper waiting for it, for ever */
	size_t got = 0;
	ssize_t k;
	char sink[4096];
	while ((k = got < whylen - 1 ? read(j->out, why + got, whylen - 1 - got)
				     : read(j->out, sink, sizeof(sink))) > 0 || (k < 0 && errno == EINTR))
		if (k > 0 && got < whylen - 1)
			got += (size_t)k;
	why[got] = '\0';
	close(j->out);
	int status = 0;
	while (waitpid(j->pid, &status, 0) < 0 && errno == EINTR)
		;
	for (char *c = why; *c && !keep_newlines; c++)
		if (*c == '\n')
			*c = ' ';
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static int nft_run(const char *script, char *why, size_t whylen, bool with_stdout)
{
	struct nft_job j;
	why[0] = '\0';
	if (nft_spawn(script, with_stdout, -1, &j, why, whylen) < 0)
		return -1;
	return nft_finish(&j, why, whylen, with_stdout);
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

/* deny, then the name servers on 53, then allow: into both policy chains. */
static void say_policy(struct script *s, const struct config *cfg, const struct names *n,
		       const char *chain)
{
	static const char refuse[] = "reject with icmpx type admin-prohibited";
	uint32_t dns[CONFIG_LIST_MAX];
	int unusable;
	int nd = net_dns_servers(cfg, dns, CONFIG_LIST_MAX, &unusable);

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

/* The instance's table, its common chains flushed and written again: the
 * whole of it is one transaction with the room's part, so no packet ever
 * meets half a policy. */
static void say_instance(struct script *s, const struct config *cfg, const struct names *n)
{
	static const char *const chains[] = { "forward", "input", "output", "postrouting", "out", "to_host" };
	char block[24];
	ip4_text(n->block, block, sizeof(block));
	const char *t = n->table, *p = n->prefix;

	say(s, "add table inet %s\n", t);
	say(s, "add chain inet %s forward { type filter hook forward priority filter - 5; policy accept; }\n", t);
	say(s, "add chain inet %s input { type filter hook input priority filter - 5; policy accept; }\n", t);
	say(s, "add chain inet %s output { type filter hook output priority filter - 5; policy accept; }\n", t);
	say(s, "add chain inet %s postrouting { type nat hook postrouting priority srcnat + 5; policy accept; }\n", t);
	say(s, "add chain inet %s out\nadd chain inet %s to_host\n", t, t);
	say(s, "add map inet %s rooms { type ifname : verdict; }\n", t);
	say(s, "add set inet %s rooms_src { type ifname . ipv4_addr; }\n", t);
	say(s, "add set inet %s forbidden { type ipv4_addr; flags interval; }\n", t);
	for (size_t i = 0; i < sizeof(chains) / sizeof(chains[0]); i++)
		say(s, "flush chain inet %s %s\n", t, chains[i]);
	say(s, "flush set inet %s forbidden\n", t);
	say(s, "add element inet %s forbidden { %s }\n", t, forbidden);

	say(s, "add rule inet %s forward iifname \"%s*\" meta nfproto != ipv4 drop\n", t, p);
	say(s, "add rule inet %s forward iifname \"%s*\" iifname . ip saddr != @rooms_src drop\n", t, p);
	/* the room's chain (its cap, its conntrack mark) then the policy; an
	 * interface not in the map failed the anti-spoofing check already */
	say(s, "add rule inet %s forward iifname \"%s*\" iifname vmap @rooms\n", t, p);
	say(s, "add rule inet %s forward iifname \"%s*\" jump out\n", t, p);
	say(s, "add rule inet %s forward oifname \"%s*\" ct state established,related accept\n", t, p);
	say(s, "add rule inet %s forward oifname \"%s*\" drop\n", t, p);
	say(s, "add rule inet %s input iifname \"%s*\" meta nfproto != ipv4 drop\n", t, p);
	say(s, "add rule inet %s input iifname \"%s*\" iifname . ip saddr != @rooms_src drop\n", t, p);
	say(s, "add rule inet %s input iifname \"%s*\" iifname vmap @rooms\n", t, p);
	say(s, "add rule inet %s input iifname \"%s*\" jump to_host\n", t, p);
	/* nor does the host open connections into a room (any local user could) */
	say(s, "add rule inet %s output oifname \"%s*\" ct state established,related accept\n", t, p);
	say(s, "add rule inet %s output oifname \"%s*\" reject with icmpx type admin-prohibited\n", t, p);
	say(s, "add rule inet %s postrouting ip saddr %s/16 oifname != \"%s*\" masquerade\n", t, block, p);

	say_policy(s, cfg, n, "out");
	say(s, "add rule inet %s out ip daddr @forbidden reject with icmpx type admin-prohibited\n", t);
	say(s, "add rule inet %s out accept\n", t);
	say_policy(s, cfg, n, "to_host");
	say(s, "add rule inet %s to_host reject with icmpx type admin-prohibited\n", t);
}

/* The room's elements; made idempotent by adding before deleting. */
static void say_room_down(struct script *s, const struct names *n)
{
	char a[16];
	ip4_text(n->room_addr, a, sizeof(a));
	const char *t = n->table;
	say(s, "add table inet %s\n", t);
	say(s, "add map inet %s rooms { type ifname : verdict; }\n", t);
	say(s, "add set inet %s rooms_src { type ifname . ipv4_addr; }\n", t);
	say(s, "add chain inet %s %s\n", t, n->chain);
	say(s, "add element inet %s rooms { \"%s\" : jump %s }\n", t, n->host_if, n->chain);
	say(s, "add element inet %s rooms_src { \"%s\" . %s }\n", t, n->host_if, a);
	say(s, "delete element inet %s rooms { \"%s\" }\n", t, n->host_if);
	say(s, "delete element inet %s rooms_src { \"%s\" . %s }\n", t, n->host_if, a);
	say(s, "flush chain inet %s %s\n", t, n->chain);
	say(s, "delete chain inet %s %s\n", t, n->chain);
}

static void say_room_up(struct script *s, const struct config *cfg, const struct names *n)
{
	char a[16];
	ip4_text(n->room_addr, a, sizeof(a));
	const char *t = n->table;
	say(s, "add chain inet %s %s\n", t, n->chain);
	say(s, "flush chain inet %s %s\n", t, n->chain);
	say(s, "add rule inet %s %s ct state new ct count over %d reject\n", t, n->chain, cfg->egress_conns);
	say(s, "add rule inet %s %s ct state new ct mark set 0x%08x\n", t, n->chain, n->ct_mark);
	say(s, "add element inet %s rooms { \"%s\" : jump %s }\n", t, n->host_if, n->chain);
	say(s, "add element inet %s rooms_src { \"%s\" . %s }\n", t, n->host_if, a);
}

/* The connection tracker's entries of a room's connections (marked by its
 * chain): flushed with one ctnetlink request, so a stopped room leaves none
 * behind and a room that gets its slot later inherits none. */
static int conntrack_flush(uint32_t mark)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER);
	if (fd < 0)
		return errno == EPROTONOSUPPORT ? 0 : -errno;   /* no netfilter: nothing tracked */
	struct timeval tv = { 5, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
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
	int nl = nl_open();
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

/* The rules of a starting room, loaded by an nft started in net_prepare
 * and waited for in net_room_up: nft's start-up (most of egress's cost)
 * runs while the keeper builds the room's root. */
static struct {
	bool started;
	struct nft_job job;
	char err[512];       /* why net_prepare could not start it */
} pending;

void net_prepare(const struct room *r)
{
	struct names n;
	char why[512];
	static struct script s;
	if (r->cfg->network != NETWORK_EGRESS)
		return;
	resolv_prepare(r->cfg);
	pending.started = false;
	pending.err[0] = '\0';
	if (names_room(r, &n, pending.err, sizeof(pending.err)) < 0)
		return;
	if (enter_host_net(why, sizeof(why)) < 0) {
		snprintf(pending.err, sizeof(pending.err),
			 "room %s: network: enter the host's net namespace: %s", r->id, why);
		return;
	}
	if (forwarding_on(why, sizeof(why)) < 0) {
		snprintf(pending.err, sizeof(pending.err),
			 "room %s: network: turn on net.ipv4.ip_forward: %s", r->id, why);
		return;
	}
	memset(&s, 0, sizeof(s));
	say_instance(&s, r->cfg, &n);
	say_room_up(&s, r->cfg, &n);
	/* nft holds the state lock until it exits: net_instance_remove (under
	 * it) must not delete the table between this load and the room's
	 * first packet; the keeper, forked later, never holds it */
	int lock = room_state_lock(r->cfg);
	if (s.full || nft_spawn(s.text, false, lock, &pending.job, why, sizeof(why)) < 0) {
		if (s.full && lock >= 0)
			close(lock);
		snprintf(pending.err, sizeof(pending.err), "room %s: network: load the firewall rules "
			 "(%s): %s", r->id, NET_NFT, s.full ? "rules too long" : why);
		return;
	}
	pending.started = true;
}

/* Undo a start that failed half-way: the host end and the elements. */
static void room_up_undo(const struct names *n)
{
	char why[512];
	static struct script s;
	int nl = nl_open();
	if (nl >= 0) {
		link_delete(nl, n->host_if);
		close(nl);
	}
	memset(&s, 0, sizeof(s));
	say_room_down(&s, n);
	nft_run(s.text, why, sizeof(why), false);
}

int net_room_up(const struct room *r, pid_t keeper, char *err, size_t errlen)
{
	struct names n;
	char why[512];
	if (r->cfg->network != NETWORK_EGRESS)
		return 0;
	if (!pending.started)
		return ERR("%s", pending.err[0] ? pending.err : "network: net_prepare did not run");
	pending.started = false;
	if (names_room(r, &n, err, errlen) < 0) {   /* it did in net_prepare */
		nft_finish(&pending.job, why, sizeof(why), false);
		return -1;
	}
	int links = links_up(r, &n, keeper, err, errlen);
	int rules = nft_finish(&pending.job, why, sizeof(why), false);
	if (links == 0 && rules == 0)
		return 0;
	if (links == 0)
		ERR("room %s: network: load the firewall rules (%s): %s", r->id, NET_NFT, why);
	room_up_undo(&n);
	return -1;
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
	int nl = nl_open();
	int rc = nl < 0 ? -errno : link_delete(nl, n.host_if);
	if (nl >= 0)
		close(nl);
	if (rc < 0)
		return ERR("room %s: network: delete %s: %s", r->id, n.host_if, strerror(-rc));
	static struct script s;
	memset(&s, 0, sizeof(s));
	say_room_down(&s, &n);
	if (nft_run(s.text, why, sizeof(why), false) < 0)
		return ERR("room %s: network: remove the firewall elements (%s): %s", r->id, NET_NFT, why);
	/* after the rules: no new entry of the room can appear now */
	if ((rc = conntrack_flush(n.ct_mark)) < 0)
		return ERR("room %s: network: flush its conntrack entries: %s", r->id, strerror(-rc));
	return 0;
}

/* With egress, only when its map of rooms is empty: a room whose keeper
 * died keeps the table (and its elements) until the room starts again or
 * is destroyed.  With network = none (egress was switched off) whatever an
 * earlier egress life left goes: no room of this mode uses it, and the
 * callers run when no room runs (stop-all) or none is left (destroy).
 * Without nftables installed there is nothing to remove. */
void net_instance_remove(const struct config *cfg)
{
	struct names n;
	char out[4096], script[128];
	struct stat st;
	if (stat(NET_NFT, &st) < 0 || enter_host_net(out, sizeof(out)) < 0)
		return;
	names_instance(cfg, &n);
	snprintf(script, sizeof(script), "list map inet %s rooms\n", n.table);
	if (nft_run(script, out, sizeof(out), true) < 0 ||
	    (cfg->network == NETWORK_EGRESS && strstr(out, "elements")))
		return;   /* no table, or rooms in it */
	snprintf(script, sizeof(script), "delete table inet %s\n", n.table);
	nft_run(script, out, sizeof(out), false);
}
