/* minijson — the helper's JSON reader and writer (see minijson.h).
 *
 * The reader is a recursive descent over the text with a depth limit and a
 * limit on the number of values; every node and decoded string lives in one
 * document that mj_free releases.  Strings are decoded into their own
 * allocations (chained on the document).  The members of the arrays and
 * objects being read are pushed on one stack shared by every level, and
 * copied into an exact-size array when their container closes: no
 * container leaves a temporary vector behind (the helper's allocator does
 * not reuse what is freed in its middle).
 */
#include "minijson.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct chunk {
	struct chunk *next;
	char data[];
};

struct mj_doc {
	struct chunk *chunks;   /* every allocation, freed together */
	struct mj_value root;
};

struct parser {
	struct mj_doc *doc;
	const char *p, *end, *start;
	char *err;
	size_t errlen;
	bool failed;
	int why;                    /* errno for the caller: EINVAL, ENOMEM, E2BIG */
	size_t values;              /* read so far, at most MJ_MAX_VALUES */
	struct mj_member *stack;    /* members of the open containers */
	size_t top, cap;
};

static void *doc_alloc(struct parser *ps, size_t n)
{
	struct chunk *c = malloc(sizeof(*c) + n);
	if (!c)
		return NULL;
	c->next = ps->doc->chunks;
	ps->doc->chunks = c;
	return c->data;
}

static int error_at(struct parser *ps, const char *why)
{
	if (!ps->failed)
		snprintf(ps->err, ps->errlen, "at byte %zu: %s", (size_t)(ps->p - ps->start), why);
	if (!ps->failed)
		ps->why = EINVAL;
	ps->failed = true;
	return -1;
}

static int error_why(struct parser *ps, const char *why, int code)
{
	bool first = !ps->failed;
	error_at(ps, why);
	if (first)
		ps->why = code;
	return -1;
}

static int out_of_memory(struct parser *ps)
{
	return error_why(ps, "out of memory", ENOMEM);
}

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static bool literal(struct parser *ps, const char *word)
{
	size_t n = strlen(word);
	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0)
		return false;
	ps->p += n;
	return true;
}

static int hex4(const char *s, unsigned *out)
{
	unsigned v = 0;
	for (int i = 0; i < 4; i++) {
		char c = s[i];
		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*out = v;
	return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xC0 | (cp >> 6));
		o[1] = (char)(0x80 | (cp & 0x3F));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xE0 | (cp >> 12));
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		return 3;
	}
	o[0] = (char)(0xF0 | (cp >> 18));
	o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
	o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
	o[3] = (char)(0x80 | (cp & 0x3F));
	return 4;
}

/* \uXXXX (and a following low surrogate) at ps->p, just after the 'u'. */
static int unicode_escape(struct parser *ps, char *o, size_t *n)
{
	unsigned cp, lo;
	if (ps->end - ps->p < 4 || hex4(ps->p, &cp) < 0)
		return error_at(ps, "bad \\u escape");
	ps->p += 4;
	if (cp >= 0xD800 && cp <= 0xDBFF && ps->end - ps->p >= 6 && ps->p[0] == '\\' && ps->p[1] == 'u' &&
	    hex4(ps->p + 2, &lo) == 0 && lo >= 0xDC00 && lo <= 0xDFFF) {
		ps->p += 6;
		cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
	} else if (cp >= 0xD800 && cp <= 0xDFFF) {
		cp = 0xFFFD;
	}
	*n = put_utf8(o, cp);
	return 0;
}

/* A string at ps->p (on the opening quote).  The decoded text is never
 * longer than the source, so one allocation of the source's size does. */
static int parse_string(struct parser *ps, const char **out, size_t *outlen)
{
	const char *s = ++ps->p;
	while (ps->p < ps->end && *ps->p != '"') {
		if (*ps->p == '\\' && ps->p + 1 < ps->end)
			ps->p++;
		ps->p++;
	}
	if (ps->p >= ps->end) {
		ps->p = s - 1;
		return error_at(ps, "unterminated string");
	}
	size_t srclen = (size_t)(ps->p - s);
	char *o = doc_alloc(ps, srclen + 1);
	if (!o)
		return out_of_memory(ps);
	size_t n = 0;
	ps->p = s;
	while (*ps->p != '"') {
		unsigned char c = (unsigned char)*ps->p;
		if (c < 0x20)
			return error_at(ps, "control character in string");
		if (c != '\\') {
			o[n++] = (char)c;
			ps->p++;
			continue;
		}
		ps->p++;
		char e = *ps->p++;
		switch (e) {
		case '"': o[n++] = '"'; break;
		case '\\': o[n++] = '\\'; break;
		case '/': o[n++] = '/'; break;
		case 'b': o[n++] = '\b'; break;
		case 'f': o[n++] = '\f'; break;
		case 'n': o[n++] = '\n'; break;
		case 'r': o[n++] = '\r'; break;
		case 't': o[n++] = '\t'; break;
		case 'u': {
			size_t k;
			if (unicode_escape(ps, o + n, &k) < 0)
				return -1;
			n += k;
			break;
		}
		default:
			ps->p--;
			return error_at(ps, "bad escape");
		}
	}
	ps->p++;
	o[n] = '\0';
	*out = o;
	*outlen = n;
	return 0;
}

static bool digit(const struct parser *ps)
{
	return ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9';
}

static int parse_number(struct parser *ps, struct mj_value *v)
{
	const char *s = ps->p;
	bool integral = true;
	if (ps->p < ps->end && *ps->p == '-')
		ps->p++;
	if (!digit(ps))
		return error_at(ps, "bad number");
	if (*ps->p == '0')
		ps->p++;
	else
		while (digit(ps))
			ps->p++;
	if (ps->p < ps->end && *ps->p == '.') {
		integral = false;
		ps->p++;
		if (!digit(ps))
			return error_at(ps, "bad number");
		while (digit(ps))
			ps->p++;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
		integral = false;
		ps->p++;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		if (!digit(ps))
			return error_at(ps, "bad number");
		while (digit(ps))
			ps->p++;
	}
	size_t n = (size_t)(ps->p - s);
	char small[64], *buf = n < sizeof(small) ? small : malloc(n + 1);
	if (!buf)
		return out_of_memory(ps);
	memcpy(buf, s, n);
	buf[n] = '\0';
	v->type = MJ_NUMBER;
	v->number = strtod(buf, NULL);
	if (integral) {
		errno = 0;
		long long i = strtoll(buf, NULL, 10);
		if (errno == 0) {
			v->is_int = true;
			v->integer = i;
		}
	}
	if (buf != small)
		free(buf);
	return 0;
}

static int parse_value(struct parser *ps, struct mj_value *v, int depth);

/* Room on the stack for one more member. */
static int stack_reserve(struct parser *ps)
{
	if (ps->top < ps->cap)
		return 0;
	size_t cap = ps->cap ? ps->cap * 2 : 64;
	struct mj_member *g = realloc(ps->stack, cap * sizeof(*g));
	if (!g)
		return out_of_memory(ps);
	ps->stack = g;
	ps->cap = cap;
	return 0;
}

/* One member of an object (key, ':', value) or array (value) onto the
 * stack.  The value is read into a local first: reading it may grow, and
 * so move, the stack. */
static int parse_member(struct parser *ps, bool object, int depth)
{
	struct mj_member m = { 0 };
	skip_ws(ps);
	if (object) {
		if (ps->p >= ps->end || *ps->p != '"')
			return error_at(ps, "expected a string key");
		if (parse_string(ps, &m.key, &m.key_len) < 0)
			return -1;
		skip_ws(ps);
		if (ps->p >= ps->end || *ps->p != ':')
			return error_at(ps, "expected ':'");
		ps->p++;
	}
	if (parse_value(ps, &m.value, depth) < 0 || stack_reserve(ps) < 0)
		return -1;
	ps->stack[ps->top++] = m;
	return 0;
}

/* Members of an array (keys NULL) or object, up to the closing bracket. */
static int parse_members(struct parser *ps, struct mj_value *v, bool object, int depth)
{
	char close = object ? '}' : ']';
	size_t base = ps->top;
	ps->p++;
	skip_ws(ps);
	if (ps->p < ps->end && *ps->p == close) {
		ps->p++;
		v->type = object ? MJ_OBJECT : MJ_ARRAY;
		return 0;
	}
	for (;;) {
		if (parse_member(ps, object, depth) < 0)
			return -1;
		skip_ws(ps);
		if (ps->p < ps->end && *ps->p == ',') {
			ps->p++;
			continue;
		}
		if (ps->p < ps->end && *ps->p == close) {
			ps->p++;
			break;
		}
		return error_at(ps, object ? "expected ',' or '}'" : "expected ',' or ']'");
	}
	size_t n = ps->top - base;
	v->members = doc_alloc(ps, n * sizeof(*v->members));
	if (!v->members)
		return out_of_memory(ps);
	memcpy(v->members, ps->stack + base, n * sizeof(*v->members));
	ps->top = base;
	v->len = n;
	v->type = object ? MJ_OBJECT : MJ_ARRAY;
	return 0;
}

static int parse_value(struct parser *ps, struct mj_value *v, int depth)
{
	memset(v, 0, sizeof(*v));
	skip_ws(ps);
	if (ps->p >= ps->end)
		return error_at(ps, "expected a value");
	if (++ps->values > MJ_MAX_VALUES)
		return error_why(ps, "more than " MJ_STR(MJ_MAX_VALUES) " values", E2BIG);
	switch (*ps->p) {
	case '{':
	case '[':
		if (depth >= MJ_MAX_DEPTH)
			return error_at(ps, "nested too deeply");
		return parse_members(ps, v, *ps->p == '{', depth + 1);
	case '"':
		v->type = MJ_STRING;
		return parse_string(ps, &v->str, &v->len);
	case 't':
	case 'f':
		v->type = MJ_BOOL;
		v->boolean = *ps->p == 't';
		return literal(ps, v->boolean ? "true" : "false") ? 0 : error_at(ps, "bad literal");
	case 'n':
		v->type = MJ_NULL;
		return literal(ps, "null") ? 0 : error_at(ps, "bad literal");
	default:
		return parse_number(ps, v);
	}
}

struct mj_doc *mj_parse(const char *text, size_t len, char *err, size_t errlen)
{
	struct mj_doc *d = calloc(1, sizeof(*d));
	if (!d) {
		snprintf(err, errlen, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	struct parser ps = { .doc = d, .p = text, .end = text + len, .start = text,
			     .err = err, .errlen = errlen };
	if (parse_value(&ps, &d->root, 0) == 0) {
		skip_ws(&ps);
		if (ps.p != ps.end)
			error_at(&ps, "text after the value");
	}
	free(ps.stack);
	if (ps.failed) {
		mj_free(d);
		errno = ps.why;
		return NULL;
	}
	return d;
}

const struct mj_value *mj_root(const struct mj_doc *d)
{
	return &d->root;
}

void mj_free(struct mj_doc *d)
{
	if (!d)
		return;
	for (struct chunk *c = d->chunks, *next; c; c = next) {
		next = c->next;
		free(c);
	}
	free(d);
}

const struct mj_value *mj_get(const struct mj_value *obj, const char *key)
{
	if (!obj || obj->type != MJ_OBJECT)
		return NULL;
	size_t n = strlen(key);
	for (size_t i = obj->len; i-- > 0;)
		if (obj->members[i].key_len == n && memcmp(obj->members[i].key, key, n) == 0)
			return &obj->members[i].value;
	return NULL;
}

const char *mj_get_str(const struct mj_value *obj, const char *key)
{
	const struct mj_value *v = mj_get(obj, key);
	return v && v->type == MJ_STRING ? v->str : NULL;
}

/* ---- writer -------------------------------------------------------------- */

void mjw_init(struct mj_writer *w)
{
	memset(w, 0, sizeof(*w));
	w->first[0] = true;
}

static void put(struct mj_writer *w, const char *s, size_t n)
{
	if (w->oom)
		return;
	if (w->len + n + 1 > w->cap) {
		size_t c = w->cap ? w->cap : 256;
		while (c < w->len + n + 1)
			c *= 2;
		char *b = realloc(w->buf, c);
		if (!b) {
			w->oom = true;
			return;
		}
		w->buf = b;
		w->cap = c;
	}
	memcpy(w->buf + w->len, s, n);
	w->len += n;
	w->buf[w->len] = '\0';
}

/* Before any value or key: the comma between members. */
static void separate(struct mj_writer *w)
{
	if (w->after_key) {
		w->after_key = false;
		return;
	}
	if (!w->first[w->depth])
		put(w, ",", 1);
	w->first[w->depth] = false;
}

static void open_level(struct mj_writer *w, char c)
{
	separate(w);
	put(w, &c, 1);
	if (w->depth >= MJ_MAX_DEPTH) {
		w->oom = true;   /* reported as a failure by mjw_finish */
		return;
	}
	w->first[++w->depth] = true;
}

static void close_level(struct mj_writer *w, char c)
{
	if (w->depth == 0) {
		w->oom = true;
		return;
	}
	w->depth--;
	put(w, &c, 1);
}

void mjw_object_begin(struct mj_writer *w) { open_level(w, '{'); }
void mjw_object_end(struct mj_writer *w) { close_level(w, '}'); }
void mjw_array_begin(struct mj_writer *w) { open_level(w, '['); }
void mjw_array_end(struct mj_writer *w) { close_level(w, ']'); }

static void put_escaped(struct mj_writer *w, const char *s, size_t n)
{
	put(w, "\"", 1);
	size_t run = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *esc = NULL;
		char u[8];
		if (c == '"')
			esc = "\\\"";
		else if (c == '\\')
			esc = "\\\\";
		else if (c == '\n')
			esc = "\\n";
		else if (c == '\t')
			esc = "\\t";
		else if (c == '\r')
			esc = "\\r";
		else if (c < 0x20) {
			snprintf(u, sizeof(u), "\\u%04x", c);
			esc = u;
		}
		if (!esc)
			continue;
		put(w, s + run, i - run);
		put(w, esc, strlen(esc));
		run = i + 1;
	}
	put(w, s + run, n - run);
	put(w, "\"", 1);
}

void mjw_key(struct mj_writer *w, const char *key)
{
	separate(w);
	put_escaped(w, key, strlen(key));
	put(w, ":", 1);
	w->after_key = true;
}

void mjw_string(struct mj_writer *w, const char *s, size_t n)
{
	separate(w);
	put_escaped(w, s, n);
}

void mjw_cstring(struct mj_writer *w, const char *s)
{
	if (!s)
		mjw_null(w);
	else
		mjw_string(w, s, strlen(s));
}

void mjw_int(struct mj_writer *w, int64_t v)
{
	char b[32];
	separate(w);
	put(w, b, (size_t)snprintf(b, sizeof(b), "%" PRId64, v));
}

void mjw_bool(struct mj_writer *w, bool v)
{
	separate(w);
	put(w, v ? "true" : "false", v ? 4 : 5);
}

void mjw_null(struct mj_writer *w)
{
	separate(w);
	put(w, "null", 4);
}

void mjw_number_text(struct mj_writer *w, const char *text)
{
	separate(w);
	put(w, text, strlen(text));
}

char *mjw_finish(struct mj_writer *w, size_t *len)
{
	char *out = w->buf;
	size_t n = w->len;
	bool ok = !w->oom && w->depth == 0 && !w->after_key && out;
	w->buf = NULL;
	mjw_free(w);
	if (!ok) {
		free(out);
		return NULL;
	}
	if (len)
		*len = n;
	return out;
}

void mjw_free(struct mj_writer *w)
{
	free(w->buf);
	mjw_init(w);
}
