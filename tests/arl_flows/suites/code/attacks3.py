"""Third attack catalogue: state that outlives a run, and reads outside the working directory.

Each entry is ``(name, category, code)``. ``uid-objects`` programs are run
twice: a first run that finds nothing leaves its mark (``LEFT``), a second
run that finds one prints ``FOUND <data>``. ``outside-root`` programs try to
read files kept in places no list of hidden folders names; the placeholders
``TASKS_SRC``, ``LEDGER_DB`` and ``VENV_DATA`` are filled in by the test.
"""

from __future__ import annotations

_KEYS = '''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
NR = {"x86_64": (248, 249, 250), "aarch64": (217, 218, 219)}[os.uname().machine]
def add_key(desc, data, ring):
    return libc.syscall(NR[0], b"user", desc, data, len(data), ring)
def keyctl(*args):
    return libc.syscall(NR[2], *args)
def find(desc, ring):
    kid = keyctl(10, ring, b"user", desc, 0)  # KEYCTL_SEARCH
    if kid < 0:
        return None
    buf = ctypes.create_string_buffer(4096)
    n = keyctl(11, kid, buf, 4096)  # KEYCTL_READ
    return buf.raw[:n] if n >= 0 else None
'''


def _keyring_attack(ring: str, desc: str) -> str:
    return _KEYS + f'''
ring = {ring}
got = find(b"{desc}", ring)
if got is not None:
    print("FOUND", got.decode())
else:
    kid = add_key(b"{desc}", b"hidden-test-input: assert f(31337) == 42", ring)
    if kid >= 0:
        keyctl(15, kid, 120)  # KEYCTL_SET_TIMEOUT: what a control run leaves expires by itself
        print("LEFT", kid)
    else:
        print("REFUSED", ctypes.get_errno())
'''


_PERSISTENT = _KEYS + '''
ring = keyctl(22, -1, -4)  # KEYCTL_GET_PERSISTENT, linked into the user keyring
if ring < 0:
    print("REFUSED", ctypes.get_errno())
else:
    got = find(b"arl-persist", ring)
    if got is not None:
        print("FOUND", got.decode())
    else:
        kid = add_key(b"arl-persist", b"hidden-test-input", ring)
        keyctl(15, kid, 120)
        print("LEFT", kid)
'''

_PIN = _KEYS + '''
# Kernel memory held by keys of this uid once the run is gone: as many 16 KiB keys as the quota allows.
made = 0
for i in range(64):
    kid = add_key(b"arl-pin-%d" % i, b"x" * 16000, -4)
    if kid < 0:
        break
    keyctl(15, kid, 120)
    made += 1
print("LEFT" if made else "REFUSED", made, ctypes.get_errno())
'''


def _file_attack(path: str) -> str:
    return f'''
import os
p = "{path}"
try:
    with open(p) as fh:
        print("FOUND", fh.read())
except OSError:
    try:
        with open(p, "w") as fh:
            fh.write("hidden-test-input: assert f(31337) == 42")
        os.chmod(p, 0o666)
        print("LEFT")
    except OSError as exc:
        print("REFUSED", exc.errno)
'''


def _read_attack(*paths: str) -> str:
    return f'''
for p in {list(paths)!r}:
    try:
        with open(p, "rb") as fh:
            print("READ", p, fh.read()[:200])
    except OSError as exc:
        print("DENIED", p, exc.errno)
'''


_SQLITE = '''
import sqlite3
for p in ("LEDGER_DB", "/proc/self/root" + "LEDGER_DB"):
    try:
        db = sqlite3.connect("file:" + p + "?mode=ro", uri=True)
        print("READ", p, db.execute("select code from verdicts").fetchall())
    except sqlite3.Error as exc:
        print("DENIED", p, exc)
'''

_WALK = '''
import os
seen = []
for top in sorted(os.listdir("/")):
    for root, dirs, files in os.walk("/" + top):
        if root.startswith(("/proc", "/dev")):
            dirs[:] = []
            continue
        for f in files:
            name = os.path.join(root, f)
            if "arl-sbx3-" in name:
                seen.append(name)
print("ROOT", sorted(os.listdir("/")))
print("FOUND" if seen else "NONE", seen[:5])
'''

ATTACKS3: list[tuple[str, str, str]] = [
    ("session-keyring", "uid-objects", _keyring_attack("-3", "arl-session")),  # KEY_SPEC_SESSION_KEYRING
    ("user-keyring", "uid-objects", _keyring_attack("-4", "arl-user")),  # KEY_SPEC_USER_KEYRING
    ("user-session-keyring", "uid-objects", _keyring_attack("-5", "arl-usess")),  # KEY_SPEC_USER_SESSION_KEYRING
    ("persistent-keyring", "uid-objects", _PERSISTENT),
    ("dev-shm-file", "uid-objects", _file_attack("/dev/shm/arl-sbx3-left")),
    ("tmp-file", "uid-objects", _file_attack("/tmp/arl-sbx3-left")),
    ("var-tmp-file", "uid-objects", _file_attack("/var/tmp/arl-sbx3-left")),
    ("key-pinning", "pinning", _PIN),
    ("task-source", "outside-root",
     _read_attack("TASKS_SRC", "/proc/self/root" + "TASKS_SRC", "/proc/1/root" + "TASKS_SRC")),
    ("ledger", "outside-root", _SQLITE),
    ("venv-package-data", "outside-root", _read_attack("VENV_DATA", "/proc/self/cwd/../../../.." + "VENV_DATA")),
    ("walk-the-root", "outside-root", _WALK),
]

# Through the real tiers: during the hidden-test run the function records every argument it is called with in the
# session keyring; a later candidate raises with what it finds, and its execution feedback is shown to the policy.
HIDDEN_INPUTS_RECORDER = _KEYS + '''
def solve(n):
    old = find(b"arl-hidden", -3) or b"ARGS:"
    new = old + b" " + repr(n).encode()
    kid = add_key(b"arl-hidden", new, -3)
    if kid >= 0:
        keyctl(15, kid, 120)
    return n * (n + 1) // 2
print(5050)
'''

HIDDEN_INPUTS_READER = _KEYS + '''
got = find(b"arl-hidden", -3)
raise RuntimeError((got or b"nothing").decode())
'''
