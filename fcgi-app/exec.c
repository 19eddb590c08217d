/* POST /api/rooms/{id}/sandbox/exec (SPEC §2.1).
 *
 * The helper answers with facts (a wait status, the output's bytes, times
 * as integers: common/protocol.h); the client's `result` -- exit code and
 * signal name, UTF-8 repair or base64, the duration and ISO timestamp -- is
 * made here, unprivileged. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "exec.h"
#include "exec_stream.h"
#include "http.h"
#include "protocol.h"
#include "textenc.h"
#include "timefmt.h"

/* max_concurrent_execs: a slot is taken before the helper is spawned and
 * given back when it has answered.  <= 0 means no limit. */
bool exec_slot_take(struct app *app)
{
	int max = app->cfg.max_concurrent_execs;

	if (max <= 0)
		return true;
	if (atomic_fetch_add(&app->execs_running, 1) < max)
		return true;
	atomic_fetch_sub(&app->execs_running, 1);
	return false;
}

void exec_slot_give(struct app *app)
{
	if (app->cfg.max_concurrent_execs > 0)
		atomic_fetch_sub(&app->execs_running, 1);
}

struct helper_exec exec_helper_exec(const struct exec_request *ex)
{
	return (struct helper_exec){
		.cmd = ex->cmd, .cmd_len = ex->cmd_len, .cwd = ex->cwd, .env = ex->env,
		.timeout_ms = ex->timeout_ms, .user = ex->user,   /* NULL: exec_user */
	};
}

/* "SIGKILL" etc. (glibc's sigabbrev_np); the kernel's real-time signals,
 * 32 to 64, as SIGRT0 to SIGRT32. */
void signal_name(int sig, char *buf, size_t len)
{
	const char *abbrev = sigabbrev_np(sig);

	if (abbrev)
		snprintf(buf, len, "SIG%s", abbrev);
	else if (sig >= 32 && sig <= 64)
		snprintf(buf, len, "SIGRT%d", sig - 32);
	else
		snprintf(buf, len, "SIGUNKNOWN");
}

json_object *exec_stream(const char *data, size_t len, bool base64)
{
	json_object *v;
	char *text;
	size_t n = len;

	text = base64 ? base64_encode((const unsigned char *)data, len)
		      : utf8_sanitize(data, len, &n);
	if (!text)
		return NULL;
	v = json_object_new_string_len(text, base64 ? (int)strlen(text) : (int)n);
	free(text);
	return v;
}

json_object *exec_result_shape(const struct helper_exec_ans *a, const struct helper_bytes *tail,
			       const struct exec_request *ex, char *why, size_t whylen)
{
	struct exec_output o = { .passed = false };

	o.out = tail->data;
	o.err = tail->data;
	return exec_result_make(a, &o, tail->len, ex, why, whylen);
}

json_object *exec_result_make(const struct helper_exec_ans *a, struct exec_output *o, size_t tail_len,
			      const struct exec_request *ex, char *why, size_t whylen)
{
	int status = a->wait_status;
	uint64_t out_len = a->stdout_bytes, err_len = a->stderr_bytes, dur_us = a->duration_us;
	bool timed_out = a->timed_out, out_cut = a->stdout_truncated, err_cut = a->stderr_truncated;
	char sig[32] = "", stamp[40], dur[32];
	int code;

	if (out_len > tail_len || err_len > tail_len || out_len + err_len != tail_len) {
		snprintf(why, whylen, "roombox-helper: exec reply: output lengths do not match");
		return NULL;
	}
	if (!o->passed) {   /* the output came after the answer */
		o->err += out_len;
		o->out_len = (size_t)out_len;
		o->err_len = (size_t)err_len;
		o->out_cut = out_cut;
		o->err_cut = err_cut;
	}
	if (timed_out) {
		code = 124;
		snprintf(sig, sizeof(sig), "SIGKILL");
	} else if (WIFSIGNALED(status)) {
		code = 128 + WTERMSIG(status);
		signal_name(WTERMSIG(status), sig, sizeof(sig));
	} else {
		code = WEXITSTATUS(status);
	}
	bool base64 = ex->has_encoding && ex->encoding == EXEC_ENCODING_BASE64;
	json_object *out = exec_stream(o->out ? o->out : "", o->out_len, base64);
	json_object *err = exec_stream(o->err ? o->err : "", o->err_len, base64);
	if (!out || !err) {
		json_object_put(out);
		json_object_put(err);
		snprintf(why, whylen, "out of memory");
		return NULL;
	}
	json_object *result = json_object_new_object(), *cut = json_object_new_object();
	json_object_object_add(result, "stdout", out);
	json_object_object_add(result, "stderr", err);
	json_object_object_add(result, "exitCode", json_object_new_int(code));
	json_object_object_add(result, "success", json_object_new_boolean(code == 0));
	json_object_object_add(result, "signal", sig[0] ? json_object_new_string(sig) : NULL);
	json_object_object_add(result, "timedOut", json_object_new_boolean(timed_out));
	json_object_object_add(cut, "stdout", json_object_new_boolean(o->out_cut));
	json_object_object_add(cut, "stderr", json_object_new_boolean(o->err_cut));
	json_object_object_add(result, "truncated", cut);
	json_object_object_add(result, "command", json_object_new_string_len(ex->cmd, (int)ex->cmd_len));
	/* milliseconds with three decimals, as the seed's performance.now()
	 * difference prints them */
	snprintf(dur, sizeof(dur), "%lld.%03lld", (long long)(dur_us / 1000), (long long)(dur_us % 1000));
	json_object_object_add(result, "duration", json_object_new_double_s((double)dur_us / 1000.0, dur));
	iso8601_utc_ms(a->started_ms, stamp, sizeof(stamp));
	json_object_object_add(result, "timestamp", json_object_new_string(stamp));
	return result;
}

json_object *exec_in_room(struct app *app, const char *room,
			  const struct exec_request *ex, struct helper_error *err)
{
	struct helper_target target = app_helper(app);
	uint64_t timeout = ex->timeout_ms ? ex->timeout_ms : app->cfg.exec_timeout_ms;
	struct helper_bytes tail;
	struct helper_exec_ans ans;
	struct helper_exec x = exec_helper_exec(ex);
	json_object *result = NULL;
	int rc;

	if (!exec_slot_take(app)) {
		memset(err, 0, sizeof(*err));
		err->http_status = 503;
		snprintf(err->code, sizeof(err->code), "busy");
		snprintf(err->message, sizeof(err->message), "too many concurrent execs");
		return NULL;
	}
	/* COMPATIBILITY: the collecting exec (HX_COLLECT), input in the
	 * request and output after the answer, until this path passes its
	 * I/O as exec_stream.c does */
	rc = helper_exec_collect(&target, room, &x, ex->stdin_data, ex->stdin_data ? ex->stdin_len : 0,
				 (long)(timeout + app->cfg.drain_ms) + HELPER_EXEC_GRACE_MS, &ans, &tail, err);
	exec_slot_give(app);
	if (rc == 0) {
		result = exec_result_shape(&ans, &tail, ex, err->message, sizeof(err->message));
		if (!result) {
			err->http_status = 500;
			snprintf(err->code, sizeof(err->code), "reply");
		}
		helper_bytes_free(&tail);
	}
	if (!result)
		fprintf(stderr, "roombox-fcgi: room %s: exec: %s\n", room, err->message);
	return result;
}

void exec_answer_error(struct response *rs, const struct helper_error *err)
{
	switch (err->http_status) {
	case 400:
		response_error(rs, 400, "%s", err->message);
		break;
	case 503:
		rs->retry_after = 1;
		response_error(rs, 503, "too many concurrent execs");
		break;
	case 429:
		response_error(rs, 429, "room limit reached");
		break;
	case 413:
		response_error(rs, 413, "request body too large");
		break;
	case 507:   /* the message names the room and the figures */
		response_error(rs, 507, "%s", err->message);
		break;
	default:
		response_error(rs, 500, "sandbox execution failed: %s", err->message);
	}
}

void api_exec_post(struct request *rq, struct response *rs)
{
	struct exec_request ex;
	struct helper_error err;
	json_object *details, *result, *answer;
	char name[SANDBOX_NAME_MAX + 1];

	details = validate_exec_request(rq->body, rq->app->cfg.exec_timeout_max_ms, &ex);
	if (details) {
		response_invalid(rs, details);
		return;
	}
	if (exec_wants_stream(rq)) {
		exec_sse(rq, rs, &ex);
		return;
	}
	result = exec_in_room(rq->app, rq->room, &ex, &err);
	if (!result) {
		exec_answer_error(rs, &err);
		return;
	}
	room_sandbox_name(rq->room, name, sizeof(name));
	answer = json_object_new_object();
	json_object_object_add(answer, "result", result);
	json_object_object_add(answer, "sandboxName", json_object_new_string(name));
	response_json(rs, 200, answer);
}
