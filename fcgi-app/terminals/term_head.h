/* The request head of a terminal's WebSocket (term_ws.c): untrusted bytes
 * from the web server's client, parsed here alone (fuzzed:
 * tests/fuzz/fuzz_term_head.c). */
#ifndef ROOMBOX_FCGI_TERM_HEAD_H
#define ROOMBOX_FCGI_TERM_HEAD_H

#include <stdbool.h>

#include "roomid.h"
#include "terminals.h"

enum term_target {
	TERM_TARGET_NONE,     /* not /api/rooms/<room>/sandbox/terminals/<tid>/ws */
	TERM_TARGET_BAD_ID,   /* that shape, but room or tid cannot be one */
	TERM_TARGET_OK,
};

struct term_head {
	enum term_target shape;
	char room[ROOM_ID_MAX + 1];        /* "" unless a valid room id */
	char tid[TERM_ID_LEN + 1];         /* "" unless of a terminal id's length */
	char ticket[TERM_TICKET_LEN + 1];  /* ?ticket=, "" when none or too long */
	bool upgrade;                      /* Upgrade: websocket, Connection: upgrade, a key */
	bool version13;                    /* Sec-WebSocket-Version: 13 */
	char key[64];                      /* Sec-WebSocket-Key, trimmed */
	char auth[600];                    /* Authorization, "" when none or too long */
};

/* head: NUL-terminated, its request line and header lines, each ended by
 * CRLF.  0 with *h, or -1 when the request line is not GET <target>
 * HTTP/1.0 or 1.1. */
int term_head_parse(const char *head, struct term_head *h);

#endif
