/* POST /api/rooms/{id}/messages: what other modules share with it. */
#ifndef ROOMBOX_FCGI_MESSAGES_H
#define ROOMBOX_FCGI_MESSAGES_H

#include "runtags.h"

/* executeCommands' callback for the room of ctx (a struct request *): runs
 * one <run> command in the room's sandbox, as an assistant message's tags
 * are run.  The agent (agent.c) runs the model's commands through it. */
runtags_exec_fn messages_run_tag;

#endif
