/* GET /api/rooms/{id}/export and PUT /api/rooms/{id}/import: a room as one
 * archive (docs/export-format.md), streamed both ways.
 *
 * Export: the helper walks the room's disk into a tree stream on a pipe
 * (its export op), and this worker turns that into the archive
 * (room_archive.c), sent to the client as libarchive hands out its
 * blocks: no second pipe, no second thread (the seal's checksum, an XXH64
 * since format version 2, is cheap enough to take inline).  The parts
 * beside the files -- the sessions (from the helper's answer), the
 * preview exposures, the process records, the messages -- are added once
 * the files are all in.
 *
 * Import: this worker reads the body into a pipe, a thread parses the
 * archive from it into a tree stream on a second pipe, checking every
 * member against the new room's disk, and the helper's import op writes
 * that stream into a new room, which exists only once everything came and
 * was found right; the sessions follow on a third pipe.  The exposures
 * and messages are ours to write after; a failure there destroys the new
 * room again.  Nothing here runs as root or touches a room's files. */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "app.h"
#include "helper_client.h"
#include "http.h"
#include "json_strict.h"
#include "label_store.h"
#include "metrics.h"
#include "preview_relay.h"
#include "preview_store.h"
#include "process_store.h"
#include "room_archive.h"
#include "room_settings.h"
#include "room_transfer.h"
#include "roomid.h"
#include "store.h"

#define KEY_MAX 4096
#define CHUNK (256u << 10)
#define PIPE_BIG (1 << 20)
/* how long a move's import waits for the next bytes of its body (see
 * room_import): roomboxctl gives up on a move stalled as long */
#define MOVE_BODY_WAIT_MS 120000

/* export_key_file's bytes (a last newline dropped): 0 with *key (len 0:
 * none configured), or -1 with err. */
static int key_load(const struct app *app, unsigned char **bytes, struct room_key *key,
		    char *err, size_t errlen)
{
	const char *path = app->cfg.export_key_file;
	*bytes = NULL;
	key->bytes = NULL;
	key->len = 0;
	if (!path[0])
		return 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return snprintf(err, errlen, "export_key_file: %s", strerror(errno)), -1;
	unsigned char *b = malloc(KEY_MAX + 1);
	ssize_t n = b ? read(fd, b, KEY_MAX + 1) : -1;
	close(fd);
	if (n <= 0 || n > KEY_MAX) {
		free(b);
		return snprintf(err, errlen, "export_key_file: empty, unreadable or over %d bytes", KEY_MAX), -1;
	}
	if (b[n - 1] == '\n')
		n--;
	if (n == 0) {
		free(b);
		return snprintf(err, errlen, "export_key_file: empty"), -1;
	}
	*bytes = b;
	key->bytes = b;
	key->len = (size_t)n;
	return 0;
}

/* A pipe that holds a megabyte: the archive's bytes cross it between two
 * threads (or processes) that each work in 1 MiB buffers; the default
 * 64 KiB would wake the other side sixteen times as often.  Where the
 * kernel refuses the size (pipe-max-size), the default pipe does. */
static int pipe_big(int p[2])
{
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	fcntl(p[1], F_SETPIPE_SZ, PIPE_BIG);
	return 0;
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

static int write_all_fd(int fd, const void *buf, size_t len)
{
	const char *p = buf;
	while (len) {
		ssize_t k = write(fd, p, len);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		len -= (size_t)k;
	}
	return 0;
}

/* A refusal of the archive: 507 for what the room's disk cannot hold,
 * 400 for the rest. */
static int refusal_status(const char *why)
{
	return strstr(why, "budget") || strstr(why, " entries") ? 507 : 400;
}

/* ---- export ---- */

struct part_list {
	struct room_part v[ROOM_PARTS_COUNT];
	size_t n, bytes;
};

static int part_add(struct part_list *l, const char *name, char *data, size_t len)
{
	if (l->n == ROOM_PARTS_COUNT || len > ROOM_PART_MAX || l->bytes + len > ROOM_PARTS_MAX) {
		free(data);
		return -1;
	}
	l->v[l->n].name = strdup(name);
	l->v[l->n].data = (unsigned char *)data;
	l->v[l->n].len = len;
	if (!l->v[l->n].name) {
		free(data);
		return -1;
	}
	l->n++;
	l->bytes += len;
	return 0;
}

static void part_list_free(struct part_list *l)
{
	for (size_t i = 0; i < l->n; i++) {
		free(l->v[i].name);
		free(l->v[i].data);
	}
	l->n = 0;
}

struct exposures_text {
	char *buf;
	size_t len;
	FILE *f;
};

static void exposure_line(const struct preview_exposure *e, void *ctx)
{
	struct exposures_text *t = ctx;
	fprintf(t->f, "%s %d\n", e->token, e->port);
}

static int name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A whole small file into *data. */
static int file_read(int dfd, const char *name, size_t max, char **data, size_t *len)
{
	struct stat st;
	int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		close(fd);
		return -1;
	}
	char *b = malloc((size_t)st.st_size + 1);
	size_t n = 0;
	ssize_t k = 0;
	while (b && n < (size_t)st.st_size &&
	       ((k = read(fd, b + n, (size_t)st.st_size - n)) > 0 || (k < 0 && errno == EINTR)))
		if (k > 0)
			n += (size_t)k;
	close(fd);
	if (!b || k < 0) {
		free(b);
		return -1;
	}
	*data = b;
	*len = n;
	return 0;
}

/* The process records and logs as kept under <state_dir>/processes/<room>/,
 * or a snapshot's, as kept beside it (process_store.c). */
static int processes_add(struct part_list *l, const struct app *app, const char *room,
			 const char *sid, char *err, size_t errlen)
{
	char dir[PATH_MAX];
	if (sid[0])
		snprintf(dir, sizeof(dir), "%s/processes/.snapshots/%s/%s", app->cfg.state_dir, room, sid);
	else
		snprintf(dir, sizeof(dir), "%s/processes/%s", app->cfg.state_dir, room);
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0)
		return errno == ENOENT ? 0 : (snprintf(err, errlen, "export: its process records: %s",
							strerror(errno)), -1);
	DIR *d = fdopendir(dfd);
	char **names = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	int rc = 0;
	while (d && (de = readdir(d))) {
		char pname[160];
		snprintf(pname, sizeof(pname), "processes/%s", de->d_name);
		size_t dn = strlen(de->d_name);
		/* a record being written (or a crash's leftover of one) is
		 * not a record: an import takes only what is whole */
		if (de->d_name[0] == '.' || room_part_name_ok(pname) < 0 ||
		    (dn > 4 && strcmp(de->d_name + dn - 4, ".tmp") == 0))
			continue;
		if (n == cap) {
			char **v = realloc(names, (cap = cap ? cap * 2 : 64) * sizeof(*v));
			if (!v)
				break;
			names = v;
		}
		names[n] = strdup(de->d_name);
		if (names[n])
			n++;
	}
	qsort(names, n, sizeof(*names), name_cmp);
	for (size_t i = 0; i < n && rc == 0; i++) {
		char *data = NULL, pname[160];
		size_t len = 0;
		snprintf(pname, sizeof(pname), "processes/%s", names[i]);
		/* a log being written is taken as far as it got */
		if (file_read(dirfd(d), names[i], ROOM_PART_MAX, &data, &len) < 0)
			continue;
		if (part_add(l, pname, data, len) < 0)
			rc = -1, snprintf(err, errlen, "export: the process records are over %u bytes",
					  ROOM_PARTS_MAX);
	}
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	if (d)
		closedir(d);
	else
		close(dfd);
	return rc;
}

struct export_job {
	struct app *app;
	const char *room;
	struct helper_run *run;
	bool helper_done;
	struct helper_error herr;
	int tree_fd;
	struct room_key key;
	struct part_list parts;
	/* the answer: its head goes with the archive's first bytes */
	struct request *rq;
	struct response *rs;
	const struct http_output *out;
	bool headers, gone;
	int rc;
	char err[1024];
};

/* The parts, once the files are in: the helper has answered by then. */
/* A move carries the room's labels and own limits ("settings", a PATCH's
 * body): the room is the same one on the next host.  A plain export leaves
 * them to the importing host's configuration. */
static int settings_add(struct export_job *j, char *err, size_t errlen)
{
	struct helper_target target = app_helper(j->app);
	struct helper_status st;
	struct helper_error herr;
	char why[256];
	if (helper_status(&target, j->room, &st, &herr) < 0)
		return snprintf(err, errlen, "export: its limits: %s", herr.message), -1;
	json_object *labels = labels_get(j->room, why, sizeof(why));
	if (!labels)
		return snprintf(err, errlen, "export: its labels: %s", why), -1;
	json_object *o = json_object_new_object();
	json_object_object_add(o, "labels", labels);
	json_object_object_add(o, "limits", room_own_limits_json(&st.limits));
	size_t n = 0;
	const char *text = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &n);
	char *copy = text ? strndup(text, n) : NULL;
	json_object_put(o);
	if (!copy || part_add(&j->parts, "settings", copy, n) < 0)
		return snprintf(err, errlen, "export: out of memory"), -1;
	return 0;
}

/* A move's settings set on the new room as a PATCH sets them, and checked
 * as one.  0, or -1 with err. */
static int settings_apply(struct request *rq, const struct room_part *part, char *err, size_t errlen)
{
	struct config_room_limits max = config_room_limits_max(&rq->app->cfg);
	struct helper_limits_args args = { 0 };
	json_object *o = NULL, *labels = NULL, *limits = NULL, *now = NULL;
	char why[256];
	int rc = -1;
	bool too_many;
	if (json_parse_strict((const char *)part->data, part->len, &o, why, sizeof(why)) != 0 ||
	    room_settings_check(o, &labels, &limits, why, sizeof(why)) < 0) {
		snprintf(err, errlen, "import: settings: %s", why);
		goto out;
	}
	/* a host that allows less (its room_limits_max) gives the room its
	 * most, not a refusal that would keep the room from ever moving */
	int clamped = limits ? room_limits_clamp(limits, &max) : 0;
	if (clamped)
		fprintf(stderr, "roombox-fcgi: room %s: moved in with %d of its own limits above this "
			"host's room_limits_max: set to that\n", rq->room, clamped);
	if ((limits && room_limits_parse(limits, &max, &args, why, sizeof(why)) < 0) ||
	    (labels && !(now = labels_patch(rq->room, labels, &too_many, why, sizeof(why))))) {
		snprintf(err, errlen, "import: settings: %s", why);
		goto out;
	}
	if (args.set) {
		struct helper_target target = app_helper(rq->app);
		struct helper_error herr;
		struct helper_status st;
		if (helper_set_limits(&target, rq->room, &args, &st, &herr) < 0) {
			snprintf(err, errlen, "import: settings: %s", herr.message);
			goto out;
		}
	}
	rc = 0;
out:
	json_object_put(now);
	json_object_put(o);
	return rc;
}

/* every room's messages fit in one part */
_Static_assert(STORE_MAX_BYTES <= ROOM_PART_MAX, "a room's messages are one export part");

static int export_parts(void *ctx, const struct room_part **parts, size_t *nparts, char *err, size_t errlen)
{
	struct export_job *j = ctx;
	char *root = NULL, *user = NULL, sid[HELPER_ROOM_LEN];
	j->helper_done = true;
	if (helper_export_finish(j->run, &root, &user, sid, &j->herr) < 0)
		return snprintf(err, errlen, "export: %s", j->herr.message), -1;
	int rc = 0;
	if (part_add(&j->parts, "session/root", root, strlen(root)) < 0 ||
	    part_add(&j->parts, "session/user", user, strlen(user)) < 0)
		rc = -1;
	struct exposures_text t = { 0 };
	t.f = open_memstream(&t.buf, &t.len);
	if (rc == 0 && t.f && preview_exposures(j->room, exposure_line, &t) >= 0) {
		fclose(t.f);
		rc = part_add(&j->parts, "exposures", t.buf, t.len);
	} else {
		if (t.f)
			fclose(t.f);
		free(t.buf);
		rc = -1;
	}
	if (rc < 0)
		return snprintf(err, errlen, "export: out of memory or the exposures unreadable"), -1;
	if (processes_add(&j->parts, j->app, j->room, sid, err, errlen) < 0)
		return -1;
	char *msgs = NULL;
	size_t mlen = 0;
	if (store_read_raw(j->room, ROOM_PART_MAX, &msgs, &mlen, err, errlen) < 0)
		return -1;
	if (msgs && part_add(&j->parts, "messages/room.jsonl", msgs, mlen) < 0)
		return snprintf(err, errlen, "export: the messages are over the parts' size"), -1;
	if (j->rq->move && settings_add(j, err, errlen) < 0)
		return -1;
	*parts = j->parts.v;
	*nparts = j->parts.n;
	return 0;
}

static void export_answer_error(struct request *rq, struct response *rs, int status, const char *text)
{
	fprintf(stderr, "roombox-fcgi: room %s: export: %s\n", rq->room, text);
	response_error(rs, status, "%s", text);
}

/* Does the room have the snapshot ref (its id or name)?  Else 404 (or
 * the helper's error) answered: said before anything is sent. */
static bool snapshot_known(const struct helper_target *t, struct request *rq, struct response *rs,
			   const char *ref)
{
	struct helper_snapshot *list;
	struct helper_error herr;
	size_t n;
	bool found = false;

	if (helper_snapshots(t, rq->room, &list, &n, &herr) < 0) {
		export_answer_error(rq, rs, herr.http_status, herr.http_status == 404 ? "room not found"
				    : herr.message);
		return false;
	}
	for (size_t i = 0; i < n && !found; i++)
		found = !strcmp(list[i].id, ref) || (list[i].name[0] && !strcmp(list[i].name, ref));
	free(list);
	if (!found)
		export_answer_error(rq, rs, 404, "snapshot not found");
	return found;
}

/* The answer's head, before its first byte. */
static int export_headers(struct request *rq, struct response *rs, const struct http_output *out,
			  bool *sent)
{
	char hdr[512];
	int n = snprintf(hdr, sizeof(hdr), "Status: 200 OK\r\n"
			 "Content-Type: application/x-roombox-room\r\n"
			 "Content-Disposition: attachment; filename=\"%s.roombox\"\r\n"
			 "X-Accel-Buffering: no\r\n%s%s%s%s\r\n", rq->room,
			 rs->request_id[0] ? "X-Request-Id: " : "", rs->request_id,
			 rs->request_id[0] ? "\r\n" : "", http_host_header);
	*sent = true;
	return out->write(out->ctx, hdr, (size_t)n) < 0 ? -1 : 0;
}

/* The archive's bytes to the client, its head before the first. */
static int export_sink(void *ctx, const void *p, size_t n)
{
	struct export_job *j = ctx;
	if (j->gone || (!j->headers && export_headers(j->rq, j->rs, j->out, &j->headers) < 0) ||
	    j->out->write(j->out->ctx, p, n) < 0) {
		j->gone = true;
		errno = EPIPE;
		return -1;
	}
	return 0;
}

void api_rooms_export(struct request *rq, struct response *rs)
{
	struct helper_target target = app_helper(rq->app);
	struct helper_status st;
	struct helper_error herr;
	unsigned char *keybuf = NULL;
	char err[1024];
	int tree[2] = { -1, -1 };
	const struct http_output *out = rq->in ? rq->in->out : NULL;
	char snap[HELPER_ROOM_LEN + 1] = "";

	if (!out) {
		response_error(rs, 500, "an export needs a connection");
		goto done;
	}
	/* ?snapshot=<id or name>: that snapshot instead of the room now */
	if (http_query_value(rq, "snapshot", snap, sizeof(snap)) && !room_id_valid(snap)) {
		response_error(rs, 400, "invalid snapshot id");
		goto done;
	}
	/* not found before anything is sent: later, only a cut answer can
	 * tell a failure */
	if (helper_status(&target, rq->room, &st, &herr) < 0) {
		export_answer_error(rq, rs, herr.http_status, herr.http_status == 404 ? "room not found"
				    : herr.message);
		goto done;
	}
	if (snap[0] && !snapshot_known(&target, rq, rs, snap))
		goto done;
	struct export_job *j = calloc(1, sizeof(*j));
	if (!j || key_load(rq->app, &keybuf, &j->key, err, sizeof(err)) < 0) {
		export_answer_error(rq, rs, 500, j ? err : "out of memory");
		free(j);
		goto done;
	}
	j->app = rq->app;
	j->room = rq->room;
	j->rq = rq;
	j->rs = rs;
	j->out = out;
	if (pipe_big(tree) < 0) {
		export_answer_error(rq, rs, 500, "pipe failed");
		free(j);
		goto done;
	}
	j->run = helper_export_start(&target, rq->room, snap, tree[1], HELPER_TRANSFER_DEADLINE_MS,
				     &herr);
	close_fd(&tree[1]);
	if (!j->run) {
		export_answer_error(rq, rs, herr.http_status, herr.message);
		close_fd(&tree[0]);
		free(j);
		goto done;
	}
	j->tree_fd = tree[0];
	j->rc = archive_from_tree_sink(j->tree_fd, export_sink, j, export_parts, j, &j->key, j->err,
				       sizeof(j->err));
	/* the helper sees its reader gone (a failure, a client gone) */
	close_fd(&j->tree_fd);
	if (!j->helper_done) {
		char *a, *b, sid[HELPER_ROOM_LEN];
		j->helper_done = true;
		if (helper_export_finish(j->run, &a, &b, sid, &j->herr) == 0) {
			free(a);
			free(b);
		}
	}
	bool headers = j->headers, gone = j->gone;
	if (!headers) {
		if (j->rc < 0 && j->herr.http_status == 404 && strstr(j->herr.message, ": snapshot "))
			export_answer_error(rq, rs, 404, "snapshot not found");   /* snapshot.c's words */
		else if (j->rc < 0 && j->herr.http_status && j->herr.http_status != 200)
			export_answer_error(rq, rs, j->herr.http_status, j->herr.message);
		else
			export_answer_error(rq, rs, 500, j->rc < 0 ? j->err : "export: no archive came");
	} else {
		if (j->rc < 0 || gone)
			fprintf(stderr, "roombox-fcgi: room %s: export cut short: %s\n", rq->room,
				j->rc < 0 ? j->err : "the client left");
		rs->status = j->rc < 0 ? 500 : 200;
		rs->streamed = true;
		/* the archive broke off: the client must not take what it got
		 * for a whole one (a backup that cannot be restored) */
		rs->streamed_short = j->rc < 0 || gone;
	}
	part_list_free(&j->parts);
	free(j);
done:
	free(keybuf);
	metrics_transfer(false, rs->status);
}

/* ---- import ---- */

struct import_job {
	int body_fd, tree_fd, sess_fd;
	uint64_t budget;
	struct room_key key;
	struct room_parts parts;
	int rc;
	char err[1024];
	/* the seal's digest: the worker hashes the body as it passes it on,
	 * beside the thread's pass over the files, and hands it over here
	 * before the body's pipe ends */
	struct room_sealer *seal;
	pthread_mutex_t lock;
	pthread_cond_t ready_cv;
	bool ready, whole;
	unsigned char digest[32];
};

/* The worker's digest of the body, once the body has ended. */
static int import_digest(void *ctx, unsigned char out[32])
{
	struct import_job *j = ctx;
	pthread_mutex_lock(&j->lock);
	while (!j->ready)
		pthread_cond_wait(&j->ready_cv, &j->lock);
	memcpy(out, j->digest, 32);
	bool whole = j->whole;
	pthread_mutex_unlock(&j->lock);
	return whole ? 0 : -1;
}

static void import_digest_done(struct import_job *j, bool whole)
{
	pthread_mutex_lock(&j->lock);
	if (!j->ready) {
		room_sealer_digest(j->seal, j->digest);
		j->whole = whole;
		j->ready = true;
		pthread_cond_broadcast(&j->ready_cv);
	}
	pthread_mutex_unlock(&j->lock);
}

static const struct room_part *part_find(const struct room_parts *p, const char *name)
{
	for (size_t i = 0; i < p->n; i++)
		if (strcmp(p->v[i].name, name) == 0)
			return &p->v[i];
	return NULL;
}

/* The sessions as the helper takes them on its fd 5 (protocol.h). */
static int sessions_send(struct import_job *j)
{
	const struct room_part *root = part_find(&j->parts, "session/root");
	const struct room_part *user = part_find(&j->parts, "session/user");
	size_t rl = root ? root->len : 0, ul = user ? user->len : 0;
	if (rl > HELPER_SESSION_MAX || ul > HELPER_SESSION_MAX ||
	    (rl && memchr(root->data, '\0', rl)) || (ul && memchr(user->data, '\0', ul)))
		return snprintf(j->err, sizeof(j->err), "import: session/root or session/user: "
				"over %u bytes or holding a NUL", HELPER_SESSION_MAX), -1;
	char head[64];
	int n = snprintf(head, sizeof(head), "%zu %zu\n", rl, ul);
	if (write_all_fd(j->sess_fd, head, (size_t)n) < 0 ||
	    (rl && write_all_fd(j->sess_fd, root->data, rl) < 0) ||
	    (ul && write_all_fd(j->sess_fd, user->data, ul) < 0))
		return snprintf(j->err, sizeof(j->err), "import: the helper stopped reading"), -1;
	return 0;
}

static void *import_thread(void *arg)
{
	struct import_job *j = arg;
	j->rc = archive_to_tree_digested(j->body_fd, j->tree_fd, j->budget, &j->key, import_digest, j,
					 &j->parts, j->err, sizeof(j->err));
	close_fd(&j->body_fd);   /* the body's reader stops */
	close_fd(&j->tree_fd);
	if (j->rc == 0)
		j->rc = sessions_send(j);
	close_fd(&j->sess_fd);
	return NULL;
}

/* Every line a message as the store keeps them: a JSON object with
 * string id, role, content and createdAt. */
static int messages_check(const struct room_part *m, char *err, size_t errlen)
{
	const char *p = (const char *)m->data, *end = p + m->len;
	size_t line = 0;
	if (m->len && end[-1] != '\n')
		return snprintf(err, errlen, "import: messages/room.jsonl: no newline at its end"), -1;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		line++;
		bool ok = store_line_is_message(p, (size_t)(nl - p));
		if (!ok)
			return snprintf(err, errlen, "import: messages/room.jsonl: line %zu is not a message",
					line), -1;
		p = nl + 1;
	}
	return 0;
}

/* "<token> <port>\n" lines: the ports exposed again.  An import makes
 * new tokens (a token is the old room's address; on this host it may name
 * another); a move keeps them, since the room is the same and its preview
 * URLs, which the router finds by token, must follow it. */
static int exposures_apply(const char *room, const struct room_part *e, bool keep,
			   char *err, size_t errlen)
{
	const char *p = (const char *)e->data, *end = p + e->len;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		char line[256];
		int port = 0, used = 0;
		if (!nl || (size_t)(nl - p) >= sizeof(line))
			return snprintf(err, errlen, "import: exposures: a line too long or unended"), -1;
		memcpy(line, p, (size_t)(nl - p));
		line[nl - p] = '\0';
		char *sp = strchr(line, ' ');
		if (!sp || sscanf(sp + 1, "%d%n", &port, &used) != 1 || sp[1 + used] || port < 1 || port > 65535)
			return snprintf(err, errlen, "import: exposures: not \"<token> <port>\""), -1;
		struct preview_exposure x;
		char why[256];
		*sp = '\0';
		if ((keep ? preview_expose_as(room, port, line, &x, why, sizeof(why))
			  : preview_expose(room, port, &x, why, sizeof(why))) < 0)
			return snprintf(err, errlen, "import: expose port %d: %s", port, why), -1;
		p = nl + 1;
	}
	return 0;
}

/* The process records and logs ("processes/<file>"): the new room's. */
static int processes_apply(const char *room, const struct room_parts *p, char *err, size_t errlen)
{
	struct proc_file *f = calloc(p->n ? p->n : 1, sizeof(*f));
	size_t n = 0;
	if (!f)
		return snprintf(err, errlen, "import: out of memory"), -1;
	for (size_t i = 0; i < p->n; i++)
		if (strncmp(p->v[i].name, "processes/", 10) == 0)
			f[n++] = (struct proc_file){ p->v[i].name + 10, p->v[i].data, p->v[i].len };
	int rc = procs_room_import(room, f, n, err, errlen);
	free(f);
	return rc;
}

static void import_fail(struct request *rq, struct response *rs, int status, const char *text)
{
	fprintf(stderr, "roombox-fcgi: room %s: import refused: %s\n", rq->room, text);
	response_error(rs, status, "%s", text);
}

void api_rooms_import(struct request *rq, struct response *rs)
{
	struct helper_target target = app_helper(rq->app);
	struct helper_status st;
	struct helper_error herr;
	unsigned char *keybuf = NULL;
	char err[1024];
	int body[2] = { -1, -1 }, tree[2] = { -1, -1 }, sess[2] = { -1, -1 };
	struct import_job *j = calloc(1, sizeof(*j));

	if (!j || !(j->seal = room_sealer_new())) {
		import_fail(rq, rs, 500, "out of memory");
		goto done;
	}
	pthread_mutex_init(&j->lock, NULL);
	pthread_cond_init(&j->ready_cv, NULL);
	if (helper_status(&target, rq->room, &st, &herr) == 0) {
		import_fail(rq, rs, 409, "room exists already");
		goto done;
	}
	if (herr.http_status != 404) {
		import_fail(rq, rs, herr.http_status, herr.message);
		goto done;
	}
	char *msgs = NULL;
	size_t mlen = 0;
	if (store_read_raw(rq->room, 1, &msgs, &mlen, err, sizeof(err)) < 0 || msgs) {
		free(msgs);
		import_fail(rq, rs, 409, "room has messages already");
		goto done;
	}
	if (key_load(rq->app, &keybuf, &j->key, err, sizeof(err)) < 0) {
		import_fail(rq, rs, 500, err);
		goto done;
	}
	j->budget = rq->app->cfg.disk_limit;
	if (!j->budget) {
		struct statvfs vs;
		j->budget = statvfs(rq->app->cfg.state_dir, &vs) == 0 ? (uint64_t)vs.f_bavail * vs.f_frsize : 0;
	}
	if (pipe_big(body) < 0 || pipe_big(tree) < 0 || pipe2(sess, O_CLOEXEC) < 0) {
		import_fail(rq, rs, 500, "pipe failed");
		goto close_all;
	}
	struct helper_run *run = helper_import_start(&target, rq->room, tree[0], sess[0],
						       HELPER_TRANSFER_DEADLINE_MS, &herr);
	close_fd(&tree[0]);
	close_fd(&sess[0]);
	if (!run) {
		import_fail(rq, rs, herr.http_status, herr.message);
		goto close_all;
	}
	j->body_fd = body[0];
	j->tree_fd = tree[1];
	j->sess_fd = sess[1];
	body[0] = tree[1] = sess[1] = -1;
	pthread_t th;
	bool threaded = pthread_create(&th, NULL, import_thread, j) == 0;
	if (!threaded) {
		close_fd(&j->body_fd);
		close_fd(&j->tree_fd);
		close_fd(&j->sess_fd);
		j->rc = -1;
		snprintf(j->err, sizeof(j->err), "import: no thread");
	}
	/* A move's body is the source's export as it is made: it starts only
	 * once the source has let the room's running requests end and has cut
	 * the room, which under load takes longer than the 10 s a client's
	 * silence is allowed.  The mover is signed and gives up on a stall of
	 * its own (MOVE_BODY_WAIT_MS, as roomboxctl's). */
	if (rq->move && rq->in->read_wait)
		rq->in->read_wait(rq->in->ctx, MOVE_BODY_WAIT_MS);
	/* the body into the parser, until it ends or the parser stops */
	char *buf = malloc(CHUNK);
	int k;
	bool short_body = false;
	bool ended = false;
	while (threaded && buf) {
		if ((k = rq->in->read(rq->in->ctx, buf, (int)CHUNK)) == 0) {
			ended = true;
			break;
		}
		if (k < 0) {
			short_body = true;
			break;
		}
		room_sealer_feed(j->seal, buf, (size_t)k);
		if (write_all_fd(body[1], buf, (size_t)k) < 0)
			break;   /* refused already: the rest is thrown away */
	}
	free(buf);
	import_digest_done(j, ended);   /* before the parser sees the end */
	close_fd(&body[1]);
	if (threaded)
		pthread_join(th, NULL);
	int hrc = helper_import_finish(run, &herr);
	if (j->rc < 0) {
		/* the parser's reason, unless the helper's is the real one (the
		 * disk full: the parser saw only its pipe close) */
		if (hrc < 0 && herr.http_status == 507)
			import_fail(rq, rs, 507, herr.message);
		else
			import_fail(rq, rs, short_body ? 400 : refusal_status(j->err), j->err);
		goto close_all;
	}
	if (hrc < 0) {
		import_fail(rq, rs, herr.http_status == 500 && strstr(herr.message, "import:") ? 400
			    : herr.http_status, herr.message);
		goto close_all;
	}
	/* the room exists: what is ours to add, or the room goes again */
	const struct room_part *m = part_find(&j->parts, "messages/room.jsonl");
	const struct room_part *e = part_find(&j->parts, "exposures");
	int rc = m ? messages_check(m, err, sizeof(err)) : 0;
	if (rc == 0 && m)
		rc = store_write_raw(rq->room, (const char *)m->data, m->len, err, sizeof(err));
	if (rc == 0 && e)
		rc = exposures_apply(rq->room, e, rq->move, err, sizeof(err));
	if (rc == 0)
		rc = processes_apply(rq->room, &j->parts, err, sizeof(err));
	const struct room_part *settings = part_find(&j->parts, "settings");
	if (rc == 0 && settings && rq->move)
		rc = settings_apply(rq, settings, err, sizeof(err));
	if (rc < 0) {
		struct helper_error derr;
		char e2[256];
		helper_destroy(&target, rq->room, &derr);
		store_reset(rq->room, e2, sizeof(e2));
		preview_room_forget(rq->room, e2, sizeof(e2));
		procs_room_reset(rq->room, e2, sizeof(e2));
		labels_forget(rq->room, e2, sizeof(e2));
		import_fail(rq, rs, 400, err);
		goto close_all;
	}
	json_object *answer = json_object_new_object();
	json_object_object_add(answer, "roomId", json_object_new_string(rq->room));
	response_json(rs, 201, answer);
close_all:
	for (int i = 0; i < 2; i++) {
		close_fd(&body[i]);
		close_fd(&tree[i]);
		close_fd(&sess[i]);
	}
done:
	if (j) {
		room_parts_free(&j->parts);
		if (j->seal) {
			room_sealer_free(j->seal);
			pthread_mutex_destroy(&j->lock);
			pthread_cond_destroy(&j->ready_cv);
		}
	}
	free(j);
	free(keybuf);
	metrics_transfer(true, rs->status);
}
