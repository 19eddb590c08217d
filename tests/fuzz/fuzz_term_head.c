/* libFuzzer target: a terminal WebSocket's request head
 * (fcgi-app/terminals/term_head.c), bytes from the web server's client.
 *
 * Input: any bytes, taken as a NUL-terminated head.  The parser reads
 * nothing past the NUL; what it returns is bounded and well-formed: an OK
 * target has a valid room id and a terminal id's length; the ticket is at
 * most 32 bytes; every string is NUL-terminated within its field; an
 * upgrade carries a key. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "term_head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *head = malloc(size + 1);
	FUZZ_ASSERT(head, "malloc");
	memcpy(head, data, size);
	head[size] = '\0';
	struct term_head h;
	if (term_head_parse(head, &h) == 0) {
		FUZZ_ASSERT(memchr(h.room, '\0', sizeof(h.room)) && memchr(h.tid, '\0', sizeof(h.tid)) &&
			    memchr(h.ticket, '\0', sizeof(h.ticket)) && memchr(h.key, '\0', sizeof(h.key)) &&
			    memchr(h.auth, '\0', sizeof(h.auth)), "a field not terminated");
		if (h.shape == TERM_TARGET_OK) {
			FUZZ_ASSERT(room_id_valid(h.room), "room %s", h.room);
			FUZZ_ASSERT(strlen(h.tid) == TERM_ID_LEN, "tid %s", h.tid);
		}
		FUZZ_ASSERT(strlen(h.ticket) <= TERM_TICKET_LEN, "ticket");
		if (h.upgrade)
			FUZZ_ASSERT(h.key[0], "an upgrade without a key");
		FUZZ_ASSERT(!strncmp(head, "GET ", 4), "accepted a request line that is not GET");
	}
	free(head);
	return 0;
}
