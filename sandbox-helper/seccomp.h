#ifndef ROOMBOX_SECCOMP_H
#define ROOMBOX_SECCOMP_H
#include <stddef.h>

/* Load the room filter into the calling process (after no_new_privs, as the
 * last step before execve).  EPERM for the syscall families of SPEC §3,
 * clone/clone3/unshare only when asked for new namespaces, and a kill for
 * non-native architectures.  0, or -1 with err set. */
int seccomp_load_room_filter(char *err, size_t errlen);

#endif
