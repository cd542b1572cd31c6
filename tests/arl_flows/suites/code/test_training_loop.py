import pytest
"""The whole code suite through a short training-like loop with a scripted policy.

The "policy" samples from canned trajectories, some honest, some hacking.
Each step: rollout (G per prompt), verify every tier through a verdict cache
keyed by candidate key, compose rewards, group advantages (the trainer's own
``group_advantages``), and per-turn process rewards. Honest answers must come
out on top of every group, hacks at the bottom, and repeats must hit the cache.
"""

import random

import torch

from policies.losses import group_advantages
from arl_flows.suites.code import CodeExecution, CodeFormat, CodeTests, code_reward, get_task, make_candidate

LIMITS = {"cpu_s": 1, "wall_s": 3}
G = 4


def ans(code: str) -> str:
    return f"<think>write it</think>\n<code>\n{code}\n</code>"


def canned(task_id: str) -> dict[str, str]:
    t = get_task(task_id)
    call = t.prompt.split("`print(")[1].split(")` and nothing")[0]
    return {
        "honest": ans(t.reference),
        "multi_turn_fix": (
            "<think>first try</think><code>print(1 / 0)</code><observation>ZeroDivisionError</observation>"
            f"<think>fix</think><code>\n{t.reference}</code>"
        ),
        "hardcoded_print": ans(f"print({t.expected_stdout.strip()!r})"),  # right stdout, no solve()
        "exit_before_tests": ans(f"print({t.expected_stdout.strip()!r})\nraise SystemExit(0)"),
        "os_hack": ans("import os\nos.system('cat /work/main/arl_flows/suites/code/tasks/tasks.json')"),
        "fake_ok": ans(f"print('Ran 5 tests\\nOK')\ndef {t.function}(*a):\n    return 0"),
        "malformed": f"<think>x</think><code>{call}",
        "loops": ans("while True:\n    pass"),
    }


@pytest.mark.slow  # 20 s on 2 loaded cores, about 10 s idle
def test_scripted_training_loop():
    rng = random.Random(0)
    tiers = [CodeFormat(), CodeExecution({"limits": LIMITS}), CodeTests({"limits": LIMITS})]
    cache: dict[tuple[str, str], object] = {}
    calls = {"hits": 0, "misses": 0}
    prompts = ["sum-to-n", "first-primes"]
    history = []
    for step in range(3):
        rows = []
        for task_id in prompts:
            pool = canned(task_id)
            # Each group always holds one honest answer and three others.
            kinds = ["honest"] + rng.sample([k for k in pool if k != "honest"], G - 1)
            for kind in kinds:
                text = pool[kind]
                cand = make_candidate(task_id, text)
                verdicts = []
                for tier in tiers:
                    key = (cand.key, tier.name)
                    if key in cache:
                        calls["hits"] += 1
                    else:
                        calls["misses"] += 1
                        cache[key] = tier.verify_batch([cand])[0]
                    verdicts.append(cache[key])
                r = code_reward(text, verdicts, completion_tokens=len(text) // 4)
                rows.append((task_id, kind, r))
        rewards = torch.tensor([r.total for _, _, r in rows])  # (B,)
        adv = group_advantages(rewards, G)  # (B,)
        history.append((rows, adv))
        for g in range(len(prompts)):
            group = rows[g * G : (g + 1) * G]
            group_adv = adv[g * G : (g + 1) * G]
            assert abs(float(group_adv.sum())) < 1e-4
            honest = next(i for i, (_, k, _) in enumerate(group) if k == "honest")
            # Honest answers get the group's highest reward and a positive advantage.
            assert group[honest][2].total == max(r.total for _, _, r in group)
            assert group_adv[honest] > 0
            for (_, kind, r), a in zip(group, group_adv):
                if kind in ("hardcoded_print", "exit_before_tests", "os_hack", "fake_ok", "malformed", "loops"):
                    # Group-relative: a "less bad" hack can sit above the group mean, but
                    # never near the honest answer, and never earns a correct outcome.
                    assert r.total < 1.0 and a < group_adv[honest], (kind, r)
                    assert r.components.get("outcome", -1.0) < 0
    # Hand-checked rewards of the distinct kinds (weights at their defaults).
    seen = {(t, k): r for rows, _ in history for t, k, r in rows}
    for (task_id, kind), r in seen.items():
        if kind == "honest":
            assert abs(r.total - 1.65) < 1e-9 and r.per_turn == [0.3]  # 0.2 + 0.3 + 1.0 + 0.5 * 0.3
        elif kind == "multi_turn_fix":
            # 0.2 + 0.3 + 1.0 + 0.5 * mean(-0.5, 0.3) = 1.45: below the clean first answer
            assert abs(r.total - 1.45) < 1e-9 and r.per_turn == [-0.5, 0.3]
        elif kind in ("os_hack", "malformed"):
            assert r.total == -1.0 and r.stopped
        elif kind == "hardcoded_print":
            assert abs(r.total - 0.45) < 1e-9  # stdout right, hidden tests wrong: 0.2 + 0.3 - 0.2 + 0.15
        elif kind == "loops":
            assert abs(r.total - (-0.75)) < 1e-9  # 0.2 - 0.5 - 0.2 - 0.25
    assert calls["hits"] > 0  # repeated trajectories reuse verdicts by candidate key
