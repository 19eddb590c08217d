/* Reading one exec's plan from its memfd (see plan.h).  The bytes come
 * from the helper (root), but a memfd's contents are whatever was written
 * to it: every count and string is checked against the blob's size. */
#include "plan.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* KP_TOOL (without environment), KP_DETACH, both, or neither */
static bool flags_valid(const struct kp_blob *h)
{
	if ((h->flags & KP_TOOL) && h->envc != 0)
		return false;
	return (h->flags & ~(KP_TOOL | KP_DETACH)) == 0;
}

int plan_read(int blob_fd, struct exec_plan *p)
{
	struct stat st;
	if (fstat(blob_fd, &st) < 0 || (size_t)st.st_size < sizeof(p->hdr) || st.st_size > (64 << 20))
		return -1;
	p->data = malloc((size_t)st.st_size + 1);
	if (!p->data || pread(blob_fd, p->data, (size_t)st.st_size, 0) != st.st_size)
		return -1;
	p->data[st.st_size] = '\0';
	memcpy(&p->hdr, p->data, sizeof(p->hdr));
	if (p->hdr.magic != KP_MAGIC || p->hdr.argc < 1 || p->hdr.argc > 64 || p->hdr.envc > 4096 ||
	    (p->hdr.who != KP_AS_ROOT && p->hdr.who != KP_AS_USER) || !flags_valid(&p->hdr))
		return -1;
	p->argv = calloc(p->hdr.argc + 1, sizeof(char *));
	p->envp = calloc(p->hdr.envc + 1, sizeof(char *));
	if (!p->argv || !p->envp)
		return -1;
	char *s = p->data + sizeof(p->hdr), *end = p->data + st.st_size;
	for (uint32_t i = 0; i < p->hdr.argc + p->hdr.envc; i++) {
		if (s >= end)
			return -1;
		if (i < p->hdr.argc)
			p->argv[i] = s;
		else
			p->envp[i - p->hdr.argc] = s;
		s += strlen(s) + 1;
	}
	return 0;
}

void plan_free(struct exec_plan *p)
{
	free(p->data);
	free(p->argv);
	free(p->envp);
	*p = (struct exec_plan){ 0 };
}
