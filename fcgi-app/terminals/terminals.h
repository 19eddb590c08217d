/* A room's terminals: /api/rooms/{id}/sandbox/terminals (terminals.c) and
 * their WebSocket (term_ws.c). */
#ifndef ROOMBOX_FCGI_TERMINALS_H
#define ROOMBOX_FCGI_TERMINALS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "app.h"
#include "roomid.h"

#define TERM_ID_LEN        12          /* "t" and 11 of [0-9a-f] */
#define TERM_TICKET_LEN    32          /* hex */
#define TERM_TICKET_MS     60000
#define TERMS_PER_ROOM     8
#define TERMS_MAX          64
#define TERM_CLIENTS_MAX   8           /* WebSocket clients of one terminal */
#define TERM_SCROLLBACK    (256u << 10)

route_handler api_terms_list, api_terms_create, api_terms_get, api_terms_delete, api_terms_ticket;

struct terminal;

/* The running terminal (room, id) with one more client on it, or NULL. */
struct terminal *term_attach(const char *room, const char *id);
void term_detach(struct terminal *t);

/* The room's clean-up: its terminals leave the list (ended with the
 * sandbox; one still running, its removal having failed, is hung up),
 * and its tickets are void. */
void terms_room_forget(const char *room);

/* A single-use ticket for (room, id), valid TERM_TICKET_MS: true (and used
 * up) when it is one. */
bool term_ticket_take(const char *ticket, const char *room, const char *id);

/* What a client does with an attached terminal (term_ws.c). */
int term_write(struct terminal *t, const void *data, size_t n);   /* keystrokes */
int term_resize(struct terminal *t, unsigned cols, unsigned rows);
/* Whether its clients' input is to be told as the room's activity now:
 * the terminal runs and every_ms passed since it last was (by any of
 * them).  True marks it told. */
bool term_activity_due(struct terminal *t, long every_ms);
/* Waits up to ms for output past *at (or the end); copies up to max bytes
 * from *at (the scrollback's oldest byte kept when *at is older).  Returns
 * bytes copied; 0 with *ended set once the terminal has ended and every
 * byte was read (its exit code in *code, -1 when the room stopped it). */
size_t term_read(struct terminal *t, uint64_t *at, void *out, size_t max, long ms, bool *ended, int *code);
/* The offset a new client starts at: the oldest scrollback byte kept. */
uint64_t term_start_offset(struct terminal *t);

#endif
