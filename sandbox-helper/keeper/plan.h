/* One exec's plan, as the helper sends it to the keeper (keeper_proto.h):
 * a memfd holding a struct kp_blob, then argc and envc NUL-terminated
 * strings (with KP_TOOL, argv names a tool and envc is 0).  Read into
 * memory the keeper owns, with the argv and envp arrays the shell is
 * started with (spawn.c). */
#ifndef ROOMBOX_KEEPER_PLAN_H
#define ROOMBOX_KEEPER_PLAN_H

#include "keeper_proto.h"

struct exec_plan {
	struct kp_blob hdr;
	char *data;
	char **argv, **envp;
};

/* The blob in blob_fd (from offset 0, its whole size) into p.  -1 when it
 * is not a well-formed plan (p then holds what was allocated: plan_free
 * it either way). */
int plan_read(int blob_fd, struct exec_plan *p);
void plan_free(struct exec_plan *p);

#endif
