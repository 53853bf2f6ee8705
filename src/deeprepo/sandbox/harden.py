"""What the child does to itself before it reads a cell: cgroup, uid, capabilities, seccomp,
Landlock, resource limits; and, between cells, reaping what the parent killed.

Kernel side, stdlib only (no deeprepo import): the child (``child.py``) runs it as a private
copy, the same inside bubblewrap and as a plain process. The parent says what to do on the
child's command line (see ``isolation.child_command``)::

    --cgroup-fds 5,6     write "0" to each (cgroup.procs fds the parent opened): join the cgroup
    --drop-to 65534:65534  give up root: empty the capability bounding set, then setresgid/setresuid
    --drop-caps          (root that cannot change uid) drop every capability, keep uid 0
    --seccomp-fd 7       install the BPF program read from fd 7 (process mode; bwrap loads its own)
    --landlock DIR       Landlock: write only below DIR, read only system paths, no TCP, no
                         signals or abstract sockets outside the sandbox (process mode)

Every step that was asked for and fails ends the process (exit code 70 and one
line on stderr): a kernel never runs cells with less isolation than the parent chose.
"""

from __future__ import annotations

import ctypes
import os
import struct
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

_PR_SET_DUMPABLE = 4
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAPBSET_DROP = 24
_PR_SET_SECCOMP = 22
_SECCOMP_MODE_FILTER = 2
_CAP_LAST = 63
_SYS_LANDLOCK = (444, 445, 446)  # create_ruleset, add_rule, restrict_self: same on every arch

_libc = ctypes.CDLL(None, use_errno=True)


def _fail(what: str) -> None:
    err = ctypes.get_errno()
    sys.stderr.write(f"deeprepo kernel: {what} failed ({os.strerror(err) if err else 'error'})\n")
    sys.stderr.flush()
    os._exit(70)


def _prctl(option: int, arg: int, what: str) -> None:
    if _libc.prctl(option, ctypes.c_ulong(arg), 0, 0, 0) != 0:
        _fail(what)


def join_cgroup(fds: list[int]) -> None:
    for fd in fds:
        try:
            os.write(fd, b"0")
        except OSError as exc:
            _fail(f"joining the kernel's cgroup ({exc})")
        os.close(fd)


def _clear_capabilities() -> None:
    # capset(2) with version 3 and all-zero sets: effective, permitted, inheritable.
    header = struct.pack("Ii", 0x20080522, 0)
    data = bytes(24)
    if _libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(data)) != 0:
        _fail("capset")


def _drop_bounding_set() -> None:
    for cap in range(_CAP_LAST + 1):
        if _libc.prctl(_PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0:
            if ctypes.get_errno() == 22:  # EINVAL: past the kernel's last capability
                break
            _fail(f"dropping capability {cap} from the bounding set")


def drop_root(uid: int, gid: int) -> None:
    """Become ``uid``/``gid`` with no capabilities, no way back (the bounding set is empty)."""
    _drop_bounding_set()
    try:
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
    except OSError as exc:
        _fail(f"changing to uid {uid} ({exc})")
    _clear_capabilities()
    if 0 in os.getresuid() or 0 in os.getresgid():
        _fail("giving up root")
    # A change of uid makes the process non-dumpable, so its own /proc/self files would stay
    # root's and unreadable to it; it holds nothing the cell does not (RLIMIT_CORE is 0).
    _prctl(_PR_SET_DUMPABLE, 1, "PR_SET_DUMPABLE")


def drop_capabilities() -> None:
    _drop_bounding_set()
    _clear_capabilities()


def install_seccomp(fd: int) -> None:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    program = b"".join(chunks)
    if not program or len(program) % 8:
        _fail("reading the seccomp filter")
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = struct.pack("HP", len(program) // 8, ctypes.addressof(buf))  # struct sock_fprog
    _prctl(_PR_SET_NO_NEW_PRIVS, 1, "PR_SET_NO_NEW_PRIVS")
    fprog_buf = ctypes.create_string_buffer(fprog, len(fprog))
    if _libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, fprog_buf, 0, 0) != 0:
        _fail("installing the seccomp filter")


# Landlock file rights (ABI 1, then REFER: 2, TRUNCATE: 3, IOCTL_DEV: 5).
_FS_EXECUTE, _FS_WRITE_FILE, _FS_READ_FILE, _FS_READ_DIR = 1, 2, 4, 8
_FS_ABI1 = (1 << 13) - 1
_FS_REFER, _FS_TRUNCATE, _FS_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
_NET_BIND_TCP, _NET_CONNECT_TCP = 1, 2
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1, 2
_FILE_ONLY = _FS_EXECUTE | _FS_WRITE_FILE | _FS_READ_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV


def landlock_abi() -> int:
    """The Landlock ABI version of this kernel, 0 where it has none."""
    rc = _libc.syscall(_SYS_LANDLOCK[0], None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return int(rc) if rc > 0 else 0


def landlock(write_dir: str, read_paths: list[str]) -> int:
    """Confine this process (and its children) to ``read_paths`` read-only and ``write_dir``.

    Returns the ABI used, 0 where the kernel has no Landlock (nothing is applied then).
    """
    abi = landlock_abi()
    if abi == 0:
        return 0
    fs = _FS_ABI1
    if abi >= 2:
        fs |= _FS_REFER
    if abi >= 3:
        fs |= _FS_TRUNCATE
    if abi >= 5:
        fs |= _FS_IOCTL_DEV
    net = _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0
    scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL if abi >= 6 else 0
    attr = struct.pack("QQQ", fs, net, scoped)[: 8 if abi < 4 else 16 if abi < 6 else 24]
    attr_buf = ctypes.create_string_buffer(attr, len(attr))
    ruleset = _libc.syscall(_SYS_LANDLOCK[0], attr_buf, ctypes.c_size_t(len(attr)), 0)
    if ruleset < 0:
        _fail("landlock_create_ruleset")
    read = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
    rules = [(p, read) for p in read_paths] + [("/dev/null", _FS_READ_FILE | _FS_WRITE_FILE)]
    # Its own /proc entry, not /proc: other processes of the same uid (a shell holding API
    # keys in its environment) would be readable there.
    rules.append((f"/proc/{os.getpid()}", _FS_READ_FILE | _FS_READ_DIR))
    rules.append((write_dir, fs))
    for path, access in rules:
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            continue  # a system path this machine does not have
        if not os.path.isdir(path):
            access &= _FILE_ONLY
        rule = struct.pack("=Qi", access & fs, fd)
        rule_buf = ctypes.create_string_buffer(rule, len(rule))
        rc = _libc.syscall(_SYS_LANDLOCK[1], ruleset, 1, rule_buf, 0)
        os.close(fd)
        if rc != 0:
            _fail(f"landlock_add_rule for {path}")
    _prctl(_PR_SET_NO_NEW_PRIVS, 1, "PR_SET_NO_NEW_PRIVS")
    if _libc.syscall(_SYS_LANDLOCK[2], ruleset, 0) != 0:
        _fail("landlock_restrict_self")
    os.close(ruleset)
    return abi


def apply(argv: list[str]) -> list[str]:
    """Apply the options in ``argv`` (in a safe order); the arguments that are not ours."""
    opts: dict[str, str] = {}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] in ("--cgroup-fds", "--drop-to", "--seccomp-fd", "--landlock", "--read-paths"):
            opts[argv[i]] = argv[i + 1]
            i += 2
        elif argv[i] == "--drop-caps":
            opts[argv[i]] = ""
            i += 1
        else:
            rest.append(argv[i])
            i += 1
    if "--cgroup-fds" in opts:
        join_cgroup([int(x) for x in opts["--cgroup-fds"].split(",") if x])
    if "--drop-to" in opts:
        uid, gid = (int(x) for x in opts["--drop-to"].split(":"))
        drop_root(uid, gid)
    elif "--drop-caps" in opts:
        drop_capabilities()
    if "--landlock" in opts:
        paths = [p for p in opts.get("--read-paths", "").split(os.pathsep) if p]
        landlock(opts["--landlock"], paths)
    if "--seccomp-fd" in opts:
        install_seccomp(int(opts["--seccomp-fd"]))
    return rest


def apply_limits(limits: dict[str, int]) -> None:
    """Lower this process's resource limits (never above the current hard limit)."""
    import resource

    mb = 1024 * 1024
    wanted: list[tuple[int, int | None]] = [
        (resource.RLIMIT_AS, limits.get("memory_mb", 0) * mb),
        (resource.RLIMIT_CPU, limits.get("cpu_seconds", 0)),
        (resource.RLIMIT_NOFILE, limits.get("open_files", 0)),
        (resource.RLIMIT_NPROC, limits.get("processes", 0)),
        (resource.RLIMIT_FSIZE, limits.get("file_size_mb", 0) * mb),
        (resource.RLIMIT_CORE, 0),
    ]
    for which, value in wanted:
        if value is None or (value <= 0 and which != resource.RLIMIT_CORE):
            continue
        _soft, hard = resource.getrlimit(which)
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        # CPU: the soft limit sends SIGXCPU, the hard one a second later SIGKILL.
        new_hard = value + 1 if which == resource.RLIMIT_CPU else value
        if hard != resource.RLIM_INFINITY:
            new_hard = min(new_hard, hard)
        try:
            resource.setrlimit(which, (value, new_hard))
        except (ValueError, OSError):
            resource.setrlimit(which, (value, hard))


def reaper() -> Callable[[], None]:
    """What reaps this process's children that died of SIGKILL (the parent stops what a cell
    leaves running): their zombies would otherwise count against the process limits of later
    cells. Children that exited on their own are left to the cell's own ``wait``.

    The kernel's loop calls it between cells, when a cell may have replaced ``os.waitid`` or
    the fields of its result type: so it runs on the functions of now (call this before any
    cell) and reads the result as a tuple."""
    waitid, waitpid, listdir, getpid = os.waitid, os.waitpid, os.listdir, os.getpid
    item = tuple.__getitem__
    p_all, p_pid, killed = os.P_ALL, os.P_PID, os.CLD_KILLED
    peek = os.WEXITED | os.WNOHANG | os.WNOWAIT

    def reap() -> None:
        try:
            first = waitid(p_all, 0, peek)
        except ChildProcessError:
            return
        if first is None:
            return  # no exited child: the usual case, one system call
        me = getpid()
        try:
            tids = listdir(f"/proc/{me}/task")
        except OSError:
            return
        for tid in tids:
            try:
                with open(f"/proc/{me}/task/{tid}/children", "rb") as f:
                    kids = [int(x) for x in f.read().split()]
            except (OSError, ValueError):
                continue
            for pid in kids:
                try:
                    info = waitid(p_pid, pid, peek)
                    # waitid_result: (si_pid, si_uid, si_signo, si_status, si_code)
                    if info is not None and item(info, 4) == killed and item(info, 3) == 9:
                        waitpid(pid, 0)
                except OSError:
                    continue

    return reap
