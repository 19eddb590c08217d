/* The checks of a room's settings (see room_settings.h): the one place
 * that knows what a label may be and how a PATCH's labels merge. */
#include "room_settings.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "errbuf.h"

static bool label_chars(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-' || c == '/'))
			return false;
	}
	return true;
}

bool label_key_valid(const char *key, size_t len)
{
	return len >= 1 && len <= LABEL_KEY_MAX && label_chars(key, len);
}

bool label_value_valid(const char *value, size_t len)
{
	return len <= LABEL_VALUE_MAX && label_chars(value, len);
}

static int labels_check(json_object *labels, char *err, size_t errlen)
{
	if (!json_object_is_type(labels, json_type_object))
		return errorf(err, errlen, "labels must be an object of label names to strings (or null)");
	json_object_object_foreach(labels, key, v) {
		if (!label_key_valid(key, strlen(key)))
			return errorf(err, errlen, "label name \"%.80s\": 1 to %d characters of "
				      "A-Z a-z 0-9 . _ - /", key, LABEL_KEY_MAX);
		if (v == NULL)
			continue;
		if (!json_object_is_type(v, json_type_string))
			return errorf(err, errlen, "label %s: its value must be a string, or null to remove it",
				      key);
		if (!label_value_valid(json_object_get_string(v), (size_t)json_object_get_string_len(v)))
			return errorf(err, errlen, "label %s: its value must be 0 to %d characters of "
				      "A-Z a-z 0-9 . _ - /", key, LABEL_VALUE_MAX);
	}
	return 0;
}

int room_settings_check(json_object *body, json_object **labels, json_object **limits,
			char *err, size_t errlen)
{
	*labels = *limits = NULL;
	if (!json_object_is_type(body, json_type_object))
		return errorf(err, errlen, "the body must be a JSON object with \"labels\" and/or \"limits\"");
	json_object_object_foreach(body, key, v) {
		if (!strcmp(key, "labels")) {
			if (labels_check(v, err, errlen) < 0)
				return -1;
			*labels = v;
		} else if (!strcmp(key, "limits")) {
			if (!json_object_is_type(v, json_type_object))
				return errorf(err, errlen, "limits must be an object");
			*limits = v;
		} else {
			return errorf(err, errlen, "unknown field \"%.80s\" (a room has \"labels\" and \"limits\")",
				      key);
		}
	}
	return 0;
}

json_object *labels_patched(json_object *labels, json_object *patch, char *err, size_t errlen)
{
	json_object *out = json_object_new_object();
	if (labels) {
		json_object_object_foreach(labels, k, v)
			json_object_object_add(out, k, json_object_get(v));
	}
	if (patch) {
		json_object_object_foreach(patch, pk, pv) {
			if (pv)
				json_object_object_add(out, pk, json_object_get(pv));
			else
				json_object_object_del(out, pk);
		}
	}
	if (json_object_object_length(out) > LABELS_MAX) {
		json_object_put(out);
		errorf(err, errlen, "a room has at most %d labels", LABELS_MAX);
		return NULL;
	}
	return out;
}

bool labels_match(json_object *labels, const char *const *want, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const char *eq = strchr(want[i], '=');
		char key[LABEL_KEY_MAX + 1];
		json_object *v;
		if (!eq || !label_key_valid(want[i], (size_t)(eq - want[i])))
			return false;
		memcpy(key, want[i], (size_t)(eq - want[i]));
		key[eq - want[i]] = '\0';
		if (!labels || !json_object_object_get_ex(labels, key, &v) ||
		    !json_object_is_type(v, json_type_string) || strcmp(json_object_get_string(v), eq + 1))
			return false;
	}
	return true;
}

/* One limit: its name in the API, its bit, and how a JSON number becomes
 * the record's (scale: cpu's thousandths). */
static const struct limit_desc {
	const char *name;
	uint32_t bit;
	size_t offset;
	double scale;
} limit_descs[] = {
	{ "memory", HL_MEMORY, offsetof(struct helper_limits, memory), 1 },
	{ "pids", HL_PIDS, offsetof(struct helper_limits, pids), 1 },
	{ "cpu", HL_CPU, offsetof(struct helper_limits, cpu_milli), 1000 },
	{ "disk", HL_DISK, offsetof(struct helper_limits, disk), 1 },
	{ "idleTimeout", HL_IDLE, offsetof(struct helper_limits, idle_timeout_ms), 1 },
	{ "execTimeoutMax", HL_EXECMAX, offsetof(struct helper_limits, exec_timeout_max_ms), 1 },
};
#define NLIMITS (sizeof(limit_descs) / sizeof(limit_descs[0]))

/* The maximum of each, in the record's units. */
static uint64_t limit_max(const struct config_room_limits *m, uint32_t bit)
{
	switch (bit) {
	case HL_MEMORY: return m->memory;
	case HL_PIDS: return (uint64_t)m->pids;
	case HL_CPU: return (uint64_t)(m->cpu * 1000 + 0.5);
	case HL_DISK: return m->disk;
	case HL_IDLE: return m->idle_timeout_ms;
	default: return m->exec_timeout_max_ms;
	}
}

static void limit_format(char *out, size_t len, uint32_t bit, uint64_t v)
{
	if (bit == HL_CPU)
		snprintf(out, len, "%g", (double)v / 1000.0);
	else
		snprintf(out, len, "%llu", (unsigned long long)v);
}

int room_limits_parse(json_object *limits, const struct config_room_limits *max,
		      struct helper_limits_args *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	if (!json_object_is_type(limits, json_type_object))
		return errorf(err, errlen, "limits must be an object");
	json_object_object_foreach(limits, key, v) {
		const struct limit_desc *d = NULL;
		for (size_t i = 0; i < NLIMITS; i++)
			if (!strcmp(limit_descs[i].name, key))
				d = &limit_descs[i];
		if (!d)
			return errorf(err, errlen, "unknown limit \"%.80s\" (a room has memory, pids, cpu, "
				      "disk, idleTimeout and execTimeoutMax)", key);
		out->set |= d->bit;
		if (!v)
			continue;   /* the configuration's again */
		bool whole = d->bit != HL_CPU;
		if (!(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)))
			return errorf(err, errlen, "limit %s: expected a %s or null", key,
				      whole ? "whole number" : "number");
		double x = json_object_get_double(v) * d->scale;
		if (!isfinite(x) || x < 1 || x > 1.8e19 || (whole && x != (double)(uint64_t)x))
			return errorf(err, errlen, "limit %s: expected a %s of at least %s, or null", key,
				      whole ? "whole number" : "number", whole ? "1" : "0.001");
		uint64_t n = (uint64_t)(x + 0.5), m = limit_max(max, d->bit);
		if (n > m) {
			char shown[32];
			limit_format(shown, sizeof(shown), d->bit, m);
			return errorf(err, errlen, "limit %s: at most %s (room_limits_max)", key, shown);
		}
		*(uint64_t *)((char *)&out->limits + d->offset) = n;
	}
	return 0;
}

json_object *room_limits_json(const struct config *cfg, const struct helper_limits *own)
{
	json_object *o = json_object_new_object();
	uint64_t v[NLIMITS] = {
		own->memory ? own->memory : cfg->memory_limit,
		own->pids ? own->pids : (uint64_t)cfg->pids_limit,
		0,
		own->disk ? own->disk : cfg->disk_limit,
		own->idle_timeout_ms ? own->idle_timeout_ms : cfg->idle_timeout_ms,
		own->exec_timeout_max_ms ? own->exec_timeout_max_ms : cfg->exec_timeout_max_ms,
	};
	for (size_t i = 0; i < NLIMITS; i++) {
		if (limit_descs[i].bit == HL_CPU)
			json_object_object_add(o, "cpu", json_object_new_double(
				own->cpu_milli ? (double)own->cpu_milli / 1000.0 : cfg->cpu_limit));
		else
			json_object_object_add(o, limit_descs[i].name, json_object_new_int64((int64_t)v[i]));
	}
	return o;
}

json_object *room_own_limits_json(const struct helper_limits *own)
{
	json_object *o = json_object_new_object();
	for (size_t i = 0; o && i < NLIMITS; i++) {
		uint64_t v = *(const uint64_t *)((const char *)own + limit_descs[i].offset);
		if (v)
			json_object_object_add(o, limit_descs[i].name, limit_descs[i].bit == HL_CPU
					       ? json_object_new_double((double)v / 1000.0)
					       : json_object_new_int64((int64_t)v));
	}
	return o;
}

int room_limits_clamp(json_object *limits, const struct config_room_limits *max)
{
	int n = 0;
	if (!json_object_is_type(limits, json_type_object))
		return 0;
	for (size_t i = 0; i < NLIMITS; i++) {
		json_object *v;
		if (!json_object_object_get_ex(limits, limit_descs[i].name, &v) ||
		    !(json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)))
			continue;
		uint64_t m = limit_max(max, limit_descs[i].bit);
		if (json_object_get_double(v) * limit_descs[i].scale <= (double)m)
			continue;
		/* a most of 0 (that limit off here, and no room_limits_max):
		 * the host's own configuration, as a PATCH's null gives */
		json_object_object_add(limits, limit_descs[i].name, m == 0 ? NULL
				       : limit_descs[i].bit == HL_CPU ? json_object_new_double((double)m / 1000.0)
				       : json_object_new_int64((int64_t)m));
		n++;
	}
	return n;
}
