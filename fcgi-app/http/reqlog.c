/* One log line per request: see reqlog.h.
 *
 * Request ids are splitmix64 of a random per-process seed plus a counter:
 * the function is a bijection, so no two requests of one process share an
 * id, and the ids of one run say nothing about another's; one atomic add per
 * request, no system call. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "reqlog.h"

static atomic_uint_fast64_t id_counter;
static uint64_t id_seed;
static pthread_once_t id_once = PTHREAD_ONCE_INIT;

static uint64_t splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void seed_once(void)
{
	if (getrandom(&id_seed, sizeof(id_seed), GRND_NONBLOCK) != sizeof(id_seed))
		id_seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
}

void reqlog_new_id(char *buf)
{
	uint64_t n = atomic_fetch_add_explicit(&id_counter, 1, memory_order_relaxed);

	pthread_once(&id_once, seed_once);

	snprintf(buf, REQUEST_ID_LEN + 1, "%016llx",
		 (unsigned long long)splitmix64(id_seed + n * 0x9e3779b97f4a7c15ull));
}

/* The client's bytes, safe for a key=value line and for JSON. */
static void safe_copy(char *dst, size_t dstlen, const char *src)
{
	size_t i;

	if (!src)
		src = "";
	for (i = 0; src[i] && i + 1 < dstlen; i++) {
		unsigned char c = (unsigned char)src[i];

		dst[i] = (c > 0x20 && c < 0x7f && c != '"' && c != '\\') ? (char)c : '?';
	}
	dst[i] = '\0';
}

static void iso_now(char *buf, size_t len)
{
	struct timespec ts;
	struct tm tm;

	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	snprintf(buf, len, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
		 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
		 ts.tv_nsec / 1000000L);
}

size_t reqlog_format(enum log_format fmt, const struct reqlog *r, char *buf, size_t len)
{
	char method[24], path[201], room[80], when[32];
	const char *route = r->route ? r->route : "-";
	bool has_room = r->room && r->room[0];
	double ms = (double)r->duration_ns / 1e6, hms = (double)r->helper_ns / 1e6;
	int n;

	safe_copy(method, sizeof(method), r->method);
	safe_copy(path, sizeof(path), r->path);
	safe_copy(room, sizeof(room), has_room ? r->room : "-");
	if (fmt == LOG_FORMAT_JSON) {
		iso_now(when, sizeof(when));
		n = snprintf(buf, len, "{\"time\":\"%s\",\"level\":\"info\",\"msg\":\"request\","
			     "\"id\":\"%s\",\"method\":\"%s\",\"route\":\"%s\",\"room\":%s%s%s,"
			     "\"status\":%d,\"duration_ms\":%.3f,\"helper_ms\":%.3f,\"path\":\"%s\"}\n",
			     when, r->id, method, route, has_room ? "\"" : "",
			     has_room ? room : "null", has_room ? "\"" : "",
			     r->status, ms, hms, path);
	} else {
		n = snprintf(buf, len, "roombox-fcgi: request id=%s method=%s route=%s room=%s "
			     "status=%d duration_ms=%.3f helper_ms=%.3f path=%s\n",
			     r->id, method, route, room, r->status, ms, hms, path);
	}
	if (n < 0)
		return 0;
	return (size_t)n < len ? (size_t)n : len - 1;
}

void reqlog_write(enum log_format fmt, const struct reqlog *r)
{
	char line[768];
	size_t n = reqlog_format(fmt, r, line, sizeof(line));

	if (n && line[n - 1] != '\n')
		line[n - 1] = '\n';   /* cut short: still one line */
	fwrite(line, 1, n, stderr);
}
