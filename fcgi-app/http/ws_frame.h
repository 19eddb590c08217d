/* WebSocket framing (RFC 6455), the server's side: reading a client's
 * frames into whole messages, writing the server's frames, and the
 * handshake's accept key.  For the routes whose WebSocket roombox-fcgi
 * itself ends (a room's terminal); the preview relay only carries a room's
 * own WebSocket bytes and parses none of them.
 *
 * A client's frames are untrusted bytes.  The reader refuses, with the
 * close code RFC 6455 gives and a reason to send with it: reserved bits
 * set (no extension is ever agreed), an unknown opcode, an unmasked frame,
 * a length not in its shortest form or with the top bit set, a control
 * frame fragmented or longer than 125 bytes, a continuation with no
 * message begun or a new message inside one, a message longer than the
 * reader's bound (1009), text or a close reason that is not UTF-8 (1007),
 * a close code no endpoint may send.  Memory is bounded by the caller's
 * frame buffer (one frame: ws_frame_max_wire) and the message being
 * assembled (at most its bound). */
#ifndef ROOMBOX_FCGI_WS_FRAME_H
#define ROOMBOX_FCGI_WS_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum ws_op { WS_CONT = 0x0, WS_TEXT = 0x1, WS_BINARY = 0x2, WS_CLOSE = 0x8, WS_PING = 0x9, WS_PONG = 0xA };

#define WS_CONTROL_MAX 125   /* a control frame's payload */
#define WS_HEADER_MAX  14    /* a client frame's header: 2 + 8 length + 4 mask */

/* close codes */
#define WS_CLOSE_NORMAL     1000
#define WS_CLOSE_GOING_AWAY 1001
#define WS_CLOSE_PROTOCOL   1002
#define WS_CLOSE_NO_STATUS  1005   /* never sent: a close without a code */
#define WS_CLOSE_BAD_DATA   1007
#define WS_CLOSE_POLICY     1008
#define WS_CLOSE_TOO_BIG    1009
#define WS_CLOSE_ERROR      1011

/* One connection's reader. */
struct ws_reader {
	size_t max_message;      /* bytes of one data message, all frames */
	uint8_t msg_op;          /* WS_TEXT or WS_BINARY being assembled, else 0 */
	unsigned char *msg;
	size_t msg_len, msg_cap;
};

/* What a fed frame completed.  op is WS_CONT when the frame was taken and
 * completes nothing yet (a fragment); else a whole message or a control
 * frame, data[0..len) valid until the next call.  For WS_CLOSE, code is
 * the peer's (WS_CLOSE_NO_STATUS when it gave none) and data its reason. */
struct ws_event {
	enum ws_op op;
	const unsigned char *data;
	size_t len;
	uint16_t code;
};

void ws_reader_init(struct ws_reader *r, size_t max_message);
void ws_reader_free(struct ws_reader *r);

/* The most bytes one acceptable frame takes on the wire: what a caller's
 * read buffer must be able to hold. */
size_t ws_frame_max_wire(const struct ws_reader *r);

/* Takes one frame from buf[0..len) (unmasking it in place).  Returns the
 * bytes it used (> 0) with *ev set; 0 when buf does not yet hold a whole
 * frame; -1 when the frame is refused, with *code the close code to send
 * and *why its reason (static text).  After -1 the connection is over. */
ssize_t ws_reader_feed(struct ws_reader *r, unsigned char *buf, size_t len, struct ws_event *ev,
		       uint16_t *code, const char **why);

/* A server frame's header (FIN set, unmasked) for a payload of len bytes
 * into out; its length (2, 4 or 10). */
size_t ws_header(unsigned char out[10], enum ws_op op, uint64_t len);

/* A close frame's payload: the code, big-endian, then as much of reason as
 * fits whole in a control frame (cut at a character boundary).  Its length. */
size_t ws_close_payload(unsigned char out[WS_CONTROL_MAX], uint16_t code, const char *reason);

/* Sec-WebSocket-Accept for the client's Sec-WebSocket-Key (which must be
 * the base64 of 16 bytes): 0 with the 28 characters and a NUL in out, or
 * -1 when the key is not such. */
int ws_accept_key(const char *key, size_t keylen, char out[29]);

#endif
