/* Preview request heads: see preview_head.h. */
#include "preview_head.h"

#include "http_lex.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define PREVIEW_PREFIX "/preview/"

int preview_token_valid(const char *s, size_t len)
{
	if (len != PREVIEW_TOKEN_LEN)
		return 0;
	for (size_t i = 0; i < len; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9')))
			return 0;
	return 1;
}

/* "METHOD SP target SP HTTP/1.x" ending at eol; fills the offsets. */
static int request_line(const char *buf, size_t eol, struct preview_head *h)
{
	size_t i = 0;
	while (i < eol && http_tchar(buf[i]))
		i++;
	if (i == 0 || i >= eol || buf[i] != ' ')
		return -1;
	h->method_len = i++;
	h->target_off = i;
	while (i < eol && buf[i] != ' ' && (unsigned char)buf[i] > 0x20 && buf[i] != 0x7f)
		i++;
	if (i == h->target_off || i >= eol || buf[i] != ' ')
		return -1;
	h->target_len = i - h->target_off;
	h->rest_off = i;
	size_t vlen = eol - (i + 1);
	if (vlen > 0 && buf[eol - 1] == '\r')
		vlen--;
	if (vlen != 8 || memcmp(buf + i + 1, "HTTP/1.", 7) != 0 ||
	    (buf[i + 8] != '0' && buf[i + 8] != '1'))
		return -1;
	return 0;
}

/* "/preview/<token>" then "/", "?" or the end: the token, and the target
 * becomes what follows ("/" at least). */
static int path_token(const char *buf, struct preview_head *h)
{
	const char *t = buf + h->target_off;
	size_t n = h->target_len, plen = strlen(PREVIEW_PREFIX);
	if (n < plen + PREVIEW_TOKEN_LEN || memcmp(t, PREVIEW_PREFIX, plen) != 0)
		return 0;
	if (!preview_token_valid(t + plen, PREVIEW_TOKEN_LEN))
		return -1;
	size_t after = plen + PREVIEW_TOKEN_LEN;
	if (after < n && t[after] != '/' && t[after] != '?')
		return -1;
	memcpy(h->token, t + plen, PREVIEW_TOKEN_LEN);
	h->token[PREVIEW_TOKEN_LEN] = '\0';
	h->target_off += after;
	h->target_len -= after;
	return 1;
}

/* The Host header's value (first one), trimmed; NULL if none. */
static const char *host_value(const char *buf, size_t from, size_t end, size_t *vlen)
{
	size_t i = from;
	while (i < end) {
		size_t eol = i;
		while (eol < end && buf[eol] != '\n')
			eol++;
		if (eol - i > 5 && strncasecmp(buf + i, "host:", 5) == 0) {
			size_t a = i + 5, b = eol;
			while (a < b && (buf[a] == ' ' || buf[a] == '\t'))
				a++;
			while (b > a && (buf[b - 1] == '\r' || buf[b - 1] == ' ' || buf[b - 1] == '\t'))
				b--;
			*vlen = b - a;
			return buf + a;
		}
		i = eol + 1;
	}
	return NULL;
}

/* "<port>-<roomId>-<token>.<domain>[:p]" (domain compared without case). */
static int host_token(const char *v, size_t n, const char *domain, struct preview_head *h)
{
	size_t dlen = strlen(domain), i = 0;
	const char *colon = memchr(v, ':', n);
	if (colon)
		n = (size_t)(colon - v);
	if (n < dlen + 2 || v[n - dlen - 1] != '.' || strncasecmp(v + n - dlen, domain, dlen) != 0)
		return 0;
	n -= dlen + 1;   /* the first label, whole: dots are not in it */
	if (memchr(v, '.', n))
		return 0;
	long port = 0;
	for (; i < n && i < 6 && v[i] >= '0' && v[i] <= '9'; i++)
		port = port * 10 + (v[i] - '0');
	if (i == 0 || i >= n || v[i] != '-' || port < 1 || port > 65535 || v[0] == '0')
		return 0;
	size_t room_off = i + 1;
	if (n < room_off + 2 + PREVIEW_TOKEN_LEN || v[n - PREVIEW_TOKEN_LEN - 1] != '-')
		return 0;
	size_t room_len = n - PREVIEW_TOKEN_LEN - 1 - room_off;
	if (room_len > ROOM_ID_MAX || !preview_token_valid(v + n - PREVIEW_TOKEN_LEN, PREVIEW_TOKEN_LEN))
		return 0;
	memcpy(h->room, v + room_off, room_len);
	h->room[room_len] = '\0';
	if (!room_id_valid(h->room))
		return 0;
	memcpy(h->token, v + n - PREVIEW_TOKEN_LEN, PREVIEW_TOKEN_LEN);
	h->token[PREVIEW_TOKEN_LEN] = '\0';
	h->port = (int)port;
	h->host_style = 1;
	return 1;
}

/* The fields framed and keep depend on (see the header). */
static void framing(const char *buf, size_t from, size_t end, struct preview_head *h)
{
	int length = 0, closes = 0;
	h->framed = 1;
	h->head_method = h->method_len == 4 && memcmp(buf, "HEAD", 4) == 0;
	for (size_t i = from; i < end && h->framed;) {
		size_t eol = i;
		while (eol < end && buf[eol] != '\n')
			eol++;
		size_t le = eol > i && buf[eol - 1] == '\r' ? eol - 1 : eol;
		if (le == i)
			break;   /* the blank line */
		size_t nlen, a, b, others;
		if (!http_field(buf, i, le, &nlen, &a, &b) || memchr(buf + i, '\r', le - i)) {
			h->framed = 0;   /* not clean: passed on as it came, to its close */
			break;
		}
		const char *name = buf + i;
		if (http_name_is(name, nlen, "content-length")) {
			unsigned long long x = 0;
			int ok = b > a && b - a <= 18;
			for (size_t k = a; k < b && ok; k++) {
				ok = buf[k] >= '0' && buf[k] <= '9';
				x = x * 10 + (unsigned long long)(buf[k] - '0');
			}
			if (!ok || (length && x != h->body_len))
				h->framed = 0;
			length = 1;
			h->body_len = x;
		} else if (http_name_is(name, nlen, "transfer-encoding") || http_name_is(name, nlen, "upgrade")) {
			h->framed = 0;
		} else if (http_name_is(name, nlen, "connection")) {
			http_list_has(buf + a, b - a, "keep-alive", &others);
			closes |= others > 0;
		}
		i = eol + 1;
	}
	if (!h->framed)
		h->body_len = 0;
	h->keep = h->framed && !closes && memcmp(buf + h->rest_off, " HTTP/1.1", 9) == 0;
}

enum preview_head_result preview_head_parse(const char *buf, size_t len, const char *domain,
					    struct preview_head *h)
{
	memset(h, 0, sizeof(*h));
	if (len > PREVIEW_HEAD_MAX)
		len = PREVIEW_HEAD_MAX;
	size_t end = http_head_end(buf, len);
	if (!end)
		return PREVIEW_HEAD_INCOMPLETE;
	if (memchr(buf, '\0', end))
		return PREVIEW_HEAD_BAD;
	/* a CR not before LF ends a line for some servers (Python's
	 * http.server), so a field behind it would pass every check here */
	for (const char *cr = buf; (cr = memchr(cr, '\r', end - (size_t)(cr - buf))); cr++)
		if (cr + 1 >= buf + end || cr[1] != '\n')
			return PREVIEW_HEAD_BAD;
	size_t eol = (size_t)((const char *)memchr(buf, '\n', end) - buf);
	if (request_line(buf, eol, h) < 0)
		return PREVIEW_HEAD_BAD;
	h->head_len = end;
	framing(buf, eol + 1, end, h);
	int p = path_token(buf, h);
	if (p < 0)
		return PREVIEW_HEAD_NO_TOKEN;
	if (p > 0)
		return PREVIEW_HEAD_OK;
	size_t vlen;
	const char *v = host_value(buf, eol + 1, end, &vlen);
	if (domain && *domain && v && host_token(v, vlen, domain, h))
		return PREVIEW_HEAD_OK;
	return PREVIEW_HEAD_NO_TOKEN;
}

/* The length of s[0..n) up to the first byte of stop. */
static size_t strcspn_n(const char *s, size_t n, const char *stop)
{
	size_t i = 0;
	while (i < n && !strchr(stop, s[i]))
		i++;
	return i;
}

/* Does an Authorization value v[0..n) hold an API credential anywhere: the
 * whole of it, or "Bearer <word>" for any word of it (a list such as
 * "Bearer x, Bearer y" names several, and a server may take any)? */
static int has_credential(const struct preview_strip *strip, const char *v, size_t n)
{
	static const char bearer[] = "Bearer ";
	char one[PREVIEW_HEAD_MAX + sizeof(bearer)];
	size_t a = 0, b = n;
	while (a < b && (v[a] == ' ' || v[a] == '\t'))
		a++;
	while (b > a && (v[b - 1] == ' ' || v[b - 1] == '\t'))
		b--;
	if (strip->api_credential(strip->ctx, v + a, b - a))
		return 1;
	for (size_t i = a, w; i < b; i += w ? w : 1) {
		w = strcspn_n(v + i, b - i, " \t,");
		if (w == 0 || w > PREVIEW_HEAD_MAX)
			continue;
		memcpy(one, bearer, sizeof(bearer) - 1);
		memcpy(one + sizeof(bearer) - 1, v + i, w);
		if (strip->api_credential(strip->ctx, one, sizeof(bearer) - 1 + w))
			return 1;
	}
	return 0;
}

/* The header line at buf[i..le) (its line end excluded) goes on?  next:
 * where the line after it starts, to see whether the field is folded. */
static int keep_line(const struct preview_head *h, const char *buf, size_t i, size_t le,
		     size_t next, const struct preview_strip *strip)
{
	size_t c = i, n;
	while (c < le && buf[c] != ':')
		c++;
	for (n = c; n > i && (buf[n - 1] == ' ' || buf[n - 1] == '\t'); n--)
		;   /* "Cookie :" is a cookie to a lenient server */
	const char *name = buf + i;
	if (h->keep && (http_name_is(name, n - i, "connection") || http_name_is(name, n - i, "keep-alive")))
		return 0;
	if (!strip)
		return 1;
	if (strip->cookies && http_name_is(name, n - i, "cookie"))
		return 0;
	if (!strip->api_credential || c == le || !http_name_is(name, n - i, "authorization"))
		return 1;
	/* folded over lines: no telling whose it is */
	if (next < h->head_len && (buf[next] == ' ' || buf[next] == '\t'))
		return 0;
	return !has_credential(strip, buf + c + 1, le - c - 1);
}

size_t preview_head_rewrite(const struct preview_head *h, const char *buf,
			    const struct preview_strip *strip, char *out, size_t outcap)
{
	/* path-style "/preview/<token>" alone or "?q" after it: "/" first */
	int slash = h->target_len == 0 || buf[h->target_off] != '/';
	size_t tail = h->head_len - h->rest_off;
	size_t need = h->method_len + 1 + (size_t)slash + h->target_len + tail;
	if (need > outcap)
		return 0;
	char *o = out;
	memcpy(o, buf, h->method_len + 1);
	o += h->method_len + 1;
	if (slash)
		*o++ = '/';
	memcpy(o, buf + h->target_off, h->target_len);
	o += h->target_len;
	/* the request line's rest, the lines that go on (a line folded into
	 * a field follows its field), the blank line */
	size_t i = h->rest_off;
	int keeping = 1;
	while (i < h->head_len) {
		size_t eol = i;
		while (eol < h->head_len && buf[eol] != '\n')
			eol++;
		size_t next = eol + 1, le = eol > i && buf[eol - 1] == '\r' ? eol - 1 : eol;
		if (le == i) {   /* the blank line */
			memcpy(o, buf + i, next - i);
			o += next - i;
			break;
		}
		if (i == h->rest_off)
			keeping = 1;
		else if (buf[i] != ' ' && buf[i] != '\t')
			keeping = keep_line(h, buf, i, le, next, strip);
		if (keeping) {
			memcpy(o, buf + i, next - i);
			o += next - i;
		}
		i = next;
	}
	return (size_t)(o - out);
}
