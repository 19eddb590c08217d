#ifndef ROOMBOX_REQUEST_H
#define ROOMBOX_REQUEST_H
/* The helper's request reader: the first code to see the caller's bytes.
 *
 * Two steps, so that a fuzz target can run the second on any buffer:
 * request_read takes at most helper_request_max(max_body) bytes from a
 * descriptor (common/protocol.h), request_parse turns bytes into one JSON
 * object.  request_exec_parse then checks an exec's fields.  Every error
 * is a message for the caller's {"error","code":"invalid"}.
 */
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "exec.h"
#include "minijson.h"

/* Every byte of fd up to EOF into *buf (malloc'd, NUL-terminated after
 * *len bytes); -1 with err when there are more than
 * helper_request_max(max_body), when reading fails or memory runs out. */
int request_read(int fd, uint64_t max_body, char **buf, size_t *len, char *err, size_t errlen);

/* buf[0..len) as one JSON object: its root (owned by *doc, which the
 * caller frees with mj_free), or NULL with err and *doc NULL. */
const struct mj_value *request_parse(const char *buf, size_t len, struct mj_doc **doc,
				     char *err, size_t errlen);

/* The fields of {"op":"exec"} (room aside) checked and gathered into q,
 * which points into req; defaults and bounds from cfg.  NULL, or the
 * protocol's error code with err: "invalid" for a bad field, "failed" for
 * an env no shell can take (as exec.c answers one it finds while
 * building the environment: refused here before anything is built). */
const char *request_exec_parse(const struct mj_value *req, const struct config *cfg,
			       struct exec_order *q, char *err, size_t errlen);

/* Together, for main: read fd bounded and parse it. */
const struct mj_value *request_read_parse(int fd, uint64_t max_body, struct mj_doc **doc,
					  char *err, size_t errlen);

#endif
