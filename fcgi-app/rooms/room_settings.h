/* A room's settings as PATCH /api/rooms/{id} takes them: its labels
 * (names a client gives it, to find it again) and its limits (below the
 * configuration's, or up to room_limits_max).  Checking only: no state,
 * no I/O, so that a unit test runs every rule (tests/unit/test_room_settings.c).
 *
 * Labels: a key is 1 to LABEL_KEY_MAX characters of [A-Za-z0-9._/-], a
 * value 0 to LABEL_VALUE_MAX characters of the same (as Kubernetes'
 * labels, give or take its prefix rule), at most LABELS_MAX per room.  A
 * PATCH replaces the keys it gives; a null value removes its key.
 *
 * Limits: "memory" and "disk" in bytes, "pids" a count, "cpu" in CPUs (a
 * number, to the thousandth), "idleTimeout" and "execTimeoutMax" in
 * milliseconds; each a positive number at most the configuration's
 * maximum (config_room_limits_max), or null for the configuration's own
 * value again. */
#ifndef ROOMBOX_FCGI_ROOM_SETTINGS_H
#define ROOMBOX_FCGI_ROOM_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>

#include "config.h"
#include "protocol.h"

#define LABELS_MAX 64
#define LABEL_KEY_MAX 63
#define LABEL_VALUE_MAX 63

bool label_key_valid(const char *key, size_t len);
bool label_value_valid(const char *value, size_t len);

/* The body of a PATCH checked whole: an object with at most "labels" (an
 * object of label keys to a label value or null) and "limits" (see
 * room_limits.h).  0 with *labels (borrowed from body, or NULL when
 * absent) and *limits (borrowed, or NULL); -1 with err, a sentence for the
 * client's 400. */
int room_settings_check(json_object *body, json_object **labels, json_object **limits,
			char *err, size_t errlen);

/* limits (an object) checked against max into a set-limits record: 0, or
 * -1 with err naming the limit (and, when too big, the maximum). */
int room_limits_parse(json_object *limits, const struct config_room_limits *max,
		      struct helper_limits_args *out, char *err, size_t errlen);

/* The limits a room runs under (own: its own, 0 = the configuration's), as
 * the API shows them. */
json_object *room_limits_json(const struct config *cfg, const struct helper_limits *own);

/* Each limit in limits (an object as a PATCH's) above this host's max set
 * to that max (null, the configuration's, where the max is 0), in place:
 * a room moved to a host that allows less.  How many were. */
int room_limits_clamp(json_object *limits, const struct config_room_limits *max);

/* Only the limits the room has of its own (own: 0 = the configuration's),
 * as a PATCH sets them: what a move carries. */
json_object *room_own_limits_json(const struct helper_limits *own);

/* labels (the room's, as stored) patched by patch: a new object, or NULL
 * with err when the result would hold more than LABELS_MAX. */
json_object *labels_patched(json_object *labels, json_object *patch, char *err, size_t errlen);

/* Whether labels hold every "k=v" of want[0..n) (a "k=v" with no '=' or a
 * bad key never matches). */
bool labels_match(json_object *labels, const char *const *want, size_t n);

#endif
