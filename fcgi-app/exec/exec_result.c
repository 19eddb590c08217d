/* The client's exec `result` (docs/api.md, "Run a command") from raw facts.
 *
 * The helper answers with facts only (a wait status, times as integers:
 * common/protocol.h), and the output's bytes were read by roombox-fcgi from
 * its own pipes (exec_pump.c); the exit code and signal name, UTF-8 repair
 * or base64, the duration and ISO timestamp are made here, unprivileged,
 * over what may be a hostile room's bytes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "exec_result.h"
#include "protocol.h"
#include "textenc.h"
#include "timefmt.h"

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

json_object *exec_result_make(const struct helper_exec_ans *a, const struct exec_output *o,
			      const struct exec_request *ex, char *why, size_t whylen)
{
	int status = a->wait_status;
	int64_t dur_us = (int64_t)a->duration_us, started = a->started_ms;
	bool timed_out = a->timed_out;
	char sig[32] = "", stamp[40], dur[32];
	int code;

	if (dur_us < 0) {
		snprintf(why, whylen, "roombox-helper: exec answer: a duration past 2^63 us");
		return NULL;
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
	/* milliseconds with three decimals, as the original service's performance.now()
	 * difference prints them */
	snprintf(dur, sizeof(dur), "%lld.%03lld", (long long)(dur_us / 1000), (long long)(dur_us % 1000));
	json_object_object_add(result, "duration", json_object_new_double_s((double)dur_us / 1000.0, dur));
	iso8601_utc_ms(started, stamp, sizeof(stamp));
	json_object_object_add(result, "timestamp", json_object_new_string(stamp));
	return result;
}
