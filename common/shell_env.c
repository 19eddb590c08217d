/* The shell's environment and its session: see shell_env.h. */
#include "shell_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
#include "session_vars.h"
#include "shquote.h"

#define ERR(...) errorf(err, errlen, __VA_ARGS__)

/* Every redirection costs dash about seven system calls (save, dup2,
 * restore), so the usual path has none: the saved directory is tested
 * before cd (2>/dev/null only on the way to a fallback), and the EXIT trap
 * moves stdout to fd 9 once for both of its writes (the shell is ending:
 * nothing else is written to stdout).  `command exec`: a command that
 * closed fd 9 gets dash's complaint on stderr and keeps its own exit status
 * (a plain special builtin's failure would end the shell with 2), and no
 * session is written to its stdout. */
#define WRAPPER_RUN \
	"__rb_c=$1; shift\n" \
	"if [ -n \"$__RB_SAVE\" ]; then\n" \
	"  unset __RB_SAVE\n" \
	"  trap '__RB_CWD=$PWD; export __RB_CWD; if command exec >&9; then export -p; echo \"#roombox-session-end\"; fi' EXIT\n" \
	"fi\n" \
	"eval \"$__rb_c\"\n"
static const char WRAPPER[] =
	"__RB_WRAPPER=\n"
	"__rb_h=$HOME __rb_u=$USER\n"
	"eval \"$__RB_SESSION\"; unset __RB_SESSION __RB_WRAPPER\n"
	"HOME=$__rb_h USER=$__rb_u LOGNAME=$__rb_u; unset __rb_h __rb_u\n"
	"if [ -n \"$__RB_ONEOFF_CWD\" ]; then\n"
	"  cd -- \"$__RB_ONEOFF_CWD\" || exit 1\n"
	"else\n"
	"  __rb_d=${__RB_CWD:-/workspace}\n"
	"  if ! { [ -d \"$__rb_d\" ] && [ -x \"$__rb_d\" ] && cd -- \"$__rb_d\"; }; then\n"
	"    cd /workspace 2>/dev/null || cd /\n"
	"  fi\n"
	"  unset __rb_d\n"
	"fi\n"
	"unset __RB_CWD __RB_ONEOFF_CWD\n"
	WRAPPER_RUN;

/* The same shell started with its session as its environment and in its
 * directory already (shell_env_direct): only the command and the trap. */
static const char WRAPPER_DIRECT[] =
	"__RB_WRAPPER=unset __RB_WRAPPER\n"
	WRAPPER_RUN;

static const char *const ENV_FIXED[] = {
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SHELL=/bin/sh", "LANG=C.UTF-8", "TERM=dumb",
};
#define N_ENV_FIXED (sizeof(ENV_FIXED) / sizeof(ENV_FIXED[0]))
/* who the shell is: the room's root or its user */
static const char *const ENV_ROOT[] = { "HOME=/root", "USER=root", "LOGNAME=root" };
static const char *const ENV_USER[] = { "HOME=/home/user", "USER=user", "LOGNAME=user" };
#define N_ENV_WHO 3

/* Room for `need` bytes in the growing buffer *buf (capacity *cap). */
static int reserve(char **buf, size_t *cap, size_t need)
{
	if (need <= *cap)
		return 0;
	char *p = realloc(*buf, need * 2);
	if (!p)
		return -1;
	*buf = p;
	*cap = need * 2;
	return 0;
}

static int append(char **buf, size_t *len, size_t *cap, const char *s)
{
	size_t n = strlen(s);
	if (reserve(buf, cap, *len + n + 1) < 0)
		return -1;
	memcpy(*buf + *len, s, n + 1);
	*len += n;
	return 0;
}

static bool shell_name(const char *s)
{
	if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z')))
		return false;
	for (s++; *s; s++)
		if (!(*s == '_' || (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9')))
			return false;
	return true;
}

static void env_add(struct shell_env *e, char *s)
{
	if (s)
		e->envp[e->n++] = s;
}

void shell_env_free(struct shell_env *e)
{
	for (size_t i = 0; e->envp && i < e->n; i++)
		free(e->envp[i]);
	free(e->envp);
	e->envp = NULL;
	e->n = 0;
}

/* The session text with the request's variables appended; NULL with err
 * (out of memory, or a value no shell word can hold). */
static char *session_text(const char *room, const char *old, const char *env, uint32_t nenv,
			  size_t *old_len, char *err, size_t errlen)
{
	size_t len = 0, cap = 256;
	char *s = malloc(cap);
	if (!s) {
		ERR("room %s: out of memory", room);
		return NULL;
	}
	s[0] = '\0';
	int bad = append(&s, &len, &cap, "__RB_SESSION=");
	bad |= append(&s, &len, &cap, old);
	*old_len = len - strlen("__RB_SESSION=");
	for (uint32_t i = 0; i < nenv; i++, env += strlen(env) + 1) {
		const char *eq = strchr(env, '=');
		char name[256];
		/* /bin/sh (dash) drops such names from the environment of
		 * everything it runs, so they cannot be passed on */
		if (!eq || (size_t)(eq - env) >= sizeof(name))
			continue;
		memcpy(name, env, (size_t)(eq - env));
		name[eq - env] = '\0';
		if (!shell_name(name))
			continue;
		bad |= append(&s, &len, &cap, "\nexport ");
		bad |= append(&s, &len, &cap, name);
		bad |= append(&s, &len, &cap, "=");
		char qerr[128], *v = shquote_alloc(eq + 1, strlen(eq + 1), qerr, sizeof(qerr));
		if (!v) {
			free(s);
			ERR("room %s: env %s: %s", room, name, qerr);
			return NULL;
		}
		bad |= append(&s, &len, &cap, v);
		free(v);
	}
	bad |= append(&s, &len, &cap, "\n");
	if (bad) {
		free(s);
		ERR("room %s: out of memory", room);
		return NULL;
	}
	return s;
}

int shell_env_build(struct shell_env *e, const char *room, const char *cmd, bool as_user, bool save,
		    const char *cwd, const char *old, const char *env, uint32_t nenv,
		    char *err, size_t errlen)
{
	*e = (struct shell_env){ 0 };
	e->envp = calloc(N_ENV_FIXED + N_ENV_WHO + 5, sizeof(char *));
	if (!e->envp)
		return ERR("room %s: out of memory", room);
	for (size_t i = 0; i < N_ENV_FIXED; i++)
		env_add(e, strdup(ENV_FIXED[i]));
	for (size_t i = 0; i < N_ENV_WHO; i++)
		env_add(e, strdup(as_user ? ENV_USER[i] : ENV_ROOT[i]));
	env_add(e, strdup(WRAPPER));
	if (save)
		env_add(e, strdup("__RB_SAVE=1"));
	if (cwd && asprintf(&e->envp[e->n], "__RB_ONEOFF_CWD=%s", cwd) > 0)
		e->n++;
	char *s = session_text(room, old, env, nenv, &e->old_len, err, errlen);
	if (!s)
		return -1;
	e->session = s;
	env_add(e, s);
	for (size_t i = 0; i < e->n; i++)
		if (strlen(e->envp[i]) > SHELL_ARG_STRLEN_MAX)
			return ERR("room %s: the environment (session and env) is larger than "
				   "a shell can take (%d bytes in one variable)", room, SHELL_ARG_STRLEN_MAX);
	if (strlen(cmd) > SHELL_ARG_STRLEN_MAX)
		return ERR("room %s: the command is %zu bytes; a shell takes at most %d",
			   room, strlen(cmd), SHELL_ARG_STRLEN_MAX);
	e->argv[0] = "/bin/sh";
	e->argv[1] = "-c";
	e->argv[2] = "eval \"$__RB_WRAPPER\"";
	e->argv[3] = "sh";
	e->argv[4] = cmd;
	e->argv[5] = NULL;
	return 0;
}

bool shell_env_session_new(const struct shell_env *e, const char *buf, size_t len, size_t *n)
{
	size_t m = strlen(SHELL_SESSION_END);
	if (len < m || len > SHELL_SESSION_MAX || memcmp(buf + len - m, SHELL_SESSION_END, m) != 0)
		return false;
	*n = len - m;
	return *n != e->old_len || memcmp(buf, e->session + strlen("__RB_SESSION="), *n) != 0;
}

/* ---- the session as the environment ------------------------------------- */

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

static const struct session_var *session_find(const struct session_vars *sv, const char *name)
{
	for (size_t i = 0; i < sv->n; i++)
		if (strcmp(sv->v[i].name, name) == 0)
			return &sv->v[i];
	return NULL;
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
		if (!known || (env_is(envp[i], "__RB_WRAPPER") && strcmp(envp[i], WRAPPER) != 0))
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

int shell_env_direct(char *const *envp, struct shell_direct *d)
{
	*d = (struct shell_direct){ 0 };
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
	size_t size = sizeof(WRAPPER_DIRECT) + sizeof("OLDPWD=/") + strlen("PWD=") + strlen(dir) + 1;
	for (size_t i = 0; i < nenv; i++)
		size += strlen(envp[i]) + 1;
	for (size_t i = 0; i < sv.n; i++)
		size += strlen(sv.v[i].name) + 1 + sv.v[i].value_len + 1;
	/* the inherited strings, the session's, OLDPWD, PWD, NULL */
	d->buf = malloc(size);
	d->envp = calloc(nenv + sv.n + 3, sizeof(char *));
	if (!d->buf || !d->envp) {
		session_vars_free(&sv);
		shell_direct_free(d);
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
			e[n++] = put(&o, WRAPPER_DIRECT, "", "");
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
