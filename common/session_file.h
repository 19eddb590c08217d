/* A room's saved shell session (common/shell_env.h), read and written in
 * place on an open file: the helper opens it by path (sandbox-helper/
 * room.c), the keeper holds descriptors of the same files for its exec
 * channels (keeper/channel.c), and both see one file.  Never replaced by
 * rename, so a descriptor held since the channel opened stays the room's
 * session; flock makes each read and write whole against the other side's. */
#ifndef ROOMBOX_SESSION_FILE_H
#define ROOMBOX_SESSION_FILE_H

#include <stddef.h>

/* The text, NUL-terminated, up to max bytes (a longer file is cut, as no
 * shell would take it back); "" for an empty file.  NULL on failure. */
char *session_file_read(int fd, size_t max);

/* The whole file becomes text[0..len).  0, or -1 with errno. */
int session_file_write(int fd, const char *text, size_t len);

#endif
