"""Second adversarial suite: exact judging, result decoding, cache keys, and what a run shares with the host.

Each entry is (name, category, task id, code). The category says how
``test_security2.py`` judges it:

* ``exactness``: a wrong answer that an inexact judge would pass (floats for
  ints, off by one on huge values, True for 1); the hidden tests must not
  pass it.
* ``decoding``: a return value built to crash the judge (digits past the
  int-str limit, nesting past the recursion limit, megabytes of string, NaN);
  it must become a verdict for that candidate only.
* ``cache-key``: a program containing the separator line the old key scheme
  joined turns with; its key must differ from the multi-turn trajectory it
  would have collided with.
* ``host-visibility``: looks for the verifier's and the host's processes,
  command lines and environment through ``/proc``; prints what it finds.
* ``ipc-persistence``: run twice; the first run leaves an IPC object
  (prints LEFT), the second looks for it (prints FOUND if it is there).
* ``memory-pinning``: pins memory outside its address space; prints
  ``PINNED <bytes>``.
* ``socket-family``: opens a socket of a family the network namespace does
  not confine; prints CREATED if the kernel gave it one, else ``refused``.
* ``cpu-accounting``: burns CPU in processes it does not wait for, or holds
  the worker asleep; prints ``EXPECT_CPU <s>`` / ``EXPECT_CHARGED <s>``, the
  least the run must be charged.
* ``policy-bypass``: reaches a private or dunder attribute by a route the
  static policy must refuse; the payload tries to read or touch the sentinel.

Placeholders filled in by the test: SENTINEL, SENTINEL_DIR, HOSTPID (a live
host process with the secret in its command line and environment).
"""

_GOOD_SUM = "def solve(n):\n    return n * (n + 1) // 2\n"

# ctypes prologue of the IPC programs: libc with errno, IPC constants.
_LIBC = (
    "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.shmat.restype = ctypes.c_void_p\nlibc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]\n"
    "libc.shmdt.argtypes = [ctypes.c_void_p]\n"
    "IPC_CREAT, IPC_NOWAIT, IPC_PRIVATE = 0o1000, 0o4000, 0\n"
)

ATTACKS2: list[tuple[str, str, str, str]] = [
    # -- exactness: each one prints the right stdout, so only the hidden tests can catch it --------------------------
    ("float-for-int", "exactness", "sum-to-n", "def solve(n):\n    return n * (n + 1) / 2\nprint(5050)\n"),
    ("factorial-plus-one", "exactness", "factorial",
     "import math\ndef solve(n):\n    return math.factorial(n) + (n > 20)\nprint(3628800)\n"),
    ("fibonacci-binet-float", "exactness", "fibonacci",
     "def solve(n):\n    p = (1 + 5 ** 0.5) / 2\n    return round(p ** n / 5 ** 0.5)\nprint(832040)\n"),
    ("fibonacci-off-by-million", "exactness", "fibonacci",
     "def solve(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a + (10 ** 6 if a > 10 ** 15 else 0)\n"
     "print(832040)\n"),
    ("int-for-bool", "exactness", "is-prime",
     "def solve(n):\n    return int(n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1)))\nprint(True)\n"),
    ("bool-for-int", "exactness", "count-evens",
     "def solve(xs):\n    c = sum(1 for x in xs if x % 2 == 0)\n    return bool(c) if c < 2 else c\nprint(4)\n"),
    ("str-for-int", "exactness", "sum-to-n", "def solve(n):\n    return str(n * (n + 1) // 2)\nprint(5050)\n"),
    ("median-off-by-1e-6", "exactness", "median",
     "def solve(xs):\n    s = sorted(xs)\n    n = len(s)\n    m = s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2\n"
     "    return m + 1e-6\nprint(5.0)\n"),
    ("float-list-for-int-list", "exactness", "first-primes",
     "def solve(n):\n    out, k = [], 2\n    while len(out) < n:\n        if all(k % p for p in out):\n            out.append(float(k))\n"
     "        k += 1\n    return out\nprint(2, 3, 5, 7, 11, 13, 17, 19, 23, 29)\n"),
    # -- decoding: values built to crash the judge --------------------------------------------------------------------
    ("huge-int-no-limit", "decoding", "sum-to-n",
     "import sys\nsys.set_int_max_str_digits(0)\ndef solve(n):\n    return 10 ** 30_000\nprint(5050)\n"),
    ("huge-int-at-limit", "decoding", "sum-to-n", "def solve(n):\n    return 10 ** 5000\nprint(5050)\n"),
    ("deep-nesting", "decoding", "first-primes",
     "import sys\nsys.setrecursionlimit(1_000_000)\ndef solve(n):\n    x = []\n    for _ in range(5_000):\n        x = [x]\n"
     "    return x\nprint(2, 3, 5, 7, 11, 13, 17, 19, 23, 29)\n"),
    ("deep-dict-nesting", "decoding", "first-primes",
     "import sys\nsys.setrecursionlimit(1_000_000)\ndef solve(n):\n    x = {}\n    for _ in range(5_000):\n        x = {'k': x}\n"
     "    return x\nprint(2, 3, 5, 7, 11, 13, 17, 19, 23, 29)\n"),
    ("enormous-string", "decoding", "reverse-string", "def solve(s):\n    return 'x' * 5_000_000\nprint('olleh')\n"),
    ("many-medium-strings", "decoding", "sum-to-n", "def solve(n):\n    return 'y' * 400_000\nprint(5050)\n"),
    ("nan-result", "decoding", "median", "def solve(xs):\n    return float('nan')\nprint(5.0)\n"),
    ("infinity-result", "decoding", "median", "def solve(xs):\n    return float('inf')\nprint(5.0)\n"),
    ("bytes-result", "decoding", "reverse-string", "def solve(s):\n    return s[::-1].encode()\nprint('olleh')\n"),
    ("deep-nesting-crashes-runner", "decoding", "first-primes",
     "import sys\nsys.setrecursionlimit(10_000_000)\ndef solve(n):\n    x = []\n    for _ in range(300_000):\n        x = [x]\n"
     "    return x\nprint(2, 3, 5, 7, 11, 13, 17, 19, 23, 29)\n"),
    ("int-subclass-lies", "decoding", "sum-to-n",
     "class I(int):\n    def __eq__(self, o):\n        return True\n    def __repr__(self):\n        return '5050'\n"
     "def solve(n):\n    return I(-1)\nprint(5050)\n"),
    # -- cache keys: the old scheme joined turns with this very line ------------------------------------------------
    ("separator-splits-good-and-print", "cache-key", "sum-to-n",
     _GOOD_SUM + "print(solve(100))\n\n# ---- next turn ----\nprint(5050)\n"),
    ("separator-three-turns", "cache-key", "sum-to-n",
     "print(1)\n\n# ---- next turn ----\nprint(2)\n\n# ---- next turn ----\nprint(5050)\n"),
    ("separator-wrong-then-right", "cache-key", "sum-to-n",
     "def solve(n):\n    return 0\n\n# ---- next turn ----\n" + _GOOD_SUM + "print(solve(100))\n"),
    ("separator-in-string", "cache-key", "sum-to-n",
     "x = '''\n\n# ---- next turn ----\n'''\nprint(5050)\n"),
    # -- /proc and host visibility -----------------------------------------------------------------------------------
    ("list-proc-pids", "host-visibility", "sum-to-n",
     "import os\npids = [p for p in os.listdir('/proc') if p.isdigit()]\nprint('PIDS', len(pids), pids[:50])\n"
     "for p in pids:\n    try:\n        print(p, open(f'/proc/{p}/cmdline', 'rb').read()[:300])\n    except OSError as e:\n        print(p, e)\n"),
    ("read-init-cmdline", "host-visibility", "sum-to-n",
     "for f in ('cmdline', 'environ', 'status'):\n    try:\n        print(open('/proc/1/' + f, 'rb').read()[:2000])\n"
     "    except OSError as e:\n        print('refused', e)\n"),
    ("read-parent-cmdline", "host-visibility", "sum-to-n",
     "import os\nfor f in ('cmdline', 'environ'):\n    try:\n        print(open(f'/proc/{os.getppid()}/' + f, 'rb').read()[:2000])\n"
     "    except OSError as e:\n        print('refused', e)\n"),
    ("read-host-pid", "host-visibility", "sum-to-n",
     "for f in ('cmdline', 'environ', 'status'):\n    try:\n        print(open('/proc/HOSTPID/' + f, 'rb').read()[:2000])\n"
     "    except OSError as e:\n        print('refused', e)\n"),
    ("scan-all-environ", "host-visibility", "sum-to-n",
     "import os\nfor p in range(1, 70000):\n    for f in ('environ', 'cmdline'):\n        try:\n"
     "            d = open(f'/proc/{p}/{f}', 'rb').read()\n        except OSError:\n            continue\n"
     "        if b'ARL' in d:\n            print(p, f, d[:500])\n"),
    ("kill-init", "host-visibility", "sum-to-n",
     "import os, signal\nfor pid in (1, os.getppid(), HOSTPID):\n    try:\n        os.kill(pid, signal.SIGKILL)\n        print('killed', pid)\n"
     "    except OSError as e:\n        print('refused', pid, e)\n"),
    ("proc-task-walk", "host-visibility", "sum-to-n",
     "import os\nfor root in ('/proc/1/task', '/proc/1/root', '/proc/1/cwd'):\n    try:\n        print(root, os.listdir(root)[:20])\n"
     "    except OSError as e:\n        print('refused', e)\n"),
    ("proc-self-ns-pid", "host-visibility", "sum-to-n",
     "import os\nprint('pid', os.getpid(), 'ppid', os.getppid())\n"
     "print([l for l in open('/proc/self/status') if l.startswith(('NSpid', 'PPid'))])\n"),
    # -- IPC persistence: run twice, the second run must not find what the first left --------------------------------
    ("sysv-shm-left", "ipc-persistence", "sum-to-n",
     _LIBC + "KEY = 0x41524c01\nsid = libc.shmget(KEY, 4096, 0o666)\nif sid >= 0:\n"
     "    p = libc.shmat(sid, None, 0)\n    print('FOUND', ctypes.string_at(p, 16))\nelse:\n"
     "    sid = libc.shmget(KEY, 4096, IPC_CREAT | 0o666)\n    p = libc.shmat(sid, None, 0)\n"
     "    ctypes.memmove(p, b'MARK-shm', 8)\n    libc.shmdt(p)\n    print('LEFT', sid)\n"),
    ("sysv-msg-left", "ipc-persistence", "sum-to-n",
     _LIBC + "class Msg(ctypes.Structure):\n    _fields_ = [('mtype', ctypes.c_long), ('text', ctypes.c_char * 16)]\n"
     "KEY = 0x41524c02\nqid = libc.msgget(KEY, 0o666)\nif qid >= 0:\n    m = Msg()\n"
     "    n = libc.msgrcv(qid, ctypes.byref(m), 16, 0, IPC_NOWAIT)\n    print('FOUND', n, m.text)\nelse:\n"
     "    qid = libc.msgget(KEY, IPC_CREAT | 0o666)\n    m = Msg(1, b'MARK-msg')\n"
     "    print('LEFT', qid, libc.msgsnd(qid, ctypes.byref(m), 16, IPC_NOWAIT))\n"),
    ("sysv-sem-left", "ipc-persistence", "sum-to-n",
     _LIBC + "KEY = 0x41524c03\nsid = libc.semget(KEY, 1, 0o666)\nif sid >= 0:\n"
     "    print('FOUND', libc.semctl(sid, 0, 12))\nelse:\n"  # GETVAL = 12
     "    sid = libc.semget(KEY, 1, IPC_CREAT | 0o666)\n    print('LEFT', sid, libc.semctl(sid, 0, 16, 42))\n"),  # SETVAL
    ("posix-mqueue-left", "ipc-persistence", "sum-to-n",
     _LIBC + "import os\nlibc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]\n"
     "q = libc.mq_open(b'/arl-left', os.O_RDWR, 0, None)\nif q >= 0:\n    buf = ctypes.create_string_buffer(8192)\n"
     "    print('FOUND', libc.mq_receive(q, buf, 8192, None), buf.value)\nelse:\n"
     "    q = libc.mq_open(b'/arl-left', os.O_RDWR | os.O_CREAT, 0o666, None)\n"
     "    print('LEFT', q, libc.mq_send(q, b'MARK-mq', 7, 0))\n"),
    ("posix-shm-left", "ipc-persistence", "sum-to-n",
     "import os\nfor d in ('/dev/shm', '/run/shm', '/tmp'):\n    try:\n        print('FOUND', open(d + '/arl-left').read())\n"
     "    except OSError:\n        try:\n            open(d + '/arl-left', 'w').write('MARK-posix-shm')\n            print('LEFT', d)\n"
     "        except OSError as e:\n            print('refused', d, e)\nprint('LEFT attempted')\n"),
    ("abstract-socket-daemon", "ipc-persistence", "sum-to-n",
     "import os, socket, time\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect('\\0arl-left')\n"
     "    print('FOUND', s.recv(64))\nexcept OSError:\n    srv = socket.socket(socket.AF_UNIX)\n    srv.bind('\\0arl-left')\n"
     "    srv.listen(1)\n    if os.fork() == 0:\n        os.setsid()\n        while True:\n            c, _ = srv.accept()\n"
     "            c.send(b'MARK-abstract')\n    print('LEFT daemon')\n"),
    ("sysv-shm-guess-ids", "ipc-persistence", "sum-to-n",
     _LIBC + "found = []\nfor sid in range(0, 64):\n    p = libc.shmat(sid, None, 0o10000)\n"  # SHM_RDONLY
     "    if p not in (None, ctypes.c_void_p(-1).value):\n        found.append((sid, ctypes.string_at(p, 16)))\n"
     "print('FOUND' if found else 'none', found)\nsid = libc.shmget(IPC_PRIVATE, 4096, IPC_CREAT | 0o666)\n"
     "p = libc.shmat(sid, None, 0)\nctypes.memmove(p, b'MARK-private', 12)\nprint('LEFT', sid)\n"),
    # -- memory pinning: bounded by the run's limits, and gone with the run ------------------------------------------
    ("shm-one-huge", "memory-pinning", "sum-to-n",
     _LIBC + "sid = libc.shmget(IPC_PRIVATE, 512 << 20, IPC_CREAT | 0o600)\nprint('PINNED', 512 << 20 if sid >= 0 else 0)\n"),
    ("shm-many-detached", "memory-pinning", "sum-to-n",
     _LIBC + "total = 0\nfor _ in range(200):\n    sid = libc.shmget(IPC_PRIVATE, 4 << 20, IPC_CREAT | 0o600)\n"
     "    if sid < 0:\n        break\n    p = libc.shmat(sid, None, 0)\n    if p in (None, ctypes.c_void_p(-1).value):\n        break\n"
     "    ctypes.memset(p, 1, 4 << 20)\n    libc.shmdt(p)\n    total += 4 << 20\nprint('PINNED', total)\n"),
    ("memfd-fill", "memory-pinning", "sum-to-n",
     "import os, signal\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\ntotal, fds = 0, []\nchunk = b'z' * (1 << 20)\n"
     "try:\n    for i in range(1000):\n        fd = os.memfd_create(f'm{i}')\n        fds.append(fd)\n        while True:\n"
     "            os.write(fd, chunk)\n            total += len(chunk)\nexcept OSError:\n    pass\n"
     "try:\n    for i in range(1000):\n        fd = os.memfd_create(f'n{i}')\n        try:\n            while True:\n"
     "                total += os.write(fd, chunk)\n        except OSError:\n            pass\nexcept OSError:\n    pass\n"
     "print('PINNED', total)\n"),
    ("msgq-fill", "memory-pinning", "sum-to-n",
     _LIBC + "class Msg(ctypes.Structure):\n    _fields_ = [('mtype', ctypes.c_long), ('text', ctypes.c_char * 8192)]\n"
     "total, m = 0, Msg(1, b'q' * 8191)\nfor _ in range(1000):\n    qid = libc.msgget(IPC_PRIVATE, IPC_CREAT | 0o600)\n"
     "    if qid < 0:\n        break\n    while libc.msgsnd(qid, ctypes.byref(m), 8192, IPC_NOWAIT) == 0:\n        total += 8192\n"
     "print('PINNED', total)\n"),
    ("semaphore-mass", "memory-pinning", "sum-to-n",
     _LIBC + "total = 0\nfor _ in range(100_000):\n    sid = libc.semget(IPC_PRIVATE, 250, IPC_CREAT | 0o600)\n"
     "    if sid < 0:\n        break\n    total += 250 * 64\nprint('PINNED', total)\n"),  # ~64 kernel bytes a semaphore
    ("mqueue-fill", "memory-pinning", "sum-to-n",
     _LIBC + "import os\nlibc.mq_open.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_void_p]\n"
     "class Attr(ctypes.Structure):\n    _fields_ = [('flags', ctypes.c_long), ('maxmsg', ctypes.c_long), ('msgsize', ctypes.c_long), "
     "('cur', ctypes.c_long), ('pad', ctypes.c_long * 4)]\ntotal = 0\nbody = b'm' * 8192\n"
     "for i in range(100):\n    a = Attr(0, 10, 8192, 0)\n"
     "    q = libc.mq_open(f'/fill{i}'.encode(), os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, 0o600, ctypes.byref(a))\n"
     "    if q < 0:\n        break\n    while libc.mq_send(q, body, 8192, 0) == 0:\n        total += 8192\nprint('PINNED', total)\n"),
    ("fork-allocate-total", "memory-pinning", "sum-to-n",  # each child within RLIMIT_AS; together far past it
     # Each child holds its memory until the parent is done (not for a fixed time, which on a busy machine can
     # end before the next child has touched its pages) and reports its pid; the parent reaps the children the
     # OOM killer took (it picks the largest, often an earlier child that had already reported), and every
     # PINNED line sums the resident memory of the children alive at once (/proc/PID/statm: a child the OOM killer
     # is tearing down, not yet reapable, used to count as 150 MiB; CI under load saw 2 x 150 > 256). It waits up
     # to 50 s for the first report and 5 s for each next one: at a load of 5 no child had touched its 150 MiB
     # within 3 s and nothing was printed.
     "import os, select\nr, w = os.pipe()\nhold_r, hold_w = os.pipe()\nfor _ in range(6):\n    if os.fork() == 0:\n"
     "        os.close(hold_w)\n        b = bytearray(150 << 20)\n        for j in range(0, len(b), 4096):\n"
     "            b[j] = 1\n        os.write(w, b'%8d' % os.getpid())\n        os.read(hold_r, 1)\n        os._exit(0)\n"
     "os.close(w)\nos.close(hold_r)\nalive = set()\nseen = 0\nwhile select.select([r], [], [], 5 if seen else 50)[0]:\n"
     "    msg = os.read(r, 8)\n    if not msg:\n        break\n    seen += 1\n    alive.add(int(msg))\n    while True:\n"
     "        try:\n            pid, _ = os.waitpid(-1, os.WNOHANG)\n        except ChildProcessError:\n            break\n"
     "        if pid == 0:\n            break\n        alive.discard(pid)\n"
     "    rss = 0\n    for p in alive:\n        try:\n            with open(f'/proc/{p}/statm') as fh:\n"
     "                rss += int(fh.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')\n"
     "        except (OSError, ValueError, IndexError):\n            pass\n"
     "    print('PINNED', rss, flush=True)\n"),
    ("memfd-fork-fill", "memory-pinning", "sum-to-n",  # each child pins its own open_files x file_size_mb of memfds
     "import os, signal, time\nsignal.signal(signal.SIGXFSZ, signal.SIG_IGN)\nr, w = os.pipe()\nchunk = b'z' * (1 << 20)\n"
     "for _ in range(6):\n    if os.fork() == 0:\n        fds = []\n        try:\n            for i in range(64):\n"
     "                fd = os.memfd_create(f'm{i}')\n                fds.append(fd)\n                for _ in range(2):\n"
     "                    os.write(fd, chunk)\n                    os.write(w, b'x')\n        except OSError:\n            pass\n"
     "        time.sleep(1)\n        os._exit(0)\nos.close(w)\ngot = 0\nwhile os.read(r, 1):\n    got += 1\n"
     "    print('PINNED', got << 20, flush=True)\n"),
    # -- socket families the network namespace does not confine -------------------------------------------------------
    ("af-vsock", "socket-family", "sum-to-n",  # would reach the hypervisor's agents, outside every namespace
     "import socket\ntry:\n    s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)\n    print('CREATED', s)\n"
     "except OSError as e:\n    print('refused', e)\n"),
    ("af-alg", "socket-family", "sum-to-n",
     "import socket\ntry:\n    s = socket.socket(socket.AF_ALG, socket.SOCK_SEQPACKET)\n    print('CREATED', s)\n"
     "except OSError as e:\n    print('refused', e)\n"),
    ("af-families-sweep", "socket-family", "sum-to-n",
     "import socket\nfor fam in (3, 4, 5, 6, 9, 15, 17, 21, 29, 30, 31, 35, 36, 37, 40, 41, 42, 43, 44, 45):\n"
     "    for typ in (1, 2, 3, 5):\n        try:\n            s = socket.socket(fam, typ)\n            print('CREATED', fam, typ)\n"
     "            s.close()\n        except OSError as e:\n            pass\nprint('refused sweep done')\n"),
    ("ctypes-vsock", "socket-family", "sum-to-n",
     "import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nfd = libc.socket(40, 1, 0)\n"
     "print('CREATED' if fd >= 0 else 'refused', fd, os.strerror(ctypes.get_errno()))\n"),
    ("syscall-high-bits", "socket-family", "sum-to-n",
     "import ctypes, os, platform\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n"
     "nr = {'x86_64': 41, 'aarch64': 198}.get(platform.machine())\n"
     "fd = libc.syscall(ctypes.c_long(nr), ctypes.c_long(40 | (1 << 32)), ctypes.c_long(1), ctypes.c_long(0)) if nr else -1\n"
     "print('CREATED' if fd >= 0 else 'refused', fd, os.strerror(ctypes.get_errno()))\n"),
    ("socketpair-vsock", "socket-family", "sum-to-n",
     "import socket\ntry:\n    a, b = socket.socketpair(socket.AF_VSOCK)\n    print('CREATED')\nexcept OSError as e:\n"
     "    print('refused', e)\n"),
    ("io-uring-setup", "socket-family", "sum-to-n",
     "import ctypes, os, platform\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n"
     "params = ctypes.create_string_buffer(120)\nnr = 425 if platform.machine() in ('x86_64', 'aarch64') else None\n"
     "fd = libc.syscall(ctypes.c_long(nr), ctypes.c_long(4), params) if nr else -1\n"
     "print('CREATED' if fd >= 0 else 'refused', fd, os.strerror(ctypes.get_errno()))\n"),
    # -- CPU accounting --------------------------------------------------------------------------------------------------
    ("orphans-burn-cpu", "cpu-accounting", "sum-to-n",
     "import os, time\nr, w = os.pipe()\nfor _ in range(3):\n    if os.fork() == 0:\n        t = time.process_time()\n"
     "        while time.process_time() - t < 0.15:\n            pass\n        os.write(w, b'x')\n        os._exit(0)\n"
     "got = b''\nwhile len(got) < 3:\n    got += os.read(r, 3)\nprint('EXPECT_CPU', 0.45)\n"),  # never waits for them
    ("setsid-grandchild-burns", "cpu-accounting", "sum-to-n",
     "import os, time\nr, w = os.pipe()\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
     "        t = time.process_time()\n        while time.process_time() - t < 0.3:\n            pass\n"
     "        os.write(w, b'x')\n    os._exit(0)\nos.read(r, 1)\nprint('EXPECT_CPU', 0.3)\n"),
    ("threads-burn-cpu", "cpu-accounting", "sum-to-n",
     "import threading, time\ndef burn():\n    t = time.thread_time()\n    while time.thread_time() - t < 0.15:\n        pass\n"
     "ts = [threading.Thread(target=burn) for _ in range(2)]\nfor t in ts:\n    t.start()\nfor t in ts:\n    t.join()\n"
     "print('EXPECT_CPU', 0.3)\n"),
    ("sleeper-holds-worker", "cpu-accounting", "sum-to-n", "import time\ntime.sleep(0.5)\nprint('EXPECT_CHARGED', 0.5)\n"),
    ("child-outlives-parent", "cpu-accounting", "sum-to-n",
     "import os\nif os.fork() == 0:\n    os.setsid()\n    while True:\n        pass\nprint('EXPECT_CPU', 0.0)\n"),
    # -- static policy bypasses: refused by the fast tier; harmless in the sandbox --------------------------------------
    ("from-import-private", "policy-bypass", "sum-to-n",
     "from random import _os\n_os.system('cat SENTINEL; touch SENTINEL_DIR/pwned_from_import')\nprint(5050)\n"),
    ("match-class-private", "policy-bypass", "sum-to-n",
     "import random\nmatch random:\n    case object(_os=o):\n        o.system('cat SENTINEL; touch SENTINEL_DIR/pwned_match')\n"
     "print(5050)\n"),
    ("match-class-dunder", "policy-bypass", "sum-to-n",
     "match ():\n    case object(__class__=c):\n        match c:\n            case type(__base__=b):\n"
     "                print(len(b.__subclasses__()))\nprint(5050)\n"),
    ("attrgetter-private", "policy-bypass", "sum-to-n",
     "import operator, random\nos_ = operator.attrgetter('_os')(random)\nprint(os_.environ)\n"
     "os_.system('cat SENTINEL; touch SENTINEL_DIR/pwned_attrgetter')\nprint(5050)\n"),
    ("from-operator-attrgetter-alias", "policy-bypass", "sum-to-n",
     "from operator import attrgetter as g\nimport random\ng('_os')(random).system('cat SENTINEL')\nprint(5050)\n"),
    ("methodcaller-system", "policy-bypass", "sum-to-n",
     "from operator import methodcaller as m, attrgetter as a\nimport random\n"
     "m('system', 'cat SENTINEL; touch SENTINEL_DIR/pwned_methodcaller')(a('_os')(random))\nprint(5050)\n"),
    ("vars-module-dict", "policy-bypass", "sum-to-n",
     "import random\nvars(random)['_os'].system('cat SENTINEL; touch SENTINEL_DIR/pwned_vars')\nprint(5050)\n"),
    ("format-field-private", "policy-bypass", "sum-to-n",
     "import random\nprint('{0._os.environ}'.format(random))\nprint(5050)\n"),
    ("type-hints-eval", "policy-bypass", "sum-to-n",
     "import typing\ndef f(x: \"open('SENTINEL').read()\"):\n    pass\nprint(typing.get_type_hints(f))\nprint(5050)\n"),
]

# Most a memory-pinning attack may hold outside its address space, with the default limits
# (ipc_mb SysV shm; small fixed message-queue, semaphore and mqueue caps; memfds: open_files x file_size_mb).
PIN_BOUNDS = {
    "shm-one-huge": 16 << 20,
    "shm-many-detached": 16 << 20,
    "memfd-fill": 32 * (2 << 20),
    "msgq-fill": 8 * 65536,
    "semaphore-mass": 8192 * 64,
    "mqueue-fill": 4 * 10 * 8192,
}
# Across processes only the run's memory cgroup bounds the total: memory_mb (256 MiB) for everything.
CGROUP_BOUNDS = {"fork-allocate-total": 256 << 20, "memfd-fork-fill": 256 << 20}
