#ifndef ROOMBOX_ROOM_FILTER_H
#define ROOMBOX_ROOM_FILTER_H
#include <stddef.h>

/* The room's seccomp filter as raw BPF (struct sock_filter[]), generated at
 * build time by gen/room_filter_gen.c from seccomp_filter.c (libseccomp),
 * so the setuid helper links no libseccomp.  The helper hands it to each
 * new keeper, which loads it once for the whole room. */
extern const unsigned char room_filter_bpf[];
extern const size_t room_filter_bpf_size;

#endif
