/* roombox-fcgi: the HTTP side of roombox.
 *
 * Theory of operation
 * -------------------
 * One process, running as the unprivileged service user (roombox), speaks
 * FastCGI to a web server (nginx or lighttpd) and never touches a namespace,
 * a cgroup or a room's files.  Everything a sandbox needs is done by the
 * setuid helper, which this process runs once per operation
 * (helper_client.c): a request record on the helper's stdin, an answer record on
 * its stdout (common/protocol.h).  That pipe is the only thing between the
 * two programs.
 *
 * Threads:
 *   main      loads the configuration, opens the socket, starts the others,
 *             then waits in sigwait() for SIGTERM/SIGINT;
 *   workers   (`workers` of them) each wait, on one epoll set they share,
 *             for a new connection or a request on a kept one (see "kept
 *             connections" below: an idle one holds no worker), read it
 *             with FCGX_Accept_r into their own FCGX_Request and serve one
 *             request at a time from start to
 *             finish (router.c: route, authenticate, read the body, call a
 *             handler which may spawn the helper, write the answer).  A slow
 *             exec holds one worker; requests for other rooms go to the
 *             others, so they are never delayed by it.  A room holds at
 *             most `room_workers` of them at once (fair_share.h: its next
 *             request waits, parked without a worker, while the room's
 *             requests end, else 503 after PARK_MS), and free workers are
 *             kept back for rooms that hold
 *             none and for requests that name no room, so whatever a room
 *             does, other rooms and /api/health keep answering;
 *   agent     (one per model call in flight, at most AGENT_CALLS_MAX,
 *             detached) with llm_url and llm_model set, a user message is
 *             routed and stored by a worker, which then hands the whole
 *             FCGX_Request to a thread of its own (agent.c) and takes a
 *             fresh one: a model call may take minutes and never holds a
 *             worker, so execs of every room go on while models think;
 *   park      releases the requests that wait for their room's share of
 *             the workers, parked without a worker, each to a thread of
 *             its own once a share is free, or answers them 503 itself
 *             when their room has not moved for PARK_MS (see "requests
 *             waiting" below);
 *   idle      when idle_timeout > 0 (or room_limits_max lets a room have
 *             one), runs helper op "stop-idle" every min(idle_timeout / 4,
 *             30 s), so idle rooms (each by its own idleTimeout) release their
 *             processes and mounts (files are kept); rooms running a
 *             managed process are named in its keep list and stay;
 *   logger    (process_log.c) reads the pipes of every managed process into
 *             its logs on disk and to its live log readers;
 *   cluster   with cluster_etcd set, two (cluster.c): one keeps this host's
 *             lease in etcd alive, one follows a watch of the rooms'
 *             records into the cache every request for a room is checked
 *             against before its handler runs (421 for another host's);
 *   preview   accepts on preview.sock (beside `socket`), where the web
 *             server proxies preview URLs, and starts one detached relay
 *             thread per connection, at most PREVIEW_RELAYS_MAX
 *             (preview_relay.c): plain bytes both ways, WebSockets included,
 *             to a socket the helper connected inside the room.
 *
 * Shared state: the configuration and the cached cgroup mode (written
 * before the threads start, read-only after), the exec counter (atomic),
 * the metrics counters (metrics.c, atomics), the token cache (auth.c,
 * behind a mutex) and the managed processes (process_store.c, behind a mutex).  Each request's state lives in
 * its own struct request / struct response.
 *
 * The socket: when started by spawn-fcgi or lighttpd's bin-path, fd 0 is
 * already a listening socket and is used as is.  Otherwise the process
 * listens on `socket` from the configuration: a stale socket file left by
 * a crash is removed first (a live one, answering connect(), is an error:
 * another instance runs), and the new one is created mode 0660 (umask set
 * around bind, then chmod), owner the service user, group the process's
 * group.  The web server must therefore share that group: run the service
 * with a group the web server user belongs to (e.g. systemd
 * Group=/SupplementaryGroups=), or make the socket's directory setgid to the
 * web server's group so the socket inherits it.  Never put the web server
 * in the helper's group (roombox): that group may run the setuid helper.
 *
 * Signals: SIGPIPE is ignored (a client gone mid-answer is not fatal).
 * SIGTERM/SIGINT are blocked in every thread and taken by main with
 * sigwait(): it stops accepting (the listening socket is shut down, which
 * wakes every worker waiting for a connection, and so are the idle kept
 * connections), runs helper op "stop-all" (rooms
 * stop with the service), gives running requests a few seconds,
 * and exits 0.  The helper gets every signal back at its default, unblocked.
 */
#include <errno.h>
#include <fastcgi.h>
#include <fcgiapp.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <time.h>
#include <unistd.h>

#include "agent.h"
#include "cluster.h"
#include "clock.h"
#include "app.h"
#include "process_store.h"
#include "processes.h"
#include "store.h"
#include "auth.h"
#include "fair_share.h"
#include "exec_channels.h"
#include "helper_client.h"
#include "protocol.h"
#include "http.h"
#include "metrics.h"
#include "preview_relay.h"
#include "term_ws.h"
#include "label_store.h"
#include "preview_store.h"
#include "router.h"

#define LISTEN_BACKLOG 1024   /* as lighttpd's fastcgi listen-backlog: a burst past the workers waits, not a 502 */
#define STOP_ALL_DEADLINE_MS (75 * 1000)   /* inside systemd's default 90 s */
#define WORKER_JOIN_SECONDS 5

static struct app app;
static int listen_fd = -1;
static bool socket_created;

/* Stopping: set once by main, read by the workers and the idle thread. */
static atomic_bool stopping;
static pthread_mutex_t stop_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cond;

static void usage(FILE *f)
{
	fprintf(f, "usage: roombox-fcgi [-f] [-c CONFIG]\n"
		"roombox's API: a FastCGI server behind nginx or lighttpd (see roombox-fcgi(8))\n"
		"  -c CONFIG  configuration file (default %s)\n"
		"  -f         stay in the foreground (the only mode; accepted for init scripts)\n"
		"  -h, --help this text\n",
		ROOMBOX_CONF);
}

/* ---- the listening socket ---- */

static bool fd0_is_listening_socket(void)
{
	int v = 0;
	socklen_t len = sizeof(v);

	return getsockopt(0, SOL_SOCKET, SO_ACCEPTCONN, &v, &len) == 0 && v;
}

/* Remove a socket file nobody listens on any more; refuse a live one. */
static int remove_stale_socket(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) < 0)
		return errno == ENOENT ? 0 : (fprintf(stderr, "roombox-fcgi: %s: %s\n",
						       path, strerror(errno)), -1);
	if (!S_ISSOCK(st.st_mode)) {
		fprintf(stderr, "roombox-fcgi: %s exists and is not a socket\n", path);
		return -1;
	}
	if (strlen(path) >= sizeof(sa.sun_path)) {
		fprintf(stderr, "roombox-fcgi: socket path too long: %s\n", path);
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		fprintf(stderr, "roombox-fcgi: socket: %s\n", strerror(errno));
		return -1;
	}
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa));
	close(fd);
	if (rc == 0) {
		fprintf(stderr, "roombox-fcgi: %s: another process is listening there\n", path);
		return -1;
	}
	if (unlink(path) < 0 && errno != ENOENT) {
		fprintf(stderr, "roombox-fcgi: remove stale socket %s: %s\n", path, strerror(errno));
		return -1;
	}
	return 0;
}

static int open_listener(const char *path)
{
	mode_t old;
	int fd;

	if (fd0_is_listening_socket())
		return 0;
	if (path[0] != '/' || strchr(path, ':')) {
		/* libfcgi would read "host:port" as TCP */
		fprintf(stderr, "roombox-fcgi: socket must be an absolute path without ':': %s\n", path);
		return -1;
	}
	if (remove_stale_socket(path) < 0)
		return -1;
	old = umask(0117);
	fd = FCGX_OpenSocket(path, LISTEN_BACKLOG);
	umask(old);
	if (fd < 0) {
		fprintf(stderr, "roombox-fcgi: cannot listen on %s\n", path);
		return -1;
	}
	socket_created = true;
	if (chmod(path, 0660) < 0)
		fprintf(stderr, "roombox-fcgi: chmod 0660 %s: %s\n", path, strerror(errno));
	fcntl(fd, F_SETFD, FD_CLOEXEC);
	return fd;
}

/* ---- workers ---- */

static const char *fcgi_param(void *ctx, const char *name)
{
	return FCGX_GetParam(name, ((FCGX_Request *)ctx)->envp);
}

static int fcgi_read_wait(void *ctx, int ms);

static int fcgi_read(void *ctx, char *buf, int n)
{
	FCGX_Request *req = ctx;
	int got = FCGX_GetStr(buf, n, req->in);

	if (got == 0 && FCGX_GetError(req->in))
		return -1;
	return got;
}

static bool hand_off(FCGX_Request **reqp, struct response *rs);
static int conn_write(void *ctx, const char *buf, size_t n);
static int conn_flush(void *ctx);
static int conn_sendfile(void *ctx, int fd, uint64_t n, long deadline_ms);

static bool park(FCGX_Request **reqp, const char *room, bool placed);
static bool parked_conn_gone(const FCGX_Request *req);

static bool fcgi_gone(void *ctx)
{
	return parked_conn_gone(ctx);
}

/* A streamed answer that failed on its way (a download short of its
 * Content-Length, an export whose archive broke off) must reach the client
 * as a failure, never as a complete-looking answer.  END_REQUEST cannot
 * say so, and neither can the connection's end alone: nginx 1.22 takes an
 * end without END_REQUEST for the answer's end wherever it has no length
 * to check (an export: chunked; unbuffered, so it does not count its
 * records) and closes it with its last chunk, as if whole; on a kept
 * connection (fastcgi_keep_conn) it even takes END_REQUEST after a short
 * download for complete and leaves the client waiting for the rest.  A
 * record it cannot parse (version 0: none such) it takes for the failure
 * it is, whatever its buffering, and cuts the client's connection
 * without the last chunk; lighttpd does the same on the connection's end.
 * No race: nginx keeps a connection only after an END_REQUEST. */
static void answer_cut(FCGX_Request *req)
{
	static const unsigned char broken[8];   /* a record header of version 0 */
	FCGX_FFlush(req->out);    /* what the client already has a right to */
	if (write(req->ipcFd, broken, sizeof(broken)) < 0) {
		/* the web server is gone already: nothing left to tell */
	}
	shutdown(req->ipcFd, SHUT_RDWR);
	FCGX_Detach(req);
	req->keepConnection = 0;  /* closed at the request's end */
}

/* true when the request was handed to another thread, or parked (*reqp is
 * then a fresh one for this worker).  how: how it gets its room's worker
 * (struct response's room_worker). */
static bool serve_one(FCGX_Request **reqp, int how, bool placed)
{
	FCGX_Request *req = *reqp;
	struct http_output direct = { conn_write, conn_flush, NULL, req, conn_sendfile };
	struct http_input in = { fcgi_param, fcgi_read, req, &direct, fcgi_read_wait, fcgi_gone };
	struct response rs = { .status = 500, .room_worker = how, .placed = placed };
	size_t len = 0;
	char *out;

	router_serve(&app, &in, &rs);
	if (rs.park[0])   /* no room to wait in: served again, to its 503 */
		return park(reqp, rs.park, rs.placed) || serve_one(reqp, ROOM_WORKER_REFUSE, rs.placed);
	if (rs.later && hand_off(reqp, &rs))
		return true;
	if (rs.streamed) {
		if (rs.streamed_short)
			answer_cut(req);
		json_object_put(rs.body);
		free(rs.text);
		return false;
	}
	out = http_render(&rs, &len);
	if (out && len <= INT_MAX)
		FCGX_PutStr(out, (int)len, req->out);
	else
		FCGX_PutS("Status: 500 Internal Server Error\r\n"
			  "Content-Type: application/json\r\n\r\n"
			  "{\"error\":\"out of memory\"}\n", req->out);
	free(out);
	json_object_put(rs.body);
	free(rs.text);
	return false;
}

/* Every read of a request's input, after libfcgi has its parameters,
 * waits at most `ms` for the peer: the body (which nginx and lighttpd send
 * whole, at once), the rest of a body-less request's input (the router
 * reads it to its end), and the end of the stream below.  A peer that stops
 * sending gets its answer all the same and gives the worker back. */
#define INPUT_WAIT_MS 10000
#define INPUT_END_MS 200

static int input_wait(FCGX_Request *req, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	return setsockopt(req->ipcFd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static int fcgi_read_wait(void *ctx, int ms)
{
	return input_wait(ctx, ms);
}

/* libfcgi closes a connection gracefully: shutdown(), then wait until
 * nginx closes its end, so that no reset can cost nginx the answer.  A
 * reset only comes from input left unread; when the request's input has
 * been read to its end (one more read finds the end of the stream, which
 * nginx sends right behind the body), a plain close is as safe and spares
 * a wake-up of this thread and a few system calls per request.  That read
 * waits at most INPUT_END_MS (the answer is sent only after it): a client
 * that never ends its input gets the graceful close, as before. */
static void input_end_or_graceful(FCGX_Request *req)
{
	char c;

	if (!FCGX_HasSeenEOF(req->in) && input_wait(req, INPUT_END_MS) == 0)
		FCGX_GetStr(&c, 1, req->in);
	if (FCGX_HasSeenEOF(req->in) && !FCGX_GetError(req->in))
		FCGX_Detach(req);
}

/* The worker accepts its connections itself: libfcgi's FCGX_Accept_r
 * would accept and then read the request's parameters with no timeout, so
 * a peer that stops inside them would hold the worker for ever.  Every read
 * on the connection is bounded from the start (input_wait: a read that
 * times out fails with EAGAIN, which libfcgi takes as the connection's
 * error: it closes it), and FCGX_Accept_r is handed the open connection,
 * which it reads instead of accepting one (as for a peer's kept
 * connection).  The request's listening socket is -1, so that when libfcgi
 * has closed a connection that failed and would accept the next one itself,
 * that fails at once and the worker accepts again. */
static int accept_connection(FCGX_Request *req)
{
	struct sockaddr_storage sa;
	socklen_t len = sizeof(sa);
	int fd = accept4(listen_fd, (struct sockaddr *)&sa, &len, SOCK_CLOEXEC);

	if (fd < 0)
		return -1;   /* EAGAIN: another worker took it */
	if (sa.ss_family == AF_INET || sa.ss_family == AF_INET6) {
		int one = 1;	/* as libfcgi does: answers are not interactive */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	}
	req->ipcFd = fd;
	/* only so that FCGX_Accept_r's own FCGX_Finish_r keeps the connection;
	 * the peer's BEGIN_REQUEST then says whether it is kept */
	req->keepConnection = 1;
	return 0;
}

/* ---- kept connections ----
 *
 * nginx (fastcgi_keep_conn on, an upstream with `keepalive`) asks in each
 * request's BEGIN_REQUEST (FCGI_KEEP_CONN) that its connection stay open
 * for its next request: no socket, connect, accept and close per request.
 * Between two requests such a connection is idle, and two rules keep that
 * sound:
 *
 *  - roombox-fcgi never closes an idle kept connection first.  nginx may
 *    send a request on it at any moment, and a POST that meets a close gets
 *    nginx's 502 (nginx retries only idempotent requests).  So an idle kept
 *    connection has no timeout here: it stays until nginx closes it (its
 *    upstream keepalive_timeout), or the service stops.  Once a request's
 *    first bytes have come, its reads are bounded as a new connection's are
 *    (INPUT_WAIT_MS): a peer stopping inside a request still gives the
 *    worker back.
 *  - an idle kept connection holds no worker.  Each is watched, with the
 *    listening socket, by one epoll set that every free worker waits on
 *    (EPOLLONESHOT: one worker takes one request's connection); a worker
 *    that finishes a request on a kept connection puts it back in the set
 *    and waits again.  So however many connections nginx keeps (`keepalive`
 *    of each of its worker processes), every worker stays free for the next
 *    request, whichever connection it comes on, and a room's share of the
 *    workers (fair_share.h) counts requests only, as before.
 *
 * A request handed to a thread of its own (the agent, a parked request)
 * takes its connection with it; that thread puts it back in the set when
 * the request ends (conn_end), as a worker does.
 *
 * A kept connection goes back to the set only with its request's input read
 * to its end: the next request's records follow right behind it.  What a
 * request left unread is read before END_REQUEST (input_drain); input that
 * does not end closes the connection, which nginx, not having sent the
 * whole request, does not keep either.
 *
 * On stop, the listening socket and every idle kept connection are shut
 * down (nginx closes its end; its next request gets a new connection,
 * refused, as before), and requests under way end as before, their
 * connections then closed.  At most KEPT_MAX idle ones are kept (nginx's
 * `keepalive` times its worker processes stays far below); past that a
 * finished request's connection is closed. */
#define KEPT_MAX 1024

static int conn_ep = -1;              /* the listening socket, the idle kept connections */
static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static int kept_fds[KEPT_MAX];         /* the idle ones, in the set */
static int kept_count;
static bool kept_full_said;

static int conn_watch(int fd, int op)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT, .data.fd = fd };

	return epoll_ctl(conn_ep, op, fd, &ev);
}

/* Put a kept connection, its request ended, in the set; false when it must
 * be closed instead (the service stops, or KEPT_MAX are idle). */
static bool kept_idle(int fd)
{
	bool ok = false;

	pthread_mutex_lock(&kept_lock);
	if (!atomic_load(&stopping) && kept_count < KEPT_MAX) {
		/* armed again (EPOLLONESHOT), or added the first time; bytes
		 * already waiting are reported at once */
		ok = conn_watch(fd, EPOLL_CTL_MOD) == 0 ||
		     (errno == ENOENT && conn_watch(fd, EPOLL_CTL_ADD) == 0);
		if (ok)
			kept_fds[kept_count++] = fd;
		else
			fprintf(stderr, "roombox-fcgi: keep a FastCGI connection: %s\n", strerror(errno));
	} else if (kept_count >= KEPT_MAX && !kept_full_said) {
		kept_full_said = true;
		fprintf(stderr, "roombox-fcgi: warning: %d idle FastCGI connections kept: the next "
			"ones are closed after their request (lower nginx's upstream keepalive)\n",
			KEPT_MAX);
	}
	pthread_mutex_unlock(&kept_lock);
	return ok;
}

/* Take fd, reported by the set, off the idle ones; false when it is not
 * one (the service stops and has shut them all down). */
static bool kept_take(int fd)
{
	bool found = false;

	pthread_mutex_lock(&kept_lock);
	for (int i = 0; i < kept_count && !found; i++)
		if (kept_fds[i] == fd) {
			kept_fds[i] = kept_fds[--kept_count];
			found = true;
		}
	pthread_mutex_unlock(&kept_lock);
	return found;
}

/* On stop: nginx is told at once that its idle connections are gone. */
static void kept_shutdown_all(void)
{
	pthread_mutex_lock(&kept_lock);
	for (int i = 0; i < kept_count; i++)
		shutdown(kept_fds[i], SHUT_RDWR);
	kept_count = 0;
	pthread_mutex_unlock(&kept_lock);
}

static int conn_set_open(void)
{
	int fl = fcntl(listen_fd, F_GETFL);

	/* a worker woken with another for one new connection must not block
	 * in accept() while requests come on kept connections */
	conn_ep = epoll_create1(EPOLL_CLOEXEC);
	if (conn_ep < 0 || fl < 0 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) < 0) {
		fprintf(stderr, "roombox-fcgi: epoll: %s\n", strerror(errno));
		return -1;
	}
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = listen_fd };

	if (epoll_ctl(conn_ep, EPOLL_CTL_ADD, listen_fd, &ev) < 0) {
		fprintf(stderr, "roombox-fcgi: epoll: %s\n", strerror(errno));
		return -1;
	}
	return 0;
}

/* The next connection with a request for this worker: a new one, or a kept
 * one whose next request has begun.  -1 (errno EAGAIN: nothing after all)
 * otherwise; a kept connection nginx has closed is closed here. */
static int next_connection(FCGX_Request *req)
{
	struct epoll_event ev;
	char c;
	int n = epoll_wait(conn_ep, &ev, 1, -1);

	if (n <= 0)
		return -1;
	if (ev.data.fd == listen_fd)
		return accept_connection(req);
	if (!kept_take(ev.data.fd)) {
		errno = EAGAIN;
		return -1;
	}
	/* nginx closing it (RDHUP) is the only other thing that wakes us; a
	 * request comes alone, and is read without a look first */
	ssize_t k = !(ev.events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) ? 1 :
		    recv(ev.data.fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);

	if (k <= 0) {
		if (k < 0 && (errno == EAGAIN || errno == EINTR) && kept_idle(ev.data.fd))
			return -1;   /* woken for nothing: watched on */
		close(ev.data.fd);   /* nginx closed it (its keepalive_timeout) */
		errno = EAGAIN;
		return -1;
	}
	req->ipcFd = ev.data.fd;
	req->keepConnection = 1;
	return 0;
}

/* Read what is left of a kept connection's request input, before its
 * END_REQUEST: nginx sends its next request on the connection only after
 * that, and libfcgi's reads (8 KiB at a time) would take the start of it
 * into this request's buffer, lost.  Mostly that is the end-of-input record
 * alone (the router reads a body, or throws away up to HTTP_DISCARD_MAX of
 * an unwanted one); what a handler left (a request that waited and is
 * refused) is read here, as much again at most.  Each read waits
 * INPUT_END_MS, as the one read of a connection that is not kept does: the
 * answer is not sent before (sent, its client could leave and nginx close
 * the connection before its END_REQUEST).  true when the input ended (the
 * connection is clean for the next request). */
static bool input_drain(FCGX_Request *req)
{
	char buf[8192];
	size_t left = HTTP_DISCARD_MAX;

	if (!FCGX_HasSeenEOF(req->in) && !FCGX_GetError(req->in))
		input_wait(req, INPUT_END_MS);
	while (left && !FCGX_HasSeenEOF(req->in) && !FCGX_GetError(req->in)) {
		int got = FCGX_GetStr(buf, left < sizeof(buf) ? (int)left : (int)sizeof(buf), req->in);

		if (got <= 0)
			break;
		left -= (size_t)got;
	}
	return FCGX_HasSeenEOF(req->in) && !FCGX_GetError(req->in);
}

/* A request's end (its answer written): its connection is closed, or, kept,
 * watched for the next request (see above).  req holds no connection
 * after.  A kept connection whose input did not end is closed as one that
 * is not kept (libfcgi's graceful close): nginx keeps a connection only
 * once it has sent the whole request, and it has not -- more than
 * HTTP_DISCARD_MAX was left, or it has sent nothing for INPUT_END_MS (a
 * client's upload that stalls, passed on unbuffered). */
static void request_end(FCGX_Request *req)
{
	if (req->keepConnection && !input_drain(req))
		req->keepConnection = 0;
	if (!req->keepConnection) {
		input_end_or_graceful(req);
		FCGX_Finish_r(req);   /* closes */
		return;
	}
	FCGX_Finish_r(req);   /* END_REQUEST; kept unless the answer failed */
	if (req->ipcFd >= 0) {
		int fd = req->ipcFd;

		req->ipcFd = -1;
		if (!kept_idle(fd))
			close(fd);
	}
}

/* ---- a request answered by a thread of its own ----
 *
 * A handler that answers later (the agent: a model call may take minutes)
 * sets rs->later.  libfcgi's streams point back at their FCGX_Request, so
 * the request itself moves, by pointer, to that thread; this worker takes a
 * fresh one and goes back to accepting at once. */

/* libfcgi's stream sends STDOUT records of 8 KiB (its buffer); a record may
 * carry 65535 bytes.  A large write (a file's bytes) goes out,
 * after what the stream holds, in records of its own of up to 64 KiB: an
 * eighth of the system calls here and of the web server's reads. */
#define RECORD_MAX 65528          /* a multiple of 8: no padding needed */
#define RECORDS_FROM (16 * 1024)  /* smaller writes stay with libfcgi */

/* All of v[0..n) on fd; 0, or -1 once the peer is gone. */
static int send_all(int fd, struct iovec *v, size_t n)
{
	struct msghdr m = { .msg_iov = v, .msg_iovlen = n };

	while (m.msg_iovlen) {
		ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		while (m.msg_iovlen && (size_t)w >= m.msg_iov->iov_len) {
			w -= (ssize_t)m.msg_iov->iov_len;
			m.msg_iov++;
			m.msg_iovlen--;
		}
		if (m.msg_iovlen) {
			m.msg_iov->iov_base = (char *)m.msg_iov->iov_base + w;
			m.msg_iov->iov_len -= (size_t)w;
		}
	}
	return 0;
}

static void record_header(const FCGX_Request *req, size_t k, unsigned char h[8])
{
	const unsigned char v[8] = { FCGI_VERSION_1, FCGI_STDOUT, (unsigned char)(req->requestId >> 8),
				     (unsigned char)req->requestId, (unsigned char)(k >> 8),
				     (unsigned char)k, 0, 0 };

	memcpy(h, v, sizeof(v));
}

static int send_records(FCGX_Request *req, const char *buf, size_t n)
{
	if (FCGX_FFlush(req->out) != 0)
		return -1;
	while (n) {
		size_t k = n < RECORD_MAX ? n : RECORD_MAX;
		unsigned char h[8];
		struct iovec v[2] = { { h, sizeof(h) }, { (void *)buf, k } };

		record_header(req, k, h);
		if (send_all(req->ipcFd, v, 2) < 0)
			return -1;
		buf += k;
		n -= k;
	}
	return 0;
}

/* A file's bytes as STDOUT records whose contents the kernel moves from
 * the file's pages to the web server's socket: no copy passes through
 * this process (the files API's downloads).  Each piece is first spliced into
 * a pipe (page references, not bytes), and only what the pipe then holds
 * is announced in a record's header: a file that shrank meanwhile ends
 * the stream between two records, never inside one.  The request then
 * ends as usual (END_REQUEST), short of its Content-Length, and the web
 * server cuts the client's connection: a failed download.  (A stream
 * merely closed, or cut inside a record, nginx takes for a finished
 * answer and keeps the client waiting for the rest.) */
static int conn_sendfile(void *ctx, int fd, uint64_t n, long deadline_ms)
{
	FCGX_Request *req = ctx;
	loff_t off = 0;
	int p[2] = { -1, -1 }, rc = -1;
	struct stat st;

	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || pipe2(p, O_CLOEXEC) < 0 ||
	    FCGX_FFlush(req->out) != 0)
		goto out;
	if ((uint64_t)st.st_size < n)
		n = (uint64_t)st.st_size;   /* what it says it holds, no more */
	while (n) {
		if (monotonic_ms() >= deadline_ms)
			goto out;   /* as the exec's deadline ended `cat` before */
		size_t want = n < RECORD_MAX ? (size_t)n : RECORD_MAX;
		ssize_t k = splice(fd, &off, p[1], NULL, want, SPLICE_F_MOVE);
		unsigned char h[8];
		struct iovec v = { h, sizeof(h) };

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			goto out;     /* the file ended early, or cannot be read */
		record_header(req, (size_t)k, h);
		if (send_all(req->ipcFd, &v, 1) < 0)
			goto out;
		for (ssize_t left = k; left;) {
			ssize_t w = splice(p[0], NULL, req->ipcFd, NULL, (size_t)left, SPLICE_F_MOVE);

			if (w < 0 && errno == EINTR)
				continue;
			if (w <= 0)
				goto out;
			left -= w;
		}
		n -= (uint64_t)k;
	}
	rc = 0;
out:
	if (p[0] >= 0) {
		close(p[0]);
		close(p[1]);
	}
	return rc;
}

static int conn_write(void *ctx, const char *buf, size_t n)
{
	FCGX_Request *req = ctx;

	if (n >= RECORDS_FROM)
		return send_records(req, buf, n);
	return n <= INT_MAX && FCGX_PutStr(buf, (int)n, req->out) == (int)n ? 0 : -1;
}

static int conn_flush(void *ctx)
{
	return FCGX_FFlush(((FCGX_Request *)ctx)->out) == 0 ? 0 : -1;
}

static void conn_end(void *ctx)
{
	FCGX_Request *req = ctx;

	request_end(req);   /* a kept connection goes back to the workers' set */
	free(req);
}

static FCGX_Request *request_new(void)
{
	FCGX_Request *req = malloc(sizeof(*req));

	/* no listening socket: the worker accepts itself (accept_connection) */
	if (req && FCGX_InitRequest(req, -1, 0) != 0) {
		free(req);
		req = NULL;
	}
	return req;
}

static bool hand_off(FCGX_Request **reqp, struct response *rs)
{
	FCGX_Request *fresh = request_new();
	struct http_output out = { conn_write, conn_flush, conn_end, *reqp, conn_sendfile };

	if (!fresh) {
		rs->later(rs->later_job, NULL);
		rs->later = NULL;
		response_error(rs, 500, "out of memory");
		return false;
	}
	*reqp = fresh;
	rs->later(rs->later_job, &out);
	return true;
}

/* ---- requests waiting for their room's share of the workers ----
 *
 * A room's requests past its share, or past what the pool has free for it
 * (fair_share.h), are not refused at once: a burst of quick ones (a page's
 * requests) would be.  The request, routed as far as its room and its body
 * unread, is parked here without a worker, the way the agent's requests
 * are handed off; the worker takes a fresh one.  A fresh request of a room
 * that has parked ones parks behind them (first come, first served).
 * Whenever a share is given back, the park thread wakes and releases each
 * parked request whose room has a share free again (taken for it), oldest
 * first, to a thread of its own.  A room's parked requests wait while its
 * requests move (a share of its given back; for a room that holds none,
 * any share given back): one that has seen nothing move for PARK_MS (they
 * hang: a hostile room), or has waited PARK_MAX_MS in all, is answered 503
 * by the park thread itself.  Released requests whose web server has
 * closed the connection meanwhile (its client went away: nginx and
 * lighttpd then close their FastCGI connection) are dropped unrouted, the
 * share given back.  PARK_MAX_MS stays well under the web servers'
 * FastCGI read timeouts (660 s in the example configurations; nginx's
 * default is 60 s), so the client gets our answer, never the web server's
 * 504.  A released request's thread runs only while it holds a share, so
 * threads of workers and of released requests together serve at most
 * `workers` rooms' requests.  At most PARKED_MAX wait, PARKED_ROOM_MAX of
 * one room; past that, 503 at once. */
#define PARK_MS 2000
#define PARK_MAX_MS 30000
#define PARKED_MAX 512
#define PARKED_ROOM_MAX 384
/* a released request's thread: as much stack as a worker's handlers use
 * (64 KiB buffers, a few deep; libcurl), with room to spare */
#define PARKED_STACK (1u << 20)

struct parked {
	struct parked *next;
	FCGX_Request *req;
	char room[ROOM_ID_MAX + 1];
	int64_t until_ms;        /* nothing of its room moved: 503 */
	int64_t last_ms;         /* waited long enough in all: 503 */
	int how;                 /* when released: ROOM_WORKER_HELD or _REFUSE */
	bool placed;             /* it placed its room (cluster mode) */
};
static struct parked *parked_first, **parked_last = &parked_first;
static atomic_int parked_count;   /* read without the lock: a hint */
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cond;

static bool park(FCGX_Request **reqp, const char *room, bool placed)
{
	struct parked *p = calloc(1, sizeof(*p)), *q;
	FCGX_Request *fresh = request_new();
	int of_room = 0;

	pthread_mutex_lock(&park_lock);
	for (q = parked_first; q; q = q->next)
		of_room += strcmp(q->room, room) == 0;
	if (!p || !fresh || parked_count >= PARKED_MAX || of_room >= PARKED_ROOM_MAX) {
		pthread_mutex_unlock(&park_lock);
		free(p);
		free(fresh);
		return false;
	}
	p->req = *reqp;
	p->placed = placed;
	snprintf(p->room, sizeof(p->room), "%s", room);
	p->until_ms = monotonic_ms() + PARK_MS;
	p->last_ms = p->until_ms - PARK_MS + PARK_MAX_MS;
	*parked_last = p;
	parked_last = &p->next;
	parked_count++;
	pthread_cond_signal(&park_cond);
	pthread_mutex_unlock(&park_lock);
	*reqp = fresh;
	return true;
}

/* Take q (the one before it: prev, or NULL) off the list.  Under lock. */
static void unpark(struct parked *prev, struct parked *q)
{
	*(prev ? &prev->next : &parked_first) = q->next;
	if (parked_last == &q->next)
		parked_last = prev ? &prev->next : &parked_first;
	parked_count--;
}

/* Put p back first in line (its thread could not start).  Under lock. */
static void repark(struct parked *p)
{
	p->next = parked_first;
	if (parked_last == &parked_first)
		parked_last = &p->next;
	parked_first = p;
	parked_count++;
}

/* A share of room's was given back (fair_share.h's `given`): its parked
 * requests, and those of rooms holding none (they wait for the pool), wait
 * on; the park thread looks whether one can go. */
static void parked_share_given(const char *room)
{
	if (!atomic_load(&parked_count))
		return;
	pthread_mutex_lock(&park_lock);
	int64_t now = monotonic_ms();

	for (struct parked *q = parked_first; q; q = q->next)
		if (strcmp(q->room, room) == 0 || fair_share_held(app.room_workers, q->room) == 0)
			q->until_ms = now + PARK_MS;
	pthread_cond_signal(&park_cond);
	pthread_mutex_unlock(&park_lock);
}

/* Has room requests parked (fair_share.h's `waiting`)? */
static bool parked_room_waits(const char *room)
{
	bool waits = false;

	if (!atomic_load(&parked_count))
		return false;
	pthread_mutex_lock(&park_lock);
	for (struct parked *q = parked_first; q && !waits; q = q->next)
		waits = strcmp(q->room, room) == 0;
	pthread_mutex_unlock(&park_lock);
	return waits;
}

/* The oldest parked request whose room has a share free again (taken for
 * it), or whose time is up; NULL when none.  Under lock. */
static struct parked *parked_next(void)
{
	struct parked *prev = NULL, *q;
	int64_t now = monotonic_ms();

	for (q = parked_first; q; prev = q, q = q->next) {
		if (fair_share_take(app.room_workers, q->room, false) == FAIR_SHARE_TAKEN)
			q->how = ROOM_WORKER_HELD;
		else if (now >= q->until_ms || now >= q->last_ms)
			q->how = ROOM_WORKER_REFUSE;
		else
			continue;
		unpark(prev, q);
		return q;
	}
	return NULL;
}

/* When the park thread must look again at the latest.  Under lock. */
static int64_t parked_due(void)
{
	int64_t due = monotonic_ms() + PARK_MAX_MS;

	for (struct parked *q = parked_first; q; q = q->next) {
		int64_t at = q->until_ms < q->last_ms ? q->until_ms : q->last_ms;

		if (at < due)
			due = at;
	}
	return due;
}

/* Has the web server closed the request's connection while it waited (its
 * client went away)?  Its input is at most read to the end, never past. */
static bool parked_conn_gone(const FCGX_Request *req)
{
	struct pollfd pfd = { .fd = req->ipcFd, .events = POLLIN | POLLRDHUP };
	char c;

	if (poll(&pfd, 1, 0) <= 0)
		return false;
	if (pfd.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL))
		return true;
	return recv(req->ipcFd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* A released parked request, served to its end (on a thread of its own
 * when it holds a share, else on the park thread: a 503 is quick). */
static void *serve_parked(void *arg)
{
	struct parked *p = arg;
	FCGX_Request *r = p->req;

	if (parked_conn_gone(r)) {
		fprintf(stderr, "roombox-fcgi: room %s: a request that waited for the room's share "
			"of the workers dropped: the web server closed its connection\n", p->room);
		if (p->placed)   /* never run: nothing made its room */
			cluster_room_unmade(&app, p->room, p->how == ROOM_WORKER_HELD);
		if (p->how == ROOM_WORKER_HELD)
			fair_share_give(app.room_workers, p->room);
		FCGX_Detach(r);   /* a plain close: the peer is gone */
		FCGX_Free(r, 1);
		free(r);
		free(p);
		return NULL;
	}
	bool gone = serve_one(&r, p->how, p->placed);

	if (gone)   /* handed to the agent: r is a fresh one */
		free(r);
	else
		conn_end(p->req);
	free(p);
	return NULL;
}

/* The park thread: releases parked requests (see above). */
static void *park_main(void *arg)
{
	pthread_attr_t attr;
	int64_t not_before = 0;   /* a thread could not start: wait a little */

	(void)arg;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, PARKED_STACK);
	pthread_mutex_lock(&park_lock);
	while (!atomic_load(&stopping)) {
		struct parked *p;
		pthread_t t;
		int rc;

		while (monotonic_ms() >= not_before && (p = parked_next())) {
			pthread_mutex_unlock(&park_lock);
			if (p->how != ROOM_WORKER_HELD) {
				serve_parked(p);
			} else if ((rc = pthread_create(&t, &attr, serve_parked, p)) != 0) {
				fprintf(stderr, "roombox-fcgi: room %s: start a thread for a request that "
					"waited: %s; it waits on\n", p->room, strerror(rc));
				fair_share_give(app.room_workers, p->room);
				pthread_mutex_lock(&park_lock);
				repark(p);
				not_before = monotonic_ms() + 100;
				continue;
			}
			pthread_mutex_lock(&park_lock);
		}
		struct timespec at;
		int64_t due = parked_due();

		if (due < not_before)
			due = not_before;
		at.tv_sec = (time_t)(due / 1000);
		at.tv_nsec = (long)(due % 1000) * 1000000L;
		pthread_cond_timedwait(&park_cond, &park_lock, &at);
	}
	pthread_mutex_unlock(&park_lock);
	pthread_attr_destroy(&attr);
	return NULL;
}

static void *worker_main(void *arg)
{
	FCGX_Request *req = request_new();

	if (!req) {
		fprintf(stderr, "roombox-fcgi: FCGX_InitRequest failed\n");
		return NULL;
	}
	while (!atomic_load(&stopping)) {
		if (req->ipcFd < 0 && next_connection(req) < 0) {
			if (atomic_load(&stopping))
				break;
			if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN) {
				fprintf(stderr, "roombox-fcgi: accept: %s\n", strerror(errno));
				usleep(100 * 1000);   /* EMFILE and friends: do not spin */
			}
			continue;
		}
		input_wait(req, INPUT_WAIT_MS);
		if (FCGX_Accept_r(req) < 0 || FCGX_GetError(req->in) != 0) {
			/* libfcgi closed it (no request head, or not FastCGI), or
			 * took a read that timed out between two parameters for
			 * their end: a request cut short is not served */
			if (req->in) {
				FCGX_Detach(req);	/* a plain close: the peer is gone or broken */
				FCGX_Free(req, 1);
			}
			if (!atomic_load(&stopping))
				fprintf(stderr, "roombox-fcgi: FastCGI connection closed: no whole "
					"request parameters (a read waited %d s, or not FastCGI)\n",
					INPUT_WAIT_MS / 1000);
			continue;
		}
		bool gone = serve_one(&req, ROOM_WORKER_TAKE, false);

		if (gone)
			continue;   /* handed off or parked; req is a fresh one */
		/* closes the connection, or keeps it (as its peer asked) for any
		 * worker, now: the next FCGX_Accept_r has no request of ours to
		 * finish, and this worker takes whichever request comes next */
		request_end(req);
	}
	FCGX_Finish_r(req);
	free(req);
	return NULL;
}

/* ---- helper calls of the service itself ---- */

/* Log the rooms a stop-idle / stop-all answer names. */
static void log_stopped(const char *why, const struct helper_stopped *st)
{
	for (size_t i = 0; i < st->count; i++)
		fprintf(stderr, "roombox-fcgi: room %s: stopped (%s)\n", st->ids[i], why);
}

/* stop-idle, sparing the rooms that run managed processes (they are not
 * idle); the number of rooms stopped. */
static unsigned stop_idle(void)
{
	struct helper_target target = app_helper(&app);
	struct helper_error err;
	struct helper_stopped st;
	json_object *busy = procs_busy_rooms();
	size_t n = busy ? json_object_array_length(busy) : 0;
	const char **keep = calloc(n + 1, sizeof(*keep));
	unsigned count = 0;

	for (size_t i = 0; keep && i < n; i++)
		keep[i] = json_object_get_string(json_object_array_get_idx(busy, i));
	if (!keep)
		fprintf(stderr, "roombox-fcgi: %s: out of memory\n", HELPER_OP_STOP_IDLE);
	else if (helper_stop_idle(&target, HELPER_DEFAULT_DEADLINE_MS, keep, n, &st, &err) < 0)
		fprintf(stderr, "roombox-fcgi: %s: %s\n", HELPER_OP_STOP_IDLE, err.message);
	else {
		log_stopped("idle", &st);
		for (size_t i = 0; i < st.count; i++)
			exec_channel_forget(st.ids[i]);
		count = (unsigned)st.count;
		free(st.ids);
	}
	free(keep);
	json_object_put(busy);
	return count;
}

static void cache_cgroup_mode(void)
{
	struct helper_target target = app_helper(&app);
	struct helper_error err;
	struct helper_info_ans info;
	bool ok = helper_info(&target, 30 * 1000, &info, &err) == 0;

	if (!ok)
		fprintf(stderr, "roombox-fcgi: %s: %s\n", HELPER_OP_INFO, err.message);
	snprintf(app.cgroup_mode, sizeof(app.cgroup_mode), "%s", ok ? info.cgroup : "unknown");
	/* network = egress with no name server a room can reach: say so now
	 * (and in /api/health), not at the first failing pip install */
	if (app.cfg.network == NETWORK_EGRESS && ok) {
		for (size_t i = 0; i < info.ndns && i < CONFIG_LIST_MAX; i++) {
			uint32_t a = info.dns[i];

			snprintf(app.dns[app.dns_count++], sizeof(app.dns[0]), "%u.%u.%u.%u",
				 a >> 24, (a >> 16) & 255, (a >> 8) & 255, a & 255);
		}
		if (app.dns_count == 0)
			fprintf(stderr, "roombox-fcgi: warning: network = egress but no name server "
				"is usable from a room (set dns in the configuration)\n");
	}
	if (strcmp(app.cgroup_mode, "none") == 0 || strcmp(app.cgroup_mode, "unknown") == 0)
		fprintf(stderr, "roombox-fcgi: warning: cgroup mode %s: room limits "
			"(memory, pids, cpu) are not enforced\n", app.cgroup_mode);
}

static void *idle_main(void *arg)
{
	/* a room's own idleTimeout (PATCH) may be shorter than the
	 * configuration's, or set where the configuration has none */
	uint64_t period = app.cfg.idle_timeout_ms ? app.cfg.idle_timeout_ms / 4 : 30000;

	if (period > 30000)
		period = 30000;
	if (period < 100)
		period = 100;
	pthread_mutex_lock(&stop_lock);
	while (!atomic_load(&stopping)) {
		struct timespec at;

		clock_gettime(CLOCK_MONOTONIC, &at);
		at.tv_sec += (time_t)(period / 1000);
		at.tv_nsec += (long)(period % 1000) * 1000000L;
		if (at.tv_nsec >= 1000000000L) {
			at.tv_sec++;
			at.tv_nsec -= 1000000000L;
		}
		while (!atomic_load(&stopping) &&
		       pthread_cond_timedwait(&stop_cond, &stop_lock, &at) != ETIMEDOUT)
			;
		if (atomic_load(&stopping))
			break;
		pthread_mutex_unlock(&stop_lock);
		metrics_idle_stops_add(stop_idle());
		pthread_mutex_lock(&stop_lock);
	}
	pthread_mutex_unlock(&stop_lock);
	return NULL;
}

/* ---- start and stop ---- */

/* fds 0-2 closed by whoever started us would be taken by the first
 * open()/pipe() and then mistaken for stdio (by us and by the helper). */
static void ensure_stdio(void)
{
	int fd;

	for (fd = 0; fd <= 2; fd++)
		if (fcntl(fd, F_GETFD) < 0 && errno == EBADF &&
		    open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY) != fd)
			exit(1);
}

static int load_config(const char *path)
{
	char err[512];

	if (config_load(&app.cfg, path, err, sizeof(err)) < 0) {
		fprintf(stderr, "roombox-fcgi: %s\n", err);
		return -1;
	}
	if (!realpath(path, app.config_path))
		snprintf(app.config_path, sizeof(app.config_path), "%s", path);
	if (app.cfg.workers < 1) {
		fprintf(stderr, "roombox-fcgi: %s: workers must be at least 1\n", path);
		return -1;
	}
	return 0;
}

/* Each room's share of the workers: room_workers, by default a quarter of
 * them (at least one); never more than there are. */
static int setup_room_workers(void)
{
	static struct fair_share share;
	int n = app.cfg.room_workers ? app.cfg.room_workers : app.cfg.workers / 4;

	if (fair_share_init(&share, app.cfg.workers, n) < 0) {
		fprintf(stderr, "roombox-fcgi: out of memory\n");
		return -1;
	}
	int max = fair_share_room_max(&share);

	if (app.cfg.room_workers && max < n)
		fprintf(stderr, "roombox-fcgi: room_workers %d: a room gets at most %d of the %d "
			"workers (the rest is kept for rooms that hold none and for the service's "
			"own requests)\n", n, max, app.cfg.workers);
	share.given = parked_share_given;
	share.waiting = parked_room_waits;
	app.room_workers = &share;
	app.room_workers_park = true;
	return 0;
}

static void setup_auth(void)
{
	int n;

	if (app.cfg.metrics == METRICS_OPEN)
		fprintf(stderr, "roombox-fcgi: warning: metrics = open: /metrics answers "
			"without a token to anyone who can reach the web server\n");

	if (app.cfg.auth == AUTH_NONE) {
		fprintf(stderr, "roombox-fcgi: warning: auth = none: the API is open to "
			"anyone who can reach the web server (development only)\n");
		return;
	}
	app.tokens = auth_tokens_new(app.cfg.tokens_file);
	if (!app.tokens) {
		fprintf(stderr, "roombox-fcgi: out of memory\n");
		exit(1);
	}
	n = auth_tokens_count(app.tokens);
	if (n > 0)
		fprintf(stderr, "roombox-fcgi: %d token(s) in %s\n", n, app.cfg.tokens_file);
	/* otherwise auth.c has said why every request will be refused */
}

/* The model's key and system prompt, read once. */
static int setup_agent(void)
{
	char err[512];

	if (agent_init(&app, err, sizeof(err)) < 0) {
		fprintf(stderr, "roombox-fcgi: %s\n", err);
		return -1;
	}
	return 0;
}

static void join_workers(pthread_t *workers, int n)
{
	struct timespec deadline;
	int i, left = 0;

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += WORKER_JOIN_SECONDS;
	for (i = 0; i < n; i++)
		if (pthread_timedjoin_np(workers[i], NULL, &deadline) != 0)
			left++;
	if (left)
		fprintf(stderr, "roombox-fcgi: %d request(s) still running at exit\n", left);
}

/* Room messages live in <state_dir>/messages, owned by this program's user
 * (the helper owns the rest of the state directory). */
static int open_message_store(void)
{
	char dir[PATH_MAX + 16], err[512];
	/* a first start as root (make run, tests) may find no state directory
	 * yet; the package makes it, root's, 0711 */
	mkdir(app.cfg.state_dir, 0711);
	snprintf(dir, sizeof(dir), "%s/messages", app.cfg.state_dir);
	if (store_init(dir, err, sizeof(err)) < 0) {
		fprintf(stderr, "roombox-fcgi: %s\n", err);
		return -1;
	}
	/* preview exposures (preview_store.c) live beside the messages */
	snprintf(dir, sizeof(dir), "%s/previews", app.cfg.state_dir);
	if (preview_store_init(dir, err, sizeof(err)) < 0) {
		fprintf(stderr, "roombox-fcgi: %s\n", err);
		return -1;
	}
	/* and rooms' labels (label_store.c) */
	snprintf(dir, sizeof(dir), "%s/labels", app.cfg.state_dir);
	if (label_store_init(dir, err, sizeof(err)) < 0) {
		fprintf(stderr, "roombox-fcgi: %s\n", err);
		return -1;
	}
	return 0;
}

/* Descriptors: the exec channels (up to 1,024), the preview relay's kept
 * connections, nginx's connections and the helpers' pipes each hold some,
 * more than the soft limit of 1,024 a service manager usually leaves.  So
 * the soft limit goes up to the hard one (libfcgi and libcurl poll(), and
 * nothing here select()s, so descriptors past FD_SETSIZE are safe), and
 * the helpers -- and the rooms they start -- get the limit we were given. */
static void raise_nofile(void)
{
	struct rlimit given, raised;

	if (getrlimit(RLIMIT_NOFILE, &given) < 0)
		return;
	helper_child_nofile(&given);
	raised = given;
	raised.rlim_cur = given.rlim_max;
	if (raised.rlim_cur > given.rlim_cur && setrlimit(RLIMIT_NOFILE, &raised) < 0)
		fprintf(stderr, "roombox-fcgi: warning: raise the descriptor limit to %llu: %s\n",
			(unsigned long long)raised.rlim_cur, strerror(errno));
}

int main(int argc, char **argv)
{
	const char *config_path = ROOMBOX_CONF;
	pthread_t *workers, idle, parker;
	pthread_condattr_t ca;
	bool idle_started = false;
	sigset_t stop_set;
	char err_text[512];
	int opt, sig, i;

	ensure_stdio();
	raise_nofile();
	/* Buffers of 128 KiB and more come from mmap and go back to the
	 * kernel when freed: an exec's output is held whole until its answer
	 * is sent (up to output_limit), and from glibc's per-thread arenas
	 * that peak would stay resident for the life of the process (an hour
	 * of mixed load grew RSS 11 -> 119 MB; with this, flat near 14 MB). */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	/* Blocked before any thread starts (the process logger starts in
	 * procs_init): every thread inherits the mask, so SIGTERM and SIGINT
	 * wait for main's sigwait() instead of landing in a thread that leaves
	 * them to libfcgi's handler, which only sets a flag. */
	sigemptyset(&stop_set);
	sigaddset(&stop_set, SIGTERM);
	sigaddset(&stop_set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
	static const struct option longs[] = {
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};

	while ((opt = getopt_long(argc, argv, "c:fh", longs, NULL)) != -1) {
		switch (opt) {
		case 'c': config_path = optarg; break;
		case 'f': break;
		case 'h': usage(stdout); return 0;
		default:  usage(stderr); return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	if (load_config(config_path) < 0 || setup_room_workers() < 0)
		return 2;
	if (open_message_store() < 0)
		return 1;
	if (procs_init(&app, err_text, sizeof(err_text)) < 0) {
		fprintf(stderr, "roombox-fcgi: %s\n", err_text);
		return 1;
	}
	setup_auth();
	app.log_requests = true;
	if (cluster_start(&app, err_text, sizeof(err_text)) < 0) {
		fprintf(stderr, "roombox-fcgi: %s\n", err_text);
		return 2;
	}
	if (setup_agent() < 0)
		return 2;

	if (FCGX_Init() != 0) {
		fprintf(stderr, "roombox-fcgi: FCGX_Init failed\n");
		return 1;
	}
	/* after FCGX_Init, which installs handlers of its own */
	signal(SIGPIPE, SIG_IGN);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&stop_cond, &ca);
	pthread_cond_init(&park_cond, &ca);

	listen_fd = open_listener(app.cfg.socket);
	if (listen_fd < 0 || conn_set_open() < 0)
		return 1;
	cache_cgroup_mode();
	/* the API works without previews or terminals' WebSockets: say so,
	 * and serve the rest */
	if (term_ws_start(&app) < 0)
		fprintf(stderr, "roombox-fcgi: warning: terminals' WebSockets are not available\n");
	if (preview_relay_start(&app) < 0)
		fprintf(stderr, "roombox-fcgi: warning: preview ports are not available\n");

	workers = calloc((size_t)app.cfg.workers, sizeof(*workers));
	if (!workers) {
		fprintf(stderr, "roombox-fcgi: out of memory\n");
		return 1;
	}
	for (i = 0; i < app.cfg.workers; i++) {
		int rc = pthread_create(&workers[i], NULL, worker_main, NULL);

		if (rc != 0) {
			fprintf(stderr, "roombox-fcgi: start worker %d: %s\n", i, strerror(rc));
			return 1;
		}
	}
	if (app.cfg.idle_timeout_ms > 0 || app.cfg.room_limits_max.idle_timeout_ms > 0)
		idle_started = pthread_create(&idle, NULL, idle_main, NULL) == 0;
	if (pthread_create(&parker, NULL, park_main, NULL) != 0) {
		fprintf(stderr, "roombox-fcgi: start the park thread\n");
		return 1;
	}
	pthread_detach(parker);
	fprintf(stderr, "roombox-fcgi %s: listening on %s, %d workers (%d a room), auth %s, cgroup %s\n",
		ROOMBOX_VERSION, listen_fd == 0 ? "fd 0" : app.cfg.socket,
		app.cfg.workers, fair_share_room_max(app.room_workers), app.cfg.auth == AUTH_NONE ? "none" : "token",
		app.cgroup_mode);

	while (sigwait(&stop_set, &sig) != 0)
		;
	fprintf(stderr, "roombox-fcgi: %s: stopping\n", strsignal(sig));
	atomic_store(&stopping, true);
	FCGX_ShutdownPending();
	shutdown(listen_fd, SHUT_RDWR);   /* wakes every worker */
	kept_shutdown_all();
	pthread_mutex_lock(&stop_lock);
	pthread_cond_broadcast(&stop_cond);
	pthread_mutex_unlock(&stop_lock);

	struct helper_target target = app_helper(&app);
	struct helper_error herr;
	struct helper_stopped stopped;
	if (helper_stop_all(&target, STOP_ALL_DEADLINE_MS, &stopped, &herr) < 0) {
		fprintf(stderr, "roombox-fcgi: %s: %s\n", HELPER_OP_STOP_ALL, herr.message);
	} else {
		log_stopped("service stopping", &stopped);
		free(stopped.ids);
	}

	join_workers(workers, app.cfg.workers);
	if (idle_started)
		join_workers(&idle, 1);
	if (socket_created)
		unlink(app.cfg.socket);
	preview_relay_stop();
	term_ws_stop();
	fflush(stderr);
	_exit(0);   /* threads still busy past the deadline end here */
}
