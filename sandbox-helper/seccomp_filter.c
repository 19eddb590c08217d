/* The room's seccomp filter.
 *
 * Why a deny list over a default ALLOW: a room runs arbitrary Debian
 * userland (compilers, interpreters, package tools), whose syscall needs
 * change with every glibc and kernel.  The jail's real walls are the
 * unprivileged uid, the namespaces and the cgroup; this filter only takes
 * away the kernel surfaces an unprivileged process could still reach and
 * that have a history of privilege escalations (new namespaces, the mount
 * APIs, bpf, io_uring, keyrings, userfaultfd, ...), plus the privileged
 * ones, so that a capability leak would not be enough on its own.
 *
 * Denials return EPERM rather than killing, so that programs probing for a
 * feature (e.g. "can I unshare?") fail the way they would without the
 * privilege and carry on.  Three exceptions:
 *   - socket() and socketpair() of a family outside a short list (unix,
 *     IPv4, IPv6, netlink: within what Docker's default profile allows,
 *     which refuses AF_VSOCK) return EAFNOSUPPORT, what a kernel built
 *     without that family answers: a program probing for vsock, bluetooth
 *     or AF_ALG takes it as "not here" and carries on, where EPERM would
 *     read as a privilege it lacks.  Those families are kernel code no room
 *     needs, and vsock reaches the hypervisor.  Packet sockets are out too
 *     (Docker allows them): nothing a room runs needs one (ping uses IPv4
 *     sockets, addresses are set from outside, no DHCP client runs; only
 *     tcpdump or arping would miss them), their kernel code has a long
 *     history of bugs, and the room's root, with no CAP_NET_RAW over its
 *     network namespace, gets EPERM for them anyway: here a capability
 *     leak alone does not reach them.
 *   - clone3 returns ENOSYS: its flags live in memory that seccomp cannot
 *     read, and ENOSYS makes glibc fall back to clone, whose flags are in a
 *     register and are checked here.
 *   - a syscall of another ABI (i386 via int 0x80, x32) kills the process:
 *     only the native architecture is in the filter, so any other ABI would
 *     otherwise bypass every rule below.
 *
 * Syscalls are named by their <sys/syscall.h> numbers for the build
 * architecture, not by libseccomp's table, so that syscalls newer than the
 * installed libseccomp (e.g. open_tree_attr) are still denied.
 */
#include "seccomp_filter.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>


/* Syscall numbers from 424 on are the same on every architecture, so these
 * fallbacks are right wherever the C library headers are too old. */
#ifndef SYS_open_tree_attr
#define SYS_open_tree_attr 467
#endif
#ifndef SYS_quotactl_fd
#define SYS_quotactl_fd 443
#endif
#ifndef SYS_mount_setattr
#define SYS_mount_setattr 442
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

struct denied_syscall {
	const char *name;
	int nr;
};

#define DENY(sys) { #sys, SYS_##sys }

static const struct denied_syscall eperm_always[] = {
	DENY(mount), DENY(umount2), DENY(pivot_root), DENY(chroot),
	DENY(fsopen), DENY(fsconfig), DENY(fsmount), DENY(fspick),
	DENY(move_mount), DENY(open_tree), DENY(open_tree_attr),
	DENY(mount_setattr),
	DENY(unshare), DENY(setns),
	DENY(bpf), DENY(perf_event_open), DENY(userfaultfd),
	DENY(keyctl), DENY(add_key), DENY(request_key),
	DENY(kexec_load), DENY(kexec_file_load),
	DENY(init_module), DENY(finit_module), DENY(delete_module),
	DENY(reboot), DENY(swapon), DENY(swapoff), DENY(acct),
	DENY(quotactl), DENY(quotactl_fd),
	DENY(settimeofday), DENY(clock_settime), DENY(clock_adjtime),
	DENY(adjtimex), DENY(syslog),
	DENY(open_by_handle_at), DENY(name_to_handle_at),
	DENY(io_uring_setup), DENY(io_uring_enter), DENY(io_uring_register),
#ifdef SYS_lookup_dcookie
	DENY(lookup_dcookie),
#endif
#ifdef SYS_iopl
	DENY(iopl),
#endif
#ifdef SYS_ioperm
	DENY(ioperm),
#endif
};

/* Every flag that asks clone for a new namespace.  CLONE_NEWTIME shares its
 * bit with the exit-signal byte of clone(); an exit signal >= 128 is not a
 * valid signal anyway, so denying it costs nothing. */
static const uint64_t clone_ns_flags[] = {
	CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC,
	CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWTIME,
};

/* The socket families a room may open, lowest first. */
static const uint64_t socket_families[] = { AF_UNIX, AF_INET, AF_INET6, AF_NETLINK };
#define N_SOCKET_FAMILIES (sizeof(socket_families) / sizeof(socket_families[0]))

static int fail(char *err, size_t errlen, const char *step, const char *what,
		int rc)
{
	snprintf(err, errlen, "seccomp: %s%s%s: %s", step, what ? " " : "",
		 what ? what : "", strerror(rc < 0 ? -rc : rc));
	return -1;
}

static int deny_always(scmp_filter_ctx ctx, char *err, size_t errlen)
{
	size_t n = sizeof(eperm_always) / sizeof(eperm_always[0]);

	for (size_t i = 0; i < n; i++) {
		int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
					  eperm_always[i].nr, 0);
		if (rc < 0)
			return fail(err, errlen, "add rule", eperm_always[i].name, rc);
	}
	return 0;
}

/* Rules for one syscall are ORed, so one masked test per flag denies a clone
 * that carries any of them. */
static int deny_clone_namespaces(scmp_filter_ctx ctx, char *err, size_t errlen)
{
	size_t n = sizeof(clone_ns_flags) / sizeof(clone_ns_flags[0]);
	int rc;

	for (size_t i = 0; i < n; i++) {
		uint64_t f = clone_ns_flags[i];
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone),
				      1, SCMP_A0(SCMP_CMP_MASKED_EQ, f, f));
		if (rc < 0)
			return fail(err, errlen, "add rule", "clone", rc);
	}
	rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0);
	if (rc < 0)
		return fail(err, errlen, "add rule", "clone3", rc);
	return 0;
}

static bool socket_family_allowed(uint64_t family)
{
	for (size_t i = 0; i < N_SOCKET_FAMILIES; i++)
		if (socket_families[i] == family)
			return true;
	return false;
}

/* The list as rules that refuse (rules are ORed): every domain above the
 * highest allowed one -- a domain with its upper register bits set among
 * them, which the kernel would read as its low 32 bits -- and each value
 * below it that is not in the list. */
static int refuse_socket_families(scmp_filter_ctx ctx, int nr, const char *name,
				  char *err, size_t errlen)
{
	uint64_t top = socket_families[N_SOCKET_FAMILIES - 1];
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), nr, 1,
				  SCMP_A0(SCMP_CMP_GT, top));
	for (uint64_t f = 0; rc >= 0 && f < top; f++)
		if (!socket_family_allowed(f))
			rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), nr, 1,
					      SCMP_A0(SCMP_CMP_EQ, f));
	return rc < 0 ? fail(err, errlen, "add rule", name, rc) : 0;
}

/* Allowed: 0 (PER_LINUX) and 0xffffffff (query).  libseccomp takes one
 * comparison per argument in a rule and rules are ORed, so "neither value"
 * is spelt as a union: anything above 32 bits, or low 32 bits that hold
 * both a 1 and a 0 -- which, read as a ring, always contain a set bit
 * followed by a clear bit. */
static int deny_personality_changes(scmp_filter_ctx ctx, char *err,
				    size_t errlen)
{
	int rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
				  SCMP_SYS(personality), 1,
				  SCMP_A0(SCMP_CMP_GT, 0xffffffffULL));
	for (int i = 0; rc >= 0 && i < 32; i++) {
		uint64_t set = 1ULL << i, clear = 1ULL << ((i + 1) % 32);
		rc = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM),
				      SCMP_SYS(personality), 1,
				      SCMP_A0(SCMP_CMP_MASKED_EQ, set | clear, set));
	}
	if (rc < 0)
		return fail(err, errlen, "add rule", "personality", rc);
	return 0;
}

/* seccomp_init() puts only the native architecture in the filter; every
 * other ABI, x32 included, takes the bad-arch action. */
static scmp_filter_ctx room_filter_new(char *err, size_t errlen)
{
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (!ctx) {
		fail(err, errlen, "init", NULL, ENOMEM);
		return NULL;
	}
	int rc = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH,
				  SCMP_ACT_KILL_PROCESS);
	if (rc < 0) {
		fail(err, errlen, "set bad-arch action", NULL, rc);
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

/* The whole filter, ready to load or export. */
static scmp_filter_ctx room_filter_build(char *err, size_t errlen)
{
	scmp_filter_ctx ctx = room_filter_new(err, errlen);
	if (!ctx)
		return NULL;
	if (deny_always(ctx, err, errlen) < 0 ||
	    deny_clone_namespaces(ctx, err, errlen) < 0 ||
	    deny_personality_changes(ctx, err, errlen) < 0 ||
	    refuse_socket_families(ctx, SYS_socket, "socket", err, errlen) < 0 ||
	    refuse_socket_families(ctx, SYS_socketpair, "socketpair", err, errlen) < 0) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

int seccomp_export_room_filter(int fd, char *err, size_t errlen)
{
	scmp_filter_ctx ctx = room_filter_build(err, errlen);
	if (!ctx)
		return -1;
	int erc = seccomp_export_bpf(ctx, fd);
	seccomp_release(ctx);
	return erc < 0 ? fail(err, errlen, "export", NULL, erc) : 0;
}
