/* The request head a preview connection starts with: which
 * exposure it names, and the head to send on into the room.
 *
 * Two forms name an exposure:
 *   path-style  GET /preview/<token>/rest HTTP/1.1      -> GET /rest HTTP/1.1
 *   host-style  Host: <port>-<roomId>-<token>.<preview_domain>[:p]
 *               (only when a preview_domain is given; target kept as is)
 * A path-style target wins over the Host.  The head is untrusted bytes from
 * the web server's client: the parser reads at most the bytes it is given,
 * never past PREVIEW_HEAD_MAX, and allocates nothing. */
#ifndef ROOMBOX_FCGI_PREVIEW_HEAD_H
#define ROOMBOX_FCGI_PREVIEW_HEAD_H

#include <stddef.h>

#include "roomid.h"

#define PREVIEW_HEAD_MAX (16u << 10)   /* a longer head is refused (431) */
#define PREVIEW_TOKEN_LEN 16

enum preview_head_result {
	PREVIEW_HEAD_INCOMPLETE,   /* no blank line yet: read more (up to the max) */
	PREVIEW_HEAD_BAD,          /* not an HTTP/1.x request head: 400 */
	PREVIEW_HEAD_NO_TOKEN,     /* names no exposure: 404 */
	PREVIEW_HEAD_OK,
};

struct preview_head {
	size_t head_len;           /* bytes up to and including the blank line */
	char token[PREVIEW_TOKEN_LEN + 1];
	int host_style;            /* 1: found in Host, then port/room are set */
	int port;                  /* host-style: the <port> label part */
	char room[ROOM_ID_MAX + 1];/* host-style: the <roomId> part, as sent */
	/* the request line's pieces, as offsets into the buffer */
	size_t method_len;         /* method at 0 */
	size_t target_off, target_len;   /* what to send instead of the target */
	size_t rest_off;           /* " HTTP/1.x\r\n..." up to head_len */
	/* framed: the request's end is known — no Upgrade, no
	 * Transfer-Encoding, a clean Content-Length or none: only its bytes
	 * go to the room; keep: framed, HTTP/1.1, a Connection of keep-alive
	 * or none, so the web server may send another request on the
	 * connection after the answer */
	int framed, keep;
	unsigned long long body_len;   /* framed: the body's bytes (Content-Length, or 0) */
	int head_method;           /* the method is HEAD: no body in the answer */
};

/* Is s exactly a token: PREVIEW_TOKEN_LEN of [a-z0-9]? */
int preview_token_valid(const char *s, size_t len);

/* Parse buf[0..len).  domain: preview_domain or NULL/"" (no host-style). */
enum preview_head_result preview_head_parse(const char *buf, size_t len, const char *domain,
					    struct preview_head *h);

/* What the rewrite leaves out of the header lines: the service's own
 * credentials, which a room's server must never see. */
struct preview_strip {
	int cookies;   /* every Cookie line (path-style: the API's origin) */
	/* an Authorization line whose value (trimmed; not NUL-terminated)
	 * this says is an API credential; NULL: none is.  A field folded over
	 * lines is left out whatever its value. */
	int (*api_credential)(void *ctx, const char *value, size_t len);
	void *ctx;
};

/* The head to send into the room: the request line with its target
 * rewritten, then the header lines unchanged but for those strip leaves
 * out (strip may be NULL) — and with keep, without the Connection and
 * Keep-Alive lines (HTTP/1.1's default: the room's server keeps its
 * connection, which the relay may use for a later request of the same
 * exposure).  Returns its length, or 0 if it does not fit in outcap
 * (never more than head_len + PREVIEW_HEAD_GROWTH). */
#define PREVIEW_HEAD_GROWTH 20
size_t preview_head_rewrite(const struct preview_head *h, const char *buf,
			    const struct preview_strip *strip, char *out, size_t outcap);

#endif
