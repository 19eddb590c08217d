/* roombox-fcgi: the state every request handler shares, one request, one
 * response, and the handlers the route table (router.c) points at.
 *
 * Mutable state the threads share: the atomic exec counter here, the count
 * of helper calls running (helper_client.c, atomic), the token cache
 * (auth.c, behind its own mutex), the metrics counters (metrics.c,
 * relaxed atomics), the preview relays' slot table and the exposures'
 * mutex (preview_relay.c, preview.c), the rooms' counts of workers held
 * (fair_share.c, behind its mutex) and main.c's stop flag and lock; the
 * message store shares nothing in memory (its locks are flock()s on each
 * room's file).  The configuration and the cached cgroup mode are written
 * once before the worker threads start and only read afterwards.
 * Anything added to this list is added here. */
#ifndef ROOMBOX_FCGI_APP_H
#define ROOMBOX_FCGI_APP_H

#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <json-c/json.h>

#include "config.h"
#include "helper_client.h"
#include "roomid.h"

#ifndef ROOMBOX_VERSION
#define ROOMBOX_VERSION "0.0.0"
#endif

struct auth_tokens;
struct fair_share;
struct http_input;
struct http_output;

struct app {
	struct config cfg;
	char config_path[PATH_MAX];   /* passed to the helper as -c */
	struct auth_tokens *tokens;   /* NULL when auth = none */
	atomic_int execs_running;     /* for max_concurrent_execs */
	struct fair_share *room_workers; /* workers held per room; NULL = no bound */
	bool room_workers_park;       /* a request past its room's share may wait,
				       * parked without a worker (main.c) */
	char cgroup_mode[16];         /* helper op "info" at start, or "unknown" */
	char dns[CONFIG_LIST_MAX][16]; /* info's usable name servers (egress) */
	int dns_count;
	bool log_requests;            /* one line per request on stderr */
	char *llm_key;                /* llm_key_file's token, or NULL (agent.c) */
	char *llm_prompt;             /* the system prompt (agent.c) */
	atomic_int agent_calls;       /* model calls in flight (agent.c) */
};

static inline struct helper_target app_helper(const struct app *app)
{
	return (struct helper_target){ app->cfg.helper, app->config_path, app->cfg.max_body };
}

/* One HTTP request after routing. */
struct request {
	struct app *app;
	const char *method;
	const char *path;             /* request URI without its query string */
	char room[ROOM_ID_MAX + 1];   /* the {roomId} segment, "" if none */
	json_object *body;            /* parsed body (routes with ROUTE_BODY) */
	const struct http_input *in;  /* its parameters (headers), e.g. Accept */
	const char *rest;             /* a {path*} route's rest of the path, raw */
	bool move;                    /* a move's signed export or import (cluster) */
};

/* One answer: always a JSON object (see http.c for how it is written). */
struct response {
	int status;
	json_object *body;            /* owned; NULL until a handler sets it */
	char allow[64];               /* Allow: for 405, "" otherwise */
	int retry_after;              /* Retry-After: seconds, 0 = none */
	bool www_authenticate;        /* WWW-Authenticate: Bearer */
	/* Set instead of body by a handler that answers later from a thread
	 * of its own (agent.c): main.c calls later(later_job, out) with the
	 * connection, or with out NULL when it cannot hand it over. */
	void (*later)(void *job, const struct http_output *out);
	void *later_job;
	/* Set by a handler that has written its whole answer itself through
	 * rq->in->out (status says what it sent, for the log); body unused. */
	bool streamed;
	/* ... and it failed on its way (a download short of the
	 * Content-Length it announced, an export's archive broken off):
	 * main.c makes sure the web server takes it for a failure */
	bool streamed_short;
	char request_id[24];          /* X-Request-Id: (router.c), "" = none */
	/* The room's share of the workers (router.c, main.c): set before
	 * routing, how this request gets its worker; set by the router, the
	 * room whose share it waits for (parked, its body unread). */
	enum { ROOM_WORKER_TAKE, ROOM_WORKER_HELD, ROOM_WORKER_REFUSE } room_worker;
	bool placed;                  /* cluster mode: the request placed its room
					 (carried across parking, as room_worker) */
	char park[ROOM_ID_MAX + 1];   /* "" = not parked */
	char *text;                   /* owned; set instead of body for an answer
					* that is not JSON (GET /metrics) */
	size_t text_len;
	const char *content_type;     /* of text */
};

typedef void route_handler(struct request *rq, struct response *rs);

/* health.c */
route_handler api_health_get;
/* rooms.c */
route_handler api_rooms_list, api_rooms_create, api_rooms_get, api_rooms_cleanup, api_rooms_patch;
route_handler api_processes_kill_all, api_rooms_restart;
/* exec.c */
route_handler api_exec_post;
/* messages.c */
route_handler api_messages_list, api_messages_post;
/* metrics_scrape.c */
route_handler api_metrics_get;
/* openapi.c */
route_handler api_openapi_get;
/* rooms.c */
route_handler api_rooms_stop;
/* A read that must not create the room: true when it exists, else false
 * with rs set (404 for a room that does not exist). */
bool room_exists_or_answer(struct request *rq, struct response *rs);
route_handler api_files_get, api_files_put, api_files_delete, api_files_move;
/* The room path of a files {path} as sent: percent-decoded, absolute or
 * relative to /workspace.  malloc'd, or NULL (bad escape, NUL, too long). */
char *files_room_path(const char *raw);
/* processes.c */
route_handler api_procs_list, api_procs_start, api_procs_get, api_procs_delete, api_procs_stdin;
/* preview.c */
route_handler api_ports_post, api_ports_list, api_ports_delete;

#endif
