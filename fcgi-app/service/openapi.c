/* GET /api/openapi.json: the OpenAPI document of this HTTP API
 * (docs/openapi.json, the one copy, kept by hand beside the code).
 *
 * The document is put into the binary when it is built (.incbin below), not
 * read from a file at run time: the answer then always describes the very
 * roombox-fcgi that serves it (no installed file of another version, no path
 * to configure or get wrong), and `make run`, the tests and the Debian
 * package serve it the same way with nothing to install.  A change to the
 * document rebuilds this object (Makefile).
 *
 * The route is public, like /api/health: the document says nothing the 404s
 * and 405s of the route table do not already tell, and a client generator
 * or an API explorer should be able to read it before it has a token. */
#include <stdlib.h>
#include <string.h>

#include "http.h"

/* The path is the compiler's working directory's: the Makefile builds from
 * the top of the tree. */
__asm__(".pushsection .rodata\n"
	".balign 16\n"
	".globl openapi_doc_start, openapi_doc_end\n"
	".hidden openapi_doc_start, openapi_doc_end\n"
	"openapi_doc_start:\n"
	".incbin \"docs/openapi.json\"\n"
	"openapi_doc_end:\n"
	".byte 0\n"
	".popsection\n");
extern const char openapi_doc_start[] __attribute__((visibility("hidden")));
extern const char openapi_doc_end[] __attribute__((visibility("hidden")));

void api_openapi_get(struct request *rq, struct response *rs)
{
	size_t len = (size_t)(openapi_doc_end - openapi_doc_start);
	/* rs->text is owned (freed once sent) and, like every answer's text,
	 * NUL-terminated past its length */
	char *text = malloc(len + 1);

	if (!text) {
		response_error(rs, 500, "out of memory");
		return;
	}
	memcpy(text, openapi_doc_start, len);
	text[len] = '\0';
	rs->status = 200;
	rs->text = text;
	rs->text_len = len;
	rs->content_type = "application/json";
}
