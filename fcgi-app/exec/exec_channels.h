/* Warm execs over a room's exec channel (common/exec_channel.h), without
 * a setuid helper per exec: see exec_channels.c. */
#ifndef ROOMBOX_FCGI_EXEC_CHANNELS_H
#define ROOMBOX_FCGI_EXEC_CHANNELS_H

#include <stdbool.h>

#include "app.h"
#include "helper_client.h"
#include "validate.h"

struct chan_run;

/* ex in room over one of the room's channels, with pass[0..2] (the
 * command's stdin, stdout and stderr: the caller closes its copies), once
 * the room is known to run; NULL when there is no channel to use (the
 * caller takes the exec to the helper: nothing was sent). */
struct chan_run *exec_channel_start(struct app *app, const char *room, const struct exec_request *ex,
				    const int pass[3]);
/* Readable once the keeper has answered (or is gone). */
int exec_channel_fd(const struct chan_run *run);
/* When to stop waiting for it (monotonic ms): the exec's timeout and
 * HELPER_EXEC_GRACE_MS, as a helper's own alarm bounds a helper exec. */
long exec_channel_deadline(const struct chan_run *run);
/* The answer, run freed: 0 with *ans; EXEC_CHANNEL_ELSEWHERE when the
 * command did not run (the caller takes it to the helper, which gives
 * that case its answer); -1 with err (the room stopped under it). */
#define EXEC_CHANNEL_ELSEWHERE 1
int exec_channel_finish(struct chan_run *run, struct helper_exec_ans *ans, struct helper_error *err);

/* A helper exec ran in room: it runs now, and the next exec may ask for a
 * channel. */
void exec_channel_warm(const char *room);
/* Its channels closed (those in use once their exec ends): the room's
 * limits changed, or it stopped. */
void exec_channel_forget(const char *room);

#endif
