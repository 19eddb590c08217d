/* POST …/sandbox/exec as an event stream: see exec_stream.c. */
#ifndef ROOMBOX_FCGI_EXEC_STREAM_H
#define ROOMBOX_FCGI_EXEC_STREAM_H

#include <stdbool.h>

#include "app.h"
#include "validate.h"

/* Does the client ask for an event stream (and can we write one)?
 * exec_sse then runs ex and answers as a stream. */
bool exec_wants_stream(const struct request *rq);
void exec_sse(struct request *rq, struct response *rs, const struct exec_request *ex);

#endif
