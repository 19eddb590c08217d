/* Which copy of each room this host holds: its epoch (epoch_store.c).
 * 0 / -1 with err; epoch_get gives 0 for a room with no epoch yet. */
#ifndef ROOMBOX_EPOCH_STORE_H
#define ROOMBOX_EPOCH_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int epoch_store_init(const char *dir, char *err, size_t errlen);
int epoch_get(const char *room, uint64_t *epoch, char *err, size_t errlen);
int epoch_set(const char *room, uint64_t epoch, char *err, size_t errlen);
int epoch_forget(const char *room, char *err, size_t errlen);

/* This host's "maint" (drained) as its record in etcd last said, kept
 * where it outlives the record: the record is under the host's lease, and
 * a lease that ran out (a restart, etcd away longer than its TTL) takes
 * it, and with it the operator's word, with it. */
bool epoch_store_maint_get(void);
int epoch_store_maint_set(bool maint, char *err, size_t errlen);

#endif
