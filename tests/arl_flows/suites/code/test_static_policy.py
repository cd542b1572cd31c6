"""The static policy is an allow-list: the red team's routes around the former deny-list are refused.

Each attack below passed the former policy (a list of refused names and attributes). The sandbox is still the
boundary (``test_security2`` runs such programs with the policy off); this file checks that the fast tier no longer
calls them ``ok``, that the policy fails closed on what it does not know, and that it refuses no reference solution.
"""

from __future__ import annotations

import pytest

from arl_flows.suites.code import CodeFormat, TaskSource, check_trajectory, load_source, load_tasks, make_candidate
from arl_flows.suites.code.fast import DEFAULT_ALLOWED_IMPORTS, _policy_tables, check_code

ATTACKS = [
    # The fourth attack pass: `.format` read as a value, then called on a built string: a Formatter subclass's
    # format_field receives the resolved object (`random._os`, then `__import__`).
    ("format-as-a-value", "import string\nimport random\nclass Grab(string.Formatter):\n    def format_field(self, v, s):\n"
     "        self.got = v\n        return ''\ng = Grab()\nfmt = g.format\nfmt('{0.' + '_' + 'os}', random)\n",
     "'.format' is allowed only called at once on a string literal"),
    ("format-bound-on-a-literal", "f = '{}'.format\nprint(f(3))", "'.format' is allowed only called at once"),
    # A permitted module that re-exports a module with sys or builtins in it.
    ("reexport-typing-sys", "import typing\nprint(typing.sys)", "'typing.sys' is not part of"),
    ("reexport-from-import", "from typing import sys\nsys.modules['os']", "typing.sys is not part of"),
    ("reexport-statistics-sys", "import statistics as s\nx = s.sys", "'statistics.sys' is not part of"),
    ("reexport-through-a-value", "import typing\nm = [typing][0]\nm.sys.modules['os']", "'.modules' is not on the allow-list"),
    ("reexport-alias-value", "import typing\nm = [typing][0]\nprint(m.sys)", "'.sys' is not on the allow-list"),
    # Dangerous builtins reached as attributes rather than names.
    ("builtins-attr-eval", "import re\nre.enum.bltns.eval('1')", "is not on the allow-list"),
    ("builtins-attr-open", "import re\nb = [re][0].enum.bltns\nb.open('/etc/passwd')", "is not on the allow-list"),
    ("builtins-attr-own-name", "class A:\n    def __init__(self):\n        self.eval = 1\nimport re\n[re][0].enum.bltns.eval('1')",
     "is not on the allow-list"),
    ("builtins-attr-exec", "x = [print][0]\nx.exec('1')", "'.exec' is not on the allow-list"),
    # Attribute reads through match class patterns, with a metaclass making anything an instance.
    ("match-metaclass", "class M(type):\n    pass\nclass P(metaclass=M):\n    pass", "a metaclass is not allowed"),
    ("match-instancecheck", "class M(type):\n    def __instancecheck__(cls, obj):\n        return True", "defining '__instancecheck__'"),
    ("match-frame-attribute", "def g():\n    yield 1\nmatch g():\n    case object(gi_frame=f):\n        print(f.f_globals)",
     "class pattern attribute 'gi_frame'"),
    ("match-defined-frame-name", "class A:\n    gi_frame = 1\ndef g():\n    yield 1\nmatch g():\n    case object(gi_frame=f):\n        pass",
     "class pattern attribute 'gi_frame'"),
    ("match-module-reexport", "import typing\nmatch typing:\n    case object(sys=s):\n        print(s.modules)", "class pattern attribute 'sys'"),
    # Format fields split across string constants (a runtime concatenation no constant shows whole).
    ("format-split-concat", "import random\nf = '{0.' + '_os}'\nprint(f.format(random))", "'.format' is allowed only on a string literal"),
    ("format-split-str-method", "import random\nprint(str.format('{0.' '_o' + 's}', random))", "'.format' is allowed only on a string literal"),
    ("format-split-format-map", "import random\nf = '{r.' + '_os}'\nprint(f.format_map({'r': random}))", "'.format_map' is allowed only"),
    ("format-attribute-field", "import random\nprint('{0.Random}'.format(random))", "format field reaching an attribute"),
    ("formatter-vformat", "import string, random\nstring.Formatter().vformat('{0.' + '_os}', (random,), {})", "'.vformat' is not allowed"),
    # A dunder check that stopped at the first match ('__main__' is allowed, what follows was not looked at).
    ("dunder-after-main", "x = '__main__ then __subclasses__'", "the string '__subclasses__'"),
    ("dunder-after-main-joined", "x = '__main__' '.__globals__'", "the string '__globals__'"),
    # What the policy does not know fails closed.
    ("unknown-builtin", "print(dir())", "use of the builtin 'dir'"),
    ("unknown-module-name", "import random\nrandom.os", "'random.os' is not part of"),
    ("star-import", "from typing import *", "import the names you use"),
    ("private-submodule", "import collections._sys", "not a public module"),
]


@pytest.mark.parametrize(("name", "code", "why"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_attack_is_refused_with_its_reason(name: str, code: str, why: str):
    problem = check_code(code)
    assert problem is not None, f"the static policy let {name} through"
    assert why in problem, problem
    (fast,) = CodeFormat().verify_batch([make_candidate("sum-to-n", f"<think>t</think>\n<code>\n{code}\n</code>")])
    assert fast.status == "invalid" and why in fast.feedback


ORDINARY = [
    "import collections.abc\nprint(isinstance([], collections.abc.Iterable))",
    "from collections import Counter, deque\nc = Counter('abca')\nprint(c.most_common(1), deque([1]).popleft())",
    "import re\nprint(re.compile('a+').match('aa').group(0))",
    "from math import isqrt\nprint(isqrt(10 ** 40))",
    "from typing import List\ndef f(x: List[int]) -> int:\n    return sum(x)\nprint(f([1]))",
    "import functools\n@functools.lru_cache(maxsize=None)\ndef f(n):\n    return n\nprint(functools.reduce(max, [1, 2]))",
    "from collections import namedtuple\nP = namedtuple('P', 'x y')\nprint(P(1, 2).x)",
    "class Node:\n    def __init__(self, v):\n        self.value = v\n        self.left = None\nprint(Node(1).value)",
    "print('{:>5}|{}|{0!r}'.format(3, 4) if False else '{:>5}'.format(3))",
    "try:\n    1 // 0\nexcept ZeroDivisionError as e:\n    print(e.args)",
    "if __name__ == '__main__':\n    print(1)",
]


@pytest.mark.parametrize("code", ORDINARY)
def test_ordinary_programs_pass(code: str):
    assert check_code(code) is None


def test_no_reference_solution_is_refused():
    humaneval = load_source(TaskSource(source="humaneval")).tasks
    assert len(humaneval) == 163  # HumanEval/34 is skipped: nothing of it is hidden
    refused = {}
    for task in [*humaneval, *load_tasks()]:
        result = check_trajectory(f"<think>r</think>\n<code>\n{task.reference}</code>", allowed_names=task.allow)
        if isinstance(result, str):
            refused[task.id] = result
    assert refused == {}


def test_the_allow_list_holds_nothing_that_reaches_the_interpreter():
    value_attrs, reserved = _policy_tables(tuple(sorted(DEFAULT_ALLOWED_IMPORTS)))
    machinery = {"gi_frame", "gi_code", "f_globals", "f_back", "f_builtins", "f_locals", "tb_frame", "tb_next",
                 "cr_frame", "ag_frame", "co_code", "cell_contents", "sys", "os", "builtins", "modules"}  # fmt: skip
    refused_builtins = {"eval", "exec", "open", "compile", "getattr", "setattr", "globals", "vars", "__import__"}
    assert not (value_attrs & (machinery | refused_builtins))
    assert machinery | refused_builtins <= reserved


def test_fast_tier_ok_is_not_presented_as_a_security_verdict():
    (fast,) = CodeFormat().verify_batch([make_candidate("sum-to-n", "<think>t</think><code>print(5050)</code>")])
    assert fast.status == "ok" and "not a security verdict" in fast.feedback


def test_the_policy_never_imports_a_module_the_candidate_names():
    # Importing runs a module's code in the verifier's process (`this` prints, `antigravity` opens a browser); only
    # submodules of allowed modules are ever looked up.
    import subprocess
    import sys

    probe = (
        "import sys\nfrom arl_flows.suites.code.fast import check_code\n"
        "for c in ['if 1:\\n    if 1:\\n        import antigravity\\nantigravity.x', 'from this import x',"
        " 'import this.x', 'if 1:\\n  if 1:\\n    import this as t\\nt.s']:\n"
        "    assert check_code(c) is not None, c\n"
        "print(sorted(m for m in ('antigravity', 'this') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr
