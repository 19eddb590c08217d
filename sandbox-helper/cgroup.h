/* Per-room cgroups behind one small interface, with two back ends:
 * cgroup v2 (unified hierarchy with controllers) and cgroup v1 (separate
 * memory, pids and cpu hierarchies, as on hybrid hosts).  Where neither is
 * usable, mode is CG_NONE and every call succeeds doing nothing, so the
 * service still runs (and says so in /api/health).
 *
 * Layout: <controller root>/<group>/<room>/         the room (limits); on v1
 *                                                   also its processes
 *         <controller root>/<group>/<room>/keeper/  v2 only: the keeper and
 *                                                   every process it forks
 *                                                   (v2 allows processes
 *                                                   only in leaves)
 * No controller is enabled below the room, so a room is one memory cgroup
 * on either back end.  Whatever cgroups appear below the room besides
 * keeper/ are part of the room: killed with it and removed with it.
 */
#ifndef ROOMBOX_CGROUP_H
#define ROOMBOX_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

enum cgroup_mode { CG_NONE, CG_V1, CG_V2 };

struct cgroup_limits {
	uint64_t memory_bytes;  /* 0 = no limit */
	int pids;               /* 0 = no limit */
	double cpus;            /* 0 = no limit */
};

struct cgroup_sys {
	enum cgroup_mode mode;
	/* v2: unified mount; v1: one mount per controller ("" if absent). */
	char v2_root[256];
	char memory_root[256], pids_root[256], cpu_root[256], freezer_root[256];
	char group[32];           /* "roombox" or "roombox-<hash>": see below */
};

/* Look at `fsroot` (normally "/sys/fs/cgroup"; tests pass a scratch tree laid
 * out the same way) and pick v2 if its cgroup.controllers lists memory and
 * pids, else v1 if memory and pids hierarchies are mounted, else none. */
void cgroup_detect(struct cgroup_sys *sys, const char *fsroot);
const char *cgroup_mode_name(enum cgroup_mode m);

/* Rooms live under <root>/roombox/ for the instance whose state_dir is the
 * default one, and under <root>/roombox-<8 hex digits of a hash of
 * state_dir>/ for any other (make run or a test stack next to the service),
 * so that two instances never touch each other's room cgroups. */
void cgroup_set_instance(struct cgroup_sys *sys, const char *state_dir,
			 const char *default_state_dir);

/* Create (or reuse) the room's cgroup and its keeper/ leaf, applying limits.
 * 0, or -1 with err "cgroup <room>: <step>: <strerror>". */
int cgroup_room_setup(const struct cgroup_sys *sys, const char *room,
		      const struct cgroup_limits *lim, char *err, size_t errlen);
/* Move pid into the room (v1, every hierarchy) or its keeper/ leaf (v2);
 * the room must have been set up.  pid 0 is the calling process, as cgroup.procs takes
 * it.  room, here as everywhere, must be [A-Za-z0-9_-]{1,64}. */
int cgroup_enter(const struct cgroup_sys *sys, const char *room, pid_t pid,
		 char *err, size_t errlen);
/* Kill every process of the room, in whatever cgroup below it, with SIGKILL
 * until none is left.  The room's cgroups stay (a stop then removes them
 * with cgroup_room_remove, and the next start makes them again). */
int cgroup_kill(const struct cgroup_sys *sys, const char *room,
		char *err, size_t errlen);
/* Kill every process of the room but `keep` (its keeper, PID 1 of the
 * room): frozen where the host can freeze (v1 freezer, v2 cgroup.freeze),
 * every other listed process gets SIGKILL, thawed, and again until only
 * `keep` is left (at most KILL_DEADLINE_MS).  *killed = how many distinct
 * processes were killed.  Not cgroup.kill: it would take the keeper too. */
int cgroup_kill_others(const struct cgroup_sys *sys, const char *room, pid_t keep,
		       int *killed, char *err, size_t errlen);
/* Give back the memory still charged to the room's memory cgroup -- page
 * cache of the files its processes read first, most of it -- by reclaiming
 * it (v1 memory.force_empty, v2 memory.reclaim), best effort.  Left
 * charged, those pages keep a removed room's memory cgroup alive in the
 * kernel ("dying": its shrinker maps and per-CPU data, ~150 KiB) until
 * memory pressure reclaims them; a host where rooms come and go collects
 * thousands.  Called with no process left in the room. */
void cgroup_room_release_memory(const struct cgroup_sys *sys, const char *room);
/* Kill everything, give the room's memory back, and remove the room's
 * cgroups, with every cgroup below them (all hierarchies): when the room is
 * destroyed, and when it stops (a stopped room holds no memory cgroup, so
 * none of the kernel's shrinker maps).  Absent ones are fine. */
int cgroup_room_remove(const struct cgroup_sys *sys, const char *room,
		       char *err, size_t errlen);
/* Remove the instance's <group> directories once they hold no room.  The
 * caller serialises this with cgroup_room_setup (the state lock). */
void cgroup_group_remove_if_empty(const struct cgroup_sys *sys);
/* Memory in bytes and number of processes of the room; 0 when unknown. */
void cgroup_room_usage(const struct cgroup_sys *sys, const char *room,
		       uint64_t *memory_bytes, uint64_t *processes);

/* Did the room's process limit make a fork fail: some fork refused for it
 * (pids.events) and either `evidence` (the caller saw the failure), or
 * pids.current within 2 of `limit`, or forks being refused right now
 * (watched up to 100 ms)?  False when unknown (no pids controller, no
 * limit). */
bool cgroup_room_pids_exhausted(const struct cgroup_sys *sys, const char *room, int limit,
				bool evidence);

/* Freeze every process of the room (v1 freezer, v2 cgroup.freeze) and
 * wait, at most FREEZE_WAIT_MS, until the kernel says they are: true when
 * the caller must thaw (false: this host cannot freeze).  A snapshot's
 * cut (snapshot.c). */
bool cgroup_room_freeze(const struct cgroup_sys *sys, const char *room);
void cgroup_room_thaw(const struct cgroup_sys *sys, const char *room);

#endif
