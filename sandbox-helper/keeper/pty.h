/* The keeper's pty tool (pty.c): a terminal in the room, its master side
 * handed to roombox-fcgi; its protocol: common/protocol.h. */
#ifndef ROOMBOX_KEEPER_PTY_H
#define ROOMBOX_KEEPER_PTY_H

int tool_pty(const char *size, const char *mode, const char *cmd);

#endif
