/* Bearer tokens.
 *
 * tokens_file holds one token a line; blank lines and surrounding whitespace
 * (CR included) are ignored.  The file is stat()ed on every check and read
 * again when it changed (mtime, ctime, size or inode, or changed within the
 * last two seconds), so adding or revoking a token needs no restart.  An empty, missing or unreadable file lets
 * nobody in, and says why in the log once per change.  Tokens are compared
 * in constant time. */
#ifndef ROOMBOX_FCGI_AUTH_H
#define ROOMBOX_FCGI_AUTH_H

#include <stdbool.h>
#include <stddef.h>

struct auth_tokens;

/* NULL only on allocation failure.  The file is read on first use. */
struct auth_tokens *auth_tokens_new(const char *path);
void auth_tokens_free(struct auth_tokens *t);

/* Is `authorization` (the Authorization header, may be NULL) "Bearer <a
 * listed token>"?  Thread-safe. */
bool auth_tokens_check(struct auth_tokens *t, const char *authorization);

/* How many tokens the file held at the last (re)load; -1 if unreadable. */
int auth_tokens_count(struct auth_tokens *t);

/* Constant-time equality of two byte strings: the time depends only on the
 * length of `given`, never on where they differ. */
bool auth_token_equal(const char *given, size_t given_len,
		      const char *known, size_t known_len);

/* The token of an Authorization header value: "Bearer" (any case), one or
 * more spaces, the token; trailing whitespace dropped.  NULL if not Bearer. */
const char *auth_bearer_token(const char *authorization, size_t *len);

#endif
