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
json_object *exec_result_shape(json_object *reply, const struct helper_bytes *tail,
			       const struct exec_request *ex, char *why, size_t whylen);

#endif
