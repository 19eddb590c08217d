/* The watch tool's records as JSON events; see watch_records.h. */
#include "watch_records.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "protocol.h"
#include "textenc.h"

static void put_path(json_object *ev, const char *key, const char *b64key, const char *p, size_t n)
{
	size_t len = 0;
	char *text = utf8_sanitize(p, n, &len);
	if (text)
		json_object_object_add(ev, key, json_object_new_string_len(text, (int)len));
	free(text);
	if (!utf8_valid(p, n)) {   /* a name that is not UTF-8: its exact bytes too */
		char *b = base64_encode((const unsigned char *)p, n);
		if (b)
			json_object_object_add(ev, b64key, json_object_new_string(b));
		free(b);
	}
}

static void overflow(watch_emit_fn *emit, void *ctx)
{
	json_object *ev = json_object_new_object();
	json_object_object_add(ev, "type", json_object_new_string("overflow"));
	emit(ctx, ev);
	json_object_put(ev);
}

/* r[0..n): type, dir flag, path, NUL and, for a move, the new path and
 * NUL (n counts both NULs); path_end is the first NUL's index. */
static void record(const char *r, size_t n, size_t path_end, watch_emit_fn *emit, void *ctx)
{
	static const struct { char t; const char *name; } types[] = {
		{ TOOL_WATCH_CREATE, "create" }, { TOOL_WATCH_MODIFY, "modify" },
		{ TOOL_WATCH_DELETE, "delete" }, { TOOL_WATCH_MOVE, "move" },
	};
	if (r[0] == TOOL_WATCH_OVERFLOW) {
		overflow(emit, ctx);
		return;
	}
	if (path_end < 3 || r[2] != '/' || (r[1] != '0' && r[1] != '1'))
		return;   /* not a record the tool writes */
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		if (types[i].t != r[0])
			continue;
		json_object *ev = json_object_new_object();
		json_object_object_add(ev, "type", json_object_new_string(types[i].name));
		put_path(ev, "path", "pathBase64", r + 2, path_end - 2);
		if (r[0] == TOOL_WATCH_MOVE)
			put_path(ev, "to", "toBase64", r + path_end + 1, n - path_end - 2);
		json_object_object_add(ev, "isDir", json_object_new_boolean(r[1] == '1'));
		emit(ctx, ev);
		json_object_put(ev);
		return;
	}
}

void watch_records_feed(struct watch_records *p, const char *data, size_t n, watch_emit_fn *emit, void *ctx)
{
	for (size_t i = 0; i < n; i++) {
		char c = data[i];
		if (!p->started) {   /* the first line: "ok", or "E <kind>" */
			if (c != '\n') {
				if (p->len < sizeof(p->kind) + 2)
					p->rec[p->len++] = c;
				continue;
			}
			p->rec[p->len] = '\0';
			if (!strcmp(p->rec, "ok"))
				p->started = true;
			else if (!strncmp(p->rec, "E ", 2) && !p->kind[0])
				snprintf(p->kind, sizeof(p->kind), "%s", p->rec + 2);
			p->len = 0;
			continue;
		}
		if (p->skipping) {   /* what is left of a record past the bound */
			if (c == '\0')
				p->skipping = false;
			continue;
		}
		if (p->len == sizeof(p->rec)) {   /* the tool never writes one so long */
			p->len = 0;
			p->skipping = c != '\0';
			overflow(emit, ctx);
			continue;
		}
		p->rec[p->len++] = c;
		if (c != '\0')
			continue;
		size_t path_end = (size_t)((const char *)memchr(p->rec, '\0', p->len) - p->rec);
		if (p->rec[0] == TOOL_WATCH_MOVE && path_end + 1 == p->len)
			continue;   /* the new path is still to come */
		record(p->rec, p->len, path_end, emit, ctx);
		p->len = 0;
	}
}
