/* roomboxctl's export, import and backup of rooms: the room archive
 * (docs/export-format.md) streamed over roombox-fcgi's FastCGI socket. */
#ifndef ROOMBOX_CTL_ROOM_IO_H
#define ROOMBOX_CTL_ROOM_IO_H

#include <stdbool.h>

struct room_io {
	const char *socket;
	const char *token;       /* NULL under auth = none */
};

/* The room's export to out_fd, its seal checked as it streams (a cut or
 * corrupted answer is an error: the archive's last bytes are held back
 * until they are known to be its seal).  0, or 1 with the reason on
 * stderr. */
int room_io_export(const struct room_io *io, const char *room, int out_fd);

/* An archive from in_fd imported as room: 0 (the new room's id printed),
 * or 1 with the service's reason on stderr. */
int room_io_import(const struct room_io *io, const char *room, int in_fd);

/* Each of rooms (count n) exported to dir/<room>.roombox, each written
 * under a temporary name, fsync'd and renamed: complete or absent.  0
 * when all were, else 1. */
int room_io_backup(const struct room_io *io, const char *dir, char **rooms, int n);

#endif
