#ifndef ROOMBOX_SECCOMP_H
#define ROOMBOX_SECCOMP_H
#include <stddef.h>

/* Load the room filter into the calling process (after no_new_privs, as the
 * last step before execve).  EPERM for the syscall families of SPEC §3,
 * unshare and setns always, clone only when asked for new namespaces, ENOSYS
 * for clone3 (glibc then falls back to clone), and a kill for non-native
 * architectures.  0, or -1 with err "seccomp: <step>: <strerror>".
 */
int seccomp_load_room_filter(char *err, size_t errlen);

/* Write the same filter as raw BPF (struct sock_filter[]) to fd: the
 * keeper loads it into each exec without linking libseccomp. */
int seccomp_export_room_filter(int fd, char *err, size_t errlen);

#endif
