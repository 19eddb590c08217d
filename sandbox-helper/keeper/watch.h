/* The keeper's watch tool (watch.c): a directory's changes as records on
 * stdout until stdin ends; the records: common/protocol.h. */
#ifndef ROOMBOX_KEEPER_WATCH_H
#define ROOMBOX_KEEPER_WATCH_H

int tool_watch(const char *path, const char *recursive_flag, const char *unused);

#endif
