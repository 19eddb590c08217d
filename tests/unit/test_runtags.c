/* Unit tests for fcgi-app/messages/runtags.c: the original service's executeCommands, to the
 * character.
 *
 * Each row of the table is an assistant message, the commands the fake
 * sandbox expects to be asked to run (in this order, and no others), what
 * each gives, and the text the original service's JavaScript returns for it.  The
 * expected strings were checked against the original service's function under Node 20
 * (with the same fake sandbox); the one place we differ on purpose is the
 * split surrogate pair, where JavaScript keeps a lone high surrogate and we
 * write U+FFFD (see runtags.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "runtags.h"

#define FFFD "\xEF\xBF\xBD"
#define E_ACUTE "\xC3\xA9"		/* é: 2 bytes, 1 UTF-16 unit */
#define GRIN "\xF0\x9F\x98\x80"		/* 😀: 4 bytes, 2 UTF-16 units */

/* Long literals, spelled out by repetition: X4(X100("a")) is 400 "a"s. */
#define X2(s) s s
#define X4(s) X2(s) X2(s)
#define X5(s) X4(s) s
#define X9(s) X4(s) X5(s)
#define X10(s) X5(s) X5(s)
#define X100(s) X10(X10(s))
#define X500(s) X5(X100(s))

/* A string literal that may hold NUL bytes, with its length. */
struct bytes {
	const char *s;
	size_t len;
};
#define B(lit) { lit, sizeof(lit) - 1 }

/* ---- the fake sandbox ---- */

enum step_kind {
	RAN,		/* the command ran: out/err as given (any exit status) */
	FAILED,		/* the sandbox failed: error as given (NULL: none) */
	SHELL,		/* run it in the tiny stateful shell below */
};

struct step {
	struct bytes cmd;	/* what runtags must ask for; {NULL} ends the list */
	enum step_kind kind;
	const char *out, *err, *error;
};

#define FAKE_FILES 4

struct fake {
	const struct step *steps;
	size_t next;
	char cat_error[96];
	struct {
		char name[32];
		char data[64];
	} files[FAKE_FILES];
};

static char *dup_or_null(const char *s, size_t *len)
{
	*len = s ? strlen(s) : 0;
	return s ? strdup(s) : NULL;
}

/* A shell that knows two commands, enough for "a later command reads what
 * an earlier one wrote": `echo WORD > FILE` and `cat FILE`. */
static void fake_shell(struct fake *f, const char *cmd, const char **out,
		       const char **err)
{
	char word[32], name[32];

	*out = *err = NULL;
	if (sscanf(cmd, "echo %31s > %31s", word, name) == 2) {
		for (int i = 0; i < FAKE_FILES; i++) {
			if (f->files[i].name[0] == '\0' || strcmp(f->files[i].name, name) == 0) {
				snprintf(f->files[i].name, sizeof(f->files[i].name), "%s", name);
				snprintf(f->files[i].data, sizeof(f->files[i].data), "%s\n", word);
				return;
			}
		}
		fail_msg("fake shell: too many files");
	}
	if (sscanf(cmd, "cat %31s", name) == 1) {
		for (int i = 0; i < FAKE_FILES; i++) {
			if (strcmp(f->files[i].name, name) == 0) {
				*out = f->files[i].data;
				return;
			}
		}
		snprintf(f->cat_error, sizeof(f->cat_error),
			 "cat: %s: No such file or directory\n", name);
		*err = f->cat_error;	/* exit status 1: still "Output" */
		return;
	}
	fail_msg("fake shell: unknown command \"%s\"", cmd);
}

static int fake_exec(void *ctx, const char *cmd, size_t cmd_len,
		     struct runtags_exec_result *res)
{
	struct fake *f = ctx;
	const struct step *st = &f->steps[f->next];
	const char *out, *err;

	if (!st->cmd.s)
		fail_msg("unexpected command \"%s\"", cmd);
	assert_int_equal(cmd_len, st->cmd.len);
	assert_memory_equal(cmd, st->cmd.s, cmd_len);
	assert_int_equal(cmd[cmd_len], '\0');
	f->next++;

	if (st->kind == FAILED) {
		res->error = dup_or_null(st->error, &res->error_len);
		return -1;
	}
	out = st->out;
	err = st->err;
	if (st->kind == SHELL)
		fake_shell(f, cmd, &out, &err);
	res->out = dup_or_null(out, &res->out_len);
	res->err = dup_or_null(err, &res->err_len);
	return 0;
}

/* ---- the table ---- */

#define NO_COMMANDS { { .cmd = { NULL, 0 } } }

struct runtags_case {
	const char *name;
	struct bytes in;
	struct step steps[4];
	struct bytes want;
};

static const struct runtags_case cases[] = {
	/* -- plain text -- */
	{ "no tags", B("Just text, no commands."), NO_COMMANDS,
	  B("Just text, no commands.") },
	{ "no tags, trimmed", B(" \t\nhello\r\n "), NO_COMMANDS, B("hello") },
	{ "empty text", B(""), NO_COMMANDS, B("") },

	/* -- one tag: the original service's own example -- */
	{ "one tag, the original service's example",
	  B("I'll create the file for you.\n<run>echo 'Hello World' > hello.txt</run>"),
	  { { B("echo 'Hello World' > hello.txt"), RAN, "", "", NULL } },
	  B("I'll create the file for you.\n\n\nOutput (echo 'Hello World' > hello.txt):\n[no output]") },
	{ "one tag with output",
	  B("Listing:<run>ls</run>done"),
	  { { B("ls"), RAN, "a.txt\nb.txt\n", "", NULL } },
	  B("Listing:done\n\nOutput (ls):\na.txt\nb.txt") },

	/* -- several tags: in order, one at a time, with state between -- */
	{ "later command reads what an earlier one wrote",
	  B("First <run>echo hi > f.txt</run> then <run>cat f.txt</run>."),
	  { { B("echo hi > f.txt"), SHELL, NULL, NULL, NULL },
	    { B("cat f.txt"), SHELL, NULL, NULL, NULL } },
	  B("First  then .\n\nOutput (echo hi > f.txt):\n[no output]\n\nOutput (cat f.txt):\nhi") },
	{ "same commands the other way round: the file is not there yet",
	  B("<run>cat f.txt</run><run>echo hi > f.txt</run><run>cat f.txt</run>"),
	  { { B("cat f.txt"), SHELL, NULL, NULL, NULL },
	    { B("echo hi > f.txt"), SHELL, NULL, NULL, NULL },
	    { B("cat f.txt"), SHELL, NULL, NULL, NULL } },
	  B("Output (cat f.txt):\ncat: f.txt: No such file or directory\n"
	    "\n\nOutput (echo hi > f.txt):\n[no output]"
	    "\n\nOutput (cat f.txt):\nhi") },

	/* -- empty commands: skipped, tags still removed -- */
	{ "empty and whitespace-only tags",
	  B("a<run></run>b<run>  \n\t </run>c<run>\xE3\x80\x80\xC2\xA0\xEF\xBB\xBF</run>d"),
	  NO_COMMANDS, B("abcd") },
	{ "only an empty tag: trims to nothing",
	  B("  <run> </run>\n"), NO_COMMANDS, B("") },
	{ "JS whitespace around the text: trims to nothing",
	  B("\xE3\x80\x80<run></run>\xEF\xBB\xBF\xE2\x80\xA8"), NO_COMMANDS, B("") },

	/* -- trim() is JavaScript's -- */
	{ "command trimmed of JS whitespace",
	  B("<run>\xE3\x80\x80\xEF\xBB\xBF ls -a \xE2\x80\xA8\xC2\xA0\v\f</run>"),
	  { { B("ls -a"), RAN, "x\n", "", NULL } },
	  B("Output (ls -a):\nx") },
	{ "U+200B and U+0085 are not JS whitespace",
	  B("<run>\xE2\x80\x8Bls\xC2\x85</run>"),
	  { { B("\xE2\x80\x8Bls\xC2\x85"), RAN, "x", "", NULL } },
	  B("Output (\xE2\x80\x8Bls\xC2\x85):\nx") },

	/* -- matching -- */
	{ "tag spanning lines",
	  B("Let me check.\n<run>\ncd /tmp &&\n  ls\n</run>\nDone."),
	  { { B("cd /tmp &&\n  ls"), RAN, "f\n", "", NULL } },
	  B("Let me check.\n\nDone.\n\nOutput (cd /tmp &&\n  ls):\nf") },
	{ "unterminated tag left as is",
	  B("Try <run>ls -l"), NO_COMMANDS, B("Try <run>ls -l") },
	{ "terminated tag runs, unterminated one after it stays",
	  B("<run>ls</run> and <run>pwd"),
	  { { B("ls"), RAN, "a\n", "", NULL } },
	  B("and <run>pwd\n\nOutput (ls):\na") },
	{ "upper-case and mixed-case tags are not tags",
	  B("<RUN>ls</RUN> <Run>ls</run> <run >ls</run>"), NO_COMMANDS,
	  B("<RUN>ls</RUN> <Run>ls</run> <run >ls</run>") },
	{ "nested: non-greedy match ends at the first </run>",
	  B("<run><run>a</run></run>"),
	  { { B("<run>a"), RAN, "A\n", "", NULL } },
	  B("</run>\n\nOutput (<run>a):\nA") },
	{ "overlapping",
	  B("x<run>a<run>b</run>c</run>y"),
	  { { B("a<run>b"), RAN, "", "", NULL } },
	  B("xc</run>y\n\nOutput (a<run>b):\n[no output]") },

	/* -- removal runs over the outputs too; outputs are never run -- */
	{ "output holding a run tag: stripped, not run",
	  B("<run>cat notes.txt</run>"),
	  { { B("cat notes.txt"), RAN, "see <run>rm -rf /</run> here\n", "", NULL } },
	  B("Output (cat notes.txt):\nsee  here") },
	{ "output closing an unterminated tag of the text: both go",
	  B("<run>a</run> <run>b"),
	  { { B("a"), RAN, "x</run>y", "", NULL } },
	  B("y") },

	/* -- the summary: stdout, else stderr, else [no output] -- */
	{ "stderr only",
	  B("<run>nope</run><run>true</run>"),
	  { { B("nope"), RAN, "", "sh: 1: nope: not found\n", NULL },
	    { B("true"), RAN, NULL, NULL, NULL } },
	  B("Output (nope):\nsh: 1: nope: not found\n\n\nOutput (true):\n[no output]") },
	{ "stdout wins over stderr",
	  B("<run>make</run>"),
	  { { B("make"), RAN, "built\n", "warning: x\n", NULL } },
	  B("Output (make):\nbuilt") },
	{ "non-zero exit with output is still Output",
	  B("<run>ls /nope; echo after</run>"),
	  { { B("ls /nope; echo after"), RAN, "after\n",
	      "ls: cannot access '/nope': No such file or directory\n", NULL } },
	  B("Output (ls /nope; echo after):\nafter") },
	{ "non-zero exit, stderr only",
	  B("<run>false || ls /nope</run>"),
	  { { B("false || ls /nope"), RAN, "",
	      "ls: cannot access '/nope': No such file or directory\n", NULL } },
	  B("Output (false || ls /nope):\nls: cannot access '/nope': No such file or directory") },

	/* -- 500 UTF-16 code units -- */
	{ "500 ASCII characters kept whole",
	  B("<run>a</run>"),
	  { { B("a"), RAN, X500("b"), "", NULL } },
	  B("Output (a):\n" X500("b")) },
	{ "501 ASCII characters: the last one goes",
	  B("<run>a</run>"),
	  { { B("a"), RAN, X500("b") "c", "", NULL } },
	  B("Output (a):\n" X500("b")) },
	{ "two-byte characters count one unit each",
	  B("<run>a</run>"),
	  { { B("a"), RAN, X5(X100(E_ACUTE)) X100(E_ACUTE), "", NULL } },
	  B("Output (a):\n" X5(X100(E_ACUTE))) },
	{ "astral characters count two units each",
	  B("<run>a</run>"),
	  { { B("a"), RAN, X5(X5(X10(GRIN))) "b", "", NULL } },
	  B("Output (a):\n" X5(X5(X10(GRIN)))) },
	{ "astral character ending exactly on unit 500",
	  B("<run>a</run>"),
	  { { B("a"), RAN, X4(X100("a")) X9(X10("a")) X4(X2("a")) GRIN "zz", "", NULL } },
	  B("Output (a):\n" X4(X100("a")) X9(X10("a")) X4(X2("a")) GRIN) },
	{ "astral character split by unit 500: lone high surrogate becomes U+FFFD",
	  B("<run>a</run>"),
	  { { B("a"), RAN, X4(X100("a")) X9(X10("a")) X9("a") GRIN "zz", "", NULL } },
	  B("Output (a):\n" X4(X100("a")) X9(X10("a")) X9("a") FFFD) },
	{ "mixed: 100 e-acute + 200 astral = 500 units",
	  B("<run>a</run>"),
	  { { B("a"), RAN, X100(E_ACUTE) X2(X100(GRIN)) "tail", "", NULL } },
	  B("Output (a):\n" X100(E_ACUTE) X2(X100(GRIN))) },
	{ "mixed: split after 99 e-acute + 200 astral",
	  B("<run>a</run>"),
	  { { B("a"), RAN, X9(X10(E_ACUTE)) X9(E_ACUTE) X2(X100(GRIN)) GRIN, "", NULL } },
	  B("Output (a):\n" X9(X10(E_ACUTE)) X9(E_ACUTE) X2(X100(GRIN)) FFFD) },
	{ "stderr is cut the same way",
	  B("<run>a</run>"),
	  { { B("a"), RAN, "", X5(X100(E_ACUTE)) "more", NULL } },
	  B("Output (a):\n" X5(X100(E_ACUTE))) },

	/* -- the sandbox failed -- */
	{ "sandbox error",
	  B("Running:<run>ls</run>"),
	  { { B("ls"), FAILED, NULL, NULL, "jail could not start: No space left on device" } },
	  B("Running:\n\nError (ls):\njail could not start: No space left on device") },
	{ "sandbox error without a message, then the next command still runs",
	  B("<run>ls</run><run>pwd</run>"),
	  { { B("ls"), FAILED, NULL, NULL, NULL },
	    { B("pwd"), RAN, "/workspace\n", "", NULL } },
	  B("Error (ls):\nunknown error\n\nOutput (pwd):\n/workspace") },

	/* -- NUL bytes are text like any other -- */
	{ "NUL in the text and in a command",
	  B("a\0b<run>x\0y</run>"),
	  { { B("x\0y"), FAILED, NULL, NULL, "Command cannot contain NUL bytes" } },
	  B("a\0b\n\nError (x\0y):\nCommand cannot contain NUL bytes") },
};

/* One table row, run as its own cmocka test (named after the row). */
static void test_runtags_case(void **state)
{
	const struct runtags_case *c = *state;
	struct fake f = { .steps = c->steps };
	size_t outlen = (size_t)-1, nsteps = 0;
	char *out;

	out = runtags_process(c->in.s, c->in.len, fake_exec, &f, &outlen);
	assert_non_null(out);
	while (c->steps[nsteps].cmd.s)
		nsteps++;
	if (f.next != nsteps)
		fail_msg("%s: %zu of %zu commands run", c->name, f.next, nsteps);
	if (outlen != c->want.len || memcmp(out, c->want.s, outlen) != 0)
		fail_msg("%s:\n got  [%.*s] (%zu bytes)\n want [%.*s] (%zu bytes)",
			 c->name, (int)outlen, out, outlen,
			 (int)c->want.len, c->want.s, c->want.len);
	assert_int_equal(out[outlen], '\0');
	free(out);
}

/* ---- trim() on its own: every character of JavaScript's set, and some
 * that look like whitespace but are not in it ---- */

static const char *const js_whitespace[] = {
	"\t", "\n", "\v", "\f", "\r", " ",
	"\xC2\xA0", "\xE1\x9A\x80",
	"\xE2\x80\x80", "\xE2\x80\x81", "\xE2\x80\x82", "\xE2\x80\x83",
	"\xE2\x80\x84", "\xE2\x80\x85", "\xE2\x80\x86", "\xE2\x80\x87",
	"\xE2\x80\x88", "\xE2\x80\x89", "\xE2\x80\x8A",
	"\xE2\x80\xA8", "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F",
	"\xE3\x80\x80", "\xEF\xBB\xBF",
};

static const char *const not_js_whitespace[] = {
	"\xC2\x85",		/* U+0085 NEL */
	"\xE1\xA0\x8E",		/* U+180E, Zs no longer */
	"\xE2\x80\x8B",		/* U+200B zero width space */
	"\xE2\x81\xA0",		/* U+2060 word joiner */
	"\x1C", "\x1F",		/* ASCII separators: \s in Python, not in JS */
	"\0",
};

static void check_trim(const char *in, size_t len, size_t want_start, size_t want_len)
{
	size_t start = (size_t)-1, n = (size_t)-1;

	runtags_js_trim(in, len, &start, &n);
	assert_int_equal(start, want_start);
	assert_int_equal(n, want_len);
}

static void test_js_trim_whitespace_set(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(js_whitespace) / sizeof(js_whitespace[0]); i++) {
		const char *w = js_whitespace[i];
		size_t n = strlen(w);
		char buf[32];

		snprintf(buf, sizeof(buf), "%s%sx%s%s", w, w, w, w);
		check_trim(buf, strlen(buf), 2 * n, 1);
		check_trim(w, n, n, 0);		/* all whitespace: empty */
	}
	for (size_t i = 0; i < sizeof(not_js_whitespace) / sizeof(not_js_whitespace[0]); i++) {
		const char *w = not_js_whitespace[i];
		size_t n = w[0] ? strlen(w) : 1;
		char buf[32];

		memcpy(buf, w, n);
		buf[n] = 'x';
		memcpy(buf + n + 1, w, n);
		check_trim(buf, 2 * n + 1, 0, 2 * n + 1);
	}
	check_trim("", 0, 0, 0);
	check_trim(" a b ", 5, 1, 3);
}

/* runtags_summary: the text after "Output (cmd):\n" / "Error (cmd):\n",
 * which the agent streams as each command ends. */
static void check_summary(int rc, const char *out, const char *err,
			  const char *error, const char *want)
{
	struct runtags_exec_result res = {
		.out = (char *)out, .out_len = out ? strlen(out) : 0,
		.err = (char *)err, .err_len = err ? strlen(err) : 0,
		.error = (char *)error, .error_len = error ? strlen(error) : 0,
	};
	size_t len = 99;
	char *s = runtags_summary(rc, &res, &len);

	assert_non_null(s);
	assert_string_equal(s, want);
	assert_int_equal(len, strlen(want));
	free(s);
}

static void test_summary(void **state)
{
	char big[700];

	(void)state;
	check_summary(0, "hi\n", "warn", NULL, "hi\n");
	check_summary(0, "", "warn\n", NULL, "warn\n");
	check_summary(0, NULL, NULL, NULL, "[no output]");
	check_summary(-1, NULL, NULL, "too many concurrent execs", "too many concurrent execs");
	check_summary(-1, NULL, NULL, NULL, "unknown error");
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	big[RUNTAGS_SUMMARY_UNITS] = '\0';
	{
		char want[RUNTAGS_SUMMARY_UNITS + 1];

		memcpy(want, big, sizeof(want));
		big[RUNTAGS_SUMMARY_UNITS] = 'y';
		check_summary(0, big, NULL, NULL, want);
	}
}

#define NCASES (sizeof(cases) / sizeof(cases[0]))

/* What runtags_process would run, counted without running: tags whose
 * trimmed inner text is empty do not count; an unclosed tag is no tag. */
static void test_count(void **state)
{
	static const struct { const char *text; size_t n; } counts[] = {
		{ "", 0 },
		{ "no tags", 0 },
		{ "<run>ls</run>", 1 },
		{ "<run> </run><run>\n\t</run>", 0 },
		{ "<run>a</run> and <run>b</run><run>c", 2 },
		{ "<run><run>x</run></run>", 1 },
		{ "<RUN>x</RUN>", 0 },
	};
	(void)state;
	for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++)
		assert_int_equal(runtags_count(counts[i].text, strlen(counts[i].text)), counts[i].n);
}

int main(void)
{
	struct CMUnitTest tests[NCASES + 3];

	for (size_t i = 0; i < NCASES; i++) {
		struct CMUnitTest t = {
			.name = cases[i].name,
			.test_func = test_runtags_case,
			.initial_state = (void *)&cases[i],
		};
		tests[i] = t;
	}
	tests[NCASES] = (struct CMUnitTest)cmocka_unit_test(test_js_trim_whitespace_set);
	tests[NCASES + 1] = (struct CMUnitTest)cmocka_unit_test(test_summary);
	tests[NCASES + 2] = (struct CMUnitTest)cmocka_unit_test(test_count);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
