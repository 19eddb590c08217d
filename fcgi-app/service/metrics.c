/* Counters and the /metrics exposition: see metrics.h.
 *
 * Why fixed tables of atomics: every request counts itself, so counting
 * must cost less than anything else the request does; with relaxed atomic
 * adds on static cells no worker ever waits for another, and a scrape reads
 * the cells without stopping anyone (a scrape may see one request counted in
 * _count but not yet in _sum: Prometheus tolerates that, a lock would cost
 * every request).  Histogram buckets are kept per bucket and summed into
 * Prometheus's cumulative form when rendered.
 *
 * HTTP status codes and helper op names are claimed into small per-slot
 * tables with a compare-and-swap the first time each is seen, so a code
 * added anywhere later (409, 507, ...) is counted under its own value without
 * a list to keep up to date here. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "metrics.h"
#include "protocol.h"

/* 1 ms ... 10 min: an exec of `true` is a few ms, exec_timeout_max is 10m. */
static const uint64_t bucket_ns[] = {
	1000000ull, 2500000ull, 5000000ull, 10000000ull, 25000000ull, 50000000ull,
	100000000ull, 250000000ull, 500000000ull, 1000000000ull, 2500000000ull,
	5000000000ull, 10000000000ull, 30000000000ull, 60000000000ull,
	120000000000ull, 300000000000ull, 600000000000ull,
};
#define NBUCKETS (sizeof(bucket_ns) / sizeof(bucket_ns[0]))

struct histogram {
	atomic_uint_fast64_t bucket[NBUCKETS + 1];   /* last: above every bound */
	atomic_uint_fast64_t sum_ns;
};

#define CODES_PER_SLOT 16
struct code_cell {
	atomic_int code;                 /* 0 = free; -1 = "other" (table full) */
	atomic_uint_fast64_t count;
};

struct route_stats {
	struct code_cell codes[CODES_PER_SLOT];
	struct histogram duration;
};

#define HELPER_OPS_MAX 32
struct op_cell {
	_Atomic(char *) op;              /* NULL = free; strdup'd, never freed */
	atomic_uint_fast64_t count;
};

static struct route_stats routes[METRICS_ROUTE_SLOTS];
static atomic_uint_fast64_t exec_total[EXEC_OUTCOMES];
static struct histogram exec_duration;
static atomic_uint_fast64_t room_starts[ROOM_START_KINDS];
static atomic_uint_fast64_t idle_stops;
/* [export, import][done, refused, failed] */
static atomic_uint_fast64_t transfers[2][3];
static const char *const transfer_result_names[3] = { "done", "refused", "failed" };
static struct op_cell helper_errors[HELPER_OPS_MAX];
static atomic_long processes_running;
static atomic_uint_fast64_t llm_requests[LLM_OUTCOMES];
static atomic_uint_fast64_t snap_ops[SNAP_KINDS][2];   /* [kind][ok] */
static struct histogram snap_frozen;
static _Thread_local uint64_t thread_helper_ns;

static const char *const exec_outcome_names[EXEC_OUTCOMES] = {
	"ok", "nonzero", "timeout", "error" };
static const char *const room_start_names[ROOM_START_KINDS] = { "new", "restart" };
static const char *const llm_outcome_names[LLM_OUTCOMES] = { "ok", "error" };
static const char *const snap_kind_names[SNAP_KINDS] = { "snapshot", "restore", "fork", "delete" };

#define INC(cell, n) atomic_fetch_add_explicit(&(cell), (n), memory_order_relaxed)
#define GET(cell) atomic_load_explicit(&(cell), memory_order_relaxed)

uint64_t metrics_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void histogram_observe(struct histogram *h, uint64_t ns)
{
	size_t i = 0;

	while (i < NBUCKETS && ns > bucket_ns[i])
		i++;
	INC(h->bucket[i], 1);
	INC(h->sum_ns, ns);
}

/* The cell counting `code` in cells[0..n), claimed if new; the "other"
 * cell (the last) when the table is full. */
static struct code_cell *code_cell(struct code_cell *cells, size_t n, int code)
{
	for (size_t i = 0; i + 1 < n; i++) {
		int seen = GET(cells[i].code);

		if (seen == 0) {
			int expect = 0;

			if (atomic_compare_exchange_strong(&cells[i].code, &expect, code))
				return &cells[i];
			seen = expect;
		}
		if (seen == code)
			return &cells[i];
	}
	atomic_store(&cells[n - 1].code, -1);
	return &cells[n - 1];
}

void metrics_http_request(int slot, int status, uint64_t ns)
{
	struct route_stats *r;

	if (slot < 0 || slot >= METRICS_ROUTE_SLOTS)
		return;
	r = &routes[slot];
	INC(code_cell(r->codes, CODES_PER_SLOT, status)->count, 1);
	histogram_observe(&r->duration, ns);
}

void metrics_exec_done(enum exec_outcome outcome, uint64_t ns)
{
	if ((unsigned)outcome >= EXEC_OUTCOMES)
		return;
	INC(exec_total[outcome], 1);
	histogram_observe(&exec_duration, ns);
}

void metrics_room_started(enum room_start_kind kind)
{
	if ((unsigned)kind < ROOM_START_KINDS)
		INC(room_starts[kind], 1);
}

void metrics_snapshot_op(enum snap_kind kind, bool ok, uint64_t frozen_us)
{
	if ((unsigned)kind >= SNAP_KINDS)
		return;
	INC(snap_ops[kind][ok], 1);
	if (ok && frozen_us)
		histogram_observe(&snap_frozen, frozen_us * 1000);
}

void metrics_transfer(bool import, int status)
{
	int r = status < 300 ? 0 : status < 500 || status == 507 ? 1 : 2;
	INC(transfers[import ? 1 : 0][r], 1);
}

void metrics_idle_stops_add(unsigned n)
{
	INC(idle_stops, n);
}

void metrics_helper_error(const char *op)
{
	if (!op || !*op)
		op = "unknown";
	for (size_t i = 0; i < HELPER_OPS_MAX; i++) {
		char *seen = atomic_load(&helper_errors[i].op);

		if (!seen) {
			char *mine = strdup(op), *expect = NULL;

			if (!mine)
				return;
			if (atomic_compare_exchange_strong(&helper_errors[i].op, &expect, mine))
				seen = mine;
			else {
				free(mine);
				seen = expect;
			}
		}
		if (strcmp(seen, op) == 0) {
			INC(helper_errors[i].count, 1);
			return;
		}
	}
	/* more than HELPER_OPS_MAX op names: the program has no such list */
}

void metrics_processes_running_add(int delta)
{
	atomic_fetch_add_explicit(&processes_running, delta, memory_order_relaxed);
}

void metrics_llm_request(enum llm_outcome outcome)
{
	if ((unsigned)outcome < LLM_OUTCOMES)
		INC(llm_requests[outcome], 1);
}

enum exec_outcome metrics_exec_outcome(const struct helper_exec_ans *a)
{
	if (!a)
		return EXEC_ERROR;
	if (a->timed_out)
		return EXEC_TIMEOUT;
	return WIFEXITED(a->wait_status) && WEXITSTATUS(a->wait_status) == 0 ? EXEC_OK : EXEC_NONZERO;
}

void metrics_helper_call_done(uint32_t op, bool ok, const struct helper_exec_ans *exec,
			      int err_status, uint64_t ns)
{
	bool failed = !ok && err_status >= 500;

	thread_helper_ns += ns;
	if (failed)
		metrics_helper_error(helper_op_name(op));
	/* an exec the helper refused as the client's doing (room limit,
	 * request too large) never ran: it is only an HTTP answer */
	if (op == HOP_EXEC && (ok || failed))
		metrics_exec_done(ok ? metrics_exec_outcome(exec) : EXEC_ERROR, ns);
}

uint64_t metrics_helper_time_take(void)
{
	uint64_t ns = thread_helper_ns;

	thread_helper_ns = 0;
	return ns;
}

void metrics_reset(void)
{
	memset(routes, 0, sizeof(routes));
	memset(exec_total, 0, sizeof(exec_total));
	memset(&exec_duration, 0, sizeof(exec_duration));
	memset(room_starts, 0, sizeof(room_starts));
	atomic_store(&idle_stops, 0);
	for (int i = 0; i < 2; i++)
		for (int k = 0; k < 3; k++)
			atomic_store(&transfers[i][k], 0);
	for (size_t i = 0; i < HELPER_OPS_MAX; i++) {
		free(atomic_exchange(&helper_errors[i].op, NULL));
		atomic_store(&helper_errors[i].count, 0);
	}
	atomic_store(&processes_running, 0);
	memset(llm_requests, 0, sizeof(llm_requests));
	thread_helper_ns = 0;
}

/* ---- the exposition --------------------------------------------------- */

/* A label value in the text format: backslash, quote and newline escaped. */
static void put_label(FILE *f, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\' || *s == '"')
			fprintf(f, "\\%c", *s);
		else if (*s == '\n')
			fputs("\\n", f);
		else
			fputc(*s, f);
	}
}

static void put_family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void put_seconds(FILE *f, uint64_t ns)
{
	fprintf(f, "%llu.%09llu", (unsigned long long)(ns / 1000000000ull),
		(unsigned long long)(ns % 1000000000ull));
}

/* One histogram's series; labels is "" or `key="value",` pairs ending in ','. */
static void put_histogram(FILE *f, const char *name, const char *labels,
			  const struct histogram *h)
{
	uint64_t cum = 0;
	size_t i;
	char le[32];

	for (i = 0; i <= NBUCKETS; i++) {
		cum += GET(h->bucket[i]);
		if (i < NBUCKETS)
			snprintf(le, sizeof(le), "%g", (double)bucket_ns[i] / 1e9);
		else
			snprintf(le, sizeof(le), "+Inf");
		fprintf(f, "%s_bucket{%sle=\"%s\"} %llu\n", name, labels, le,
			(unsigned long long)cum);
	}
	fprintf(f, "%s_sum", name);
	if (*labels)
		fprintf(f, "{%.*s}", (int)strlen(labels) - 1, labels);
	fputc(' ', f);
	put_seconds(f, GET(h->sum_ns));
	fprintf(f, "\n%s_count", name);
	if (*labels)
		fprintf(f, "{%.*s}", (int)strlen(labels) - 1, labels);
	fprintf(f, " %llu\n", (unsigned long long)cum);
}

static uint64_t histogram_count(const struct histogram *h)
{
	uint64_t n = 0;

	for (size_t i = 0; i <= NBUCKETS; i++)
		n += GET(h->bucket[i]);
	return n;
}

/* `route="...",method="...",` for a slot, into buf (NUL-terminated). */
static bool slot_labels(metrics_slot_name_fn *slot_name, int slot, char *buf, size_t len)
{
	const char *route, *method;
	char *text = NULL;
	size_t tlen = 0;
	FILE *f;

	if (!slot_name(slot, &route, &method))
		return false;
	f = open_memstream(&text, &tlen);
	if (!f)
		return false;
	fputs("route=\"", f);
	put_label(f, route);
	fputs("\",method=\"", f);
	put_label(f, method);
	fputs("\",", f);
	fclose(f);
	snprintf(buf, len, "%s", text ? text : "");
	free(text);
	return text != NULL;
}

static void put_http(FILE *f, metrics_slot_name_fn *slot_name)
{
	char labels[512];
	int slot;

	put_family(f, "roombox_http_requests_total", "counter",
		   "HTTP requests answered, by route pattern, method and status code.");
	for (slot = 0; slot < METRICS_ROUTE_SLOTS; slot++) {
		if (!histogram_count(&routes[slot].duration) ||
		    !slot_labels(slot_name, slot, labels, sizeof(labels)))
			continue;
		for (size_t i = 0; i < CODES_PER_SLOT; i++) {
			int code = GET(routes[slot].codes[i].code);
			uint64_t n = GET(routes[slot].codes[i].count);
			char c[16];

			if (!code || !n)
				continue;
			if (code < 0)
				snprintf(c, sizeof(c), "other");
			else
				snprintf(c, sizeof(c), "%d", code);
			fprintf(f, "roombox_http_requests_total{%scode=\"%s\"} %llu\n",
				labels, c, (unsigned long long)n);
		}
	}
	put_family(f, "roombox_http_request_duration_seconds", "histogram",
		   "Time from a request's start to its answer, by route pattern and method.");
	for (slot = 0; slot < METRICS_ROUTE_SLOTS; slot++)
		if (histogram_count(&routes[slot].duration) &&
		    slot_labels(slot_name, slot, labels, sizeof(labels)))
			put_histogram(f, "roombox_http_request_duration_seconds", labels,
				      &routes[slot].duration);
}

static void put_labelled_counters(FILE *f, const char *name, const char *label,
				  const char *const *values, atomic_uint_fast64_t *cells,
				  size_t n)
{
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%s{%s=\"%s\"} %llu\n", name, label, values[i],
			(unsigned long long)GET(cells[i]));
}

static void put_rooms(FILE *f, const struct metrics_rooms *rooms)
{
	if (!rooms || !rooms->known)
		return;
	put_family(f, "roombox_rooms", "gauge", "Rooms that exist, by the state of their jail.");
	fprintf(f, "roombox_rooms{state=\"running\"} %ld\n", rooms->running);
	fprintf(f, "roombox_rooms{state=\"stopped\"} %ld\n", rooms->stopped);
}

static void put_helper_errors(FILE *f)
{
	put_family(f, "roombox_helper_errors_total", "counter",
		   "Helper calls that failed (spawn, timeout, bad reply, sandbox failure), by op.");
	for (size_t i = 0; i < HELPER_OPS_MAX; i++) {
		char *op = atomic_load(&helper_errors[i].op);

		if (!op)
			break;
		fputs("roombox_helper_errors_total{op=\"", f);
		put_label(f, op);
		fprintf(f, "\"} %llu\n", (unsigned long long)GET(helper_errors[i].count));
	}
}

static void put_snapshots(FILE *f)
{
	put_family(f, "roombox_snapshot_ops_total", "counter",
		   "Snapshots taken, restored, forked and deleted, by outcome (error: refused or failed).");
	for (int k = 0; k < SNAP_KINDS; k++)
		for (int ok = 1; ok >= 0; ok--)
			fprintf(f, "roombox_snapshot_ops_total{op=\"%s\",outcome=\"%s\"} %llu\n",
				snap_kind_names[k], ok ? "ok" : "error",
				(unsigned long long)GET(snap_ops[k][ok]));
	put_family(f, "roombox_snapshot_frozen_seconds", "histogram",
		   "How long a room's processes were frozen for a snapshot's or a fork's cut.");
	put_histogram(f, "roombox_snapshot_frozen_seconds", "", &snap_frozen);
}

static void put_all(FILE *f, const struct metrics_rooms *rooms, metrics_slot_name_fn *slot_name)
{
	put_family(f, "roombox_build_info", "gauge", "The roombox version running (always 1).");
	fputs("roombox_build_info{version=\"", f);
	put_label(f, ROOMBOX_VERSION);
	fputs("\"} 1\n", f);
	put_http(f, slot_name);
	put_family(f, "roombox_exec_total", "counter",
		   "Execs run in rooms, by outcome (ok: exit 0; nonzero; timeout; error: the sandbox failed).");
	put_labelled_counters(f, "roombox_exec_total", "outcome", exec_outcome_names,
			      exec_total, EXEC_OUTCOMES);
	put_family(f, "roombox_exec_duration_seconds", "histogram",
		   "Time of an exec's helper call, from spawn to answer.");
	put_histogram(f, "roombox_exec_duration_seconds", "", &exec_duration);
	put_rooms(f, rooms);
	put_family(f, "roombox_room_starts_total", "counter",
		   "Room jails started: new rooms, and stopped rooms started again.");
	put_labelled_counters(f, "roombox_room_starts_total", "kind", room_start_names,
			      room_starts, ROOM_START_KINDS);
	put_family(f, "roombox_idle_stops_total", "counter",
		   "Rooms stopped after idle_timeout without activity.");
	fprintf(f, "roombox_idle_stops_total %llu\n", (unsigned long long)GET(idle_stops));
	put_family(f, "roombox_exports_total", "counter",
		   "Room exports (GET /api/rooms/{id}/export), by result: done, refused (4xx), failed.");
	for (int i = 0; i < 3; i++)
		fprintf(f, "roombox_exports_total{result=\"%s\"} %llu\n", transfer_result_names[i],
			(unsigned long long)GET(transfers[0][i]));
	put_family(f, "roombox_imports_total", "counter",
		   "Room imports (PUT /api/rooms/{id}/import), by result: done, refused (4xx, 507), failed.");
	for (int i = 0; i < 3; i++)
		fprintf(f, "roombox_imports_total{result=\"%s\"} %llu\n", transfer_result_names[i],
			(unsigned long long)GET(transfers[1][i]));
	put_helper_errors(f);
	put_family(f, "roombox_processes_running", "gauge",
		   "Managed processes (sandbox/processes) running in all rooms.");
	fprintf(f, "roombox_processes_running %ld\n", GET(processes_running));
	put_family(f, "roombox_llm_requests_total", "counter",
		   "Model requests made for room messages, by outcome.");
	put_labelled_counters(f, "roombox_llm_requests_total", "outcome", llm_outcome_names,
			      llm_requests, LLM_OUTCOMES);
	put_snapshots(f);
}

char *metrics_render(const struct metrics_rooms *rooms, metrics_slot_name_fn *slot_name,
		     size_t *len)
{
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);

	if (!f)
		return NULL;
	put_all(f, rooms, slot_name);
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	*len = n;
	return text;
}
