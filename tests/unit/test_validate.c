/* Unit tests for fcgi-app/http/validate.c: zod v4's field errors.
 *
 * The two tables below were produced by running the schemas quoted at the top
 * of validate.c through zod 4.6.7 (safeParse + z.flattenError().fieldErrors),
 * with the NUL-byte rules written as .refine()s; zod's own message for a bad
 * record key, "Invalid key in record", is the one place where roombox says
 * more ("Environment variable names cannot contain NUL bytes").  Each body
 * goes through json_parse_strict first, as a request body does. */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "http.h"
#include "json_strict.h"
#include "validate.h"

#define TIMEOUT_MAX 600000

struct vector {
	const char *body;
	const char *details;    /* compact JSON, NULL = valid */
};

static const struct vector exec_vectors[] = {
	{ "{}",
	  "{\"cmd\":[\"Invalid input: expected string, received undefined\"]}" },
	{ "{\"cmd\":\"\"}",
	  "{\"cmd\":[\"Command cannot be empty\"]}" },
	{ "{\"cmd\":5}",
	  "{\"cmd\":[\"Invalid input: expected string, received number\"]}" },
	{ "{\"cmd\":null}",
	  "{\"cmd\":[\"Invalid input: expected string, received null\"]}" },
	{ "{\"cmd\":true}",
	  "{\"cmd\":[\"Invalid input: expected string, received boolean\"]}" },
	{ "{\"cmd\":false}",
	  "{\"cmd\":[\"Invalid input: expected string, received boolean\"]}" },
	{ "{\"cmd\":[]}",
	  "{\"cmd\":[\"Invalid input: expected string, received array\",\"Command cannot be empty\"]}" },
	{ "{\"cmd\":[\"ls\"]}",
	  "{\"cmd\":[\"Invalid input: expected string, received array\"]}" },
	{ "{\"cmd\":{}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\"]}" },
	{ "{\"cmd\":{\"length\":0}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\",\"Command cannot be empty\"]}" },
	{ "{\"cmd\":{\"length\":null}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\",\"Command cannot be empty\"]}" },
	{ "{\"cmd\":{\"length\":\"5\"}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\"]}" },
	{ "{\"cmd\":{\"length\":\" 0x1 \"}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\"]}" },
	{ "{\"cmd\":{\"length\":\"0b0\"}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\",\"Command cannot be empty\"]}" },
	{ "{\"cmd\":{\"length\":\"Infinity\"}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\"]}" },
	{ "{\"cmd\":{\"length\":\"-Infinity\"}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\",\"Command cannot be empty\"]}" },
	{ "{\"cmd\":{\"length\":\"a\"}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\",\"Command cannot be empty\"]}" },
	{ "{\"cmd\":{\"length\":\"\"}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\",\"Command cannot be empty\"]}" },
	{ "{\"cmd\":{\"length\":\"1e0\"}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\"]}" },
	{ "{\"cmd\":{\"length\":\".9\"}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\",\"Command cannot be empty\"]}" },
	{ "{\"cmd\":{\"length\":\"1.\"}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\"]}" },
	{ "{\"cmd\":{\"length\":\"\\u00a0 2\\u3000\"}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\"]}" },
	{ "{\"cmd\":{\"length\":true}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\"]}" },
	{ "{\"cmd\":{\"length\":false}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\",\"Command cannot be empty\"]}" },
	{ "{\"cmd\":{\"length\":[]}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\",\"Command cannot be empty\"]}" },
	{ "{\"cmd\":{\"length\":[3]}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\"]}" },
	{ "{\"cmd\":{\"length\":[\"4\"]}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\"]}" },
	{ "{\"cmd\":{\"length\":[[5]]}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\"]}" },
	{ "{\"cmd\":{\"length\":[true]}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\",\"Command cannot be empty\"]}" },
	{ "{\"cmd\":{\"length\":[null]}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\",\"Command cannot be empty\"]}" },
	{ "{\"cmd\":{\"length\":[1,2]}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\",\"Command cannot be empty\"]}" },
	{ "{\"cmd\":{\"length\":{}}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\",\"Command cannot be empty\"]}" },
	{ "{\"cmd\":{\"length\":1.5}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\"]}" },
	{ "{\"cmd\":{\"length\":0.5}}",
	  "{\"cmd\":[\"Invalid input: expected string, received object\",\"Command cannot be empty\"]}" },
	{ "{\"cmd\":1e400}",
	  "{\"cmd\":[\"Invalid input: expected string, received Infinity\"]}" },
	{ "{\"cmd\":-1e400}",
	  "{\"cmd\":[\"Invalid input: expected string, received -Infinity\"]}" },
	{ "{\"cmd\":\"x\"}",
	  NULL },
	{ "{\"cmd\":\"a\\u0000b\"}",
	  "{\"cmd\":[\"Command cannot contain NUL bytes\"]}" },
	{ "{\"cmd\":\"\\u0000\"}",
	  "{\"cmd\":[\"Command cannot contain NUL bytes\"]}" },
	{ "{\"cmd\":\"x\",\"unknown\":5}",
	  NULL },
	{ "{\"cmd\":\"x\",\"timeout\":-1}",
	  "{\"timeout\":[\"Too small: expected number to be >0\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":0}",
	  "{\"timeout\":[\"Too small: expected number to be >0\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":-0}",
	  "{\"timeout\":[\"Too small: expected number to be >0\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":-0.0}",
	  "{\"timeout\":[\"Too small: expected number to be >0\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":1}",
	  NULL },
	{ "{\"cmd\":\"x\",\"timeout\":1.5}",
	  "{\"timeout\":[\"Invalid input: expected int, received number\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":-1.5}",
	  "{\"timeout\":[\"Invalid input: expected int, received number\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":\"5\"}",
	  "{\"timeout\":[\"Invalid input: expected number, received string\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":null}",
	  "{\"timeout\":[\"Invalid input: expected number, received null\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":true}",
	  "{\"timeout\":[\"Invalid input: expected number, received boolean\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":[]}",
	  "{\"timeout\":[\"Invalid input: expected number, received array\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":{}}",
	  "{\"timeout\":[\"Invalid input: expected number, received object\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":700000}",
	  "{\"timeout\":[\"Too big: expected number to be <=600000\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":600000}",
	  NULL },
	{ "{\"cmd\":\"x\",\"timeout\":600001}",
	  "{\"timeout\":[\"Too big: expected number to be <=600000\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":600000.5}",
	  "{\"timeout\":[\"Invalid input: expected int, received number\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":600000.0}",
	  NULL },
	{ "{\"cmd\":\"x\",\"timeout\":1e3}",
	  NULL },
	{ "{\"cmd\":\"x\",\"timeout\":1E3}",
	  NULL },
	{ "{\"cmd\":\"x\",\"timeout\":1.5e3}",
	  NULL },
	{ "{\"cmd\":\"x\",\"timeout\":1e20}",
	  "{\"timeout\":[\"Too big: expected int to be <=9007199254740991\",\"Too big: expected number to be <=600000\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":-1e20}",
	  "{\"timeout\":[\"Too small: expected int to be >=-9007199254740991\",\"Too small: expected number to be >0\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":9007199254740991}",
	  "{\"timeout\":[\"Too big: expected number to be <=600000\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":9007199254740992}",
	  "{\"timeout\":[\"Too big: expected int to be <=9007199254740991\",\"Too big: expected number to be <=600000\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":99999999999999999999}",
	  "{\"timeout\":[\"Too big: expected int to be <=9007199254740991\",\"Too big: expected number to be <=600000\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":-9223372036854775809}",
	  "{\"timeout\":[\"Too small: expected int to be >=-9007199254740991\",\"Too small: expected number to be >0\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":1e400}",
	  "{\"timeout\":[\"Invalid input: expected number, received Infinity\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":-1e400}",
	  "{\"timeout\":[\"Invalid input: expected number, received -Infinity\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":1e-400}",
	  "{\"timeout\":[\"Too small: expected number to be >0\"]}" },
	{ "{\"cmd\":\"x\",\"env\":{}}",
	  NULL },
	{ "{\"cmd\":\"x\",\"env\":{\"A\":\"1\",\"B\":\"\"}}",
	  NULL },
	{ "{\"cmd\":\"x\",\"env\":{\"A\":1}}",
	  "{\"env\":[\"Invalid input: expected string, received number\"]}" },
	{ "{\"cmd\":\"x\",\"env\":\"x\"}",
	  "{\"env\":[\"Invalid input: expected record, received string\"]}" },
	{ "{\"cmd\":\"x\",\"env\":null}",
	  "{\"env\":[\"Invalid input: expected record, received null\"]}" },
	{ "{\"cmd\":\"x\",\"env\":[]}",
	  "{\"env\":[\"Invalid input: expected record, received array\"]}" },
	{ "{\"cmd\":\"x\",\"env\":[\"a\"]}",
	  "{\"env\":[\"Invalid input: expected record, received array\"]}" },
	{ "{\"cmd\":\"x\",\"env\":5}",
	  "{\"env\":[\"Invalid input: expected record, received number\"]}" },
	{ "{\"cmd\":\"x\",\"env\":true}",
	  "{\"env\":[\"Invalid input: expected record, received boolean\"]}" },
	{ "{\"cmd\":\"x\",\"env\":{\"A\":1,\"B\":true,\"C\":\"ok\",\"D\":null,\"E\":[],\"F\":{}}}",
	  "{\"env\":[\"Invalid input: expected string, received number\",\"Invalid input: expected string, received boolean\",\"Invalid input: expected string, received null\",\"Invalid input: expected string, received array\",\"Invalid input: expected string, received object\"]}" },
	{ "{\"cmd\":\"x\",\"env\":{\"A\\u0000\":\"x\"}}",
	  "{\"env\":[\"Environment variable names cannot contain NUL bytes\"]}" },
	{ "{\"cmd\":\"x\",\"env\":{\"A\":\"x\\u0000\"}}",
	  "{\"env\":[\"Environment variable values cannot contain NUL bytes\"]}" },
	{ "{\"cmd\":\"x\",\"env\":{\"A\\u0000\":\"x\\u0000\",\"B\":5}}",
	  "{\"env\":[\"Environment variable names cannot contain NUL bytes\",\"Invalid input: expected string, received number\"]}" },
	{ "{\"cmd\":\"x\",\"env\":{\"A\\u0000\":5}}",
	  "{\"env\":[\"Environment variable names cannot contain NUL bytes\"]}" },
	{ "{\"cmd\":\"x\",\"env\":{\"\\u0000\":\"v\",\"B\\u0000C\":\"w\"}}",
	  "{\"env\":[\"Environment variable names cannot contain NUL bytes\",\"Environment variable names cannot contain NUL bytes\"]}" },
	{ "{\"cmd\":\"x\",\"cwd\":\"/\"}",
	  NULL },
	{ "{\"cmd\":\"x\",\"cwd\":\"/tmp\"}",
	  NULL },
	{ "{\"cmd\":\"x\",\"cwd\":\"tmp\"}",
	  "{\"cwd\":[\"Invalid string: must start with \\\"/\\\"\"]}" },
	{ "{\"cmd\":\"x\",\"cwd\":\"\"}",
	  "{\"cwd\":[\"Invalid string: must start with \\\"/\\\"\"]}" },
	{ "{\"cmd\":\"x\",\"cwd\":5}",
	  "{\"cwd\":[\"Invalid input: expected string, received number\"]}" },
	{ "{\"cmd\":\"x\",\"cwd\":null}",
	  "{\"cwd\":[\"Invalid input: expected string, received null\"]}" },
	{ "{\"cmd\":\"x\",\"cwd\":[]}",
	  "{\"cwd\":[\"Invalid input: expected string, received array\"]}" },
	{ "{\"cmd\":\"x\",\"cwd\":[\"/\"]}",
	  "{\"cwd\":[\"Invalid input: expected string, received array\"]}" },
	{ "{\"cmd\":\"x\",\"cwd\":{\"length\":0}}",
	  "{\"cwd\":[\"Invalid input: expected string, received object\"]}" },
	{ "{\"cmd\":\"x\",\"cwd\":\"/a\\u0000\"}",
	  "{\"cwd\":[\"Working directory cannot contain NUL bytes\"]}" },
	{ "{\"cmd\":\"x\",\"cwd\":\"a\\u0000\"}",
	  "{\"cwd\":[\"Invalid string: must start with \\\"/\\\"\",\"Working directory cannot contain NUL bytes\"]}" },
	{ "{\"cmd\":\"x\",\"cwd\":\"\\u0000/\"}",
	  "{\"cwd\":[\"Invalid string: must start with \\\"/\\\"\",\"Working directory cannot contain NUL bytes\"]}" },
	{ "{\"cmd\":\"x\",\"stdin\":\"\"}",
	  NULL },
	{ "{\"cmd\":\"x\",\"stdin\":\"a\\u0000b\"}",
	  NULL },
	{ "{\"cmd\":\"x\",\"stdin\":5}",
	  "{\"stdin\":[\"Invalid input: expected string, received number\"]}" },
	{ "{\"cmd\":\"x\",\"stdin\":null}",
	  "{\"stdin\":[\"Invalid input: expected string, received null\"]}" },
	{ "{\"cmd\":\"x\",\"stdin\":[]}",
	  "{\"stdin\":[\"Invalid input: expected string, received array\"]}" },
	{ "{\"cmd\":\"x\",\"stdin\":{}}",
	  "{\"stdin\":[\"Invalid input: expected string, received object\"]}" },
	{ "{\"cmd\":\"x\",\"encoding\":\"utf8\"}",
	  NULL },
	{ "{\"cmd\":\"x\",\"encoding\":\"base64\"}",
	  NULL },
	{ "{\"cmd\":\"x\",\"encoding\":\"hex\"}",
	  "{\"encoding\":[\"Invalid option: expected one of \\\"utf8\\\"|\\\"base64\\\"\"]}" },
	{ "{\"cmd\":\"x\",\"encoding\":\"UTF8\"}",
	  "{\"encoding\":[\"Invalid option: expected one of \\\"utf8\\\"|\\\"base64\\\"\"]}" },
	{ "{\"cmd\":\"x\",\"encoding\":\"utf8\\u0000\"}",
	  "{\"encoding\":[\"Invalid option: expected one of \\\"utf8\\\"|\\\"base64\\\"\"]}" },
	{ "{\"cmd\":\"x\",\"encoding\":\"\"}",
	  "{\"encoding\":[\"Invalid option: expected one of \\\"utf8\\\"|\\\"base64\\\"\"]}" },
	{ "{\"cmd\":\"x\",\"encoding\":5}",
	  "{\"encoding\":[\"Invalid option: expected one of \\\"utf8\\\"|\\\"base64\\\"\"]}" },
	{ "{\"cmd\":\"x\",\"encoding\":null}",
	  "{\"encoding\":[\"Invalid option: expected one of \\\"utf8\\\"|\\\"base64\\\"\"]}" },
	{ "{\"cmd\":\"x\",\"encoding\":[\"utf8\"]}",
	  "{\"encoding\":[\"Invalid option: expected one of \\\"utf8\\\"|\\\"base64\\\"\"]}" },
	{ "{\"cmd\":\"\",\"timeout\":0,\"env\":1,\"cwd\":\"a\",\"stdin\":[],\"encoding\":\"x\"}",
	  "{\"cmd\":[\"Command cannot be empty\"],\"timeout\":[\"Too small: expected number to be >0\"],\"env\":[\"Invalid input: expected record, received number\"],\"cwd\":[\"Invalid string: must start with \\\"/\\\"\"],\"encoding\":[\"Invalid option: expected one of \\\"utf8\\\"|\\\"base64\\\"\"],\"stdin\":[\"Invalid input: expected string, received array\"]}" },
	{ "{\"encoding\":\"x\",\"stdin\":[],\"cwd\":\"a\",\"env\":1,\"timeout\":0,\"cmd\":\"\"}",
	  "{\"cmd\":[\"Command cannot be empty\"],\"timeout\":[\"Too small: expected number to be >0\"],\"env\":[\"Invalid input: expected record, received number\"],\"cwd\":[\"Invalid string: must start with \\\"/\\\"\"],\"encoding\":[\"Invalid option: expected one of \\\"utf8\\\"|\\\"base64\\\"\"],\"stdin\":[\"Invalid input: expected string, received array\"]}" },
	{ "{\"encoding\":\"x\",\"cmd\":5}",
	  "{\"cmd\":[\"Invalid input: expected string, received number\"],\"encoding\":[\"Invalid option: expected one of \\\"utf8\\\"|\\\"base64\\\"\"]}" },
	{ "{\"stdin\":1,\"timeout\":1.5}",
	  "{\"cmd\":[\"Invalid input: expected string, received undefined\"],\"timeout\":[\"Invalid input: expected int, received number\"],\"stdin\":[\"Invalid input: expected string, received number\"]}" },
	{ "{\"cmd\":\"x\",\"timeout\":null,\"env\":null,\"cwd\":null,\"stdin\":null,\"encoding\":null}",
	  "{\"timeout\":[\"Invalid input: expected number, received null\"],\"env\":[\"Invalid input: expected record, received null\"],\"cwd\":[\"Invalid input: expected string, received null\"],\"encoding\":[\"Invalid option: expected one of \\\"utf8\\\"|\\\"base64\\\"\"],\"stdin\":[\"Invalid input: expected string, received null\"]}" },
	{ "{\"cmd\":[],\"cwd\":[]}",
	  "{\"cmd\":[\"Invalid input: expected string, received array\",\"Command cannot be empty\"],\"cwd\":[\"Invalid input: expected string, received array\"]}" },
	{ "{\"cmd\":\"a\",\"cmd\":5}",
	  "{\"cmd\":[\"Invalid input: expected string, received number\"]}" },
	{ "{\"cmd\":5,\"cmd\":\"a\"}",
	  NULL },
	{ "{\"cmd\\u0000\":\"x\"}",
	  "{\"cmd\":[\"Invalid input: expected string, received undefined\"]}" },
	{ "{\"cmd\":\"ok\",\"cmd\\u0000\":5}",
	  NULL },
	{ "{\"cmd\\u0000x\":\"ok\"}",
	  "{\"cmd\":[\"Invalid input: expected string, received undefined\"]}" },
	{ "{\"cmd\":\"x\",\"user\":\"root\"}",
	  NULL },
	{ "{\"cmd\":\"x\",\"user\":\"user\"}",
	  NULL },
	{ "{\"cmd\":\"x\",\"user\":\"admin\"}",
	  "{\"user\":[\"Invalid option: expected one of \\\"root\\\"|\\\"user\\\"\"]}" },
	{ "{\"cmd\":\"x\",\"user\":\"Root\"}",
	  "{\"user\":[\"Invalid option: expected one of \\\"root\\\"|\\\"user\\\"\"]}" },
	{ "{\"cmd\":\"x\",\"user\":1000}",
	  "{\"user\":[\"Invalid option: expected one of \\\"root\\\"|\\\"user\\\"\"]}" },
	{ "{\"cmd\":\"x\",\"user\":null}",
	  "{\"user\":[\"Invalid option: expected one of \\\"root\\\"|\\\"user\\\"\"]}" },
	/* the order of the exec request's fields, whatever the body's */
	{ "{\"user\":\"x\",\"stdin\":[],\"encoding\":\"x\",\"cmd\":\"\"}",
	  "{\"cmd\":[\"Command cannot be empty\"],\"encoding\":[\"Invalid option: expected one of \\\"utf8\\\"|\\\"base64\\\"\"],\"stdin\":[\"Invalid input: expected string, received array\"],\"user\":[\"Invalid option: expected one of \\\"root\\\"|\\\"user\\\"\"]}" },
	{ "{\"env\":{\"A\":\"1\"},\"cmd\":\"ls\",\"cwd\":\"/\",\"stdin\":\"x\",\"timeout\":10,\"encoding\":\"base64\"}",
	  NULL },
	{ "null",
	  "{}" },
	{ "[]",
	  "{}" },
	{ "[{\"cmd\":\"x\"}]",
	  "{}" },
	{ "\"x\"",
	  "{}" },
	{ "\"\"",
	  "{}" },
	{ "5",
	  "{}" },
	{ "0",
	  "{}" },
	{ "true",
	  "{}" },
	{ "false",
	  "{}" },
};

static const struct vector message_vectors[] = {
	{ "{}",
	  "{\"role\":[\"Invalid option: expected one of \\\"user\\\"|\\\"assistant\\\"\"],\"content\":[\"Invalid input: expected string, received undefined\"]}" },
	{ "{\"role\":\"user\",\"content\":\"hi\"}",
	  NULL },
	{ "{\"role\":\"assistant\",\"content\":\"hi\"}",
	  NULL },
	{ "{\"role\":\"system\",\"content\":\"hi\"}",
	  "{\"role\":[\"Invalid option: expected one of \\\"user\\\"|\\\"assistant\\\"\"]}" },
	{ "{\"role\":\"user\",\"content\":\"\"}",
	  "{\"content\":[\"Content cannot be empty\"]}" },
	{ "{\"role\":\"user\"}",
	  "{\"content\":[\"Invalid input: expected string, received undefined\"]}" },
	{ "{\"content\":\"hi\"}",
	  "{\"role\":[\"Invalid option: expected one of \\\"user\\\"|\\\"assistant\\\"\"]}" },
	{ "{\"role\":5,\"content\":5}",
	  "{\"role\":[\"Invalid option: expected one of \\\"user\\\"|\\\"assistant\\\"\"],\"content\":[\"Invalid input: expected string, received number\"]}" },
	{ "{\"role\":null,\"content\":null}",
	  "{\"role\":[\"Invalid option: expected one of \\\"user\\\"|\\\"assistant\\\"\"],\"content\":[\"Invalid input: expected string, received null\"]}" },
	{ "{\"role\":\"user\",\"content\":[]}",
	  "{\"content\":[\"Invalid input: expected string, received array\",\"Content cannot be empty\"]}" },
	{ "{\"role\":\"user\",\"content\":{\"length\":0}}",
	  "{\"content\":[\"Invalid input: expected string, received object\",\"Content cannot be empty\"]}" },
	{ "{\"role\":\"user\",\"content\":\"a\\u0000\"}",
	  NULL },
	{ "{\"content\":\"\",\"role\":\"x\"}",
	  "{\"role\":[\"Invalid option: expected one of \\\"user\\\"|\\\"assistant\\\"\"],\"content\":[\"Content cannot be empty\"]}" },
	{ "null",
	  "{}" },
	{ "[]",
	  "{}" },
};

static json_object *parse(const char *text)
{
	json_object *o = NULL;
	char err[128];

	if (json_parse_strict(text, strlen(text), &o, err, sizeof(err)) < 0)
		fail_msg("cannot parse %s: %s", text, err);
	return o;
}

static void check_vectors(const struct vector *v, size_t n, bool exec)
{
	size_t i;
	int failures = 0;

	for (i = 0; i < n; i++) {
		json_object *body = parse(v[i].body), *details;
		struct exec_request ex;
		struct message_request mr;
		const char *got;

		details = exec ? validate_exec_request(body, TIMEOUT_MAX, &ex)
			       : validate_message_request(body, &mr);
		got = details ? json_write(details, NULL) : NULL;
		if ((got == NULL) != (v[i].details == NULL) ||
		    (got && strcmp(got, v[i].details) != 0)) {
			print_error("body %s\n  want %s\n  got  %s\n", v[i].body,
				    v[i].details ? v[i].details : "(valid)",
				    got ? got : "(valid)");
			failures++;
		}
		json_object_put(details);
		json_object_put(body);
	}
	assert_int_equal(failures, 0);
}

static void test_exec_table(void **state)
{
	(void)state;
	check_vectors(exec_vectors, sizeof(exec_vectors) / sizeof(exec_vectors[0]), true);
}

static void test_message_table(void **state)
{
	(void)state;
	check_vectors(message_vectors, sizeof(message_vectors) / sizeof(message_vectors[0]), false);
}

/* The exec request's rules, one by one, in the words of their errors. */
static void expect(const char *body, const char *details)
{
	json_object *b = parse(body), *d;
	struct exec_request ex;

	d = validate_exec_request(b, TIMEOUT_MAX, &ex);
	if (!details) {
		assert_null(d);
	} else {
		assert_non_null(d);
		assert_string_equal(json_write(d, NULL), details);
	}
	json_object_put(d);
	json_object_put(b);
}

static void test_spec_rows(void **state)
{
	(void)state;
	expect("{}", "{\"cmd\":[\"Invalid input: expected string, received undefined\"]}");
	expect("{\"cmd\":\"\"}", "{\"cmd\":[\"Command cannot be empty\"]}");
	expect("{\"cmd\":5}", "{\"cmd\":[\"Invalid input: expected string, received number\"]}");
	expect("{\"cmd\":null}", "{\"cmd\":[\"Invalid input: expected string, received null\"]}");
	expect("{\"cmd\":true}", "{\"cmd\":[\"Invalid input: expected string, received boolean\"]}");
	expect("{\"cmd\":[\"a\"]}", "{\"cmd\":[\"Invalid input: expected string, received array\"]}");
	expect("{\"cmd\":{}}", "{\"cmd\":[\"Invalid input: expected string, received object\"]}");
	expect("null", "{}");
	expect("[1]", "{}");
	expect("\"cmd\"", "{}");
	expect("42", "{}");
	expect("{\"cmd\":\"x\",\"timeout\":-1}", "{\"timeout\":[\"Too small: expected number to be >0\"]}");
	expect("{\"cmd\":\"x\",\"timeout\":1.5}", "{\"timeout\":[\"Invalid input: expected int, received number\"]}");
	expect("{\"cmd\":\"x\",\"timeout\":\"5\"}", "{\"timeout\":[\"Invalid input: expected number, received string\"]}");
	expect("{\"cmd\":\"x\",\"timeout\":700000}", "{\"timeout\":[\"Too big: expected number to be <=600000\"]}");
	expect("{\"cmd\":\"x\",\"env\":{\"A\":1}}", "{\"env\":[\"Invalid input: expected string, received number\"]}");
	expect("{\"cmd\":\"x\",\"env\":\"x\"}", "{\"env\":[\"Invalid input: expected record, received string\"]}");
	expect("{\"cmd\":\"x\",\"cwd\":\"tmp\"}", "{\"cwd\":[\"Invalid string: must start with \\\"/\\\"\"]}");
	expect("{\"cmd\":\"x\",\"encoding\":\"hex\"}", "{\"encoding\":[\"Invalid option: expected one of \\\"utf8\\\"|\\\"base64\\\"\"]}");
	expect("{\"cmd\":\"x\",\"stdin\":5}", "{\"stdin\":[\"Invalid input: expected string, received number\"]}");
	expect("{\"cmd\":\"a\\u0000b\"}", "{\"cmd\":[\"Command cannot contain NUL bytes\"]}");
	expect("{\"cmd\":\"echo hi\"}", NULL);
}

/* The timeout message names the configured maximum. */
static void test_timeout_max_from_config(void **state)
{
	json_object *b = parse("{\"cmd\":\"x\",\"timeout\":30001}"), *d;
	struct exec_request ex;

	(void)state;
	d = validate_exec_request(b, 30000, &ex);
	assert_non_null(d);
	assert_string_equal(json_write(d, NULL),
			    "{\"timeout\":[\"Too big: expected number to be <=30000\"]}");
	json_object_put(d);
	assert_null(validate_exec_request(b, 30001, &ex));
	assert_int_equal(ex.timeout_ms, 30001);
	json_object_put(b);
}

/* Several bad fields: keys in schema order, whatever the body's order. */
static void test_field_order(void **state)
{
	static const char *const bodies[] = {
		"{\"cmd\":\"\",\"timeout\":0,\"env\":1,\"cwd\":\"a\",\"stdin\":[],\"encoding\":\"x\"}",
		"{\"encoding\":\"x\",\"stdin\":[],\"cwd\":\"a\",\"env\":1,\"timeout\":0,\"cmd\":\"\"}",
		"{\"stdin\":[],\"encoding\":\"x\",\"cmd\":\"\",\"cwd\":\"a\",\"timeout\":0,\"env\":1}",
	};
	static const char *const order[] = { "cmd", "timeout", "env", "cwd", "encoding", "stdin" };
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		json_object *b = parse(bodies[i]), *d;
		struct exec_request ex;
		size_t k = 0;

		d = validate_exec_request(b, TIMEOUT_MAX, &ex);
		assert_non_null(d);
		json_object_object_foreach(d, key, val) {
			(void)val;
			assert_true(k < 6);
			assert_string_equal(key, order[k]);
			k++;
		}
		assert_int_equal(k, 6);
		json_object_put(d);
		json_object_put(b);
	}
}

/* A valid request comes back field by field. */
static void test_valid_request_fields(void **state)
{
	json_object *b = parse("{\"cmd\":\"cat\",\"timeout\":1e3,\"env\":{\"A\":\"1\"},"
			       "\"cwd\":\"/tmp\",\"stdin\":\"a\\u0000b\",\"encoding\":\"base64\","
			       "\"extra\":[1,2,3]}");
	struct exec_request ex;
	json_object *v;

	(void)state;
	assert_null(validate_exec_request(b, TIMEOUT_MAX, &ex));
	assert_int_equal(ex.cmd_len, 3);
	assert_memory_equal(ex.cmd, "cat", 3);
	assert_int_equal(ex.timeout_ms, 1000);
	assert_non_null(ex.env);
	assert_true(json_object_object_get_ex(ex.env, "A", &v));
	assert_string_equal(json_object_get_string(v), "1");
	assert_string_equal(ex.cwd, "/tmp");
	assert_int_equal(ex.stdin_len, 3);                 /* NUL kept */
	assert_memory_equal(ex.stdin_data, "a\0b", 3);
	assert_true(ex.has_encoding);
	assert_int_equal(ex.encoding, EXEC_ENCODING_BASE64);
	json_object_put(b);

	b = parse("{\"cmd\":\"true\"}");
	assert_null(validate_exec_request(b, TIMEOUT_MAX, &ex));
	assert_int_equal(ex.timeout_ms, 0);
	assert_null(ex.env);
	assert_null(ex.cwd);
	assert_null(ex.stdin_data);
	assert_false(ex.has_encoding);
	json_object_put(b);

	b = parse("{\"cmd\":\"true\",\"encoding\":\"utf8\",\"stdin\":\"\"}");
	assert_null(validate_exec_request(b, TIMEOUT_MAX, &ex));
	assert_true(ex.has_encoding);
	assert_int_equal(ex.encoding, EXEC_ENCODING_UTF8);
	assert_non_null(ex.stdin_data);                    /* given, empty */
	assert_int_equal(ex.stdin_len, 0);
	json_object_put(b);
}

/* NUL bytes: cmd, cwd, env keys and values refused; stdin passed through. */
static void test_nul_bytes(void **state)
{
	(void)state;
	expect("{\"cmd\":\"\\u0000\"}", "{\"cmd\":[\"Command cannot contain NUL bytes\"]}");
	expect("{\"cmd\":\"ls\\u0000 -l\"}", "{\"cmd\":[\"Command cannot contain NUL bytes\"]}");
	expect("{\"cmd\":\"x\",\"cwd\":\"/tmp\\u0000\"}",
	       "{\"cwd\":[\"Working directory cannot contain NUL bytes\"]}");
	expect("{\"cmd\":\"x\",\"env\":{\"A\":\"1\\u0000\"}}",
	       "{\"env\":[\"Environment variable values cannot contain NUL bytes\"]}");
	expect("{\"cmd\":\"x\",\"env\":{\"A\\u0000B\":\"1\"}}",
	       "{\"env\":[\"Environment variable names cannot contain NUL bytes\"]}");
	/* the key is not read as its part before the NUL ("PATH") */
	expect("{\"cmd\":\"x\",\"env\":{\"PATH\\u0000junk\":\"/evil\"}}",
	       "{\"env\":[\"Environment variable names cannot contain NUL bytes\"]}");
	/* "cmd\u0000" is not "cmd": an unknown key, ignored as zod does */
	expect("{\"cmd\\u0000\":\"rm -rf /\"}",
	       "{\"cmd\":[\"Invalid input: expected string, received undefined\"]}");
	expect("{\"cmd\":\"ok\",\"cmd\\u0000x\":5}", NULL);
	/* an escaped backslash before "u0000" is no NUL */
	expect("{\"cmd\":\"x\",\"env\":{\"A\\\\u0000\":\"1\"}}", NULL);
	expect("{\"cmd\":\"x\",\"stdin\":\"\\u0000\\u0000\"}", NULL);
	/* raw (unescaped) NUL bytes are not JSON at all: see test_json_strict */
}

static void test_messages(void **state)
{
	json_object *b = parse("{\"role\":\"assistant\",\"content\":\"a\\u0000b\"}"), *d;
	struct message_request mr;

	(void)state;
	assert_null(validate_message_request(b, &mr));
	assert_string_equal(mr.role, "assistant");
	assert_int_equal(mr.content_len, 3);
	json_object_put(b);

	b = parse("{\"role\":\"admin\",\"content\":\"\"}");
	d = validate_message_request(b, &mr);
	assert_non_null(d);
	assert_string_equal(json_write(d, NULL),
			    "{\"role\":[\"Invalid option: expected one of \\\"user\\\"|\\\"assistant\\\"\"],"
			    "\"content\":[\"Content cannot be empty\"]}");
	json_object_put(d);
	json_object_put(b);
}

static void test_type_names(void **state)
{
	json_object *o;

	(void)state;
	assert_string_equal(zod_type_name(NULL, false), "undefined");
	assert_string_equal(zod_type_name(NULL, true), "null");
	o = json_object_new_boolean(0);
	assert_string_equal(zod_type_name(o, true), "boolean");
	json_object_put(o);
	o = json_object_new_int(3);
	assert_string_equal(zod_type_name(o, true), "number");
	json_object_put(o);
	o = json_object_new_double(NAN);
	assert_string_equal(zod_type_name(o, true), "NaN");
	json_object_put(o);
	o = json_object_new_double(-INFINITY);
	assert_string_equal(zod_type_name(o, true), "-Infinity");
	json_object_put(o);
	o = json_object_new_array();
	assert_string_equal(zod_type_name(o, true), "array");
	json_object_put(o);
	o = json_object_new_object();
	assert_string_equal(zod_type_name(o, true), "object");
	json_object_put(o);
}

/* JavaScript's Number(x) for the JSON values zod's length check meets. */
static void test_js_to_number(void **state)
{
	static const struct { const char *json; double want; } cases[] = {
		{ "null", 0 }, { "true", 1 }, { "false", 0 }, { "2.5", 2.5 },
		{ "\"\"", 0 }, { "\"  \"", 0 }, { "\" 12 \"", 12 }, { "\"\\t\\n7\\r\"", 7 },
		{ "\"\\u00a03\\u3000\"", 3 }, { "\"\\ufeff4\\u2028\"", 4 },
		{ "\"0x1F\"", 31 }, { "\"0o17\"", 15 }, { "\"0b101\"", 5 },
		{ "\"1e3\"", 1000 }, { "\"-2\"", -2 }, { "\"+.5\"", 0.5 }, { "\"5.\"", 5 },
		{ "\"Infinity\"", INFINITY }, { "\"-Infinity\"", -INFINITY },
		{ "[]", 0 }, { "[7]", 7 }, { "[\"8\"]", 8 }, { "[[9]]", 9 }, { "[null]", 0 },
		{ "[[]]", 0 },
	};
	static const char *const nans[] = {
		"\"a\"", "\"0x\"", "\"-0x1\"", "\"0xg\"", "\"1_000\"", "\".\"", "\"1e\"",
		"\"infinity\"", "\"inf\"", "\"NaN\"", "\"0b2\"", "\"1 2\"",
		"{}", "[1,2]", "[true]", "[{}]",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_object *o = parse(cases[i].json);
		double got = js_to_number(o);

		if (got != cases[i].want)
			fail_msg("Number(%s) = %g, want %g", cases[i].json, got, cases[i].want);
		json_object_put(o);
	}
	for (i = 0; i < sizeof(nans) / sizeof(nans[0]); i++) {
		json_object *o = parse(nans[i]);

		if (!isnan(js_to_number(o)))
			fail_msg("Number(%s) = %g, want NaN", nans[i], js_to_number(o));
		json_object_put(o);
	}
}

/* The parser in front of validation: RFC 8259 only, json-c's reason. */
static void test_json_strict(void **state)
{
	static const struct { const char *text; size_t len; const char *err; } bad[] = {
		{ "", 0, "unexpected end of data" },
		{ "   ", 3, "unexpected end of data" },
		{ "{", 1, "unexpected end of data" },
		{ "{\"cmd\":\"x\"", 10, "unexpected end of data" },
		{ "{\"cmd\":\"x\"} x", 13, "unexpected character" },
		{ "{\"cmd\":\"x\"}}", 12, "unexpected character" },
		{ "{} {}", 5, "unexpected character" },
		{ "1 2", 3, "unexpected character" },
		{ "{'cmd':'x'}", 11, "unexpected character" },
		{ "{\"cmd\":'x'}", 11, "unexpected character" },
		{ "[1,]", 4, "unexpected character" },
		{ "{\"a\":1,}", 8, "unexpected character" },
		{ "NaN", 3, "unexpected character" },
		{ "Infinity", 8, "unexpected character" },
		{ "-Infinity", 9, "number expected" },
		{ "01", 2, "number expected" },
		{ "1.", 2, "number expected" },
		{ ".5", 2, "unexpected character" },
		{ "1e", 2, "number expected" },
		{ "tru", 3, "unexpected character" },
		{ "/* c */ {}", 10, "unexpected character" },
		{ "{\"a\":1} // c", 12, "unexpected character" },
		{ "\"a\tb\"", 5, "invalid string sequence" },
		{ "\"\\x\"", 4, "invalid string sequence" },
		{ "\"\xff\"", 3, "invalid utf-8 string" },
		{ "\"\xc0\x80\"", 4, "invalid utf-8 string" },
		{ "\"\xed\xa0\x80\"", 5, "invalid utf-8 string" },
		{ "{\"cmd\":\"x\"}\0", 12, "unexpected character" },
		{ "{\"cmd\":\"a\0b\"}", 13, "invalid string sequence" },
		{ "{\"a\" 1}", 7, "object property name separator ':' expected" },
		{ "\f{}", 3, "unexpected character" },          /* JSON space is " \t\n\r" */
		{ "[1,\v2]", 6, "unexpected character" },
	};
	static const char *const good[] = {
		"{}", " {\"cmd\" : \"x\"}\r\n", "null", "0", "-0", "1e400", "[1.5e+3,-2E-2]",
		"\"\\ud83d\\ude00\"", "\"\xc3\xa9\"", "true", "{\"a\":{\"b\":[null,false]}}",
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_object *o = NULL;
		char err[128] = "";

		if (json_parse_strict(bad[i].text, bad[i].len, &o, err, sizeof(err)) != -1)
			fail_msg("accepted: %s", bad[i].text);
		assert_null(o);
		if (strcmp(err, bad[i].err) != 0)
			fail_msg("%s: got \"%s\", want \"%s\"", bad[i].text, err, bad[i].err);
	}
	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		json_object *o = NULL;
		char err[128] = "";

		if (json_parse_strict(good[i], strlen(good[i]), &o, err, sizeof(err)) != 0)
			fail_msg("refused %s: %s", good[i], err);
		json_object_put(o);
	}
}

/* Deep nesting is fine up to a limit, then a clean error. */
static void test_json_depth(void **state)
{
	char buf[2 * 600 + 1];
	json_object *o = NULL;
	char err[128];

	(void)state;
	memset(buf, '[', 100);
	memset(buf + 100, ']', 100);
	assert_int_equal(json_parse_strict(buf, 200, &o, err, sizeof(err)), 0);
	json_object_put(o);
	memset(buf, '[', 600);
	memset(buf + 600, ']', 600);
	assert_int_equal(json_parse_strict(buf, 1200, &o, err, sizeof(err)), -1);
	assert_string_equal(err, "nesting too deep");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_exec_table),
		cmocka_unit_test(test_message_table),
		cmocka_unit_test(test_spec_rows),
		cmocka_unit_test(test_timeout_max_from_config),
		cmocka_unit_test(test_field_order),
		cmocka_unit_test(test_valid_request_fields),
		cmocka_unit_test(test_nul_bytes),
		cmocka_unit_test(test_messages),
		cmocka_unit_test(test_type_names),
		cmocka_unit_test(test_js_to_number),
		cmocka_unit_test(test_json_strict),
		cmocka_unit_test(test_json_depth),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
