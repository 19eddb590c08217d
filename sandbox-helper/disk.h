/* disk_limit: each room's writable layer lives on its own sparse ext4 image,
 * loop-mounted inside the room's keeper mount namespace only.  A write past
 * the image's size fails with ENOSPC in that room alone, and the host never
 * loses more than disk_limit to a room. */
#ifndef ROOMBOX_DISK_H
#define ROOMBOX_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Make the template at path: a sparse file of `bytes` with an empty ext4,
 * or one holding fill_dir's tree (files, modes, owners) when not NULL. */
int disk_template_make(const char *path, uint64_t bytes, const char *fill_dir, char *err, size_t errlen);

/* Remove every template (.disk-*.img) in dir. */
void disk_templates_remove(const char *dir);

/* Make the image at path: a sparse copy (or reflink) of the template tpl,
 * `bytes` long.  The caller serialises calls (state lock). */
int disk_image_create(const char *path, const char *tpl, uint64_t bytes, char *err, size_t errlen);

/* The file in (bytes long) into the empty file out: its blocks shared
 * (FICLONE) where the file system can (*reflinked true then, if not NULL),
 * else only its allocated extents copied (SEEK_DATA/SEEK_HOLE,
 * copy_file_range), holes kept.  0, or -1 with errno. */
int disk_image_clone(int in, int out, uint64_t bytes, bool *reflinked);

/* The next new room's image, made ahead at spare (a name beside the
 * template's, for room creation to rename into place): spare from tpl, with its bytes on disk (fdatasync), under a name of
 * this process's first and then renamed: a loop device flushes its backing
 * file's dirty pages when it is configured, 2-3 ms for a fresh copy on the
 * critical path of a new room's start; a spare written earlier has none.
 * Needs no lock: a spare is whole or absent.  0, or -1. */
int disk_image_spare_make(const char *spare, const char *tpl, uint64_t bytes);

/* Attach the image to a free loop device, auto-clearing: the device is
 * released when the returned descriptor is closed and no mount holds it.
 * With direct I/O where the image's file system can (a room's blocks are
 * cached once, by the room's ext4, not a second time in the host's cache
 * of the image).  Its path in dev.  Returns the descriptor or -1 (err set). */
int disk_image_attach(const char *path, char *dev, size_t devlen, char *err, size_t errlen);
/* The same for an open image (read and write).  direct: the device reads
 * and writes the image with direct I/O (where its file system can), past
 * the host's page cache: for a writer that streams a whole disk in and
 * then syncs it (an import), whose pages would otherwise be copied into
 * that cache and all written out only at the sync. */
int disk_image_attach_fd(int img, bool direct, char *dev, size_t devlen, char *err, size_t errlen);

/* Remove the loop device dev ("/dev/loopN") once the room whose image is
 * img has stopped, or, img NULL, once the caller's own close let go of it
 * (a transfer's mount, transfer.c): autoclear unbinds a device but never
 * removes it, and an unbound device keeps its queue, request tags and
 * sysfs and debugfs entries (150-220 KiB) until someone does.  Left when
 * it is the lowest free device (the next start's), and then every unbound
 * device above it removed (one left as the spare while this one was bound,
 * devices freed out of order), so that the host keeps one spare at most
 * after any order of stops.  Best effort and never in anyone's way: the kernel
 * refuses to remove a device that is bound or open (another room took it
 * meanwhile), and a start that finds no free device makes one
 * (LOOP_CTL_GET_FREE, about 1 ms).  While dev is still bound to img (its
 * release lagging the keeper's death), waited for up to 50 ms; a device
 * still bound then is left alone. */
void disk_loop_remove(const char *dev, const char *img);

/* An ext4 mount of the attached device, nosuid,nodev,noatime, attached
 * nowhere (fsmount): the keeper moves it into its own namespace.  The
 * mount holds the device.  Returns its descriptor or -1 (err set). */
int disk_image_fsmount(const char *dev, char *err, size_t errlen);

/* A room's disk grows, never shrinks: disk_image_extend makes the image
 * file (not attached yet) bytes long when it is shorter -- 1 when it did,
 * 0 when not, -1 (err set) -- and disk_image_grow_fs then grows the ext4
 * in it to the file's whole size, before it is attached (e2fsck, then
 * resize2fs: offline, as the kernel's online resize takes
 * CAP_SYS_RESOURCE, which a host may not give). */
int disk_image_extend(const char *path, uint64_t bytes, char *err, size_t errlen);
int disk_image_grow_fs(const char *path, char *err, size_t errlen);

#endif
