#ifndef ROOMBOX_SECCOMP_H
#define ROOMBOX_SECCOMP_H
#include <stddef.h>

/* The room filter -- EPERM for the kernel surfaces a room has no business
 * with (mounts, namespaces, bpf, keyrings, ...), unshare and setns always,
 * clone only when asked for new namespaces, ENOSYS for clone3 (glibc then
 * falls back to clone), EAFNOSUPPORT for socket families outside the
 * room's short list, a kill for non-native architectures --
 * written as raw BPF (struct sock_filter[]) to fd.  Used at build time by
 * gen/room_filter_gen.c; the helper ships the result (room_filter.h).
 * 0, or -1 with err "seccomp: <step>: <strerror>". */
int seccomp_export_room_filter(int fd, char *err, size_t errlen);

#endif
