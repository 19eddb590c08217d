/* A room's labels, on disk: <state_dir>/labels/<room> holds them as one
 * JSON object.  Thread- and process-safe.  Room ids must already be valid
 * (roomid.h); checked again, since they become file names. */
#ifndef ROOMBOX_FCGI_LABEL_STORE_H
#define ROOMBOX_FCGI_LABEL_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <json-c/json.h>

/* At start: open (creating it) the store's directory.  0, or -1 with err. */
int label_store_init(const char *dir, char *err, size_t errlen);

/* The room's labels: a new object ({} when it has none), or NULL with err. */
json_object *labels_get(const char *room, char *err, size_t errlen);

/* The room's labels patched (room_settings.h: labels_patched), durably:
 * the new object, or NULL with err (*too_many: the patch was refused for
 * LABELS_MAX, a client's mistake). */
json_object *labels_patch(const char *room, json_object *patch, bool *too_many,
			  char *err, size_t errlen);

/* The room's labels gone (cleanup): 0, also when it had none; -1 with err. */
int labels_forget(const char *room, char *err, size_t errlen);

#endif
