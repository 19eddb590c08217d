/* The capabilities of a room, and those roombox-keeper uses: these lists,
 * and nothing else.
 *
 * Every capability named here is one over the room's own user namespace
 * (its ids 0-65535, mapped onto host ids of that room alone): the room's
 * mount, network, uts, ipc, pid and cgroup namespaces are owned by the
 * host's user namespace, so none of these capabilities reaches them, the
 * host, or another room.  They act on the room's own files and processes.
 *
 * ROOM_CAPS is Docker's default set.  It is the bounding set of every
 * process of the room (confine_room drops the rest once, for all), and what
 * the room's root gets at each exec.  A shell runs with no_new_privs, which
 * lets an execve grant no capability its parent did not hold: so the keeper
 * keeps ROOM_CAPS in its permitted set, to hand them to the room's root.
 *
 * KEEPER_CAPS is what the keeper itself uses, its effective set:
 *
 *   CAP_SETUID, CAP_SETGID  an exec's child of `user` drops to uid/gid 1000
 *                           (setgroups, setresgid, setresuid)
 *   CAP_KILL                stopping and killing the room's processes (at a
 *                           deadline, a fork bomb), some of which run as
 *                           the room's user
 *
 * (The keeper no longer needs CAP_AUDIT_CONTROL: it clears its own audit
 * login uid while still on the host's side, so each exec's child may set it
 * once without privilege, and then no process of the room can change it.)
 *
 * tests/security/test_keeper_caps.py reads these lists and checks a running
 * keeper's CapEff, CapPrm and CapBnd, and a room root's, against them. */
#ifndef ROOMBOX_KEEPER_CAPS_H
#define ROOMBOX_KEEPER_CAPS_H

#include <linux/capability.h>
#include <stdint.h>

#define KEEPER_CAP_BIT(c) (UINT64_C(1) << (c))
#define KEEPER_CAPS (KEEPER_CAP_BIT(CAP_SETUID) | KEEPER_CAP_BIT(CAP_SETGID) | \
		     KEEPER_CAP_BIT(CAP_KILL))
/* Docker's default set (moby's oci/caps/defaults.go) */
#define ROOM_CAPS (KEEPER_CAP_BIT(CAP_CHOWN) | KEEPER_CAP_BIT(CAP_DAC_OVERRIDE) | \
		   KEEPER_CAP_BIT(CAP_FSETID) | KEEPER_CAP_BIT(CAP_FOWNER) | \
		   KEEPER_CAP_BIT(CAP_MKNOD) | KEEPER_CAP_BIT(CAP_NET_RAW) | \
		   KEEPER_CAP_BIT(CAP_SETGID) | KEEPER_CAP_BIT(CAP_SETUID) | \
		   KEEPER_CAP_BIT(CAP_SETFCAP) | KEEPER_CAP_BIT(CAP_SETPCAP) | \
		   KEEPER_CAP_BIT(CAP_NET_BIND_SERVICE) | KEEPER_CAP_BIT(CAP_SYS_CHROOT) | \
		   KEEPER_CAP_BIT(CAP_KILL) | KEEPER_CAP_BIT(CAP_AUDIT_WRITE))

#endif
