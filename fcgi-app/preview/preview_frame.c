/* Response framing for the preview relay: see preview_frame.h. */
#include "preview_frame.h"

#include "http_lex.h"

#include <string.h>
#include <strings.h>

#define CLOSE_LINE "Connection: close\r\n"
#define CHUNK_LINE_MAX 4096         /* a chunk-size line with its extensions */
#define TRAILERS_MAX (16u << 10)

/* What the header fields say; bad: anything the relay does not take as
 * clean, then the response is passed on to its close. */
struct fields {
	bool bad, chunked, length;
	bool close;        /* the room's server ends its connection after it */
	uint64_t content_length;
};

static void field(struct fields *fs, const char *name, size_t nlen, const char *v, size_t vlen)
{
	if (http_name_is(name, nlen, "content-length")) {
		uint64_t x = 0;
		if (vlen == 0 || vlen > 18)
			fs->bad = true;
		for (size_t i = 0; i < vlen && !fs->bad; i++) {
			if (v[i] < '0' || v[i] > '9')
				fs->bad = true;
			x = x * 10 + (uint64_t)(v[i] - '0');
		}
		if (fs->length && fs->content_length != x)
			fs->bad = true;
		fs->length = true;
		fs->content_length = x;
	} else if (http_name_is(name, nlen, "connection")) {
		size_t others;
		fs->close |= http_list_has(v, vlen, "close", &others);
	} else if (http_name_is(name, nlen, "transfer-encoding")) {
		/* only a lone "chunked": any other coding is read to the close */
		if (fs->chunked || vlen != 7 || strncasecmp(v, "chunked", 7) != 0)
			fs->bad = true;
		fs->chunked = true;
	}
}

/* Hop-by-hop fields of the room's connection: not passed on. */
static bool hop_field(const char *name, size_t nlen)
{
	return http_name_is(name, nlen, "connection") || http_name_is(name, nlen, "keep-alive") ||
	       http_name_is(name, nlen, "proxy-connection");
}

/* "HTTP/1.x SP DDD" then SP or the line's end; the status, or -1. */
static int status_line(const char *s, size_t n)
{
	if (n < 12 || memcmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1') || s[8] != ' ')
		return -1;
	for (int i = 9; i < 12; i++)
		if (s[i] < '0' || s[i] > '9')
			return -1;
	if (n > 12 && s[12] != ' ')
		return -1;
	return (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
}

/* The line at buf[i..): its content's end (before CR LF or LF) and the
 * next line's start; false on a bare CR or NUL in it. */
static bool line_at(const char *buf, size_t i, size_t end, size_t *eol, size_t *next)
{
	size_t j = i;
	while (j < end && buf[j] != '\n') {
		if (buf[j] == '\0' || (buf[j] == '\r' && (j + 1 >= end || buf[j + 1] != '\n')))
			return false;
		j++;
	}
	*next = j + 1;
	*eol = j > i && buf[j - 1] == '\r' ? j - 1 : j;
	return true;
}

/* The response head's fields, in place: those of the room's connection
 * dropped (compact), then "Connection: close" put before the blank line
 * (close), body bytes moved to follow.  Returns the head's new length. */
static size_t head_rewrite(char *buf, size_t *len, size_t end, bool compact, bool close)
{
	size_t eol, next, w;
	line_at(buf, 0, end, &eol, &next);
	char blank[2];
	size_t blank_len = buf[end - 2] == '\r' ? 2 : 1;
	memcpy(blank, buf + end - blank_len, blank_len);
	if (compact) {
		w = next;
		for (size_t i = next; i < end - blank_len;) {
			size_t le, nx;
			line_at(buf, i, end, &le, &nx);
			size_t c = i;
			while (c < le && buf[c] != ':')
				c++;
			if (!hop_field(buf + i, c - i)) {
				memmove(buf + w, buf + i, nx - i);
				w += nx - i;
			}
			i = nx;
		}
	} else {
		w = end - blank_len;
	}
	size_t add = close ? strlen(CLOSE_LINE) : 0;
	size_t head = w + add + blank_len, body = *len - end;
	memmove(buf + head, buf + end, body);
	memcpy(buf + w, CLOSE_LINE, add);
	memcpy(buf + w + add, blank, blank_len);
	*len = head + body;
	return head;
}

/* frame_head for the first head in buf; 2 when it was an interim answer,
 * now dropped from buf. */
static int head_once(char *buf, size_t *len, size_t cap, bool head_request, bool may_keep,
		     struct frame *f, size_t *head_out)
{
	memset(f, 0, sizeof(*f));
	size_t limit = cap > FRAME_SLACK ? cap - FRAME_SLACK : 0;
	size_t end = http_head_end(buf, *len < limit ? *len : limit);
	if (!end)
		return *len < limit ? 0 : -1;
	/* first look, changing nothing */
	struct fields fs = { 0 };
	size_t eol, next;
	f->status = line_at(buf, 0, end, &eol, &next) ? status_line(buf, eol) : -1;
	if (f->status >= 100 && f->status < 200 && f->status != 101) {
		/* an interim answer is not passed on: nginx 1.22 would take it
		 * for the answer, and nginx from 1.29 reads past a 103 and
		 * frames the answer by the final head alone (a close put in
		 * the 103 would not be seen, the connection kept while the
		 * relay still passes on bytes); the final head is framed */
		memmove(buf, buf + end, *len - end);
		*len -= end;
		return 2;
	}
	fs.bad = f->status < 0;
	for (size_t i = next; !fs.bad && i < end;) {
		size_t le, nx;
		if (!line_at(buf, i, end, &le, &nx)) {
			fs.bad = true;
			break;
		}
		if (le == i)   /* the blank line */
			break;
		size_t name_len, a, b;
		if (!http_field(buf, i, le, &name_len, &a, &b)) {
			fs.bad = true;
			break;
		}
		field(&fs, buf + i, name_len, buf + a, b - a);
		/* nginx (1.22) takes only SP around a value: a Content-Length
		 * with a tab is none to it, read to the close; ended here, its
		 * client would wait for the close until the kept connection's
		 * own deadline */
		if (memchr(buf + i, '\t', le - i) && http_name_is(buf + i, name_len, "content-length"))
			fs.bad = true;
		i = nx;
	}
	bool http10 = !fs.bad && buf[7] == '0';
	if (fs.bad || f->status < 200 || (fs.chunked && (fs.length || http10))) {
		/* as it came, with "Connection: close" added, and read to the
		 * close: a 101 starts a tunnel, the rest is not clean HTTP/1.x */
		f->end = FRAME_CLOSE;
		*head_out = head_rewrite(buf, len, end, false, f->status != 101 || may_keep);
		return 1;
	}
	if (head_request || f->status == 204 || f->status == 304)
		f->end = FRAME_NONE;
	else if (fs.chunked)
		f->end = FRAME_CHUNKED;
	else if (fs.length)
		f->end = FRAME_LENGTH;
	else
		f->end = FRAME_CLOSE;
	f->left = f->end == FRAME_LENGTH ? fs.content_length : 0;
	f->keep = may_keep && f->end != FRAME_CLOSE;
	f->reuse = f->end != FRAME_CLOSE && !http10 && !fs.close;
	f->done = f->end == FRAME_NONE || (f->end == FRAME_LENGTH && f->left == 0);
	if (f->keep && http10)
		buf[7] = '1';
	*head_out = head_rewrite(buf, len, end, true, !f->keep);
	return 1;
}

int frame_head(char *buf, size_t *len, size_t cap, bool head_request, bool may_keep,
	       struct frame *f, size_t *head_out)
{
	int rc;
	while ((rc = head_once(buf, len, cap, head_request, may_keep, f, head_out)) == 2)
		;   /* an interim answer dropped: the next head */
	return rc;
}

/* chunked framing's states */
enum { C_SIZE, C_SIZE_MORE, C_EXT, C_SIZE_LF, C_DATA, C_DATA_CR, C_DATA_LF,
       C_TRAILER_START, C_TRAILER, C_TRAILER_LF, C_END_LF };

static int hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* One framing byte (not chunk data); false where the framing breaks. */
static bool chunk_byte(struct frame *f, char ch)
{
	int h;
	switch (f->cstate) {
	case C_SIZE:
	case C_SIZE_MORE:
		if ((h = hexval(ch)) >= 0) {
			if (f->left >> 56)
				return false;   /* past any size a body could have */
			f->left = f->left * 16 + (uint64_t)h;
			f->cstate = C_SIZE_MORE;
			break;
		}
		if (f->cstate == C_SIZE)
			return false;
		if (ch == ';' || ch == ' ' || ch == '\t')
			f->cstate = C_EXT;
		else if (ch == '\r')
			f->cstate = C_SIZE_LF;
		else if (ch == '\n')
			f->cstate = f->left ? C_DATA : C_TRAILER_START;
		else
			return false;
		break;
	case C_EXT:
		if (ch == '\r')
			f->cstate = C_SIZE_LF;
		else if (ch == '\n')
			f->cstate = f->left ? C_DATA : C_TRAILER_START;
		else if (ch == '\0')
			return false;
		break;
	case C_SIZE_LF:
		if (ch != '\n')
			return false;
		f->cstate = f->left ? C_DATA : C_TRAILER_START;
		break;
	case C_DATA_CR:
		if (ch == '\r')
			f->cstate = C_DATA_LF;
		else if (ch == '\n')
			f->cstate = C_SIZE;
		else
			return false;
		break;
	case C_DATA_LF:
		if (ch != '\n')
			return false;
		f->cstate = C_SIZE;
		break;
	case C_TRAILER_START:
		if (ch == '\r')
			f->cstate = C_END_LF;
		else if (ch == '\n')
			f->done = true;
		else if (http_tchar(ch))
			f->cstate = C_TRAILER;
		else
			return false;
		break;
	case C_TRAILER:
		if (ch == '\r')
			f->cstate = C_TRAILER_LF;
		else if (ch == '\n')
			f->cstate = C_TRAILER_START;
		else if (ch == '\0')
			return false;
		break;
	case C_TRAILER_LF:
		if (ch != '\n')
			return false;
		f->cstate = C_TRAILER_START;
		break;
	case C_END_LF:
		if (ch != '\n')
			return false;
		f->done = true;
		break;
	}
	if (f->cstate == C_SIZE || f->cstate == C_DATA || f->cstate == C_TRAILER_START)
		f->line = 0;   /* a line has ended */
	else if (++f->line > CHUNK_LINE_MAX)
		return false;
	if (f->cstate >= C_TRAILER_START && ++f->trailers > TRAILERS_MAX)
		return false;
	return true;
}

size_t frame_body(struct frame *f, const char *p, size_t n)
{
	if (f->done)
		return 0;
	if (f->end == FRAME_CLOSE)
		return n;
	if (f->end == FRAME_LENGTH) {
		size_t take = f->left < n ? (size_t)f->left : n;
		f->left -= take;
		f->done = f->left == 0;
		return take;
	}
	if (f->end != FRAME_CHUNKED)
		return 0;
	size_t i = 0;
	while (i < n && !f->done) {
		if (f->cstate == C_DATA) {
			size_t take = f->left < n - i ? (size_t)f->left : n - i;
			f->left -= take;
			i += take;
			if (!f->left)
				f->cstate = C_DATA_CR;
			continue;
		}
		if (!chunk_byte(f, p[i])) {
			f->broken = f->done = true;
			return i;
		}
		i++;
	}
	return i;
}
