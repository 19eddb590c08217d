/* roombox configuration parser.
 *
 * The file is read whole and parsed line by line into a struct config that
 * already holds the defaults. Keys are described once, in key_table: the
 * field they fill, how its value is parsed and what a user should have
 * written instead. Every error says "<file>:<line>: <reason>" because the
 * reader of the message is an administrator with the file open in an editor.
 *
 * Choices a user could expect otherwise (docs/choices.md):
 *   - `#` starts a comment at the beginning of a line, or after whitespace
 *     inside a line, so `rootfs = /srv/a#b` keeps its `#`.
 *   - A key given twice in one file is an error: which of the two was meant
 *     cannot be guessed.
 *   - drain_ms is a duration whose bare number is milliseconds (its name
 *     says so); every other duration's bare number is seconds.
 *   - Checks between keys (exec_timeout <= exec_timeout_max,
 *     uid_base + max_rooms * 65536 <= 2^31: each room owns 65536 host ids)
 *     run after the last line and name the line
 *     of whichever of the two keys came later.
 */
#include "config.h"
#include "protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

/* Larger than any sane configuration; stops a mistaken path (a log file, a
 * device) from being slurped into memory. */
#define CONFIG_FILE_MAX (1u << 20)

/* Host ids of rooms stay below this: uids at or above 2^31 confuse tools that
 * keep them in a signed int, and (uid_t)-1 is "no change" for setresuid. */
#define UID_LIMIT 2147483648ull
/* Each room's user namespace maps its ids 0-65535 onto a range of its own. */
#define ROOM_IDS 65536ull

/* Keeps cpu.max / cpu.cfs_quota_us arithmetic (cpus * period) far from
 * overflow whatever the period. */
#define CPU_LIMIT_MAX 65536.0

enum value_kind {
	V_PATH,		/* absolute path into a char array */
	V_ROOTFS,	/* "host" or an absolute path */
	V_AUTH,		/* token | none */
	V_CHOICE,	/* a word of choice_table, stored as its index (an enum) */
	V_NETWORK,	/* none | egress */
	V_EXEC_USER,	/* root | user */
	V_INT,		/* int >= min */
	V_UID,		/* uint32_t >= min */
	V_SIZE,		/* uint64_t bytes, K/M/G; >= min */
	V_DURATION,	/* uint64_t ms, bare number = seconds; >= min */
	V_MILLIS,	/* uint64_t ms, bare number = milliseconds */
	V_CPU,		/* double > 0 */
	V_RATIO,	/* double > 0 */
	V_URL,		/* http:// or https:// URL, no blanks or controls */
	V_TEXT,		/* one word: printable, no blanks or controls */
	V_DOMAIN,	/* a DNS name: labels of [a-z0-9-] joined by dots */
	V_ADDRS,	/* list of IPv4 addresses */
	V_CIDRS,	/* list of IPv4 CIDR[:port] */
	V_LIMITS,	/* name=value list of struct config_room_limits */
	V_URLS,		/* list of http:// URLs, kept as written (commas or spaces) */
	V_HOSTNAME,	/* [a-z0-9-]{1,32}: a cluster host's name */
};

struct key_desc {
	const char *name;
	enum value_kind kind;
	size_t offset;		/* of the field in struct config */
	size_t size;		/* of the field, for strings */
	uint64_t min;		/* smallest accepted number */
	size_t max_len;		/* strings: longest accepted; 0 = field size - 1 */
};

#define FIELD(f) offsetof(struct config, f), sizeof(((struct config *)0)->f)

/* A unix socket path must fit sockaddr_un.sun_path with its NUL. */
#define SUN_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

static const struct key_desc key_table[] = {
	{ "state_dir",            V_PATH,     FIELD(state_dir),            0, 0 },
	{ "run_dir",              V_PATH,     FIELD(run_dir),              0, 0 },
	{ "socket",               V_PATH,     FIELD(socket),               0, SUN_PATH_MAX },
	{ "tokens_file",          V_PATH,     FIELD(tokens_file),          0, 0 },
	{ "rootfs",               V_ROOTFS,   FIELD(rootfs),               0, 0 },
	{ "helper",               V_PATH,     FIELD(helper),               0, 0 },
	{ "workers",              V_INT,      FIELD(workers),              1, 0 },
	{ "room_workers",         V_INT,      FIELD(room_workers),         1, 0 },
	{ "auth",                 V_AUTH,     FIELD(auth),                 0, 0 },
	{ "metrics",              V_CHOICE,   FIELD(metrics),              0, 0 },
	{ "log_format",           V_CHOICE,   FIELD(log_format),           0, 0 },
	{ "network",              V_NETWORK,  FIELD(network),              0, 0 },
	{ "uid_base",             V_UID,      FIELD(uid_base),             1000, 0 },
	{ "max_rooms",            V_INT,      FIELD(max_rooms),            1, 0 },
	{ "snapshots_max",        V_INT,      FIELD(snapshots_max),        0, 0 },
	{ "memory_limit",         V_SIZE,     FIELD(memory_limit),         1, 0 },
	{ "pids_limit",           V_INT,      FIELD(pids_limit),           1, 0 },
	{ "cpu_limit",            V_CPU,      FIELD(cpu_limit),            0, 0 },
	{ "disk_limit",           V_SIZE,     FIELD(disk_limit),           0, 0 },
	{ "disk_overcommit",      V_RATIO,    FIELD(disk_overcommit),      0, 0 },
	{ "exec_timeout",         V_DURATION, FIELD(exec_timeout_ms),      1, 0 },
	{ "exec_timeout_max",     V_DURATION, FIELD(exec_timeout_max_ms),  1, 0 },
	{ "output_limit",         V_SIZE,     FIELD(output_limit),         1, 0 },
	{ "drain_ms",             V_MILLIS,   FIELD(drain_ms),             0, 0 },
	{ "max_body",             V_SIZE,     FIELD(max_body),             1, 0 },
	{ "max_file",             V_SIZE,     FIELD(max_file),             1, 0 },
	{ "log_max",              V_SIZE,     FIELD(log_max),              1, 0 },
	{ "max_concurrent_execs", V_INT,      FIELD(max_concurrent_execs), 1, 0 },
	{ "idle_timeout",         V_DURATION, FIELD(idle_timeout_ms),      0, 0 },
	{ "llm_url",              V_URL,      FIELD(llm_url),              0, 0 },
	{ "llm_model",            V_TEXT,     FIELD(llm_model),            0, 0 },
	{ "llm_key_file",         V_PATH,     FIELD(llm_key_file),         0, 0 },
	{ "llm_system_prompt_file", V_PATH,   FIELD(llm_system_prompt_file), 0, 0 },
	{ "llm_timeout",          V_DURATION, FIELD(llm_timeout_ms),       1, 0 },
	{ "llm_rounds",           V_INT,      FIELD(llm_rounds),           1, 0 },
	{ "llm_history",          V_INT,      FIELD(llm_history),          0, 0 },
	{ "exec_user",            V_EXEC_USER, FIELD(exec_user),           0, 0 },
	{ "preview_domain",       V_DOMAIN,   FIELD(preview_domain),       0, 0 },
	{ "dns",                  V_ADDRS,    FIELD(dns),                  0, 0 },
	{ "egress_allow",         V_CIDRS,    FIELD(egress_allow),         0, 0 },
	{ "egress_deny",          V_CIDRS,    FIELD(egress_deny),          0, 0 },
	{ "egress_conns",         V_INT,      FIELD(egress_conns),         1, 0 },
	{ "room_limits_max",      V_LIMITS,   FIELD(room_limits_max),      0, 0 },
	{ "export_key_file",      V_PATH,     FIELD(export_key_file),      0, 0 },
	{ "cluster_etcd",         V_URLS,     FIELD(cluster_etcd),         0, 0 },
	{ "cluster_host",         V_HOSTNAME, FIELD(cluster_host),         0, 0 },
	{ "cluster_url",          V_URL,      FIELD(cluster_url),          0, 0 },
	{ "cluster_key_file",     V_PATH,     FIELD(cluster_key_file),     0, 0 },
};

/* The words of each V_CHOICE key, in the order of its enum. */
static const struct {
	const char *key;
	const char *const words[4];
} choice_table[] = {
	{ "log_format", { "text", "json", NULL } },           /* enum log_format */
	{ "metrics",    { "token", "open", "none", NULL } },  /* enum metrics_mode */
};

static const char *const *choice_words(const struct key_desc *k)
{
	static const char *const none[] = { NULL };

	for (size_t i = 0; i < sizeof(choice_table) / sizeof(choice_table[0]); i++)
		if (strcmp(choice_table[i].key, k->name) == 0)
			return choice_table[i].words;
	return none;
}

_Static_assert(sizeof(enum log_format) == sizeof(int) &&
	       sizeof(enum metrics_mode) == sizeof(int), "V_CHOICE fields are ints");

#define KEY_COUNT (sizeof(key_table) / sizeof(key_table[0]))

/* Largest value a whole-number key's field can hold. */
static uint64_t int_max(const struct key_desc *k)
{
	return k->kind == V_INT ? (uint64_t)INT_MAX : (uint64_t)UINT32_MAX;
}

/* Where each key was set in the text being parsed (0 = not set), for the
 * duplicate check and for naming a line in the checks between keys. */
struct parse_state {
	const char *name;
	unsigned key_line[KEY_COUNT];
	char *err;
	size_t errlen;
};

void config_defaults(struct config *c)
{
	memset(c, 0, sizeof(*c));
	snprintf(c->state_dir, sizeof(c->state_dir), "%s", "/var/lib/roombox");
	snprintf(c->run_dir, sizeof(c->run_dir), "%s", "/run/roombox");
	snprintf(c->socket, sizeof(c->socket), "%s", "/run/roombox/fcgi.sock");
	snprintf(c->tokens_file, sizeof(c->tokens_file), "%s", "/etc/roombox/tokens");
	snprintf(c->rootfs, sizeof(c->rootfs), "%s", "host");
	snprintf(c->helper, sizeof(c->helper), "%s", ROOMBOX_HELPER);
	c->workers = 32;
	c->auth = AUTH_TOKEN;
	c->metrics = METRICS_TOKEN;
	c->log_format = LOG_FORMAT_TEXT;
	c->network = NETWORK_NONE;
	c->uid_base = 200000;
	c->max_rooms = 1000;
	c->snapshots_max = 10;
	c->memory_limit = 512ull << 20;
	c->pids_limit = 256;
	c->cpu_limit = 1.0;
	c->disk_overcommit = 1.0;
	c->disk_limit = 1ull << 30;
	c->exec_timeout_ms = 30 * 1000;
	c->exec_timeout_max_ms = 10 * 60 * 1000;
	c->output_limit = 1ull << 20;
	c->drain_ms = 50;
	c->max_body = 1ull << 20;
	c->max_file = 100ull << 20;
	c->log_max = 1ull << 20;
	c->max_concurrent_execs = 64;
	c->idle_timeout_ms = 15 * 60 * 1000;
	c->llm_timeout_ms = 120 * 1000;
	c->llm_rounds = 1;
	c->llm_history = 20;
	c->exec_user = EXEC_USER_ROOT;
	c->egress_conns = 256;
}

/* ---- value parsers ---- */

/* Leading decimal digits of s into *out; returns the first unparsed char or
 * NULL when there are no digits or the number does not fit. */
static const char *parse_digits(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	const char *p = s;

	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (UINT64_MAX - d) / 10)
			return NULL;
		v = v * 10 + d;
	}
	if (p == s)
		return NULL;
	*out = v;
	return p;
}

static int mul_checked(uint64_t v, uint64_t factor, uint64_t *out)
{
	if (factor && v > UINT64_MAX / factor)
		return -1;
	*out = v * factor;
	return 0;
}

int config_parse_size(const char *s, uint64_t *out)
{
	uint64_t v, factor;
	const char *p = parse_digits(s, &v);

	if (!p)
		return -1;
	switch (*p) {
	case '\0':           factor = 1; break;
	case 'K': case 'k':  factor = 1ull << 10; p++; break;
	case 'M': case 'm':  factor = 1ull << 20; p++; break;
	case 'G': case 'g':  factor = 1ull << 30; p++; break;
	default:             return -1;
	}
	if (*p != '\0')
		return -1;
	return mul_checked(v, factor, out);
}

/* Shared by durations whose bare number means seconds and drain_ms, whose
 * bare number means milliseconds. */
static int parse_duration(const char *s, uint64_t bare_factor, uint64_t *out)
{
	uint64_t v, factor;
	const char *p = parse_digits(s, &v);

	if (!p)
		return -1;
	if (strcmp(p, "") == 0)
		factor = bare_factor;
	else if (strcmp(p, "ms") == 0)
		factor = 1;
	else if (strcmp(p, "s") == 0)
		factor = 1000;
	else if (strcmp(p, "m") == 0)
		factor = 60 * 1000;
	else if (strcmp(p, "h") == 0)
		factor = 60 * 60 * 1000;
	else
		return -1;
	return mul_checked(v, factor, out);
}

int config_parse_duration_ms(const char *s, uint64_t *out)
{
	return parse_duration(s, 1000, out);
}

/* A plain decimal ("1", "0.5", "2.25", ".5"): strtod alone would also take
 * "inf", "nan", "0x1p3" and "1e3", none of which belong in this file. */
static int parse_cpus(const char *s, double *out)
{
	size_t digits = 0, dots = 0;
	double v;

	for (const char *p = s; *p; p++) {
		if (*p >= '0' && *p <= '9')
			digits++;
		else if (*p == '.' && dots++ == 0)
			continue;
		else
			return -1;
	}
	if (digits == 0)
		return -1;
	v = strtod(s, NULL);
	if (!isfinite(v) || v <= 0 || v > CPU_LIMIT_MAX)
		return -1;
	*out = v;
	return 0;
}

/* Printable ASCII or UTF-8, no blanks or controls: such a value goes into
 * an HTTP request (llm_model into its JSON, llm_url as its target), where a
 * stray space or line break is a mistake, never a meaning. */
static bool word_ok(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= ' ' || *s == 0x7f)
			return false;
	return true;
}

/* preview_domain: lower-case labels of letters, digits and inner '-',
 * 1-63 bytes each, joined by single dots (it becomes part of every
 * preview URL, and nginx and lighttpd match Hosts against it). */
static bool domain_ok(const char *s)
{
	size_t label = 0;
	if (!*s)
		return false;
	for (const char *p = s; ; p++) {
		if (*p == '.' || !*p) {
			if (label == 0 || label > 63 || p[-1] == '-')
				return false;
			if (!*p)
				return true;
			label = 0;
			continue;
		}
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || (*p == '-' && label > 0)))
			return false;
		label++;
	}
}

/* The model's base URL: http or https, a host, nothing libcurl would read
 * as another protocol. */
static bool url_ok(const char *s)
{
	size_t n = strncmp(s, "http://", 7) == 0 ? 7 :
		   strncmp(s, "https://", 8) == 0 ? 8 : 0;

	return n && word_ok(s) && s[n] && s[n] != '/';
}

/* cluster_etcd: every item of the list an http:// URL (etcd's JSON
 * gateway; libcurl is told to speak nothing else); empty is single host. */
static bool urls_ok(const char *s)
{
	char item[512];
	size_t n = 0;

	for (const char *p = s; ; p += n) {
		p += strspn(p, ", ");
		if (!*p)
			return true;
		n = strcspn(p, ", ");
		if (n >= sizeof(item))
			return false;
		memcpy(item, p, n);
		item[n] = '\0';
		if (strncmp(item, "http://", 7) != 0 || !url_ok(item))
			return false;
	}
}

/* cluster_host: it names the host in etcd's keys, in HAProxy's map and in
 * every answer's X-Roombox-Host. */
static bool hostname_ok(const char *s)
{
	size_t n = strlen(s);

	return n >= 1 && n <= 32 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

/* One decimal part of an address: 0-255, at most three digits. */
static const char *parse_octet(const char *p, const char *end, uint32_t *out)
{
	uint64_t v = 0;
	const char *q = p;

	while (q < end && *q >= '0' && *q <= '9' && q - p < 3)
		v = v * 10 + (uint64_t)(*q++ - '0');
	if (q == p || v > 255 || (q < end && *q >= '0' && *q <= '9'))
		return NULL;
	*out = (uint32_t)v;
	return q;
}

int config_parse_ipv4(const char *s, size_t len, uint32_t *out)
{
	const char *p = s, *end = s + len;
	uint32_t addr = 0, part;

	for (int i = 0; i < 4; i++) {
		if (i > 0 && (p >= end || *p++ != '.'))
			return -1;
		if (!(p = parse_octet(p, end, &part)))
			return -1;
		addr = addr << 8 | part;
	}
	if (p != end)
		return -1;
	*out = addr;
	return 0;
}

/* A number from 1 to max (decimal, no sign) filling [p, end). */
static int parse_small(const char *p, const char *end, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v = 0;

	if (p == end || end - p > 5)
		return -1;
	for (; p < end; p++) {
		if (*p < '0' || *p > '9')
			return -1;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (v < min || v > max)
		return -1;
	*out = (uint32_t)v;
	return 0;
}

int config_parse_cidr(const char *s, size_t len, struct config_cidr *out)
{
	const char *end = s + len;
	const char *colon = memchr(s, ':', len);
	const char *addr_end = colon ? colon : end;
	const char *slash = memchr(s, '/', (size_t)(addr_end - s));
	uint32_t addr, prefix = 32, port = 0;

	if (config_parse_ipv4(s, (size_t)((slash ? slash : addr_end) - s), &addr) < 0)
		return -1;
	if (slash && parse_small(slash + 1, addr_end, 0, 32, &prefix) < 0)
		return -1;
	if (colon && parse_small(colon + 1, end, 1, 65535, &port) < 0)
		return -1;
	/* 10.1.2.3/8 is most likely a typing slip: say so rather than guess */
	uint32_t mask = prefix ? ~0u << (32 - prefix) : 0;
	if (addr & ~mask)
		return -1;
	out->addr = addr;
	out->prefix = (uint8_t)prefix;
	out->port = (uint16_t)port;
	return 0;
}

/* ---- errors ---- */

static int fail(struct parse_state *st, unsigned line, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct parse_state *st, unsigned line, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!st->err || st->errlen == 0)
		return -1;
	n = snprintf(st->err, st->errlen, "%s:%u: ", st->name, line);
	if (n < 0 || (size_t)n >= st->errlen)
		return -1;
	va_start(ap, fmt);
	vsnprintf(st->err + n, st->errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

static const char *expected_text(const struct key_desc *k)
{
	switch (k->kind) {
	case V_PATH:     return "expected an absolute path";
	case V_ROOTFS:   return "expected 'host' or an absolute path";
	case V_AUTH:     return "expected 'token' or 'none'";
	case V_CHOICE:   break;	/* the words are printed by bad_value */
	case V_EXEC_USER: return "expected 'root' or 'user'";
	case V_NETWORK:  return "expected 'none' or 'egress'";
	case V_ADDRS:    return "expected IPv4 addresses like 192.0.2.53, separated by commas or spaces";
	case V_CIDRS:
		return "expected IPv4 networks CIDR[:port] like 10.0.0.0/8 or 10.1.2.3:3128, "
		       "without host bits, separated by commas or spaces";
	case V_INT:
	case V_UID:      break;	/* bounds are printed by bad_value */
	case V_SIZE:
		return k->min ? "expected a size like 512M, greater than 0"
			      : "expected a size like 512M";
	case V_DURATION:
		return k->min ? "expected a duration like 30s, greater than 0"
			      : "expected a duration like 30s";
	case V_MILLIS:   return "expected milliseconds like 50, or a duration like 50ms";
	case V_LIMITS:   return "expected name=value pairs separated by commas, like memory=2G,pids=1024,"
				"cpu=2,disk=10G,idle_timeout=1h,exec_timeout_max=30m";
	case V_CPU:      return "expected a positive number of CPUs like 1.5";
	case V_RATIO:    return "expected a positive number like 1.5";
	case V_URL:      return "expected an http:// or https:// URL like http://127.0.0.1:11434/v1";
	case V_TEXT:     return "expected a name without blanks, like llama3.1:8b";
	case V_DOMAIN:   return "expected a lower-case DNS name like preview.example.com";
	case V_URLS:
		return "expected http:// URLs like http://10.0.0.1:2379, separated by commas or spaces";
	case V_HOSTNAME: return "expected a host name of 1 to 32 characters a-z, 0-9 and -, like h1";
	}
	return "unexpected value";
}

static int bad_value(struct parse_state *st, unsigned line,
		     const struct key_desc *k, const char *value)
{
	if (k->kind == V_INT || k->kind == V_UID)
		return fail(st, line,
			    "bad value for %s: '%s' (expected a whole number from %llu to %llu)",
			    k->name, value, (unsigned long long)k->min,
			    (unsigned long long)int_max(k));
	if (k->kind == V_CHOICE) {
		const char *const *choices = choice_words(k);
		char words[128] = "";
		size_t used = 0;

		for (size_t i = 0; choices[i] && used < sizeof(words); i++)
			used += (size_t)snprintf(words + used, sizeof(words) - used, "%s'%s'",
						 i ? (choices[i + 1] ? ", " : " or ") : "",
						 choices[i]);
		return fail(st, line, "bad value for %s: '%s' (expected %s)",
			    k->name, value, words);
	}
	return fail(st, line, "bad value for %s: '%s' (%s)",
		    k->name, value, expected_text(k));
}

/* ---- setting one key ---- */

static int set_string(struct parse_state *st, unsigned line,
		      const struct key_desc *k, char *field, const char *value)
{
	size_t max = k->max_len ? k->max_len : k->size - 1;
	size_t len = strlen(value);

	if (len > max)
		return fail(st, line, "value for %s is too long (%zu bytes, at most %zu)",
			    k->name, len, max);
	memcpy(field, value, len + 1);
	return 0;
}

static int set_number(const struct key_desc *k, void *field, const char *value)
{
	uint64_t v;

	switch (k->kind) {
	case V_INT:
	case V_UID: {
		const char *end = parse_digits(value, &v);

		if (!end || *end != '\0' || v < k->min || v > int_max(k))
			return -1;
		if (k->kind == V_INT)
			*(int *)field = (int)v;
		else
			*(uint32_t *)field = (uint32_t)v;
		return 0;
	}
	case V_SIZE:
		if (config_parse_size(value, &v) < 0 || v < k->min)
			return -1;
		break;
	case V_DURATION:
		if (config_parse_duration_ms(value, &v) < 0 || v < k->min)
			return -1;
		break;
	case V_MILLIS:
		if (parse_duration(value, 1, &v) < 0 || v < k->min)
			return -1;
		break;
	default:
		return -1;
	}
	*(uint64_t *)field = v;
	return 0;
}

static bool is_blank(char ch);
static int quote_len(size_t len);

/* The next entry of a list value (entries separated by commas, blanks or
 * both): its start, with its length in *len, or NULL at the end. */
static const char *list_next(const char **p, size_t *len)
{
	while (**p == ',' || is_blank(**p))
		(*p)++;
	if (!**p)
		return NULL;
	*len = strcspn(*p, ", \t\r\v\f");
	const char *item = *p;
	*p += *len;
	return item;
}

/* A list value: entries separated by commas, blanks or both; an empty
 * value is an empty list.  The field is replaced, not appended to. */
static int set_list(struct parse_state *st, unsigned line,
		    const struct key_desc *k, void *field, const char *value)
{
	struct config_addr_list *addrs = field;
	struct config_cidr_list *cidrs = field;
	const char *p = value, *item;
	size_t len;
	int n = 0;

	while ((item = list_next(&p, &len))) {
		if (n == CONFIG_LIST_MAX)
			return fail(st, line, "too many entries for %s (at most %d)",
				    k->name, CONFIG_LIST_MAX);
		int rc = k->kind == V_ADDRS ? config_parse_ipv4(item, len, &addrs->items[n])
					    : config_parse_cidr(item, len, &cidrs->items[n]);
		if (rc < 0)
			return fail(st, line, "bad entry for %s: '%.*s' (%s)",
				    k->name, quote_len(len), item, expected_text(k));
		n++;
	}
	if (k->kind == V_ADDRS)
		addrs->count = n;
	else
		cidrs->count = n;
	return 0;
}

/* room_limits_max: name=value pairs, each name at most once; the value
 * parsed as its configuration key's (memory_limit's size, cpu_limit's
 * CPUs...).  The field is replaced whole. */
static int set_limits(struct config_room_limits *out, const char *value)
{
	struct config_room_limits l = { 0 };
	const char *p = value, *entry;
	size_t len;
	unsigned seen = 0;

	while ((entry = list_next(&p, &len))) {
		char item[64], *eq;
		uint64_t v;
		unsigned bit;
		if (len >= sizeof(item))
			return -1;
		memcpy(item, entry, len);
		item[len] = '\0';
		if (!(eq = strchr(item, '=')))
			return -1;
		*eq++ = '\0';
		if (!strcmp(item, "memory") && config_parse_size(eq, &v) == 0 && v > 0)
			l.memory = v, bit = 1;
		else if (!strcmp(item, "pids") && parse_digits(eq, &v) && !*parse_digits(eq, &v) &&
			 v > 0 && v <= INT_MAX)
			l.pids = (int)v, bit = 2;
		else if (!strcmp(item, "cpu") && parse_cpus(eq, &l.cpu) == 0)
			bit = 4;
		else if (!strcmp(item, "disk") && config_parse_size(eq, &v) == 0 && v > 0)
			l.disk = v, bit = 8;
		else if (!strcmp(item, "idle_timeout") && config_parse_duration_ms(eq, &v) == 0 && v > 0)
			l.idle_timeout_ms = v, bit = 16;
		else if (!strcmp(item, "exec_timeout_max") && config_parse_duration_ms(eq, &v) == 0 && v > 0)
			l.exec_timeout_max_ms = v, bit = 32;
		else
			return -1;
		if (seen & bit)
			return -1;
		seen |= bit;
	}
	*out = l;
	return 0;
}

struct config_room_limits config_room_limits_max(const struct config *c)
{
	struct config_room_limits m = c->room_limits_max;
	if (!m.memory)
		m.memory = c->memory_limit;
	if (!m.pids)
		m.pids = c->pids_limit;
	if (!(m.cpu > 0))
		m.cpu = c->cpu_limit;
	if (!m.disk)
		m.disk = c->disk_limit;
	if (!m.idle_timeout_ms)
		m.idle_timeout_ms = c->idle_timeout_ms;
	if (!m.exec_timeout_max_ms)
		m.exec_timeout_max_ms = c->exec_timeout_max_ms;
	return m;
}

static int set_value(struct parse_state *st, unsigned line, struct config *c,
		     const struct key_desc *k, const char *value)
{
	void *field = (char *)c + k->offset;

	switch (k->kind) {
	case V_PATH:
		if (value[0] != '/')
			return bad_value(st, line, k, value);
		return set_string(st, line, k, field, value);
	case V_ROOTFS:
		if (value[0] != '/' && strcmp(value, "host") != 0)
			return bad_value(st, line, k, value);
		return set_string(st, line, k, field, value);
	case V_AUTH:
		if (strcmp(value, "token") == 0)
			*(enum auth_mode *)field = AUTH_TOKEN;
		else if (strcmp(value, "none") == 0)
			*(enum auth_mode *)field = AUTH_NONE;
		else
			return bad_value(st, line, k, value);
		return 0;
	case V_CHOICE:
		for (int i = 0; choice_words(k)[i]; i++)
			if (strcmp(value, choice_words(k)[i]) == 0) {
				*(int *)field = i;
				return 0;
			}
		return bad_value(st, line, k, value);
	case V_NETWORK:
		if (strcmp(value, "none") == 0)
			*(enum network_mode *)field = NETWORK_NONE;
		else if (strcmp(value, "egress") == 0)
			*(enum network_mode *)field = NETWORK_EGRESS;
		else
			return bad_value(st, line, k, value);
		return 0;
	case V_EXEC_USER:
		if (strcmp(value, "root") == 0)
			*(enum exec_user *)field = EXEC_USER_ROOT;
		else if (strcmp(value, "user") == 0)
			*(enum exec_user *)field = EXEC_USER_USER;
		else
			return bad_value(st, line, k, value);
		return 0;
	case V_ADDRS:
	case V_CIDRS:
		return set_list(st, line, k, field, value);
	case V_LIMITS:
		if (set_limits(field, value) < 0)
			return bad_value(st, line, k, value);
		return 0;
	case V_CPU:
	case V_RATIO:
		if (parse_cpus(value, field) < 0)
			return bad_value(st, line, k, value);
		return 0;
	case V_URL:
		if (!url_ok(value))
			return bad_value(st, line, k, value);
		return set_string(st, line, k, field, value);
	case V_TEXT:
		if (!word_ok(value))
			return bad_value(st, line, k, value);
		return set_string(st, line, k, field, value);
	case V_DOMAIN:
		if (!domain_ok(value))
			return bad_value(st, line, k, value);
		return set_string(st, line, k, field, value);
	case V_URLS:
		if (!urls_ok(value))
			return bad_value(st, line, k, value);
		return set_string(st, line, k, field, value);
	case V_HOSTNAME:
		if (!hostname_ok(value))
			return bad_value(st, line, k, value);
		return set_string(st, line, k, field, value);
	default:
		if (set_number(k, field, value) < 0)
			return bad_value(st, line, k, value);
		return 0;
	}
}

/* ---- lines ---- */

static bool is_blank(char ch)
{
	return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\v' || ch == '\f';
}

/* Narrow s[0..*len) to leave out surrounding blanks; returns the new start. */
static const char *trim(const char *s, size_t *len)
{
	while (*len && is_blank(*s)) {
		s++;
		(*len)--;
	}
	while (*len && is_blank(s[*len - 1]))
		(*len)--;
	return s;
}

/* Length of a line without its comment: '#' at the start or after a blank
 * starts one, a '#' glued to other text ("/srv/a#b") is part of the value. */
static size_t strip_comment(const char *v, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (v[i] == '#' && (i == 0 || is_blank(v[i - 1])))
			return i;
	return len;
}

/* Quoting a whole runaway line helps nobody; keep quotes readable. */
static int quote_len(size_t len)
{
	return len > 200 ? 200 : (int)len;
}

static int find_key(const char *key, size_t len)
{
	for (size_t i = 0; i < KEY_COUNT; i++)
		if (strlen(key_table[i].name) == len &&
		    memcmp(key_table[i].name, key, len) == 0)
			return (int)i;
	return -1;
}

static int parse_line(struct parse_state *st, struct config *c, unsigned line,
		      const char *s, size_t len)
{
	const char *eq, *key, *value;
	size_t klen, vlen;
	char *copy;
	int k, rc;

	s = trim(s, &len);
	len = strip_comment(s, len);
	s = trim(s, &len);
	if (len == 0)
		return 0;
	eq = memchr(s, '=', len);
	klen = eq ? (size_t)(eq - s) : 0;
	key = trim(s, &klen);
	if (klen == 0)
		return fail(st, line, "expected 'key = value', got '%.*s'", quote_len(len), s);
	k = find_key(key, klen);
	if (k < 0)
		return fail(st, line, "unknown key '%.*s'", quote_len(klen), key);
	if (st->key_line[k])
		return fail(st, line, "duplicate key '%s' (first set on line %u)",
			    key_table[k].name, st->key_line[k]);
	st->key_line[k] = line;

	value = eq + 1;
	vlen = (size_t)(s + len - value);
	value = trim(value, &vlen);

	copy = strndup(value, vlen);
	if (!copy)
		return fail(st, line, "out of memory");
	rc = set_value(st, line, c, &key_table[k], copy);
	free(copy);
	return rc;
}

/* ---- checks between keys ---- */

static unsigned later_line(const struct parse_state *st, const char *a, const char *b)
{
	unsigned la = st->key_line[find_key(a, strlen(a))];
	unsigned lb = st->key_line[find_key(b, strlen(b))];

	return la > lb ? la : lb;
}

static int check_consistency(struct parse_state *st, const struct config *c)
{
	unsigned line;

	line = later_line(st, "exec_timeout", "exec_timeout_max");
	if (line && c->exec_timeout_ms > c->exec_timeout_max_ms)
		return fail(st, line,
			    "exec_timeout (%llums) is greater than exec_timeout_max (%llums)",
			    (unsigned long long)c->exec_timeout_ms,
			    (unsigned long long)c->exec_timeout_max_ms);
	/* the setuid helper reads a request of max_body within a fixed
	 * memory budget (common/protocol.h) */
	line = later_line(st, "max_body", "max_body");
	if (line && c->max_body > MAX_BODY_LIMIT)
		return fail(st, line,
			    "max_body (%llu bytes) is above %uM: roombox-helper reads a request "
			    "within a %u MiB memory budget",
			    (unsigned long long)c->max_body, MAX_BODY_LIMIT >> 20, HELPER_MEMORY_MAX >> 20);
	line = later_line(st, "output_limit", "output_limit");
	if (line && c->output_limit > OUTPUT_LIMIT_MAX)
		return fail(st, line,
			    "output_limit (%llu bytes) is above %uM: roombox-fcgi holds both "
			    "streams of every running exec",
			    (unsigned long long)c->output_limit, OUTPUT_LIMIT_MAX >> 20);
	line = later_line(st, "uid_base", "max_rooms");
	if (line && (uint64_t)c->uid_base + (uint64_t)c->max_rooms * ROOM_IDS > UID_LIMIT)
		return fail(st, line,
			    "uid_base + max_rooms * 65536 must be at most %llu: each room owns "
			    "65536 host ids (uid_base %u, max_rooms %d)",
			    UID_LIMIT, c->uid_base, c->max_rooms);
	line = later_line(st, "llm_url", "llm_model");
	if (line && !c->llm_url[0] != !c->llm_model[0])
		return fail(st, line, "llm_url and llm_model go together: set both "
			    "(the agent) or neither");
	line = later_line(st, "cluster_etcd", "cluster_host");
	if (line < later_line(st, "cluster_url", "cluster_url"))
		line = later_line(st, "cluster_url", "cluster_url");
	if (line && c->cluster_etcd[0] && (!c->cluster_host[0] || !c->cluster_url[0]))
		return fail(st, line, "cluster_etcd needs cluster_host and cluster_url: the name "
			    "this host has in etcd and the URL peers and the router reach it at");
	return 0;
}

int config_parse(struct config *c, const char *name, const char *text,
		 char *err, size_t errlen)
{
	struct parse_state st = { .name = name, .err = err, .errlen = errlen };
	const char *p = text;
	unsigned line = 0;

	if (err && errlen)
		err[0] = '\0';
	/* Editors on other systems may save a byte order mark. */
	if (strncmp(p, "\xEF\xBB\xBF", 3) == 0)
		p += 3;
	while (*p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);

		if (parse_line(&st, c, ++line, p, len) < 0)
			return -1;
		p += len + (nl ? 1 : 0);
	}
	return check_consistency(&st, c);
}

/* ---- files ---- */

static int load_error(char *err, size_t errlen, const char *path, const char *why)
{
	if (err && errlen)
		snprintf(err, errlen, "%s: %s", path, why);
	return -1;
}

/* Whole file as a NUL-terminated string; NULL with err set. */
static char *read_text(const char *path, char *err, size_t errlen)
{
	struct stat sb;
	char *buf;
	ssize_t n;
	size_t got = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	if (fd < 0) {
		load_error(err, errlen, path, strerror(errno));
		return NULL;
	}
	if (fstat(fd, &sb) < 0) {
		load_error(err, errlen, path, strerror(errno));
		close(fd);
		return NULL;
	}
	if (!S_ISREG(sb.st_mode)) {
		/* A FIFO or a device would block or never end. */
		load_error(err, errlen, path, "not a regular file");
		close(fd);
		return NULL;
	}
	buf = malloc(CONFIG_FILE_MAX + 1);
	if (!buf) {
		load_error(err, errlen, path, "out of memory");
		close(fd);
		return NULL;
	}
	/* Read to EOF rather than trusting st_size: the file may be growing. */
	while (got <= CONFIG_FILE_MAX &&
	       (n = read(fd, buf + got, CONFIG_FILE_MAX + 1 - got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			load_error(err, errlen, path, strerror(errno));
			goto fail;
		}
		got += (size_t)n;
	}
	if (got > CONFIG_FILE_MAX) {
		load_error(err, errlen, path, "file too large");
		goto fail;
	}
	/* A NUL would silently end the text early and hide the lines after it. */
	if (memchr(buf, '\0', got)) {
		load_error(err, errlen, path, "contains a NUL byte");
		goto fail;
	}
	buf[got] = '\0';
	close(fd);
	return buf;
fail:
	free(buf);
	close(fd);
	return NULL;
}

int config_load(struct config *c, const char *path, char *err, size_t errlen)
{
	char *text;
	int rc;

	config_defaults(c);
	text = read_text(path, err, errlen);
	if (!text)
		return -1;
	rc = config_parse(c, path, text, err, errlen);
	free(text);
	return rc;
}
