"""Run untrusted Python in a separate, locked-down process.

Design intent: the policy is trained to maximise reward, so it will find any
hole a weak checker leaves. The sandbox therefore stacks independent layers
and records which ones were active, so a verdict says how it was produced:

1. **Process**: a fresh ``python -I -S`` (isolated mode: no user site, no
   ``PYTHON*`` variables, no current directory on ``sys.path``) in its own
   session, with a scrubbed environment and a fresh empty working directory.
2. **Resource limits** (``setrlimit`` in the child before ``exec``): CPU
   seconds, address space, file size, processes, open files, no core dumps;
   when we are root the working directory is a size-capped tmpfs (disk).
3. **Identity** (when we are root): a fresh unprivileged uid per run, so the
   program cannot read root-only files, cannot write outside its directory,
   cannot signal our processes, and every process it leaves behind can be
   found by uid and killed (``setsid`` cannot hide a process from that).
4. **Mounts** (when we are root): a private mount namespace. With the
   PID/IPC layout (``allow_list_root``) the run's root is a fresh tmpfs
   holding only what it is given: the interpreter's files read-only
   (:func:`_interpreter_files`), a few ``/dev`` nodes, a fresh ``/proc``,
   its working directory and the paths a task declares, entered with
   ``pivot_root`` so the host's root is detached, not covered; a task
   source, a ledger or a venv anywhere else is simply not there. The old
   layout covers ``hide_paths`` with empty read-only tmpfs mounts instead
   (a deny-list; for comparison and control runs). The working directory
   is a size-capped tmpfs either way.
5. **Network**: a new, empty network namespace (only a downed loopback), or,
   where ``unshare`` is not allowed, an audit hook that refuses every
   ``socket.*`` event (weaker: ``ctypes`` can call libc directly).
6. **Processes and IPC** (when we are root, ``private_pids_ipc``): new PID
   and IPC namespaces. Every privileged step of this layout runs in a small
   separate interpreter (``_namespace_init.py``, started without a
   ``preexec_fn`` so ``subprocess`` can ``vfork``: a large verifier is never
   forked). A trusted init (pid 1, our code, root) starts the
   program as pid 2 under a fresh ``/proc`` mounted with ``hidepid=2``, so
   the program sees its own processes only: not ours, not the host's, not
   the init's command line. The init reaps every orphan (their CPU time is
   charged to the run) and, when the program exits, kills everything left in
   the namespace; the kernel then frees the IPC namespace with every SysV
   shared memory segment, message queue and semaphore set and every POSIX
   message queue in it. The namespace's IPC limits are lowered to
   ``ipc_mb`` in all, so what a run pins outside its address space is
   bounded, and it is gone when the run ends. Where the machine has a
   cgroup v1 memory controller we may write to, the run also gets its own
   memory cgroup limited to ``memory_mb``: every process of the run, its
   shared memory, memfds and working-directory files count against that one
   total (``RLIMIT_AS`` alone is per process).
7. **Socket families** (``socket_filter``): a seccomp filter (built with
   libseccomp where the library is present) refuses ``socket``/``socketpair``
   for every family but those the network namespace confines (``AF_UNIX``,
   ``AF_INET``, ``AF_INET6``, ``AF_NETLINK``), so ``AF_VSOCK``, Bluetooth,
   ``AF_ALG`` and the rest fail with ``EPERM``; ``io_uring_setup`` is refused
   too (it can open sockets without the ``socket`` syscall). Without
   libseccomp, an audit hook on ``socket.__new__`` refuses them (weaker:
   ``ctypes`` bypasses it).
8. **Objects owned by a uid or a session** (``refuse_uid_objects``): keys
   and keyrings live past every namespace of the run (in the session
   keyring it inherits, or its uid's keyrings), so the seccomp filter
   refuses ``add_key``, ``request_key``, ``keyctl`` and ``bpf``, and the
   run joins a fresh session keyring of its own before its exec.

The wall-clock timeout is enforced from outside, stdout and stderr are read
with a cap (the process is killed when it overflows them, nothing large is
ever buffered), and afterwards every process of the run's uid, or of its
process group where we cannot switch uid, is killed.

Cost: a run is charged ``max(CPU seconds of all its processes, wall seconds
the worker was held)`` (``SandboxResult.charged_s``): CPU burnt in forked
children counts (they are reaped by the run's init, or by the program), and
a program that sleeps still holds a worker for as long as it sleeps.

Nothing here decides whether a program is *correct*; that is the tiers' job.
"""

from __future__ import annotations

import ctypes
import functools
import json
import marshal
import os
import pwd
import random
import resource
import secrets
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "IsolationSupport",
    "SandboxError",
    "SandboxLimits",
    "SandboxResult",
    "channel_fd_placeholder",
    "describe_support",
    "isolation_support",
    "run_python",
]

_CLONE_NEWNS = 0x00020000
_CLONE_NEWNET = 0x40000000
_CLONE_NEWPID = 0x20000000
_CLONE_NEWIPC = 0x08000000
_PR_SET_SECCOMP = 22
_PR_SET_NO_NEW_PRIVS = 38
_SECCOMP_MODE_FILTER = 2
_MS_RDONLY = 1
_MS_NOSUID = 2
_MS_NODEV = 4
_MS_NOEXEC = 8
_MS_REC = 16384
_MS_PRIVATE = 1 << 18

# Sandbox uids come from a range no real account uses; one fresh uid per run
# makes RLIMIT_NPROC per-run and lets us find every process the run left.
_UID_LOW, _UID_HIGH = 1_500_000, 1_900_000

_REPO_ROOT = Path(__file__).resolve().parents[2]
_DEFAULT_HIDDEN = (str(_REPO_ROOT), "/root", "/home", "/tmp", "/var/tmp", "/dev/shm", "/run", "/work")


class SandboxError(RuntimeError):
    """The sandbox itself could not run (an infrastructure failure, not the candidate's fault)."""


class SandboxLimits(BaseModel):
    """Resource limits and isolation switches of one sandboxed run."""

    model_config = ConfigDict(extra="forbid")

    cpu_s: int = Field(default=2, ge=1, le=600, description="RLIMIT_CPU: CPU seconds before SIGXCPU/SIGKILL.")
    wall_s: float = Field(default=5.0, gt=0, le=3600, description="Wall-clock limit enforced from outside (kills the run).")
    memory_mb: int = Field(default=256, ge=32, description="RLIMIT_AS: address space in MiB (Python needs ~30 MiB).")
    file_size_mb: int = Field(default=2, ge=0, description="RLIMIT_FSIZE: largest file the program may write, MiB.")
    processes: int = Field(
        default=8, ge=1, description="RLIMIT_NPROC: processes of the sandbox uid (a fork bomb hits this)."
    )
    open_files: int = Field(default=32, ge=8, description="RLIMIT_NOFILE: open file descriptors.")
    disk_mb: int = Field(
        default=16, ge=1, description="Size of the tmpfs mounted as the working directory (root only; caps disk use)."
    )
    output_bytes: int = Field(
        default=64 * 1024, ge=1024, description="Cap on stdout and on stderr, each; overflowing kills the run."
    )
    isolate_user: bool = Field(default=True, description="Run as a fresh unprivileged uid when we are root.")
    network: Literal["auto", "netns", "audit-hook", "off"] = Field(
        default="auto",
        description=(
            "'auto': a new network namespace where allowed, else the audit hook; 'netns' or 'audit-hook' force one "
            "layer (netns fails as an infrastructure error where not allowed); 'off' leaves the network alone "
            "(tests only)."
        ),
    )
    hide_paths: list[str] = Field(
        default_factory=lambda: list(_DEFAULT_HIDDEN),
        description="Paths covered by an empty read-only tmpfs in the run's mount namespace (root only), where the "
        "allow-list root is off or not available.",
    )
    memory_cgroup: bool = Field(
        default=True,
        description="Put the run in its own memory cgroup limited to memory_mb, where the machine has one (root, "
        "cgroup v1 memory controller, with the PID/IPC layout): every process, shared memory, memfds and the "
        "working directory's tmpfs count against one total.",
    )
    private_pids_ipc: bool = Field(
        default=True,
        description="New PID and IPC namespaces with a fresh /proc and a reaping init (root only). False keeps "
        "the older layout (the host's /proc, the host's IPC objects); for comparison benchmarks only.",
    )
    ipc_mb: int = Field(
        default=16,
        ge=1,
        description="SysV shared memory allowed in the run's IPC namespace, MiB (message queues and semaphores get "
        "small fixed caps); freed when the run ends.",
    )
    socket_filter: bool = Field(
        default=True,
        description="Refuse socket families the network namespace does not confine (AF_VSOCK, AF_ALG, ...) and "
        "io_uring: a seccomp filter, or an audit hook where libseccomp is missing.",
    )
    refuse_uid_objects: bool = Field(
        default=True,
        description="Refuse the kernel objects that belong to a uid or a session rather than to a namespace and so "
        "outlive the run (keys and keyrings: add_key, request_key, keyctl; bpf objects): a seccomp rule, and the "
        "run joins its own empty session keyring (with the PID/IPC layout). False is for the security tests' "
        "control runs only.",
    )
    allow_list_root: bool = Field(
        default=True,
        description="The run's root is a fresh tmpfs holding only the interpreter's files (read-only), its "
        "working directory, a few /dev nodes and readable_paths, entered with pivot_root (with the PID/IPC layout, "
        "root only). False falls back to covering hide_paths (a deny-list; for the security tests' control runs "
        "and comparison benchmarks only).",
    )
    readable_paths: list[str] = Field(
        default_factory=list,
        description="Absolute paths a task declares it needs, bound read-only into the run's allow-list root at the "
        "same place.",
    )

    @field_validator("readable_paths")
    @classmethod
    def _absolute(cls, paths: list[str]) -> list[str]:
        for path in paths:
            if not os.path.isabs(path):
                raise ValueError(f"readable path {path!r} is relative; give an absolute path")
        return paths


class IsolationSupport(BaseModel):
    """What this machine lets the sandbox do (probed once per process)."""

    root: bool
    netns: bool = Field(description="unshare(CLONE_NEWNET) works.")
    mountns: bool = Field(description="unshare(CLONE_NEWNS) plus tmpfs mounts work.")
    setuid: bool = Field(description="The interpreter runs under a fresh unprivileged uid.")
    pidns: bool = Field(default=False, description="PID and IPC namespaces with a fresh /proc and our init work.")
    seccomp: bool = Field(default=False, description="A seccomp socket-family filter can be built (libseccomp).")
    memcg: str = Field(
        default="", description="Directory under which per-run memory cgroups are made (cgroup v1), '' if none."
    )
    python: str = Field(description="Interpreter used inside the sandbox.")
    detail: str = ""


class SandboxResult(BaseModel):
    """What happened in one sandboxed run."""

    outcome: Literal["success", "error", "timeout", "output_limit"] = Field(
        description="success: exit 0; error: non-zero exit or signal; timeout: CPU or wall limit; "
        "output_limit: stdout/stderr overflowed the cap."
    )
    returncode: int
    stdout: str
    stderr: str
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    channel: str = Field(default="", description="Bytes written to the extra result pipe, if one was asked for.")
    channel_truncated: bool = False
    wall_s: float = 0.0
    cpu_s: float = 0.0
    uid: int | None = Field(default=None, description="Sandbox uid, None when the run kept our uid.")
    charged_s: float = Field(
        default=0.0, description="What the run costs: max(CPU seconds of all its processes, wall seconds)."
    )
    network_layer: str = Field(description="'netns', 'audit-hook' or 'none'.")
    mount_layer: str = Field(description="'pivot-root' (allow-list root), 'tmpfs-hide' (deny-list) or 'none'.")
    uid_objects_layer: str = Field(
        default="none", description="'seccomp' (key and bpf syscalls refused), 'session-keyring' (own keyring only) "
        "or 'none'."
    )
    process_layer: str = Field(default="none", description="'pidns+ipcns' (private /proc, IPC, init) or 'none'.")
    memory_layer: str = Field(default="rlimit", description="'cgroup' (one total per run) or 'rlimit' (per process).")
    memory_peak_mb: float | None = Field(default=None, description="Peak memory of the run's cgroup, MiB.")
    memory_limit_hit: bool = Field(default=False, description="The run's cgroup reached its limit at least once.")
    socket_layer: str = Field(default="none", description="'seccomp', 'audit-hook' or 'none'.")
    leftover_killed: int = Field(default=0, description="Processes still alive after the run that we killed.")
    leftover_after_cleanup: int = Field(default=0, description="Processes of the run alive after cleanup (must be 0).")


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.unshare.argtypes = [ctypes.c_int]
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return libc


# Families whose sockets the network namespace confines; every other family is refused.
_ALLOWED_SOCKET_FAMILIES = (1, 2, 10, 16)  # AF_UNIX, AF_INET, AF_INET6, AF_NETLINK


class _ScmpArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


# Syscalls that make kernel objects owned by a uid or a session keyring rather than by a namespace: such an
# object outlives the run's namespaces (a cross-run channel, kernel memory pinned after the run).
_UID_OBJECT_SYSCALLS = (b"add_key", b"request_key", b"keyctl", b"bpf")


@functools.cache
def _socket_filter(families: bool = True, uid_objects: bool = False) -> bytes | None:
    """The seccomp BPF program, built once per combination here with libseccomp.

    ``families`` refuses the socket families the network namespace does not confine and io_uring;
    ``uid_objects`` refuses :data:`_UID_OBJECT_SYSCALLS`. Built in the verifier and handed to the namespace's
    init as bytes, which installs it with ``prctl`` just before the program's exec. None where libseccomp is
    not installed.
    """
    try:
        lib = ctypes.CDLL("libseccomp.so.2", use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ScmpArgCmp)
    ]  # fmt: skip
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    allow, deny = 0x7FFF0000, 0x00050000 | 1  # SCMP_ACT_ALLOW, SCMP_ACT_ERRNO(EPERM)
    eq, ge = 4, 5  # SCMP_CMP_EQ, SCMP_CMP_GE
    ctx = lib.seccomp_init(allow)
    if not ctx:
        return None
    try:
        for name in _UID_OBJECT_SYSCALLS if uid_objects else ():
            nr = lib.seccomp_syscall_resolve_name(name)
            if nr >= 0:
                _check(lib.seccomp_rule_add_array(ctx, deny, nr, 0, None), "seccomp rule")
        for name in (b"socket", b"socketpair") if families else ():
            nr = lib.seccomp_syscall_resolve_name(name)
            for family in range(64):
                if family not in _ALLOWED_SOCKET_FAMILIES:
                    cmp = _ScmpArgCmp(0, eq, family, 0)
                    _check(lib.seccomp_rule_add_array(ctx, deny, nr, 1, ctypes.byref(cmp)), "seccomp rule")
            # Past AF_MAX, and any value with high bits set (the kernel reads the family as an int).
            cmp = _ScmpArgCmp(0, ge, 64, 0)
            _check(lib.seccomp_rule_add_array(ctx, deny, nr, 1, ctypes.byref(cmp)), "seccomp rule")
        nr = lib.seccomp_syscall_resolve_name(b"io_uring_setup")
        if nr >= 0 and families:
            _check(lib.seccomp_rule_add_array(ctx, deny, nr, 0, None), "seccomp rule")
        read_fd, write_fd = os.pipe()
        try:
            _check(lib.seccomp_export_bpf(ctx, write_fd), "seccomp export")
            os.close(write_fd)
            write_fd = -1
            program = b""
            while chunk := os.read(read_fd, 65536):
                program += chunk
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)
    except OSError:
        return None
    finally:
        lib.seccomp_release(ctx)
    if not program or len(program) % 8:
        return None
    return program


def _install_socket_filter(bpf: bytes) -> None:
    """Install the seccomp program (in the child, before exec; the old layout only)."""
    libc = _libc()
    buffer = ctypes.create_string_buffer(bpf, len(bpf))
    fprog = _SockFprog(len(bpf) // 8, ctypes.addressof(buffer))
    _check(libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "no_new_privs")
    _check(libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0), "seccomp")


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _python_candidates() -> list[str]:
    found = [os.path.realpath(sys.executable), "/usr/bin/python3", shutil.which("python3") or ""]
    out: list[str] = []
    for p in found:
        if p and os.path.exists(p) and p not in out:
            out.append(p)
    return out


def _probe(python: str, *, netns: bool, mountns: bool, uid: int | None) -> bool:
    def pre() -> None:
        flags = (_CLONE_NEWNET if netns else 0) | (_CLONE_NEWNS if mountns else 0)
        if flags:
            _check(_libc().unshare(flags), "unshare")
        if mountns:
            _check(_libc().mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount private")
            _check(_libc().mount(b"tmpfs", b"/mnt", b"tmpfs", _MS_RDONLY, b"size=4k,mode=555"), "mount tmpfs")
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)

    proc = _run_probe([python, "-I", "-S", "-c", "import math"], preexec_fn=pre)
    return proc is not None and proc.returncode == 0


def _run_probe(argv: list[str], **popen: Any) -> subprocess.CompletedProcess[bytes] | None:
    """Run a capability probe from ``/`` with a bare PATH, 30 s at most; None when it could not run at all."""
    try:
        return subprocess.run(argv, cwd="/", env={"PATH": "/usr/bin:/bin"}, capture_output=True, timeout=30, **popen)
    except (OSError, subprocess.SubprocessError):
        return None


# The namespace's init (see _namespace_init.py): run with ``python -I -S -c`` in the child, as root.
_INIT_SOURCE = (Path(__file__).with_name("_namespace_init.py")).read_text(encoding="utf-8")


@functools.cache
def _memory_cgroup_root() -> Path | None:
    """Our own cgroup v1 memory directory, if per-run child cgroups can be made in it (probed once)."""
    try:
        lines = Path("/proc/self/cgroup").read_text(encoding="ascii").splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" not in controllers.split(","):
            continue
        root = Path("/sys/fs/cgroup/memory") / path.lstrip("/")
        probe = root / f"arl-probe-{os.getpid()}"
        try:
            probe.mkdir()
            try:
                (probe / "memory.limit_in_bytes").write_text(str(64 << 20))
            finally:
                probe.rmdir()
        except OSError:
            return None
        return root
    return None


def _make_memory_cgroup(name: str, limit_bytes: int) -> Path | None:
    root = _memory_cgroup_root()
    if root is None:
        return None
    cg = root / name
    try:
        cg.mkdir(mode=0o755)
        (cg / "memory.limit_in_bytes").write_text(str(limit_bytes))
        swap = cg / "memory.memsw.limit_in_bytes"  # present only with swap accounting
        if swap.exists():
            swap.write_text(str(limit_bytes))
    except OSError:
        _remove_memory_cgroup(cg)
        return None
    return cg


def _remove_memory_cgroup(cg: Path) -> tuple[float | None, bool]:
    """Read the run's peak and whether it hit the limit, then remove the (now empty) cgroup."""
    peak, hit = None, False
    try:
        peak = int((cg / "memory.max_usage_in_bytes").read_text()) / (1 << 20)
        oom = dict(line.split() for line in (cg / "memory.oom_control").read_text().splitlines() if line.strip())
        hit = int((cg / "memory.failcnt").read_text()) > 0 or int(oom.get("oom_kill", 0)) > 0
    except (OSError, ValueError):
        pass
    for _ in range(100):  # the last processes may still be exiting
        try:
            cg.rmdir()
            break
        except FileNotFoundError:
            break
        except OSError:
            time.sleep(0.01)
    return peak, hit


def _init_argv(python: str, **config: object) -> list[str]:
    """The command line of the set-up and init program; ``config`` as described in ``_namespace_init.py``."""
    return [python, "-I", "-S", "-c", _INIT_SOURCE, marshal.dumps(config).hex()]


def _probe_pidns(python: str) -> bool:
    probe = "import os; print(os.getpid(), len([p for p in os.listdir('/proc') if p.isdigit()]))"
    argv = _init_argv(
        python, netns=False, ipc_mb=1, work="", work_opts="", hide=[], rlimits=[], uid=None, bpf="", token="probe",
        root=None, newroot="", own_keyring=False, cgroup="", argv=[python, "-I", "-S", "-c", probe],
    )  # fmt: skip
    proc = _run_probe(argv, start_new_session=True)
    # Run as root in the probe, so hidepid hides nothing: the init and the program.
    return proc is not None and proc.returncode == 0 and proc.stdout.split() == [b"2", b"2"]


@functools.cache
def isolation_support() -> IsolationSupport:
    """Probe (once) which isolation layers this machine allows."""
    root = os.geteuid() == 0
    pythons = _python_candidates()
    netns = root and _probe(pythons[0], netns=True, mountns=False, uid=None)
    mountns = root and _probe(pythons[0], netns=False, mountns=True, uid=None)
    python, setuid = pythons[0], False
    if root:
        for candidate in pythons:
            if _probe(candidate, netns=False, mountns=False, uid=_UID_LOW - 1):
                python, setuid = candidate, True
                break
    detail = (
        "" if setuid or not root else "no interpreter runs as an unprivileged uid (is it under a 0700 directory?)"
    )
    pidns = mountns and _probe_pidns(pythons[0])
    return IsolationSupport(
        root=root,
        netns=netns,
        mountns=mountns,
        setuid=setuid,
        pidns=pidns,
        seccomp=_socket_filter() is not None,
        memcg=str(_memory_cgroup_root() or "") if root else "",
        python=python,
        detail=detail,
    )


# Installed (as `-c` bootstrap) only when the audit-hook network layer is used:
# audit hooks cannot be removed from Python code once added.
_NET_HOOK = (
    "import sys\n"
    "def _arl_no_net(event, args):\n"
    "    if event.startswith('socket.'):\n"
    "        raise PermissionError('network access is disabled in the sandbox')\n"
    "sys.addaudithook(_arl_no_net)\n"
    "del _arl_no_net\n"
)

# Installed when socket families must be refused and no seccomp filter can be built (weaker: ctypes bypasses it).
_SOCKET_FAMILY_HOOK = (
    "import sys\n"
    "def _arl_families(event, args, _ok=" + repr(_ALLOWED_SOCKET_FAMILIES) + "):\n"
    "    if event == 'socket.__new__' and args[1] not in _ok and args[1] != -1:\n"
    "        raise PermissionError('this socket family is refused in the sandbox')\n"
    "sys.addaudithook(_arl_families)\n"
    "del _arl_families\n"
)

_RUN_MAIN = (
    "_arl_path = sys.argv[1]\n"
    "del sys.argv[0]\n"
    "_arl_src = open(_arl_path, encoding='utf-8').read()\n"
    "_arl_g = {'__name__': '__main__', '__file__': _arl_path, '__builtins__': __builtins__}\n"
    "del _arl_path\n"
    "exec(compile(_arl_src, 'main.py', 'exec'), _arl_g)\n"
)


def _hidden_roots(paths: list[str], python: str) -> list[str]:
    """Existing directories to cover, outermost only (a mount over /work hides /work/main too)."""
    real = sorted({os.path.realpath(p) for p in paths if os.path.isdir(p)}, key=len)
    roots: list[str] = []
    for p in real:
        if python.startswith(p.rstrip("/") + "/") or any(p.startswith(r.rstrip("/") + "/") for r in roots):
            continue
        roots.append(p)
    return roots


# Run once per interpreter by _interpreter_files: loads every extension module of its standard library, so
# /proc/self/maps names every shared library a program could make it load.
_FILES_PROBE = (
    "import json, os, sys, sysconfig\n"
    "dyn = sysconfig.get_path('platstdlib', vars={'platbase': sys.base_exec_prefix, 'base': sys.base_prefix})\n"
    "std = os.path.dirname(os.__file__)\n"
    "for d in {dyn, os.path.join(std, 'lib-dynload')}:\n"
    "    for f in (os.listdir(d) if os.path.isdir(d) else []):\n"
    "        if f.endswith('.so') and not f.startswith(('_test', 'xxlimited', '_xx')):\n"
    "            try: __import__(f.split('.')[0])\n"
    "            except Exception: pass\n"
    "maps = {ln.split(None, 5)[5].strip() for ln in open('/proc/self/maps') if len(ln.split(None, 5)) == 6}\n"
    "print(json.dumps({'stdlib': [std, dyn], 'maps': sorted(m for m in maps if m.startswith('/'))}))\n"
)


def _elf_interpreter(path: str) -> str | None:
    """The PT_INTERP of a 64-bit little-endian ELF file (its dynamic loader), None if it has none."""
    with open(path, "rb") as fh:
        head = fh.read(64)
        if head[:4] != b"\x7fELF" or head[4] != 2 or head[5] != 1:
            return None
        phoff = int.from_bytes(head[0x20:0x28], "little")
        phentsize = int.from_bytes(head[0x36:0x38], "little")
        phnum = int.from_bytes(head[0x38:0x3A], "little")
        for i in range(phnum):
            fh.seek(phoff + i * phentsize)
            ph = fh.read(phentsize)
            if int.from_bytes(ph[0:4], "little") == 3:  # PT_INTERP
                fh.seek(int.from_bytes(ph[8:16], "little"))
                return fh.read(int.from_bytes(ph[32:40], "little")).rstrip(b"\0").decode()
    return None


def _resolve_links(path: str, links: dict[str, str]) -> str:
    """The real path of ``path``; every symlink met on the way is recorded in ``links`` (path -> target)."""
    parts, cur, hops = path.strip("/").split("/"), "/", 0
    while parts:
        step = os.path.join(cur, parts.pop(0))
        if os.path.islink(step):
            hops += 1
            if hops > 40:
                raise SandboxError(f"too many symlinks resolving {path}")
            target = os.readlink(step)
            links[step] = target
            parts = os.path.normpath(os.path.join(cur, target)).strip("/").split("/") + parts
            cur = "/"
            continue
        cur = step
    return cur


def _under(path: str, dirs: list[str]) -> bool:
    return any(path == d or path.startswith(d.rstrip("/") + "/") for d in dirs)


@functools.cache
def _interpreter_files(python: str) -> tuple[tuple[str, ...], ...]:
    """What the interpreter needs to run: (directories, files, symlinks, package directories to cover).

    The directories are its standard library and the directories of the shared libraries it maps; the files its
    executable, its loader and the loader's cache; the symlinks those paths go through; the package
    directories (site-packages, dist-packages) found inside its standard library, covered by an empty mount.
    """
    try:
        proc = subprocess.run(
            [python, "-I", "-S", "-c", _FILES_PROBE], capture_output=True, timeout=60, cwd="/",
            env={"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8"},
        )  # fmt: skip
        probe = json.loads(proc.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise SandboxError(f"could not list the interpreter's files ({python}): {exc}") from exc
    links: dict[str, str] = {}
    dirs = [_resolve_links(d, links) for d in probe["stdlib"] if os.path.isdir(d)]
    loader = _elf_interpreter(os.path.realpath(python))
    wanted_files = [python] + ([loader] if loader else []) + ["/etc/ld.so.cache"]
    files = [_resolve_links(f, links) for f in wanted_files if os.path.exists(f)]
    executable = os.path.realpath(python)
    for mapped in probe["maps"]:
        if os.path.isfile(mapped) and os.path.realpath(mapped) != executable:
            dirs.append(os.path.dirname(_resolve_links(mapped, links)))
    dirs = sorted(set(dirs), key=len)
    dirs = [d for i, d in enumerate(dirs) if not _under(d, dirs[:i])]
    files = sorted({f for f in files if not _under(f, dirs)})
    covered = sorted(
        os.path.join(d, name) for d in dirs for name in ("site-packages", "dist-packages")
        if os.path.isdir(os.path.join(d, name))
    )  # fmt: skip
    kept_links = tuple(sorted((p, t) for p, t in links.items() if not _under(p, dirs)))
    return tuple(dirs), tuple(files), kept_links, tuple(covered)


_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


def _root_plan(python: str, readable: list[str]) -> dict[str, object]:
    """The allow-list root of a run, as the namespace's init builds it (see ``_namespace_init.py``)."""
    dirs, files, links, covered = _interpreter_files(python)
    extra_links: dict[str, str] = {}
    ro_dirs, ro_files = list(dirs), list(files)
    for path in readable:
        if not os.path.isabs(path) or not os.path.exists(path):
            raise SandboxError(f"readable path {path!r} does not exist; give an absolute path that does")
        real = _resolve_links(path, extra_links)
        (ro_dirs if os.path.isdir(real) else ro_files).append(real)
    return {
        "dirs": sorted(set(ro_dirs), key=len),
        "files": sorted(set(ro_files)),
        "links": sorted(set(links) | set(extra_links.items())),
        "cover": list(covered),
        "devices": [d for d in _DEVICES if os.path.exists(d)],
    }


def _proc_pids(name: str, matches: Callable[[str], bool]) -> list[int]:
    """The processes whose ``/proc/PID/<name>`` text ``matches``; one that exits or reads oddly meanwhile is skipped."""
    pids = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/{name}", encoding="ascii", errors="replace") as fh:
                if matches(fh.read()):
                    pids.append(int(entry.name))
        except (OSError, IndexError, ValueError):
            continue
    return pids


def _pids_of_uid(uid: int) -> list[int]:
    def owned(status: str) -> bool:
        return any(line.startswith("Uid:") and int(line.split()[1]) == uid for line in status.splitlines())

    return _proc_pids("status", owned)


def _pids_of_group(pgid: int) -> list[int]:
    def in_group(stat: str) -> bool:
        fields = stat.rsplit(")", 1)[1].split()
        # fields[0] is state; fields[2] is pgrp; zombies are already dead.
        return int(fields[2]) == pgid and fields[0] != "Z"

    return _proc_pids("stat", in_group)


def _kill_all(uid: int | None, pgid: int) -> tuple[int, int]:
    """SIGKILL everything the run left; returns (killed, still alive)."""
    killed = 0
    for _ in range(50):
        pids = [p for p in (_pids_of_uid(uid) if uid is not None else _pids_of_group(pgid)) if p != os.getpid()]
        pids = [p for p in pids if not _is_zombie(p)]
        if not pids:
            return killed, 0
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except ProcessLookupError:
                pass
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        time.sleep(0.01)
    remaining = _pids_of_uid(uid) if uid is not None else _pids_of_group(pgid)
    return killed, len([p for p in remaining if not _is_zombie(p)])


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (OSError, IndexError):
        return True


def _fresh_uid() -> int:
    for _ in range(100):
        uid = random.randrange(_UID_LOW, _UID_HIGH)
        try:
            pwd.getpwuid(uid)
            continue
        except KeyError:
            pass
        if not _pids_of_uid(uid):
            return uid
    raise SandboxError("could not find a free sandbox uid")


def run_python(
    code: str,
    limits: SandboxLimits | None = None,
    *,
    stdin: str = "",
    bootstrap: str | None = None,
    result_channel: bool = False,
    channel_bytes: int = 1 << 20,
) -> SandboxResult:
    """Run ``code`` as ``main.py`` in a fresh sandbox and return what happened.

    ``bootstrap``, when given, replaces the default launcher: it is run with
    ``python -c`` and receives ``main.py``'s path as ``sys.argv[1]`` (the
    hidden-test runner uses this). With ``result_channel``, a pipe's write end
    is inherited by the program and its number is passed in ``stdin`` JSON by
    the caller (see :func:`channel_fd_placeholder`); what arrives there comes
    back as ``SandboxResult.channel``.

    Raises :class:`SandboxError` when the sandbox itself cannot run.
    """
    limits = limits or SandboxLimits()
    support = isolation_support()
    uid = _fresh_uid() if (limits.isolate_user and support.setuid) else None
    python = support.python if uid is not None else os.path.realpath(sys.executable)

    if limits.network == "off":
        net_layer = "none"
    elif limits.network == "netns" or (limits.network == "auto" and support.netns):
        if not support.netns:
            raise SandboxError("network namespace requested but unshare(CLONE_NEWNET) is not allowed here")
        net_layer = "netns"
    else:
        net_layer = "audit-hook"
    private = limits.private_pids_ipc and support.pidns
    root_plan = _root_plan(python, limits.readable_paths) if (private and limits.allow_list_root) else None
    hide = [] if root_plan else _hidden_roots(limits.hide_paths, python)
    mount_layer = "pivot-root" if root_plan else ("tmpfs-hide" if (support.mountns and hide) else "none")
    want_objects = limits.refuse_uid_objects
    bpf = (
        _socket_filter(limits.socket_filter, want_objects) if (limits.socket_filter or want_objects) else None
    )
    socket_layer = "seccomp" if bpf is not None and limits.socket_filter else (
        "audit-hook" if limits.socket_filter else "none"
    )
    own_keyring = want_objects and private
    uid_objects_layer = (
        "seccomp" if (bpf is not None and want_objects) else ("session-keyring" if own_keyring else "none")
    )

    top = Path(tempfile.mkdtemp(prefix="arl-sbx-"))
    work = top / "work"
    work.mkdir()
    if root_plan:
        (top / "root").mkdir()
    (work / "main.py").write_text(code, encoding="utf-8")
    if uid is not None:
        os.chmod(top, 0o711)
        os.chown(work, uid, uid)
        os.chmod(work, 0o700)
        os.chmod(work / "main.py", 0o444)

    read_fd = write_fd = -1
    if result_channel:
        read_fd, write_fd = os.pipe()
        stdin = stdin.replace(channel_fd_placeholder(), str(write_fd))

    launcher = (
        (_NET_HOOK if net_layer == "audit-hook" else "import sys\n")
        + (_SOCKET_FAMILY_HOOK if socket_layer == "audit-hook" else "")
        + (bootstrap or _RUN_MAIN)
    )
    argv = [python, "-I", "-S", "-c", launcher, "main.py"]
    mb = 1024 * 1024
    rlimits = [
        (resource.RLIMIT_CPU, limits.cpu_s, limits.cpu_s + 1),
        (resource.RLIMIT_AS, limits.memory_mb * mb, limits.memory_mb * mb),
        (resource.RLIMIT_FSIZE, limits.file_size_mb * mb, limits.file_size_mb * mb),
        (resource.RLIMIT_NOFILE, limits.open_files, limits.open_files),
        (resource.RLIMIT_CORE, 0, 0),
        (resource.RLIMIT_NPROC, limits.processes, limits.processes),
        (resource.RLIMIT_MSGQUEUE, 256 * 1024, 256 * 1024),
    ]
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": str(work)}
    libc = _libc()
    hide_bytes = [p.encode() for p in hide] if mount_layer != "none" else []
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    work_opts = f"size={limits.disk_mb}m,mode=0700{owner}".encode()
    init_token = secrets.token_hex(8)
    cgroup = None
    if private and limits.memory_cgroup:
        # The run's two small set-up processes join it too (what they allocate once in it is counted, a few MiB);
        # should the limit be hit, the kernel's OOM killer picks the largest process, the program's.
        cgroup = _make_memory_cgroup(f"arl-{init_token}", limits.memory_mb << 20)
    if private:
        # Every privileged step and every fork happens in the small set-up program (see _namespace_init.py), so
        # this process, however large, is never forked: without a preexec_fn, subprocess can vfork.
        argv = _init_argv(
            python, netns=net_layer == "netns", ipc_mb=limits.ipc_mb,
            work=str(work) if (hide_bytes or root_plan) else "",
            work_opts=work_opts.decode(), hide=[h.decode() for h in hide_bytes], rlimits=rlimits, uid=uid,
            root=root_plan, newroot=str(top / "root") if root_plan else "", own_keyring=own_keyring,
            bpf=(bpf or b"").hex(), token=init_token, cgroup=cgroup.name if cgroup else "",
            argv=argv,
        )  # fmt: skip

    def preexec() -> None:  # the old layout only; runs in the forked child, after chdir(work) and setsid
        flags = (_CLONE_NEWNET if net_layer == "netns" else 0) | (_CLONE_NEWNS if hide_bytes else 0)
        if flags:
            _check(libc.unshare(flags), "unshare")
        if hide_bytes:
            _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make mounts private")
            # A size-capped tmpfs as the working directory: RLIMIT_FSIZE caps one
            # file, this caps them all (a loop of small files cannot fill /tmp).
            program = (work / "main.py").read_bytes()
            _check(libc.mount(b"tmpfs", bytes(work), b"tmpfs", _MS_NOSUID | _MS_NODEV, work_opts), "mount workdir")
            os.chdir(work)
            fd = os.open("main.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
            os.write(fd, program)
            os.close(fd)
            for p in hide_bytes:
                _check(
                    libc.mount(b"tmpfs", p, b"tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, b"size=4k,mode=555"),
                    "hide path",
                )
        for which, soft, hard in rlimits:
            resource.setrlimit(which, (soft, hard))
        os.umask(0o077)
        if bpf is not None:
            _install_socket_filter(bpf)
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)

    start = time.perf_counter()
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=work,
            env=env,
            preexec_fn=None if private else preexec,
            start_new_session=True,
            pass_fds=(write_fd,) if result_channel else (),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        for fd in (read_fd, write_fd):
            if fd >= 0:
                os.close(fd)
        shutil.rmtree(top, ignore_errors=True)
        if cgroup is not None:
            _remove_memory_cgroup(cgroup)
        raise SandboxError(f"could not start the sandbox: {exc}") from exc
    if cgroup is not None:
        # Moving a process between cgroups waits for an RCU grace period (~10-20 ms); done here, it overlaps
        # the set-up program's interpreter start-up, which waits for it before forking anything.
        try:
            (cgroup / "cgroup.procs").write_text(str(proc.pid))
        except OSError as exc:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            for fd in (read_fd, write_fd):
                if fd >= 0:
                    os.close(fd)
            shutil.rmtree(top, ignore_errors=True)
            _remove_memory_cgroup(cgroup)
            raise SandboxError(f"could not move the run into its memory cgroup: {exc}") from exc
    if result_channel:
        os.close(write_fd)
    pgid = proc.pid

    try:
        outcome, streams, truncated, rc, cpu_s = _supervise(
            proc, stdin, limits, read_fd if result_channel else None, channel_bytes
        )
    finally:
        killed, alive = _kill_all(uid, pgid)
        if result_channel:
            os.close(read_fd)
        shutil.rmtree(top, ignore_errors=True)
        peak_mb, limit_hit = _remove_memory_cgroup(cgroup) if cgroup is not None else (None, False)
    wall = time.perf_counter() - start
    marker = f"arl-sandbox {init_token}:".encode()
    if private and rc == 125 and marker in streams["stderr"]:
        message = streams["stderr"].split(marker, 1)[1].decode("utf-8", errors="replace").strip()
        raise SandboxError(f"could not start the sandbox: {message}")
    return SandboxResult(
        outcome=outcome,
        returncode=rc,
        stdout=streams["stdout"].decode("utf-8", errors="replace"),
        stderr=streams["stderr"].decode("utf-8", errors="replace"),
        stdout_truncated=truncated["stdout"],
        stderr_truncated=truncated["stderr"],
        channel=streams["channel"].decode("utf-8", errors="replace"),
        channel_truncated=truncated["channel"],
        wall_s=wall,
        cpu_s=cpu_s,
        charged_s=max(cpu_s, wall),
        uid=uid,
        network_layer=net_layer,
        mount_layer=mount_layer,
        uid_objects_layer=uid_objects_layer,
        process_layer="pidns+ipcns" if private else "none",
        memory_layer="cgroup" if cgroup is not None else "rlimit",
        memory_peak_mb=peak_mb,
        memory_limit_hit=limit_hit,
        socket_layer=socket_layer,
        leftover_killed=killed,
        leftover_after_cleanup=alive,
    )


def channel_fd_placeholder() -> str:
    """Token in ``stdin`` that :func:`run_python` replaces with the result pipe's fd number."""
    return "__ARL_CHANNEL_FD__"


def _supervise(
    proc: subprocess.Popen[bytes],
    stdin: str,
    limits: SandboxLimits,
    channel_fd: int | None,
    channel_bytes: int,
) -> tuple[str, dict[str, bytes], dict[str, bool], int, float]:
    """Feed stdin, read the capped streams until exit or deadline, reap the child."""
    assert proc.stdin and proc.stdout and proc.stderr
    try:
        proc.stdin.write(stdin.encode("utf-8"))
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass
    caps = {"stdout": limits.output_bytes, "stderr": limits.output_bytes, "channel": channel_bytes}
    data: dict[str, bytearray] = {k: bytearray() for k in caps}
    truncated = {k: False for k in caps}
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout.fileno(), selectors.EVENT_READ, "stdout")
    sel.register(proc.stderr.fileno(), selectors.EVENT_READ, "stderr")
    if channel_fd is not None:
        sel.register(channel_fd, selectors.EVENT_READ, "channel")
    deadline = time.monotonic() + limits.wall_s
    reason: str | None = None
    exited_at: float | None = None
    reaped: tuple[int, resource.struct_rusage] | None = None
    while sel.get_map() and reason is None:
        now = time.monotonic()
        if now >= deadline:
            reason = "timeout"
            break
        if exited_at is None:
            # wait4, not poll(): reaping must keep the rusage (the CPU time of the run's processes).
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                reaped, exited_at = (status, usage), now
        # After the main process exits, a leftover child may hold the pipes
        # open; give it a moment to flush, then stop reading (it is killed).
        if exited_at is not None and now - exited_at > 0.2:
            break
        for key, _ in sel.select(timeout=min(0.05, max(deadline - now, 0.0))):
            name = key.data
            try:
                chunk = os.read(key.fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                sel.unregister(key.fd)
                continue
            room = caps[name] - len(data[name])
            data[name] += chunk[: max(room, 0)]
            if len(chunk) > room:
                truncated[name] = True
                if name != "channel":
                    reason = "output_limit"
    # The streams are closed (a program may close its own, or a leftover child may stop writing) but the process may
    # still run: the deadline bounds the process, not its pipes. Without this, wait4 below waited for ever.
    while reason is None and reaped is None:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            reaped = (status, usage)
        elif time.monotonic() >= deadline:
            reason = "timeout"
        else:
            time.sleep(0.02)
    sel.close()
    if reason is not None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    for stream in (proc.stdout, proc.stderr):
        stream.close()
    # Reap with wait4 to charge the child's CPU time, and that of every process it (or the run's init) reaped.
    try:
        if reaped is None:
            _, status, usage = os.wait4(proc.pid, 0)
            reaped = (status, usage)
        status, usage = reaped
        rc = os.waitstatus_to_exitcode(status)
        cpu_s = usage.ru_utime + usage.ru_stime
    except ChildProcessError:
        rc, cpu_s = proc.returncode if proc.returncode is not None else -9, 0.0
    proc.returncode = rc
    if reason is None:
        # Only RLIMIT_CPU sends SIGXCPU, so it is a CPU timeout whatever wait4 charged (its accounting can lag the
        # kernel's limit check on a loaded machine). A SIGKILL is one only if the CPU time reached the hard limit.
        if rc == -signal.SIGXCPU or (rc == -signal.SIGKILL and cpu_s >= limits.cpu_s - 0.05):
            reason = "timeout"
        else:
            reason = "success" if rc == 0 else "error"
    return reason, {k: bytes(v) for k, v in data.items()}, truncated, rc, cpu_s


def describe_support() -> str:
    """One line about the isolation layers available here (for docs and logs)."""
    s = isolation_support()
    return json.dumps(s.model_dump())

