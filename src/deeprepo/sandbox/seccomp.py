"""The kernel's seccomp filter: system calls no cell needs, answered with EPERM.

The filter is built once per process with libseccomp (the C library, through
ctypes: see docs/decisions.md for why not a Python binding) and exported as a
classic BPF program. bwrap loads it with ``--seccomp FD`` just before it starts
the child; in process mode the child installs the same program on itself before
it reads any cell (``child.py``). Either way every process the cell starts
inherits it.

What it refuses, and why:

- debugging other processes: ``ptrace``, ``process_vm_readv/writev``, ``kcmp``,
  ``pidfd_getfd`` (a cell could otherwise rewrite the sandbox's init and clear
  its parent-death signal, or read another process's memory);
- namespaces and mounts: ``unshare``, ``setns``, ``clone`` with any ``CLONE_NEW*``
  flag (``clone3`` answers ENOSYS, so libc falls back to ``clone``), ``mount`` and the
  new mount API, ``pivot_root``, ``chroot`` (a new user namespace is the usual first
  step of kernel exploits);
- kernel attack surface no cell needs: the keyring (``keyctl``, ``add_key``,
  ``request_key``), ``bpf``, ``perf_event_open``, ``userfaultfd``,
  ``io_uring_*`` (its operations bypass seccomp), modules, ``kexec``, ``reboot``,
  swap, clocks, ``acct``, ``quotactl``, ``personality``, ``iopl``/``ioperm``,
  file handles (``open_by_handle_at``);
- memory outside ``RLIMIT_AS``: ``memfd_create`` and System V ``shmget``
  (their pages are not charged to the address-space limit);
- socket address families other than ``AF_UNIX``, ``AF_INET`` and ``AF_INET6``
  (:data:`ALLOWED_FAMILIES`), for ``socket`` and ``socketpair``, answered with
  EAFNOSUPPORT: a network namespace isolates only IP, so vsock (the host's
  hypervisor), netlink, packet, bluetooth, crypto (``AF_ALG``) and key sockets
  would reach the host or the kernel's less-used code around it. An allow-list,
  so a family added to a later kernel is refused too.

Other architectures' system call tables (i386 on x86-64, x32) kill the process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

__all__ = ["ALLOWED_FAMILIES", "DENIED", "SeccompUnavailable", "filter_bpf"]

DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "unshare",
    "setns",
    "mount",
    "umount",
    "umount2",
    "mount_setattr",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "pivot_root",
    "chroot",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "acct",
    "quotactl",
    "quotactl_fd",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "syslog",
    "personality",
    "iopl",
    "ioperm",
    "uselib",
    "vhangup",
    "lookup_dcookie",
    "name_to_handle_at",
    "open_by_handle_at",
    "fanotify_init",
    "nfsservctl",
    "memfd_create",
    "memfd_secret",
    "shmget",
)

#: The only address families a cell may open a socket in: unix sockets (Python's
#: multiprocessing, local servers a cell starts) and IP, which the network namespace
#: (bwrap) or Landlock (process mode) confines.
ALLOWED_FAMILIES = {"AF_UNIX": 1, "AF_INET": 2, "AF_INET6": 10}
# Every family number below this is checked one by one (Linux has 46 today); any
# larger value, including one with the upper 32 bits set (the kernel reads an int),
# is refused by a single comparison.
_FAMILY_LIMIT = 64

# clone(2) with any of these flags makes a new namespace.
_CLONE_NEW = {
    "CLONE_NEWNS": 0x00020000,
    "CLONE_NEWCGROUP": 0x02000000,
    "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000,
    "CLONE_NEWUSER": 0x10000000,
    "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000,
}  # CLONE_NEWTIME (0x80) exists only for clone3 and unshare; in clone's flags it is the exit signal

_ACT_ALLOW = 0x7FFF0000
_ACT_ERRNO_EPERM = 0x00050000 | 1
# clone3 passes its flags in memory that seccomp cannot read, so it is refused as missing
# (ENOSYS), which makes glibc fall back to clone, whose flags the filter checks.
_ACT_ERRNO_ENOSYS = 0x00050000 | 38
_ACT_ERRNO_EAFNOSUPPORT = 0x00050000 | 97
_CMP_EQ = 4
_CMP_GE = 5
_CMP_MASKED_EQ = 7


class SeccompUnavailable(RuntimeError):
    """libseccomp cannot be loaded or refused the filter; the message says why."""


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _libseccomp() -> ctypes.CDLL:
    names = [ctypes.util.find_library("seccomp"), "libseccomp.so.2"]
    for name in names:
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name, use_errno=True)
        except OSError:
            continue
        lib.seccomp_init.restype = ctypes.c_void_p
        lib.seccomp_init.argtypes = [ctypes.c_uint32]
        lib.seccomp_release.argtypes = [ctypes.c_void_p]
        lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        lib.seccomp_rule_add_array.argtypes = [
            ctypes.c_void_p,
            ctypes.c_uint32,
            ctypes.c_int,
            ctypes.c_uint,
            ctypes.POINTER(_ArgCmp),
        ]
        lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
        return lib
    raise SeccompUnavailable(
        "libseccomp is not installed (apt-get install libseccomp2, or run scripts/setup.sh)"
    )


@functools.lru_cache(maxsize=1)
def filter_bpf() -> bytes:
    """The filter as a BPF program (``struct sock_filter`` array) for this machine's architecture.

    Raises :class:`SeccompUnavailable` where libseccomp is missing or fails.
    """
    if not os.uname().sysname == "Linux":
        raise SeccompUnavailable("seccomp needs Linux")
    lib = _libseccomp()
    ctx = lib.seccomp_init(_ACT_ALLOW)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:
        for name in DENIED:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:
                continue  # not a system call on this architecture
            _add(lib, ctx, nr, [])
        clone3 = lib.seccomp_syscall_resolve_name(b"clone3")
        if clone3 >= 0:
            _add(lib, ctx, clone3, [], _ACT_ERRNO_ENOSYS)
        clone = lib.seccomp_syscall_resolve_name(b"clone")
        for flag in _CLONE_NEW.values():
            _add(lib, ctx, clone, [_ArgCmp(0, _CMP_MASKED_EQ, flag, flag)])
        _refuse_families(lib, ctx)
        read_fd, write_fd = os.pipe()
        try:
            rc = lib.seccomp_export_bpf(ctx, write_fd)
            os.close(write_fd)
            write_fd = -1
            if rc != 0:
                raise SeccompUnavailable(f"seccomp_export_bpf failed ({os.strerror(-rc)})")
            chunks = []
            while chunk := os.read(read_fd, 65536):
                chunks.append(chunk)
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)
    finally:
        lib.seccomp_release(ctx)
    program = b"".join(chunks)
    if not program or len(program) % 8:
        raise SeccompUnavailable("libseccomp exported an empty or malformed filter")
    return program


def _refuse_families(lib: ctypes.CDLL, ctx: int) -> None:
    """``socket`` and ``socketpair`` in any family outside :data:`ALLOWED_FAMILIES`: EAFNOSUPPORT."""
    allowed = set(ALLOWED_FAMILIES.values())
    for name in (b"socket", b"socketpair"):
        nr = lib.seccomp_syscall_resolve_name(name)
        if nr < 0:
            continue
        for family in range(_FAMILY_LIMIT):
            if family not in allowed:
                _add(lib, ctx, nr, [_ArgCmp(0, _CMP_EQ, family, 0)], _ACT_ERRNO_EAFNOSUPPORT)
        _add(lib, ctx, nr, [_ArgCmp(0, _CMP_GE, _FAMILY_LIMIT, 0)], _ACT_ERRNO_EAFNOSUPPORT)


def _add(
    lib: ctypes.CDLL, ctx: int, nr: int, cmps: list[_ArgCmp], action: int = _ACT_ERRNO_EPERM
) -> None:
    array = (_ArgCmp * max(1, len(cmps)))(*cmps)
    rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), array)
    if rc != 0:
        raise SeccompUnavailable(f"seccomp_rule_add failed for syscall {nr} ({os.strerror(-rc)})")


def program_fd(program: bytes) -> int:
    """A readable fd holding ``program`` from its start (for ``bwrap --seccomp`` or the child)."""
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, program)  # a few KB: fits in the pipe buffer
    finally:
        os.close(write_fd)
    return read_fd
