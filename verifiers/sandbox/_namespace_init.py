"""The sandbox's set-up and PID-namespace init, run as ``python -I -S -c <this file> CONFIG`` (stdlib only).

Why a separate interpreter: the verifier may hold gigabytes (a training
process with its model), and every ``fork`` of it copies its page tables.
The sandbox therefore starts this small program with no ``preexec_fn``
(so ``subprocess`` can ``vfork``), as root, in a new session, and every
privileged step and every fork happens here:

* this process enters new mount, network, IPC and PID namespaces, lowers
  the IPC namespace's limits, mounts the size-capped tmpfs working
  directory (rewriting ``main.py`` into it) and then either builds the
  allow-list root on a fresh tmpfs and ``pivot_root``-s into it, or (the
  deny-list layout) puts empty read-only mounts over the hidden paths;
* it then forks the namespace's init (``unshare(CLONE_NEWPID)`` moves only
  later children), waits
  for it and then ends the way the program ended (same exit code, or the
  same signal), so the verifier's ``wait4`` sees the program's status and,
  through the reaped init, the CPU time of every process of the run;
* the init (pid 1, root) mounts a fresh ``/proc`` with ``hidepid=2``, forks
  the program (pid 2) and reaps every process of the namespace, orphans
  included; once the program exits it kills everything left and reports the
  program's wait status on a pipe;
* the program's process sets the rlimits, installs the seccomp filter,
  drops to the run's uid and execs the sandboxed interpreter.

CONFIG is a dict, ``marshal``-ed and hex-encoded (``json`` would import ``re``, a third of
this program's start-up time): ``netns`` (bool), ``ipc_mb``, ``work`` (the working
directory, "" for none), ``work_opts`` (its tmpfs options), ``hide`` (paths
to cover), ``rlimits`` ([resource number, soft, hard] triples), ``uid`` (or
null), ``bpf`` (hex of the seccomp program, or ""), ``root`` (the allow-list root's plan, see
``runtime._root_plan``, or None), ``newroot`` (the empty directory it is built on), ``own_keyring``
(join a fresh session keyring), ``cgroup`` (the name of the run's
memory cgroup this process waits to be moved into, or ""), ``argv``
(what to exec), ``token``. A failure before the exec exits 125 with one
line on stderr starting ``arl-sandbox <token>:``: an infrastructure failure,
told apart from a program's own output by the token it never sees.
"""

import ctypes
import marshal
import os
import resource
import signal
import sys

_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC, _MS_REC, _MS_PRIVATE = 1, 2, 4, 8, 16384, 1 << 18
_MS_REMOUNT, _MS_BIND, _MNT_DETACH = 32, 4096, 2
_SYS_PIVOT_ROOT = {"x86_64": 155, "aarch64": 41, "riscv64": 41, "ppc64le": 203, "s390x": 217}
_KEYCTL_JOIN_SESSION_KEYRING = 1
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "riscv64": 219, "ppc64le": 271, "s390x": 280}
_CLONE_NEWNS, _CLONE_NEWNET, _CLONE_NEWPID, _CLONE_NEWIPC = 0x00020000, 0x40000000, 0x20000000, 0x08000000
_PR_SET_PDEATHSIG, _PR_SET_SECCOMP, _PR_SET_NO_NEW_PRIVS = 1, 22, 38
_SECCOMP_MODE_FILTER = 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_TOKEN = ""


def _fail(what):
    os.write(2, f"arl-sandbox {_TOKEN}: {what}\n".encode())
    os._exit(125)


def _check(rc, what):
    if rc != 0:
        _fail(f"{what}: {os.strerror(ctypes.get_errno())}")


def _limit_ipc(ipc_mb):
    """Lower the limits of the (new, empty) IPC namespace we are in; they die with it."""
    page = os.sysconf("SC_PAGE_SIZE")
    settings = {
        "kernel/shmmax": ipc_mb << 20,
        "kernel/shmall": (ipc_mb << 20) // page,
        "kernel/shmmni": 32,
        "kernel/msgmax": 8192,
        "kernel/msgmnb": 65536,
        "kernel/msgmni": 8,
        "kernel/sem": "250 8192 32 32",  # per set, in all, per semop, sets
        "fs/mqueue/queues_max": 4,
        "fs/mqueue/msg_max": 10,
        "fs/mqueue/msgsize_max": 8192,
    }
    for name, value in settings.items():
        try:
            with open(f"/proc/sys/{name}", "w", encoding="ascii") as fh:
                fh.write(str(value))
        except FileNotFoundError:  # a kernel without that IPC flavour has nothing to cap
            continue


def _bind_read_only(libc, src, dst):
    _check(libc.mount(src.encode(), dst.encode(), None, _MS_BIND, None), f"bind {src}")
    flags = _MS_BIND | _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV
    _check(libc.mount(None, dst.encode(), None, flags, None), f"make {src} read-only")


def _make_mount_point(path, is_dir):
    if is_dir:
        os.makedirs(path, mode=0o755, exist_ok=True)
    elif not os.path.exists(path):
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o444))


def _enter_allow_list_root(libc, plan, new, work, work_opts, program):
    """Build the run's root on a fresh tmpfs from nothing but the plan, then pivot_root into it.

    The plan (made by the verifier) lists read-only directories and files, symlinks and device nodes; every
    other host path is absent from the run's filesystem: not covered, never there.
    """
    _check(libc.mount(b"tmpfs", new.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, b"size=1m,mode=755"), "mount root")
    for path, target in plan["links"]:
        os.makedirs(os.path.dirname(new + path), mode=0o755, exist_ok=True)
        os.symlink(target, new + path)
    for path in plan["dirs"]:
        _make_mount_point(new + path, True)
        _bind_read_only(libc, path, new + path)
    for path in plan["files"]:
        _make_mount_point(new + path, False)
        _bind_read_only(libc, path, new + path)
    for path in plan["cover"]:
        flags = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
        _check(libc.mount(b"tmpfs", (new + path).encode(), b"tmpfs", flags, b"size=4k,mode=555"), "cover path")
    for path in plan["devices"]:  # read-write (a read-only mount refuses writes to /dev/null too), no suid
        _make_mount_point(new + path, False)
        _check(libc.mount(path.encode(), (new + path).encode(), None, _MS_BIND, None), f"bind {path}")
        _check(libc.mount(None, (new + path).encode(), None, _MS_BIND | _MS_REMOUNT | _MS_NOSUID, None), "nosuid")
    os.makedirs(new + "/proc", mode=0o555, exist_ok=True)
    os.makedirs(new + work, mode=0o755, exist_ok=True)
    _check(libc.mount(b"tmpfs", (new + work).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, work_opts.encode()),
           "mount workdir")
    fd = os.open(new + work + "/main.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    os.write(fd, program)
    os.close(fd)
    os.chdir(new)
    # pivot_root(".", "."): the old root is stacked under the new one and detached at once.
    nr = _SYS_PIVOT_ROOT.get(os.uname().machine)
    if nr is None:  # an architecture whose number we do not know: chroot, equivalent for a process without caps
        os.chroot(".")
    else:
        _check(libc.syscall(nr, b".", b"."), "pivot_root")
        _check(libc.umount2(b".", _MNT_DETACH), "detach the old root")
    os.chdir("/")
    _check(libc.mount(None, b"/", None, _MS_REMOUNT | _MS_RDONLY | _MS_NOSUID | _MS_NODEV, None), "root read-only")
    os.chdir(work)


def _enter_namespaces(libc, config):
    flags = _CLONE_NEWNS | _CLONE_NEWPID | _CLONE_NEWIPC | (_CLONE_NEWNET if config["netns"] else 0)
    _check(libc.unshare(flags), "unshare")
    _limit_ipc(config["ipc_mb"])
    _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make mounts private")
    work = config["work"]
    if config["root"]:
        with open(os.path.join(work, "main.py"), "rb") as fh:
            program = fh.read()
        _enter_allow_list_root(libc, config["root"], config["newroot"], work, config["work_opts"], program)
        return
    if work:
        # A size-capped tmpfs as the working directory: RLIMIT_FSIZE caps one file, this caps them all.
        with open(os.path.join(work, "main.py"), "rb") as fh:
            program = fh.read()
        _check(libc.mount(b"tmpfs", work.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, config["work_opts"].encode()),
               "mount workdir")
        os.chdir(work)
        fd = os.open("main.py", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
        os.write(fd, program)
        os.close(fd)
    for path in config["hide"]:
        flags = _MS_RDONLY | _MS_NOSUID | _MS_NODEV | _MS_NOEXEC
        _check(libc.mount(b"tmpfs", path.encode(), b"tmpfs", flags, b"size=4k,mode=555"), "hide path")


def _close_fds_except(keep, devnull):
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 16)


def _mirror_program(init, status_r):
    init_status = signal.SIGKILL
    while True:
        try:
            init_status = os.waitpid(init, 0)[1]
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            break
    raw = os.read(status_r, 32)
    if not raw.strip().isdigit():  # the init failed before the program ran (it said why on stderr)
        os._exit(os.WEXITSTATUS(init_status) if os.WIFEXITED(init_status) else 125)
    status = int(raw)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        try:
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        except (OSError, ValueError):
            pass
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def _reap_namespace(program, status_w):
    program_status = None
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == program:
            program_status = status
        if program_status is not None:
            try:
                os.kill(-1, signal.SIGKILL)  # pid 1 reaches every other process of its namespace
            except ProcessLookupError:
                pass
    os.write(status_w, str(program_status if program_status is not None else int(signal.SIGKILL)).encode())
    os._exit(0)


def _await_cgroup(name):
    """Wait until the verifier has moved us into the run's memory cgroup (it does so while we start up).

    Everything forked from here on (the init, the program and all it forks) is then charged to it; its
    files are root's, so the program cannot leave it or raise its limit.
    """
    import time

    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline:
        with open("/proc/self/cgroup", encoding="ascii") as fh:
            for line in fh:
                _, controllers, path = line.rstrip("\n").split(":", 2)
                if "memory" in controllers.split(",") and path.endswith("/" + name):
                    return
        time.sleep(0.001)
    _fail("not moved into the run's memory cgroup")


def main():
    global _TOKEN
    config = marshal.loads(bytes.fromhex(sys.argv[1]))
    _TOKEN = config["token"]
    if config["cgroup"]:
        _await_cgroup(config["cgroup"])
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    libc.unshare.argtypes = [ctypes.c_int]
    libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]
    _enter_namespaces(libc, config)
    bpf = bytes.fromhex(config["bpf"])
    buffer = ctypes.create_string_buffer(bpf, len(bpf)) if bpf else None
    fprog = _SockFprog(len(bpf) // 8, ctypes.addressof(buffer)) if bpf else None

    devnull = os.open("/dev/null", os.O_RDWR)
    status_r, status_w = os.pipe()
    init = os.fork()
    if init:
        os.close(status_w)
        _close_fds_except(status_r, devnull)
        _mirror_program(init, status_r)
    os.close(status_r)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    # Mounted by the namespace's init, so it shows this namespace's processes; hidepid=2 hides the init's own.
    _check(libc.mount(b"proc", b"/proc", b"proc", _MS_NOSUID | _MS_NODEV | _MS_NOEXEC, b"hidepid=2"), "mount /proc")
    program = os.fork()
    if program:
        _close_fds_except(status_w, devnull)
        _reap_namespace(program, status_w)
    os.close(status_w)
    os.close(devnull)
    try:
        for which, soft, hard in config["rlimits"]:
            resource.setrlimit(which, (soft, hard))
        os.umask(0o077)
        if config["own_keyring"]:
            # A new anonymous session keyring: nothing the verifier's session holds, nothing shared with later runs.
            nr = _SYS_KEYCTL.get(os.uname().machine, -1)
            if nr < 0 or libc.syscall(nr, _KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
                _fail(f"session keyring: {os.strerror(ctypes.get_errno())}")
        if fprog is not None:
            if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
                _fail("no_new_privs")
            if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
                _fail(f"seccomp: {os.strerror(ctypes.get_errno())}")
        uid = config["uid"]
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        argv = config["argv"]
        os.execv(argv[0], argv)
    except OSError as exc:
        _fail(f"starting the program: {exc}")


if __name__ == "__main__":  # `python -c` runs it as __main__; importing it does nothing
    main()
