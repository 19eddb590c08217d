/* The request head of a terminal's WebSocket; see term_head.h. */
#include "term_head.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

/* The value of header name in head (lines after the first), trimmed, into
 * out; false when absent or too long. */
static bool header(const char *head, const char *name, char *out, size_t outlen)
{
	size_t nl = strlen(name);
	for (const char *l = strstr(head, "\r\n"); l && l[2] != '\r'; l = strstr(l + 2, "\r\n")) {
		const char *p = l + 2;
		if (strncasecmp(p, name, nl) || p[nl] != ':')
			continue;
		p += nl + 1;
		while (*p == ' ' || *p == '\t')
			p++;
		const char *e = strstr(p, "\r\n");
		if (!e)
			e = p + strlen(p);
		while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		if ((size_t)(e - p) >= outlen)
			return false;
		memcpy(out, p, (size_t)(e - p));
		out[e - p] = '\0';
		return true;
	}
	return false;
}

static bool has_token(const char *list, const char *token)
{
	size_t tl = strlen(token);
	for (const char *p = list; *p;) {
		while (*p == ' ' || *p == ',')
			p++;
		size_t n = strcspn(p, ",");
		size_t m = n;
		while (m > 0 && p[m - 1] == ' ')
			m--;
		if (m == tl && !strncasecmp(p, token, tl))
			return true;
		p += n;
	}
	return false;
}

/* "/api/rooms/<room>/sandbox/terminals/<tid>/ws[?query]" (the web server
 * sends only that shape here, but anything may come). */
static enum term_target parse_target(const char *target, char *room, char *tid, char *ticket)
{
	static const char a[] = "/api/rooms/", b[] = "/sandbox/terminals/", c[] = "/ws";
	bool ids_ok = true;
	if (strncmp(target, a, sizeof(a) - 1))
		return TERM_TARGET_NONE;
	const char *p = target + sizeof(a) - 1;
	size_t n = strcspn(p, "/");
	ids_ok &= room_id_valid_n(p, n);
	snprintf(room, ROOM_ID_MAX + 1, "%.*s", (int)(n <= ROOM_ID_MAX ? n : 0), p);
	p += n;
	if (strncmp(p, b, sizeof(b) - 1))
		return TERM_TARGET_NONE;
	p += sizeof(b) - 1;
	n = strcspn(p, "/");
	ids_ok &= n == TERM_ID_LEN;
	snprintf(tid, TERM_ID_LEN + 1, "%.*s", (int)(n == TERM_ID_LEN ? n : 0), p);
	p += n;
	if (strncmp(p, c, sizeof(c) - 1) || (p[3] && p[3] != '?'))
		return TERM_TARGET_NONE;
	ticket[0] = '\0';
	for (const char *q = p[3] ? p + 4 : ""; *q;) {
		size_t len = strcspn(q, "&");
		if (!strncmp(q, "ticket=", 7) && len - 7 <= TERM_TICKET_LEN) {
			memcpy(ticket, q + 7, len - 7);
			ticket[len - 7] = '\0';
		}
		q += len + (q[len] == '&');
	}
	return ids_ok ? TERM_TARGET_OK : TERM_TARGET_BAD_ID;
}

int term_head_parse(const char *head, struct term_head *h)
{
	char target[4200], v[256];
	memset(h, 0, sizeof(*h));
	if (strncmp(head, "GET ", 4))
		return -1;
	size_t n = strcspn(head + 4, " \r\n");
	const char *version = head + 4 + n;
	/* lighttpd asks in HTTP/1.0 but for an upgrade: a refusal is answered */
	if (n == 0 || n >= sizeof(target) ||
	    (strncmp(version, " HTTP/1.1\r\n", 11) && strncmp(version, " HTTP/1.0\r\n", 11)))
		return -1;
	memcpy(target, head + 4, n);
	target[n] = '\0';
	h->shape = parse_target(target, h->room, h->tid, h->ticket);
	h->upgrade = header(head, "Upgrade", v, sizeof(v)) && !strcasecmp(v, "websocket") &&
		     header(head, "Connection", v, sizeof(v)) && has_token(v, "upgrade") &&
		     header(head, "Sec-WebSocket-Key", h->key, sizeof(h->key)) && h->key[0];
	h->version13 = header(head, "Sec-WebSocket-Version", v, sizeof(v)) && !strcmp(v, "13");
	if (!header(head, "Authorization", h->auth, sizeof(h->auth)))
		h->auth[0] = '\0';
	return 0;
}
