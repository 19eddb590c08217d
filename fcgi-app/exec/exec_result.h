/* The original service's exec `result` (docs/api.md, "Run a command"), made from the
 * helper's facts and the output roombox-fcgi read itself: see
 * exec_result.c. */
#ifndef ROOMBOX_FCGI_EXEC_RESULT_H
#define ROOMBOX_FCGI_EXEC_RESULT_H

#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>

#include "protocol.h"
#include "validate.h"

/* What a result carries of the command's output, as read from its pipes:
 * each stream up to output_limit, and whether more was cut. */
struct exec_output {
	const char *out, *err;
	size_t out_len, err_len;
	bool out_cut, err_cut;
};

/* The result (its key order) from the helper's exec answer
 * (common/protocol.h) and the output.  NULL with why set when the answer
 * does not hold together. */
json_object *exec_result_make(const struct helper_exec_ans *a, const struct exec_output *o,
			      const struct exec_request *ex, char *why, size_t whylen);

/* One stream's bytes as a client asked for them: UTF-8 text with U+FFFD
 * for what is not UTF-8, or base64 of the exact bytes. */
json_object *exec_stream(const char *data, size_t len, bool base64);

/* "SIGKILL" for 9 (the kernel's real-time signals as SIGRT0..SIGRT32). */
void signal_name(int sig, char *buf, size_t len);

#endif
