/* The session as the shell's environment, for the keeper alone: see
 * shell_direct.h. */
#include "shell_direct.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session_vars.h"
#include "shell_env.h"

/* What shell_env_build puts in the environment besides the session: the
 * fixed defaults, who the shell is, and the wrapper's own. */
static const char *const ENV_KNOWN[] = {
	"PATH", "SHELL", "LANG", "TERM", "HOME", "USER", "LOGNAME", "__RB_WRAPPER", "__RB_SAVE",
	"__RB_SESSION",
};
#define N_ENV_KNOWN (sizeof(ENV_KNOWN) / sizeof(ENV_KNOWN[0]))

/* Variables the shell evaluating the session would treat otherwise than the
 * shell importing them: dash resets IFS, OPTIND and PPID after reading its
 * environment and keeps LINENO itself; __RB_* and __rb_* are the wrapper's
 * (a session setting __RB_SAVE would change what the wrapper does).  And
 * what the shell's own start reads, which an evaluated session only ever
 * gave the commands the shell runs: the dynamic loader's and libc's
 * variables (LD_LIBRARY_PATH, LD_PRELOAD, GLIBC_TUNABLES, ...: glibc's
 * list of those it ignores for a setuid program, and the prefixes). */
static bool name_not_direct(const char *name)
{
	static const char *const SPECIAL[] = {
		"IFS", "OPTIND", "PPID", "LINENO",
		"GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "NIS_PATH",
		"NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TMPDIR", "TZDIR",
	};
	static const char *const PREFIX[] = { "__RB_", "__rb_", "LD_", "MALLOC_", "GLIBC_" };
	for (size_t i = 0; i < sizeof(SPECIAL) / sizeof(SPECIAL[0]); i++)
		if (strcmp(name, SPECIAL[i]) == 0)
			return true;
	for (size_t i = 0; i < sizeof(PREFIX) / sizeof(PREFIX[0]); i++)
		if (strncmp(name, PREFIX[i], strlen(PREFIX[i])) == 0)
			return true;
	return false;
}

/* Replaced whatever the session says: who the shell is stays the fixed
 * one (the wrapper restores it after the session), PWD and OLDPWD are the
 * wrapper's cd's (see shell_env_direct), __RB_CWD is where that goes. */
static bool name_replaced(const char *name)
{
	static const char *const R[] = { "HOME", "USER", "LOGNAME", "PWD", "OLDPWD", "__RB_CWD" };
	for (size_t i = 0; i < sizeof(R) / sizeof(R[0]); i++)
		if (strcmp(name, R[i]) == 0)
			return true;
	return false;
}

/* The length of "NAME=" in an environment string, or 0. */
static size_t env_name_len(const char *s)
{
	const char *eq = strchr(s, '=');
	return eq ? (size_t)(eq - s) : 0;
}

static bool env_is(const char *s, const char *name)
{
	size_t n = strlen(name);
	return strncmp(s, name, n) == 0 && s[n] == '=';
}

/* A directory as dash's `cd -L` would write it into PWD: absolute, no
 * empty, . or .. component, no trailing slash.  Any other spelling cd
 * would rewrite, so it is left to the wrapper. */
static bool dir_canonical(const char *d)
{
	if (d[0] != '/')
		return false;
	if (d[1] == '\0')
		return true;
	for (const char *c = d + 1;; ) {
		const char *e = strchrnul(c, '/');
		size_t n = (size_t)(e - c);
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		if (!*e)
			return true;
		c = e + 1;
	}
}

static int name_is(const void *name, const void *var)
{
	return strcmp(name, ((const struct session_var *)var)->name);
}

/* sv is sorted by name, each name once (session_vars_parse) */
static const struct session_var *session_find(const struct session_vars *sv, const char *name)
{
	return sv->n ? bsearch(name, sv->v, sv->n, sizeof(*sv->v), name_is) : NULL;
}

/* Checks every input string and every session variable; *cwd the saved
 * directory (NULL: none).  false: leave it to the wrapper. */
static bool direct_possible(char *const *envp, const struct session_vars *sv, const char **cwd)
{
	*cwd = NULL;
	for (size_t i = 0; envp[i]; i++) {
		size_t n = env_name_len(envp[i]);
		bool known = false;
		for (size_t k = 0; k < N_ENV_KNOWN && !known; k++)
			known = n == strlen(ENV_KNOWN[k]) && strncmp(envp[i], ENV_KNOWN[k], n) == 0;
		/* a wrapper of another build (a keeper older than its helper) */
		if (!known || (env_is(envp[i], "__RB_WRAPPER") && strcmp(envp[i], shell_wrapper) != 0))
			return false;
	}
	for (size_t i = 0; i < sv->n; i++) {
		const struct session_var *v = &sv->v[i];
		if (strcmp(v->name, "__RB_CWD") == 0) {
			if (!v->value || (v->value[0] && !dir_canonical(v->value)))
				return false;
			*cwd = v->value[0] ? v->value : NULL;
			continue;
		}
		if (name_not_direct(v->name))
			return false;
		if (v->value && strlen(v->name) + 1 + v->value_len > SHELL_ARG_STRLEN_MAX)
			return false;
		if (v->value || name_replaced(v->name))
			continue;
		/* `export NAME` without a value: exported and unset, which an
		 * environment cannot say -- unless NAME is in it already */
		bool inherited = false;
		for (size_t k = 0; envp[k] && !inherited; k++)
			inherited = env_is(envp[k], v->name);
		if (!inherited)
			return false;
	}
	return true;
}

/* One string at *o, a b and c joined (memcpy, not stpcpy: the sanitizers
 * see every byte read). */
static char *put(char **o, const char *a, const char *b, const char *c)
{
	char *s = *o;
	const char *parts[] = { a, b, c };
	for (int i = 0; i < 3; i++) {
		size_t n = strlen(parts[i]);
		memcpy(*o, parts[i], n);
		*o += n;
	}
	*(*o)++ = '\0';
	return s;
}

/* d's memory grown to size bytes of strings and n pointers, where it has
 * less (realloc keeps what it had on failure: still d's to free). */
static int direct_room(struct shell_direct *d, size_t size, size_t n)
{
	if (size > d->buf_cap) {
		char *b = realloc(d->buf, size);
		if (!b)
			return -1;
		d->buf = b;
		d->buf_cap = size;
	}
	if (n > d->envp_cap) {
		char **e = realloc(d->envp, n * sizeof(*e));
		if (!e)
			return -1;
		d->envp = e;
		d->envp_cap = n;
	}
	return 0;
}

int shell_env_direct(char *const *envp, struct shell_direct *d)
{
	d->dir = NULL;
	const char *session = NULL;
	size_t nenv = 0;
	for (; envp[nenv]; nenv++)
		if (env_is(envp[nenv], "__RB_SESSION"))
			session = envp[nenv] + strlen("__RB_SESSION=");
	struct session_vars sv;
	const char *cwd;
	if (!session || session_vars_parse(session, strlen(session), &sv) < 0)
		return -1;
	if (!direct_possible(envp, &sv, &cwd)) {
		session_vars_free(&sv);
		return -1;
	}
	const char *dir = cwd ? cwd : "/workspace";
	size_t size = strlen(shell_wrapper_direct) + 1 + sizeof("OLDPWD=/") + strlen("PWD=") + strlen(dir) + 1;
	for (size_t i = 0; i < nenv; i++)
		size += strlen(envp[i]) + 1;
	for (size_t i = 0; i < sv.n; i++)
		size += strlen(sv.v[i].name) + 1 + sv.v[i].value_len + 1;
	/* the inherited strings, the session's, OLDPWD, PWD, NULL */
	if (direct_room(d, size, nenv + sv.n + 3) < 0) {
		session_vars_free(&sv);
		return -1;
	}
	char *o = d->buf, **e = d->envp;
	size_t n = 0;
	for (size_t i = 0; i < nenv; i++) {
		size_t k = env_name_len(envp[i]);
		char name[16];
		snprintf(name, sizeof(name), "%.*s", (int)k, envp[i]);
		const struct session_var *v = session_find(&sv, name);
		if (env_is(envp[i], "__RB_SESSION"))
			continue;
		if (env_is(envp[i], "__RB_WRAPPER"))
			e[n++] = put(&o, shell_wrapper_direct, "", "");
		else if (v && v->value && !name_replaced(name))
			continue;   /* the session's value, below */
		else
			e[n++] = put(&o, envp[i], "", "");
	}
	for (size_t i = 0; i < sv.n; i++)
		if (sv.v[i].value && !name_replaced(sv.v[i].name))
			e[n++] = put(&o, sv.v[i].name, "=", sv.v[i].value);
	/* the wrapper's cd ran in the shell's first directory, /, so it left
	 * OLDPWD=/; PWD names the directory (dash keeps an environment's PWD
	 * when it is the current directory, as cd would have set it) */
	e[n++] = put(&o, "OLDPWD=/", "", "");
	e[n] = put(&o, "PWD=", dir, "");   /* dir may be in sv: freed after */
	d->dir = e[n] + strlen("PWD=");
	e[n + 1] = NULL;
	session_vars_free(&sv);
	return 0;
}

void shell_direct_free(struct shell_direct *d)
{
	free(d->buf);
	free(d->envp);
	*d = (struct shell_direct){ 0 };
}
