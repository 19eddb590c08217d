/* roombox configuration: /etc/roombox/roombox.conf, "key = value" lines,
 * '#' comments (whole lines, or after whitespace at the end of a line).
 * One parser for both programs; an unknown key, a bad value or a key given
 * twice is an error that names the file, the line and the reason. */
#ifndef ROOMBOX_CONFIG_H
#define ROOMBOX_CONFIG_H

#include <stdint.h>
#include <stddef.h>

#ifndef ROOMBOX_CONF
#define ROOMBOX_CONF "/etc/roombox/roombox.conf"
#endif
#ifndef ROOMBOX_HELPER
#define ROOMBOX_HELPER "/usr/lib/roombox/roombox-helper"
#endif

enum auth_mode { AUTH_TOKEN, AUTH_NONE };
/* Operating it: the request log's format; who may read /metrics
 * (token: as the API, so open too under auth = none; open: anyone who
 * reaches the web server; none: not served). */
enum log_format { LOG_FORMAT_TEXT, LOG_FORMAT_JSON };
enum metrics_mode { METRICS_TOKEN, METRICS_OPEN, METRICS_NONE };
/* Who runs a command in a room by default: the room's root (uid 0 in its
 * user namespace) or its user (uid 1000). */
enum exec_user { EXEC_USER_ROOT, EXEC_USER_USER };
enum network_mode { NETWORK_NONE, NETWORK_EGRESS };

/* Longest list a list key (dns, egress_allow, egress_deny) takes: each entry
 * becomes a firewall rule per room start, so the lists stay short. */
#define CONFIG_LIST_MAX 32

/* An IPv4 network, optionally one port of it: CIDR[:port]. */
struct config_cidr {
	uint32_t addr;           /* host byte order, host bits zero */
	uint8_t prefix;          /* 0-32 */
	uint16_t port;           /* 0 = every port */
};

struct config_cidr_list {
	int count;
	struct config_cidr items[CONFIG_LIST_MAX];
};

struct config_addr_list {
	int count;               /* 0 = not set (dns: the host's name servers) */
	uint32_t items[CONFIG_LIST_MAX];   /* IPv4, host byte order */
};

/* room_limits_max: how far a room's own limits (PATCH /api/rooms/{id}) may
 * go; a field left 0 is the configuration's own value for that limit. */
struct config_room_limits {
	uint64_t memory;         /* bytes */
	int pids;
	double cpu;              /* CPUs */
	uint64_t disk;           /* bytes */
	uint64_t idle_timeout_ms;
	uint64_t exec_timeout_max_ms;
};

struct config {
	char state_dir[256];     /* /var/lib/roombox */
	char run_dir[256];       /* /run/roombox */
	char socket[256];        /* /run/roombox/fcgi.sock */
	char tokens_file[256];   /* /etc/roombox/tokens */
	char rootfs[256];        /* "host" or an absolute path */
	char helper[256];        /* path of roombox-helper (roombox extension) */
	int workers;             /* 32 */
	int room_workers;        /* 0: a quarter of workers, at least 1 */
	enum auth_mode auth;     /* token */
	enum metrics_mode metrics;      /* token */
	enum log_format log_format;     /* text */
	enum network_mode network; /* none */
	uint32_t uid_base;       /* 200000 */
	int max_rooms;           /* 1000 */
	int snapshots_max;       /* 10 snapshots per room */
	uint64_t memory_limit;   /* bytes, 512M */
	int pids_limit;          /* 256 */
	double cpu_limit;        /* CPUs, 1.0 */
	uint64_t disk_limit;     /* bytes, 1G; 0 = no quota */
	double disk_overcommit;  /* rooms' images may promise this many times the free space, 1.0 */
	uint64_t exec_timeout_ms;     /* 30s */
	uint64_t exec_timeout_max_ms; /* 10m */
	uint64_t output_limit;   /* bytes per stream, 1M */
	uint64_t drain_ms;       /* 50; here a bare number is milliseconds */
	uint64_t max_body;       /* bytes, 1M */
	uint64_t max_file;       /* bytes, 100M: one file through the files API */
	uint64_t log_max;        /* bytes, 1M: kept of each stream of a managed process */
	int max_concurrent_execs; /* 64 */
	uint64_t idle_timeout_ms; /* 15m; 0 = never */
	/* the agent: on when llm_url and llm_model are both set */
	char llm_url[512];       /* "" or an http:// or https:// /v1 base */
	char llm_model[256];     /* "" or the model's name */
	char llm_key_file[256];  /* "" or an absolute path */
	char llm_system_prompt_file[256]; /* "" = the built-in prompt */
	char export_key_file[256]; /* "" or an absolute path: exports' HMAC key */
	uint64_t llm_timeout_ms; /* 120s: one model call, start to end */
	int llm_rounds;          /* 1: model replies per user message */
	int llm_history;         /* 20: earlier messages sent to the model */
	enum exec_user exec_user; /* root */
	char preview_domain[254]; /* "": path-style preview URLs */
	struct config_addr_list dns;          /* empty: the host's /etc/resolv.conf */
	struct config_cidr_list egress_allow; /* empty */
	struct config_cidr_list egress_deny;  /* empty */
	int egress_conns;        /* 256 concurrent connections per room */
	struct config_room_limits room_limits_max; /* all 0: the limits above */
	/* cluster mode: on when cluster_etcd is set (fcgi-app/cluster/) */
	char cluster_etcd[512];  /* "" = single host; etcd client URLs, commas or spaces */
	char cluster_host[33];   /* this host's name, [a-z0-9-]{1,32} */
	char cluster_url[256];   /* http://ADDR:PORT peers and the router reach it at */
	char cluster_key_file[256]; /* "" or an absolute path: the hosts' shared secret */
};

/* The most a room's own limits may be: room_limits_max's, or the
 * configuration's limit where it names none. */
struct config_room_limits config_room_limits_max(const struct config *c);

/* Fill every key with its default. */
void config_defaults(struct config *c);

/* Parse text (the contents of file `name`, used only in messages) on top of
 * the current values. Returns 0, or -1 with "name:line: reason" in err. */
int config_parse(struct config *c, const char *name, const char *text,
		 char *err, size_t errlen);

/* config_defaults + read and parse the file. Returns 0 or -1 with err set
 * (a missing file is an error naming the path). */
int config_load(struct config *c, const char *path, char *err, size_t errlen);

/* Value parsers, exposed for tests: sizes with K/M/G (powers of 1024),
 * durations with ms/s/m/h (a bare number is seconds). 0 or -1. */
int config_parse_size(const char *s, uint64_t *out);
int config_parse_duration_ms(const char *s, uint64_t *out);
/* "a.b.c.d" (exactly four decimal parts, each 0-255) and "CIDR[:port]"
 * (prefix 0-32 with no host bits set, port 1-65535). 0 or -1. */
int config_parse_ipv4(const char *s, size_t len, uint32_t *out);
int config_parse_cidr(const char *s, size_t len, struct config_cidr *out);

#endif
