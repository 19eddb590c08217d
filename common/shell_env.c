/* The shell's environment and its session: see shell_env.h. */
#include "shell_env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errbuf.h"
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
const char shell_wrapper[] =
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
const char shell_wrapper_direct[] =
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
		if (!shell_var_name(name, strlen(name)))
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
	env_add(e, strdup(shell_wrapper));
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
