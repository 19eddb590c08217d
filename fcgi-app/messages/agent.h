/* The agent: with llm_url and llm_model set, a user message
 * posted to /api/rooms/{id}/messages is answered by the model, whose
 * <run> tags run in the room through the same executeCommands as an
 * assistant message's (runtags.c, messages.c). */
#ifndef ROOMBOX_FCGI_AGENT_H
#define ROOMBOX_FCGI_AGENT_H

#include <stddef.h>

#include "app.h"
#include "runtags.h"

/* Model calls in flight at once, over all rooms; past it a user message
 * gets 503 with Retry-After (and is not stored, so a retry does not
 * repeat it).  Each one has a thread of its own, not a worker. */
#define AGENT_CALLS_MAX 256

/* The system prompt used without llm_system_prompt_file. */
extern const char agent_builtin_prompt[];

/* Is the agent configured (llm_url and llm_model)? */
bool agent_enabled(const struct app *app);

/* At start, before the worker threads: read llm_key_file and
 * llm_system_prompt_file into app.  0, or -1 with err naming the file. */
int agent_init(struct app *app, char *err, size_t errlen);

/* A validated user message for the model: take a call slot, store the
 * message, and set rs->later so that main.c hands the connection to a
 * thread of the agent's own; or answer now (503, 500).  run runs one of
 * the model's <run> commands in the room, ctx a struct request * of the
 * room: the messages route passes the one its assistant messages use, so
 * the model's commands run exactly as theirs do. */
void agent_post(struct request *rq, struct response *rs,
		const char *content, size_t content_len, runtags_exec_fn *run);

/* The room's messages are reset or go to another host (why: "was cleaned
 * up", ...): the replies its model calls in flight would give are given
 * up.  From the return on, none of them runs a command or is stored; each
 * is answered 409 (or the stream's error event) when its model answers.
 * Call before the reset or the export; returns how many were given up. */
int agent_room_gone(const char *room, const char *why);

/* How many model calls of the room are in flight. */
int agent_room_calls(const char *room);

#endif
