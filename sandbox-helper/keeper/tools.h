/* The keeper's own tools (file operations, signalling a session): see
 * tools.c; the operations and their answers: common/protocol.h. */
#ifndef ROOMBOX_KEEPER_TOOLS_H
#define ROOMBOX_KEEPER_TOOLS_H

#include <stdbool.h>

/* Run the tool argv names (argv[0] the operation), in the calling process,
 * with its stdin, stdout and stderr; the exit status. */
int tool_main(char *const *argv);

#endif
