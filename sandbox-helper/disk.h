/* disk_limit: each room's writable layer lives on its own sparse ext4 image,
 * loop-mounted inside the room's keeper mount namespace only.  A write past
 * the image's size fails with ENOSPC in that room alone, and the host never
 * loses more than disk_limit to a room. */
#ifndef ROOMBOX_DISK_H
#define ROOMBOX_DISK_H

#include <stddef.h>
#include <stdint.h>

/* Make a sparse image of `bytes` at path with an empty ext4 on it: a sparse
 * copy (or reflink) of <template_dir>/.disk-<bytes>.img, which is made with
 * mkfs.ext4 the first time.  The caller serialises calls (state lock). */
int disk_image_create(const char *path, const char *template_dir, uint64_t bytes,
		      char *err, size_t errlen);

/* Attach the image to a free loop device (auto-clearing, so it is released
 * with the last mount) and mount it on dir, nosuid,nodev.  Runs in the
 * keeper's mount namespace. */
int disk_image_mount(const char *path, const char *dir, char *err, size_t errlen);

#endif
