/* A terminal's WebSocket on term.sock; see term_ws.c. */
#ifndef ROOMBOX_FCGI_TERM_WS_H
#define ROOMBOX_FCGI_TERM_WS_H

#include "app.h"

/* Listen on term.sock beside the FastCGI socket and start accepting;
 * -1 with a message on stderr. */
int term_ws_start(struct app *app);
void term_ws_stop(void);

#endif
