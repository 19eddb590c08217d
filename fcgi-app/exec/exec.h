/* POST /api/rooms/{id}/sandbox/exec, and running one command
 * for its answer, as <run> tags of assistant messages do too. */
#ifndef ROOMBOX_FCGI_EXEC_H
#define ROOMBOX_FCGI_EXEC_H

#include "app.h"
#include "validate.h"

/* Run ex in room's sandbox (the helper creates or restarts the room when
 * needed).  Returns the exec's `result` object, or NULL with err set: 503
 * when max_concurrent_execs are already running, else the helper's error. */
json_object *exec_in_room(struct app *app, const char *room,
			  const struct exec_request *ex, struct helper_error *err);

#endif
