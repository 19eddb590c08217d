/* Running one command in a room (SPEC §2.1), for the exec endpoint and,
 * later, for the <run> tags of assistant messages. */
#ifndef ROOMBOX_FCGI_EXEC_H
#define ROOMBOX_FCGI_EXEC_H

#include "app.h"
#include "validate.h"

/* Run ex in room's sandbox (the helper creates or restarts the room when
 * needed).  Returns SPEC §2.1's `result` object, or NULL with err set: 503
 * when max_concurrent_execs are already running, else the helper's error. */
json_object *exec_in_room(struct app *app, const char *room,
			  const struct exec_request *ex, struct helper_error *err);

/* The seed's `result` (SPEC §2.1, its key order) from the helper's exec
 * answer and the output bytes that follow it (common/protocol.h).  NULL
 * with why set when the answer does not hold together. */
json_object *exec_result_shape(const struct helper_exec_ans *a, const struct helper_bytes *tail,
			       const struct exec_request *ex, char *why, size_t whylen);

/* The output a result carries: after the helper's answer (passed false:
 * exec_result_make takes lengths and flags from the answer), or read by
 * roombox-fcgi itself from pipes it passed (passed true). */
struct exec_output {
	bool passed;
	const char *out, *err;
	size_t out_len, err_len;
	bool out_cut, err_cut;
};
json_object *exec_result_make(const struct helper_exec_ans *a, struct exec_output *o, size_t tail_len,
			      const struct exec_request *ex, char *why, size_t whylen);

/* One stream's bytes as a client asked for them: UTF-8 text with U+FFFD
 * for what is not UTF-8, or base64 of the exact bytes. */
json_object *exec_stream(const char *data, size_t len, bool base64);

/* The helper's exec (helper_client.h) for ex: its command, env, cwd,
 * timeout and user (the input is the caller's to send). */
struct helper_exec exec_helper_exec(const struct exec_request *ex);

/* A failed exec's JSON answer (503 with Retry-After, 429, 413, 500). */
void exec_answer_error(struct response *rs, const struct helper_error *err);

/* Slot accounting for max_concurrent_execs (exec_stream.c too). */
bool exec_slot_take(struct app *app);
void exec_slot_give(struct app *app);

/* "SIGKILL" for 9 (the kernel's real-time signals as SIGRT0..SIGRT32). */
void signal_name(int sig, char *buf, size_t len);

#endif
