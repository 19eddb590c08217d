/* The tokens file (tokens_file: one bearer token a line), as roomboxctl
 * edits it.  roombox-fcgi stat()s that file on every authentication and
 * reads it again when it changed (fcgi-app/http/auth.c), so a token added or
 * revoked here counts from the next request on, without a restart. */
#ifndef ROOMBOX_CTL_TOKENS_H
#define ROOMBOX_CTL_TOKENS_H

#include <stddef.h>

#define TOKEN_FINGERPRINT_LEN 12   /* hex digits of SHA-256 shown */

/* The fingerprint of a token: TOKEN_FINGERPRINT_LEN hex digits + NUL. */
void token_fingerprint(const char *token, size_t len, char out[TOKEN_FINGERPRINT_LEN + 1]);

/* Each verb prints what it did (list: one fingerprint a line) and returns
 * 0, or prints why not to stderr and returns 1. */
int tokens_new(const char *path);
int tokens_list(const char *path);
int tokens_revoke(const char *path, const char *fingerprint);

/* The first token of the file, malloc'd, for roomboxctl's own requests;
 * NULL with a reason in err. */
char *tokens_first(const char *path, char *err, size_t errlen);

#endif
