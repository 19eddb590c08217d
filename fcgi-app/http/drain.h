/* Output pipes that background processes of a room still hold after an
 * exec has been answered: read and dropped until they close, so those
 * processes never block on a full pipe nor die of SIGPIPE. */
#ifndef ROOMBOX_FCGI_DRAIN_H
#define ROOMBOX_FCGI_DRAIN_H

/* Takes fd (closes it at its end of file).  Thread-safe; the first call
 * starts the one drainer thread. */
void drain_add(int fd);

#endif
