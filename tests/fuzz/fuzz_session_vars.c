/* Fuzz target: a room's saved session read as variables
 * (common/session_vars.c) and handed to the shell as its environment
 * (shell_env_direct, common/shell_direct.c).  The session is bytes the room
 * wrote.
 *
 * Input: any bytes, as the session text.
 *
 * Invariants, for a text the parser takes:
 *  - each name is a shell name, once, in order; each value is NUL-free
 *    and value_len long;
 *  - a second reader of sh's token rules, written here rather than taken
 *    from the product (quotes and backslashes as POSIX says, anything the
 *    shell would expand, split or run is a refusal), takes the text too
 *    and reads the same variables: nothing is taken that the shell would
 *    read differently;
 *  - re-quoted with common/shquote.c ('\'' for a quote) and in dash's own
 *    quoting ("'" runs), as export lines, it parses back to the same.
 * And for any text, the environment shell_env_direct makes from it (as
 * shell_env_build passes it on) holds each name once, the fixed HOME,
 * USER and LOGNAME, no __RB_SESSION, and PWD naming an absolute dir. */
#include <stdint.h>
#include <string.h>

#include "dash_quote.h"
#include "fuzz.h"
#include "session_vars.h"
#include "shell_direct.h"
#include "shell_env.h"
#include "shquote.h"

struct ref_var {
	char *name, *value;   /* value NULL: no value */
};

/* A byte the shell takes as itself outside quotes in an assignment's
 * value: anything else is an operator, a blank, an expansion, a glob or
 * tilde, and this reader refuses it. */
static bool plain(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("_-./,:+%@^=", c));
}

/* The shell's reading of s as `export NAME[=WORD]` commands, one a line:
 * the count of variables into v (last value wins, `export NAME` keeps a
 * value), or -1 when any byte would be interpreted. */
static long ref_read(const char *s, size_t len, struct ref_var *v, size_t max)
{
	size_t i = 0, n = 0;
	while (i < len) {
		if (s[i] == '\n') {
			i++;
			continue;
		}
		if (len - i < 8 || memcmp(s + i, "export ", 7) != 0)
			return -1;
		i += 7;
		size_t n0 = i;
		while (i < len && (s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') ||
				   (s[i] >= 'A' && s[i] <= 'Z') || (i > n0 && s[i] >= '0' && s[i] <= '9')))
			i++;
		if (i == n0)
			return -1;
		char *name = strndup(s + n0, i - n0), *value = NULL;
		if (i < len && s[i] == '=') {
			value = malloc(len - i + 1);
			size_t o = 0;
			for (i++; i < len && s[i] != '\n';) {
				if (s[i] == '\'') {                 /* to the next ' */
					size_t j = i + 1;
					while (j < len && s[j] != '\'')
						j++;
					if (j == len)
						goto bad;
					memcpy(value + o, s + i + 1, j - i - 1);
					o += j - i - 1;
					i = j + 1;
				} else if (s[i] == '"') {          /* only bytes no expansion touches */
					size_t j = i + 1;
					for (; j < len && s[j] != '"'; j++) {
						if (s[j] == '$' || s[j] == '`' || s[j] == '\\')
							goto bad;
						value[o++] = s[j];
					}
					if (j == len)
						goto bad;
					i = j + 1;
				} else if (s[i] == '\\' && i + 1 < len && s[i + 1] != '\n') {
					value[o++] = s[i + 1];
					i += 2;
				} else if (plain(s[i])) {
					value[o++] = s[i++];
				} else {
					goto bad;
				}
			}
			value[o] = '\0';
			if (memchr(value, '\0', o))
				goto bad;
		}
		if (i < len && s[i] != '\n')
			goto bad;
		size_t k = 0;
		while (k < n && strcmp(v[k].name, name) != 0)
			k++;
		if (k == n) {
			if (n == max)
				goto bad;
			v[n++] = (struct ref_var){ name, value };
		} else {
			free(name);
			if (value) {
				free(v[k].value);
				v[k].value = value;
			}
		}
		continue;
bad:
		free(name);
		free(value);
		for (size_t m = 0; m < n; m++) {
			free(v[m].name);
			free(v[m].value);
		}
		return -1;
	}
	return (long)n;
}

static bool same_vars(const struct session_vars *a, const struct session_vars *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const struct session_var *x = &a->v[i], *y = &b->v[i];
		if (strcmp(x->name, y->name) != 0 || !x->value != !y->value)
			return false;
		if (x->value && (x->value_len != y->value_len || memcmp(x->value, y->value, x->value_len)))
			return false;
	}
	return true;
}

/* The variables written again as export lines: shquote's quoting, or
 * dash's ("'" runs), and parsed back. */
static void requote(const struct session_vars *sv, bool dash_style)
{
	size_t cap = 1;
	for (size_t i = 0; i < sv->n; i++)
		cap += strlen(sv->v[i].name) + 4 * sv->v[i].value_len + 16;
	char *t = malloc(cap), err[128];
	size_t n = 0;
	for (size_t i = 0; i < sv->n; i++) {
		const struct session_var *v = &sv->v[i];
		n += (size_t)sprintf(t + n, "export %s", v->name);
		if (v->value && !dash_style) {
			t[n++] = '=';
			ssize_t q = shquote(t + n, cap - n, v->value, v->value_len, err, sizeof(err));
			FUZZ_ASSERT(q >= 0, "shquote: %s", err);
			n += (size_t)q;
		} else if (v->value) {
			t[n++] = '=';
			n += dash_quote(t + n, v->value);
		}
		t[n++] = '\n';
	}
	struct session_vars back;
	FUZZ_ASSERT(session_vars_parse(t, n, &back) == 0, "re-quoted (%s) refused: %.*s",
		    dash_style ? "dash" : "shquote", (int)n, t);
	FUZZ_ASSERT(same_vars(sv, &back), "re-quoted (%s) reads otherwise", dash_style ? "dash" : "shquote");
	session_vars_free(&back);
	free(t);
}

static void check_parsed(const char *s, size_t len, const struct session_vars *sv)
{
	FUZZ_ASSERT(sv->n <= SESSION_VARS_MAX, "%zu variables", sv->n);
	for (size_t i = 0; i < sv->n; i++) {
		const struct session_var *v = &sv->v[i];
		FUZZ_ASSERT(shell_var_name(v->name, strlen(v->name)), "name %s", v->name);
		FUZZ_ASSERT(i == 0 || strcmp(sv->v[i - 1].name, v->name) < 0, "order at %s", v->name);
		FUZZ_ASSERT(!v->value || strlen(v->value) == v->value_len, "value of %s", v->name);
	}
	static struct ref_var ref[SESSION_VARS_MAX];
	long m = ref_read(s, len, ref, SESSION_VARS_MAX);
	FUZZ_ASSERT(m >= 0, "taken, but the shell would interpret a byte");
	FUZZ_ASSERT((size_t)m == sv->n, "%ld variables for the shell, %zu parsed", m, sv->n);
	for (long i = 0; i < m; i++) {
		const struct session_var *v = NULL;
		for (size_t k = 0; k < sv->n && !v; k++)
			if (strcmp(sv->v[k].name, ref[i].name) == 0)
				v = &sv->v[k];
		FUZZ_ASSERT(v, "%s not parsed", ref[i].name);
		FUZZ_ASSERT(!v->value == !ref[i].value && (!v->value || strcmp(v->value, ref[i].value) == 0),
			    "%s reads otherwise", ref[i].name);
		free(ref[i].name);
		free(ref[i].value);
	}
	requote(sv, false);
	requote(sv, true);
}

static void check_direct(const char *session)
{
	struct shell_env e;
	struct shell_direct d = { 0 };
	char err[256];
	if (shell_env_build(&e, "fz", "true", true, true, NULL, session, NULL, 0, err, sizeof(err)) < 0)
		return;
	if (shell_env_direct(e.envp, &d) == 0) {
		FUZZ_ASSERT(d.dir && d.dir[0] == '/', "directory %s", d.dir ? d.dir : "(none)");
		size_t n = 0;
		for (; d.envp[n]; n++) {
			const char *eq = strchr(d.envp[n], '=');
			FUZZ_ASSERT(eq && shell_var_name(d.envp[n], (size_t)(eq - d.envp[n])),
				    "not a NAME=value: %s", d.envp[n]);
			FUZZ_ASSERT(strncmp(d.envp[n], "__RB_SESSION=", 13) != 0, "the session passed on");
			for (size_t k = 0; k < n; k++)
				FUZZ_ASSERT(strncmp(d.envp[k], d.envp[n], (size_t)(eq - d.envp[n]) + 1) != 0,
					    "%.*s twice", (int)(eq - d.envp[n]), d.envp[n]);
			if (strncmp(d.envp[n], "HOME=", 5) == 0)
				FUZZ_ASSERT(strcmp(d.envp[n], "HOME=/home/user") == 0, "%s", d.envp[n]);
			if (strncmp(d.envp[n], "USER=", 5) == 0 || strncmp(d.envp[n], "LOGNAME=", 8) == 0)
				FUZZ_ASSERT(strcmp(eq, "=user") == 0, "%s", d.envp[n]);
		}
		FUZZ_ASSERT(n > 0 && strncmp(d.envp[n - 1], "PWD=", 4) == 0 &&
			    strcmp(d.envp[n - 1] + 4, d.dir) == 0, "PWD is not the directory");
	}
	shell_direct_free(&d);
	shell_env_free(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *s = (const char *)data;
	struct session_vars sv = { .n = 7 };
	if (session_vars_parse(s, size, &sv) == 0) {
		check_parsed(s, size, &sv);
		session_vars_free(&sv);
	} else {
		FUZZ_ASSERT(!sv.v && !sv.buf && sv.n == 0, "a refusal left something");
	}
	char *z = strndup(s, size);   /* what an environment string can carry */
	check_direct(z);
	free(z);
	return 0;
}
