/* Where a response from a room's server ends, and its head as the web
 * server gets it (the preview relay keeps the web server's connection for
 * the next request only after a response whose end it found itself).
 *
 * The bytes are the room's: untrusted.  The rule that keeps one room's
 * bytes out of another room's answers on a kept connection: the relay
 * passes on a response's bytes only up to the end found here, and a
 * response whose end the web server could place elsewhere (no length,
 * a transfer coding other than chunked, a 101, a head that is not clean
 * HTTP/1.x) goes on with "Connection: close" put in its head, so the web
 * server never sends another request on that connection.  The parser
 * reads only the bytes it is given and allocates nothing. */
#ifndef ROOMBOX_FCGI_PREVIEW_FRAME_H
#define ROOMBOX_FCGI_PREVIEW_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* room the head's rewrite may need beyond the bytes read ("Connection:
 * close" and a line end): a head is looked for only in cap - this */
#define FRAME_SLACK 32

enum frame_end {
	FRAME_NONE,      /* no body: the head is the whole response */
	FRAME_LENGTH,    /* Content-Length bytes */
	FRAME_CHUNKED,   /* chunked (RFC 9112 §7.1), found by frame_body */
	FRAME_CLOSE,     /* until the server closes; the web server's connection closes after it */
};

struct frame {
	enum frame_end end;
	bool keep;          /* the web server may send another request after this response */
	bool reuse;         /* the room's server keeps its connection after it (HTTP/1.1,
			     * no "close", its end found): the relay may send another
			     * request on it once the response is done, not broken, and
			     * no byte came past its end */
	bool done;          /* the response's last byte has been counted */
	bool broken;        /* chunked framing went wrong: nothing more may go on */
	int status;
	uint64_t left;      /* LENGTH: body bytes to come; CHUNKED: of this chunk's data */
	int cstate;         /* CHUNKED: where in the framing */
	unsigned line;      /* CHUNKED: bytes of the current size, extension or trailer line */
	size_t trailers;    /* CHUNKED: trailer bytes so far */
};

/* The response head at buf[0..*len), body bytes perhaps after it, in a
 * buffer of cap bytes.  head_request: the request was HEAD; may_keep: the
 * request allows a kept connection (else f->keep is false, and a 101, the
 * answer to an upgrade, goes on untouched).  Returns 0
 * while the head is not whole (read more, if *len < cap - FRAME_SLACK;
 * at that bound: -1, the head is too large to pass on).
 * Returns 1 when f is set and the head has been rewritten in place: its
 * Connection, Keep-Alive and Proxy-Connection fields removed, HTTP/1.0
 * made HTTP/1.1, "Connection: close" added unless f->keep; *len grows or
 * shrinks with it, and *head_out is the rewritten head's length (the body
 * bytes follow it).  A 101 or a head that is not clean goes on as it
 * came, "Connection: close" added, read to the close.  An interim answer
 * (another 1xx) is dropped from buf, and the head after it read instead
 * (0 while that is not whole). */
int frame_head(char *buf, size_t *len, size_t cap, bool head_request, bool may_keep,
	       struct frame *f, size_t *head_out);

/* Of the n body bytes at p, how many belong to the response; sets
 * f->done at its end (and f->broken, with done, where chunked framing
 * breaks: the bytes before it are the response's, nothing after). */
size_t frame_body(struct frame *f, const char *p, size_t n);

#endif
