/* WebSocket framing, the server's side; see ws_frame.h. */
#include "ws_frame.h"
#include "textenc.h"

#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

void ws_reader_init(struct ws_reader *r, size_t max_message)
{
	memset(r, 0, sizeof(*r));
	r->max_message = max_message;
}

void ws_reader_free(struct ws_reader *r)
{
	free(r->msg);
	r->msg = NULL;
	r->msg_len = r->msg_cap = 0;
	r->msg_op = 0;
}

size_t ws_frame_max_wire(const struct ws_reader *r)
{
	size_t payload = r->max_message > WS_CONTROL_MAX ? r->max_message : WS_CONTROL_MAX;
	return WS_HEADER_MAX + payload;
}

static ssize_t refuse(uint16_t *code, const char **why, uint16_t c, const char *w)
{
	*code = c;
	*why = w;
	return -1;
}

/* Codes a peer may send in a close frame (RFC 6455 7.4, and the
 * registered 1012-1014); 1005, 1006 and 1015 are never sent. */
static bool close_code_ok(uint16_t c)
{
	if (c >= 3000 && c <= 4999)
		return true;
	return (c >= 1000 && c <= 1003) || (c >= 1007 && c <= 1014);
}

static int msg_append(struct ws_reader *r, const unsigned char *p, size_t n)
{
	if (r->msg_len + n > r->msg_cap) {
		size_t cap = r->msg_cap ? r->msg_cap : 256;
		while (cap < r->msg_len + n)
			cap *= 2;
		if (cap > r->max_message)
			cap = r->max_message;
		unsigned char *m = realloc(r->msg, cap ? cap : 1);
		if (!m)
			return -1;
		r->msg = m;
		r->msg_cap = cap;
	}
	if (n)
		memcpy(r->msg + r->msg_len, p, n);
	r->msg_len += n;
	return 0;
}

/* The header of the frame at buf: 0 when incomplete, -1 refused, else its
 * size with the payload's length and where its mask is. */
static ssize_t parse_header(const unsigned char *buf, size_t len, const struct ws_reader *r,
			    uint64_t *plen, uint16_t *code, const char **why)
{
	if (len < 2)
		return 0;
	uint8_t op = buf[0] & 0x0f;
	bool fin = buf[0] & 0x80;
	if (buf[0] & 0x70)
		return refuse(code, why, WS_CLOSE_PROTOCOL, "reserved bits set");
	if (op != WS_CONT && op != WS_TEXT && op != WS_BINARY && op != WS_CLOSE && op != WS_PING && op != WS_PONG)
		return refuse(code, why, WS_CLOSE_PROTOCOL, "unknown opcode");
	if (!(buf[1] & 0x80))
		return refuse(code, why, WS_CLOSE_PROTOCOL, "frame not masked");
	uint64_t n = buf[1] & 0x7f;
	size_t hl = 2;
	if (n == 126) {
		if (len < 4)
			return 0;
		n = (uint64_t)buf[2] << 8 | buf[3];
		hl = 4;
		if (n < 126)
			return refuse(code, why, WS_CLOSE_PROTOCOL, "length not in its shortest form");
	} else if (n == 127) {
		if (len < 10)
			return 0;
		n = 0;
		for (int i = 0; i < 8; i++)
			n = n << 8 | buf[2 + i];
		hl = 10;
		if (n >> 63)
			return refuse(code, why, WS_CLOSE_PROTOCOL, "length with its top bit set");
		if (n <= 0xffff)
			return refuse(code, why, WS_CLOSE_PROTOCOL, "length not in its shortest form");
	}
	if (op >= WS_CLOSE) {
		if (!fin)
			return refuse(code, why, WS_CLOSE_PROTOCOL, "fragmented control frame");
		if (n > WS_CONTROL_MAX)
			return refuse(code, why, WS_CLOSE_PROTOCOL, "control frame longer than 125 bytes");
	} else if (op == WS_CONT ? !r->msg_op : r->msg_op) {
		return refuse(code, why, WS_CLOSE_PROTOCOL,
			      op == WS_CONT ? "continuation without a message" : "new message inside a fragmented one");
	} else if (n > r->max_message || (op == WS_CONT && n > r->max_message - r->msg_len)) {
		return refuse(code, why, WS_CLOSE_TOO_BIG, "message too big");
	}
	*plen = n;
	return (ssize_t)(hl + 4);
}

static ssize_t control(unsigned char *p, size_t n, uint8_t op, struct ws_event *ev, uint16_t *code,
		       const char **why)
{
	ev->op = op;
	ev->data = p;
	ev->len = n;
	ev->code = 0;
	if (op != WS_CLOSE)
		return 0;
	if (n == 1)
		return refuse(code, why, WS_CLOSE_PROTOCOL, "close payload of one byte");
	ev->code = WS_CLOSE_NO_STATUS;
	if (n >= 2) {
		ev->code = (uint16_t)(p[0] << 8 | p[1]);
		ev->data = p + 2;
		ev->len = n - 2;
		if (!close_code_ok(ev->code))
			return refuse(code, why, WS_CLOSE_PROTOCOL, "close code not allowed");
		if (!utf8_valid((const char *)ev->data, ev->len))
			return refuse(code, why, WS_CLOSE_BAD_DATA, "close reason not UTF-8");
	}
	return 0;
}

ssize_t ws_reader_feed(struct ws_reader *r, unsigned char *buf, size_t len, struct ws_event *ev,
		       uint16_t *code, const char **why)
{
	uint64_t n;
	ssize_t hl = parse_header(buf, len, r, &n, code, why);
	if (hl <= 0)
		return hl;
	if (len < (size_t)hl || (uint64_t)(len - (size_t)hl) < n)
		return 0;
	const unsigned char *mask = buf + hl - 4;
	unsigned char *p = buf + hl;
	for (uint64_t i = 0; i < n; i++)
		p[i] ^= mask[i & 3];
	ssize_t used = hl + (ssize_t)n;
	uint8_t op = buf[0] & 0x0f;
	bool fin = buf[0] & 0x80;

	if (op >= WS_CLOSE)
		return control(p, (size_t)n, op, ev, code, why) < 0 ? -1 : used;
	if (op != WS_CONT)
		r->msg_op = op;
	if (fin && op != WS_CONT) {
		/* a whole message in one frame: no copy */
		ev->op = op;
		ev->data = p;
		ev->len = (size_t)n;
		r->msg_op = 0;
	} else {
		if (msg_append(r, p, (size_t)n) < 0)
			return refuse(code, why, WS_CLOSE_ERROR, "out of memory");
		ev->op = WS_CONT;
		ev->data = NULL;
		ev->len = 0;
		if (fin) {
			ev->op = r->msg_op;
			ev->data = r->msg;
			ev->len = r->msg_len;
			r->msg_op = 0;
			r->msg_len = 0;
		}
	}
	ev->code = 0;
	if (ev->op == WS_TEXT && !utf8_valid((const char *)ev->data, ev->len))
		return refuse(code, why, WS_CLOSE_BAD_DATA, "text message not UTF-8");
	return used;
}

size_t ws_header(unsigned char out[10], enum ws_op op, uint64_t len)
{
	out[0] = 0x80 | (uint8_t)op;
	if (len < 126) {
		out[1] = (uint8_t)len;
		return 2;
	}
	if (len <= 0xffff) {
		out[1] = 126;
		out[2] = (uint8_t)(len >> 8);
		out[3] = (uint8_t)len;
		return 4;
	}
	out[1] = 127;
	for (int i = 0; i < 8; i++)
		out[2 + i] = (uint8_t)(len >> (56 - 8 * i));
	return 10;
}

size_t ws_close_payload(unsigned char out[WS_CONTROL_MAX], uint16_t code, const char *reason)
{
	out[0] = (uint8_t)(code >> 8);
	out[1] = (uint8_t)code;
	size_t n = reason ? strlen(reason) : 0;
	if (n > WS_CONTROL_MAX - 2)
		n = WS_CONTROL_MAX - 2;
	/* never end inside a character: back off over continuation bytes */
	while (n > 0 && n < strlen(reason) && ((unsigned char)reason[n] & 0xc0) == 0x80)
		n--;
	memcpy(out + 2, reason ? reason : "", n);
	return 2 + n;
}

int ws_accept_key(const char *key, size_t keylen, char out[29])
{
	size_t raw_len;
	unsigned char *raw = base64_decode(key, keylen, &raw_len);
	if (!raw)
		return -1;
	free(raw);
	if (raw_len != 16)
		return -1;
	unsigned char cat[24 + sizeof(WS_GUID) - 1], digest[SHA_DIGEST_LENGTH];
	memcpy(cat, key, 24);
	memcpy(cat + 24, WS_GUID, sizeof(WS_GUID) - 1);
	SHA1(cat, sizeof(cat), digest);
	char *b = base64_encode(digest, sizeof(digest));
	if (!b)
		return -1;
	memcpy(out, b, 28);
	out[28] = '\0';
	free(b);
	return 0;
}
