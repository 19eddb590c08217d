/* Unit tests for common/session_vars.c and shell_env_direct (shell_direct.c)
 * (common/shell_env.c): the session dash's `export -p` writes is read as
 * dash reads it, and nothing else is taken.  dash itself is the reference:
 * every value of a byte corpus goes through a real `export -p`, and every
 * text the parser takes, hostile ones included, is evaluated by dash and
 * printed back with `export -p` -- the parser's reading must give the
 * same lines.  (A machine without dash skips those two, saying so.) */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "../fuzz/dash_quote.h"
#include "session_vars.h"
#include "shell_direct.h"
#include "shell_env.h"

#define DASH "/bin/dash"

static const struct session_var *find(const struct session_vars *sv, const char *name)
{
	for (size_t i = 0; i < sv->n; i++)
		if (strcmp(sv->v[i].name, name) == 0)
			return &sv->v[i];
	return NULL;
}

static void assert_value(const struct session_vars *sv, const char *name, const char *value)
{
	const struct session_var *v = find(sv, name);
	assert_non_null(v);
	if (!value) {
		assert_null(v->value);
		return;
	}
	assert_non_null(v->value);
	assert_int_equal(v->value_len, strlen(value));
	assert_memory_equal(v->value, value, strlen(value) + 1);
}

static int parse(const char *s, size_t n, struct session_vars *sv)
{
	return session_vars_parse(s, n, sv);
}

#define PARSE(lit, sv) parse(lit, sizeof(lit) - 1, sv)

static void test_dash_quoting_forms(void **state)
{
	(void)state;
	struct session_vars sv;
	const char s[] =
		"export X='a'\"'\"'b'\"''\"'c'\"'\"\n"
		"export Y=''\"'\"\n"
		"export NL='one\ntwo\n'\n"
		"export E=''\n"
		"export BARE=\n"
		"export U\n"
		"\n"
		"export S='it'\\''s'\n"
		"export D='$HOME `x` \\ \"q\"'";   /* no newline at the end */
	assert_int_equal(PARSE(s, &sv), 0);
	assert_int_equal(sv.n, 8);
	assert_value(&sv, "X", "a'b''c'");
	assert_value(&sv, "Y", "'");
	assert_value(&sv, "NL", "one\ntwo\n");
	assert_value(&sv, "E", "");
	assert_value(&sv, "BARE", "");
	assert_value(&sv, "U", NULL);
	assert_value(&sv, "S", "it's");
	assert_value(&sv, "D", "$HOME `x` \\ \"q\"");
	for (size_t i = 1; i < sv.n; i++)
		assert_true(strcmp(sv.v[i - 1].name, sv.v[i].name) < 0);
	session_vars_free(&sv);
	assert_int_equal(PARSE("", &sv), 0);
	assert_int_equal(sv.n, 0);
	session_vars_free(&sv);
}

static void test_a_later_line_wins(void **state)
{
	(void)state;
	struct session_vars sv;
	assert_int_equal(PARSE("export A='1'\nexport B\nexport A='2'\nexport B='x'\n"
			       "export C='c'\nexport C\nexport A='3'\n", &sv), 0);
	assert_int_equal(sv.n, 3);
	assert_value(&sv, "A", "3");
	assert_value(&sv, "B", "x");
	assert_value(&sv, "C", "c");     /* `export C` keeps the value C had */
	session_vars_free(&sv);
}

static void test_hostile_texts_are_refused(void **state)
{
	(void)state;
	static const char *const bad[] = {
		"export X='open\n", "export X='a'\"'", "export X=\"a\"\n", "export X=\"\"\n",
		"export X=a\n", "export X=$(id)\n", "export X='a' Y='b'\n", "export X='a';rm -rf /\n",
		"export X='a'\\\n", "export X=\\a\n", "export X='a' \n", " export X='a'\n",
		"exportX='a'\n", "export  X='a'\n", "export 1X='a'\n", "export X-Y='a'\n",
		"export X.Y='a'\n", "export ='a'\n", "export \n", "export", "declare -x X=\"a\"\n",
		"X='a'\n", "true\n", ": comment\n", "#roombox-session-end\n", "export X='a'\r\n",
		"export X='a'\nrm -rf /\n", "export X='a'\n\texport Y='b'\n", "export X=\"'\n",
		"unset X\n", "export -n X\n", "export X='\xff\x81'x\n",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct session_vars sv = { .n = 99 };
		if (parse(bad[i], strlen(bad[i]), &sv) == 0)
			fail_msg("taken: \"%s\"", bad[i]);
		assert_null(sv.v);
		assert_null(sv.buf);
	}
}

static void test_nul_bytes_truncation_and_limits(void **state)
{
	(void)state;
	struct session_vars sv;
	/* a NUL anywhere: inside quotes, in a name, between lines */
	const char nul1[] = "export X='a\0b'\n", nul2[] = "export X\0Y='a'\n", nul3[] = "export X='a'\n\0";
	assert_int_equal(parse(nul1, sizeof(nul1) - 1, &sv), -1);
	assert_int_equal(parse(nul2, sizeof(nul2) - 1, &sv), -1);
	assert_int_equal(parse(nul3, sizeof(nul3) - 1, &sv), -1);
	/* every prefix of a good text either parses or is refused, never read past */
	const char good[] = "export A='x'\"'\"'y'\nexport B\nexport C='z\nw'\n";
	for (size_t n = 0; n <= sizeof(good) - 1; n++) {
		char *copy = malloc(n ? n : 1);
		memcpy(copy, good, n);
		if (parse(copy, n, &sv) == 0)
			session_vars_free(&sv);
		free(copy);
	}
	/* a huge name is a name; a value as big as a session */
	size_t big = 200 * 1024;
	char *s = malloc(big + 32);
	memcpy(s, "export ", 7);
	memset(s + 7, 'N', big);
	memcpy(s + 7 + big, "='v'\n", 5);
	assert_int_equal(parse(s, 7 + big + 5, &sv), 0);
	assert_int_equal(sv.n, 1);
	assert_int_equal(strlen(sv.v[0].name), big);
	session_vars_free(&sv);
	free(s);
	/* SESSION_VARS_MAX names, and one more */
	size_t cap = (SESSION_VARS_MAX + 1) * 16;
	s = malloc(cap);
	size_t len = 0;
	for (int i = 0; i < SESSION_VARS_MAX; i++)
		len += (size_t)sprintf(s + len, "export V%d=''\n", i);
	assert_int_equal(parse(s, len, &sv), 0);
	assert_int_equal(sv.n, SESSION_VARS_MAX);
	session_vars_free(&sv);
	len += (size_t)sprintf(s + len, "export W=''\n");
	assert_int_equal(parse(s, len, &sv), -1);
	free(s);
}

/* ---- dash as the reference ------------------------------------------------ */

/* The parsed variables as dash's `export -p` prints them. */
static char *as_export_p(const struct session_vars *sv)
{
	size_t cap = 64;
	for (size_t i = 0; i < sv->n; i++)
		cap += strlen(sv->v[i].name) + 4 * sv->v[i].value_len + 16;
	char *o = malloc(cap);
	size_t n = 0;
	for (size_t i = 0; i < sv->n; i++) {
		n += (size_t)sprintf(o + n, "export %s", sv->v[i].name);
		if (sv->v[i].value) {
			o[n++] = '=';
			n += dash_quote(o + n, sv->v[i].value);
		}
		o[n++] = '\n';
	}
	o[n] = '\0';
	return o;
}

/* What `dash -c SCRIPT sh ARG` writes, in an empty environment. */
static char *dash_run(const char *script, const char *arg)
{
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid_t pid = fork();
	if (pid == 0) {
		char *const argv[] = { "dash", "-c", (char *)script, "sh", (char *)arg, NULL };
		char *const envp[] = { NULL };
		dup2(p[1], 1);
		close(p[0]);
		execve(DASH, argv, envp);
		_exit(127);
	}
	close(p[1]);
	size_t cap = 1 << 16, n = 0;
	char *out = malloc(cap + 1);
	ssize_t k;
	while ((k = read(p[0], out + n, cap - n)) > 0)
		if ((n += (size_t)k) == cap)
			out = realloc(out, (cap *= 2) + 1);
	close(p[0]);
	int st;
	waitpid(pid, &st, 0);
	out[n] = '\0';
	return out;
}

/* The lines of dash's `export -p` after it evaluated s (PWD, which dash
 * exports of its own, left out). */
static char *dash_reads(const char *s)
{
	return dash_run("eval \"$1\" && export -p | grep -v \"^export PWD='\"", s);
}

static void test_dash_reads_what_the_parser_took(void **state)
{
	(void)state;
	if (access(DASH, X_OK) != 0)
		skip();   /* cmocka: no dash to compare with */
	static const char *const texts[] = {
		"export X='a'\"'\"'b'\"''\"'c'\"'\"\nexport Y=''\"'\"\n",
		"export NL='one\ntwo\n'\nexport E=''\nexport BARE=\nexport U\n\n",
		"export S='it'\\''s'\\'\\'\nexport D='$HOME `x` \\ \"q\" ${a:-b}'\n",
		"export A='1'\nexport B\nexport A='2'\nexport B='x'\nexport C='c'\nexport C\n",
		"export CTL='\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a' UTF='\xc3\xa9\xe2\x9c\x93'\n",
		"export CTL='\x81\x82\x83\x84\x85\x86\x87\x88\x89\x8a'\nexport UTF='\xc3\xa9\xe2\x9c\x93'\n",
		"export T='\t\v\f\r\x01\x1f\x7f\xff'\nexport G='*?[a] ~ #'\n\n\n",
		"export _='x'\nexport __9='y'\nexport z=''\"''''\"''\n",
	};
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		struct session_vars sv;
		if (parse(texts[i], strlen(texts[i]), &sv) < 0)
			continue;   /* refused: the shell evaluates it, nothing to compare */
		char *mine = as_export_p(&sv), *dash = dash_reads(texts[i]);
		if (strcmp(mine, dash) != 0)
			fail_msg("text %zu: parsed\n%s\ndash read\n%s", i, mine, dash);
		free(mine);
		free(dash);
		session_vars_free(&sv);
	}
}

static void test_every_byte_through_dash_export_p(void **state)
{
	(void)state;
	if (access(DASH, X_OK) != 0)
		skip();
	/* values of every byte but NUL, runs of quotes, newlines: dash's own
	 * `export -p` of them must parse back to the same bytes */
	char vals[6][300];
	size_t k = 0;
	for (int b = 1; b < 256; b++)
		vals[0][k++] = (char)b;
	vals[0][k] = '\0';
	strcpy(vals[1], "'''");
	strcpy(vals[2], "a'b''c'''d''''");
	strcpy(vals[3], "\n\n'\n");
	strcpy(vals[4], "");
	strcpy(vals[5], "\\'\"$`");
	for (int i = 0; i < 6; i++) {
		char *out = dash_run("export V=\"$1\" W; export -p", vals[i]);
		struct session_vars sv;
		if (parse(out, strlen(out), &sv) < 0)
			fail_msg("dash's export -p refused: %s", out);
		assert_value(&sv, "V", vals[i]);
		assert_value(&sv, "W", NULL);
		session_vars_free(&sv);
		free(out);
	}
}

/* ---- shell_env_direct ------------------------------------------------------ */

static const char *envp_get(char *const *envp, const char *prefix)
{
	const char *found = NULL;
	for (size_t i = 0; envp[i]; i++)
		if (strncmp(envp[i], prefix, strlen(prefix)) == 0) {
			assert_null(found);   /* each name once */
			found = envp[i];
		}
	return found;
}

static int direct(const char *session, const char *cwd, const char *env, uint32_t nenv,
		  struct shell_direct *d)
{
	struct shell_env e;
	char err[256];
	assert_int_equal(shell_env_build(&e, "r1", "true", true, true, cwd, session, env, nenv,
					 err, sizeof(err)), 0);
	int rc = shell_env_direct(e.envp, d);
	shell_env_free(&e);   /* d owns copies */
	return rc;
}

static void test_direct_environment(void **state)
{
	(void)state;
	struct shell_direct d = { 0 };
	const char env[] = "R=it's\0";
	assert_int_equal(direct("export A='x\ny'\nexport HOME='/evil'\nexport PATH='/p'\n"
				"export PWD='/old'\nexport OLDPWD='/older'\nexport TERM\n"
				"export __RB_CWD='/usr/share'\n", NULL, env, 1, &d), 0);
	assert_string_equal(d.dir, "/usr/share");
	assert_string_equal(envp_get(d.envp, "A="), "A=x\ny");
	assert_string_equal(envp_get(d.envp, "R="), "R=it's");
	assert_string_equal(envp_get(d.envp, "HOME="), "HOME=/home/user");
	assert_string_equal(envp_get(d.envp, "USER="), "USER=user");
	assert_string_equal(envp_get(d.envp, "PATH="), "PATH=/p");
	assert_string_equal(envp_get(d.envp, "TERM="), "TERM=dumb");
	assert_string_equal(envp_get(d.envp, "PWD="), "PWD=/usr/share");
	assert_string_equal(envp_get(d.envp, "OLDPWD="), "OLDPWD=/");
	assert_string_equal(envp_get(d.envp, "__RB_SAVE="), "__RB_SAVE=1");
	assert_non_null(envp_get(d.envp, "__RB_WRAPPER="));
	assert_null(envp_get(d.envp, "__RB_SESSION="));
	assert_null(envp_get(d.envp, "__RB_CWD="));
	shell_direct_free(&d);
	/* no saved directory: the wrapper's first is /workspace */
	assert_int_equal(direct("", NULL, NULL, 0, &d), 0);
	assert_string_equal(d.dir, "/workspace");
	assert_string_equal(envp_get(d.envp, "PWD="), "PWD=/workspace");
	shell_direct_free(&d);
	assert_int_equal(direct("export __RB_CWD=''\n", NULL, NULL, 0, &d), 0);
	assert_string_equal(d.dir, "/workspace");
	shell_direct_free(&d);
}

static void test_direct_leaves_to_the_shell(void **state)
{
	(void)state;
	struct shell_direct d = { 0 };
	static const char *const left[] = {
		"export X='a'\n: anything\n",             /* not a session */
		"export NOVAL\n",                         /* exported, unset */
		"export __RB_CWD\n",
		"export IFS=':'\n", "export PPID='1'\n", "export OPTIND='2'\n",
		"export __RB_SAVE=''\n", "export __rb_c='x'\n",
		/* read by the shell's own start (the loader, libc) */
		"export LD_LIBRARY_PATH='/opt/lib'\n", "export LD_PRELOAD='/x.so'\n",
		"export GLIBC_TUNABLES='glibc.malloc.check=3'\n", "export MALLOC_CHECK_='3'\n",
		"export TMPDIR='/t'\n",
		"export __RB_CWD='relative'\n", "export __RB_CWD='/a//b'\n",
		"export __RB_CWD='/a/./b'\n", "export __RB_CWD='/a/../b'\n",
		"export __RB_CWD='/a/'\n", "export __RB_CWD='//a'\n",
	};
	for (size_t i = 0; i < sizeof(left) / sizeof(left[0]); i++)
		if (direct(left[i], NULL, NULL, 0, &d) == 0)
			fail_msg("taken directly: %s", left[i]);
	/* a one-off cwd keeps the wrapper's `cd -- X || exit 1` */
	assert_int_equal(direct("export A='1'\n", "/tmp", NULL, 0, &d), -1);
	/* a request's variable with a name the shell would not take is dropped
	 * by shell_env_build; one dash resets is left to the shell */
	const char ifs[] = "IFS=x\0";
	assert_int_equal(direct("", NULL, ifs, 1, &d), -1);
	/* a variable no environment string can hold (more than shell_env_build
	 * lets through: the keeper's check stands on its own) */
	struct shell_env e;
	char err[256];
	assert_int_equal(shell_env_build(&e, "r1", "true", true, true, NULL, "", NULL, 0,
					 err, sizeof(err)), 0);
	size_t big = SHELL_ARG_STRLEN_MAX;
	char *s = malloc(big + 64);
	int k = sprintf(s, "__RB_SESSION=export B='");
	memset(s + k, 'v', big - 1);
	strcpy(s + k + big - 1, "'\n");
	for (size_t i = 0; i < e.n; i++)
		if (strncmp(e.envp[i], "__RB_SESSION=", 13) == 0) {
			char *was = e.envp[i];
			e.envp[i] = s;
			assert_int_equal(shell_env_direct(e.envp, &d), -1);
			s[k + big - 2] = '\'';
			s[k + big - 1] = '\n';
			s[k + big] = '\0';
			assert_int_equal(shell_env_direct(e.envp, &d), 0);   /* one byte less: taken */
			shell_direct_free(&d);
			e.envp[i] = was;
		}
	shell_env_free(&e);
	free(s);
	/* a wrapper of another build */
	char *envp[] = { "__RB_WRAPPER=echo other", "__RB_SESSION=", NULL };
	assert_int_equal(shell_env_direct(envp, &d), -1);
	char *unknown[] = { "__RB_SESSION=", "LD_PRELOAD=/x.so", NULL };
	assert_int_equal(shell_env_direct(unknown, &d), -1);
	shell_direct_free(&d);
}

/* The keeper makes one environment per exec in its slot's memory: a
 * smaller one after a larger is made in the same memory, a refused one
 * in between leaves it, and none of the earlier one's variables is left. */
static void test_direct_memory_is_kept_from_exec_to_exec(void **state)
{
	(void)state;
	struct shell_direct d = { 0 };
	assert_int_equal(direct("export LONG='0123456789012345678901234567890123456789'\n"
				"export __RB_CWD='/usr/share/doc'\n", NULL, NULL, 0, &d), 0);
	char *buf = d.buf;
	char **envp = d.envp;
	assert_string_equal(envp_get(d.envp, "LONG="), "LONG=0123456789012345678901234567890123456789");
	assert_int_equal(direct("export X='a'\n: anything\n", NULL, NULL, 0, &d), -1);
	assert_null(d.dir);
	assert_int_equal(direct("export S='x'\n", NULL, NULL, 0, &d), 0);
	assert_ptr_equal(d.buf, buf);
	assert_ptr_equal(d.envp, envp);
	assert_string_equal(d.dir, "/workspace");
	assert_string_equal(envp_get(d.envp, "S="), "S=x");
	assert_null(envp_get(d.envp, "LONG="));
	assert_string_equal(envp_get(d.envp, "PWD="), "PWD=/workspace");
	shell_direct_free(&d);
	assert_null(d.buf);
	assert_null(d.envp);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dash_quoting_forms),
		cmocka_unit_test(test_a_later_line_wins),
		cmocka_unit_test(test_hostile_texts_are_refused),
		cmocka_unit_test(test_nul_bytes_truncation_and_limits),
		cmocka_unit_test(test_dash_reads_what_the_parser_took),
		cmocka_unit_test(test_every_byte_through_dash_export_p),
		cmocka_unit_test(test_direct_environment),
		cmocka_unit_test(test_direct_leaves_to_the_shell),
		cmocka_unit_test(test_direct_memory_is_kept_from_exec_to_exec),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
