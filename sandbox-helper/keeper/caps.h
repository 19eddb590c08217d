/* The capabilities roombox-keeper keeps: this list, and nothing else.
 *
 * The keeper starts as root with every capability (the helper execs it in
 * the room's new namespaces).  It needs CAP_SYS_ADMIN and CAP_SETPCAP once,
 * to load the room's seccomp filter and empty the bounding set for itself
 * and every process of the room (confine_room); then it lowers its
 * permitted, effective and inheritable sets to KEEPER_CAPS for good:
 *
 *   CAP_SETUID, CAP_SETGID  each exec's child drops to the room's uid and
 *                           gid (setgroups, setresgid, setresuid)
 *   CAP_KILL                stopping and killing the room's processes (at a
 *                           deadline, a fork bomb), which run as another uid
 *   CAP_AUDIT_CONTROL       each exec's child starts a new audit session
 *                           (/proc/self/loginuid), by which the keeper finds
 *                           what the exec left running
 *
 * tests/security/test_privileges.py reads this list and checks a running
 * keeper's CapEff and CapPrm against it. */
#ifndef ROOMBOX_KEEPER_CAPS_H
#define ROOMBOX_KEEPER_CAPS_H

#include <linux/capability.h>
#include <stdint.h>

#define KEEPER_CAP_BIT(c) (UINT64_C(1) << (c))
#define KEEPER_CAPS (KEEPER_CAP_BIT(CAP_SETUID) | KEEPER_CAP_BIT(CAP_SETGID) | \
		     KEEPER_CAP_BIT(CAP_KILL) | KEEPER_CAP_BIT(CAP_AUDIT_CONTROL))

#endif
