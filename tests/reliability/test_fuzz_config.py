"""Fuzzed TOML run configs: every input is a RunConfig or one clear ConfigError line, never a crash."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arl_flows.config import (
    MAX_GROUP_SIZE,
    MAX_NAME_LENGTH,
    MAX_PROMPTS_PER_STEP,
    MAX_STEPS,
    MAX_TIER_CONCURRENCY,
    ConfigError,
    RunConfig,
    load_config,
)

tomli_w = pytest.importorskip("tomli_w")
MAX = 2500 if os.environ.get("ARL_FUZZ_SLOW") else 60

FIELDS = list(RunConfig.model_fields)
SECTIONS = {"prior": ["n_layer", "n_embd", "max_minutes", "lr"], "trainer": ["group_size", "temperature", "lr", "loss"],
            "scheduler": ["policy", "objective", "target_low", "target_high", "budget_per_step", "window_softness"],
            "rollout": ["prompts_per_step", "goal_windows"], "options": ["goal_windows", "prior", "tasks"], "hindsight": ["enabled", "threshold", "min_fidelity"]}

_scalars = st.one_of(
    st.integers(-10**6, 10**6), st.floats(allow_nan=True, allow_infinity=True), st.booleans(),
    st.text(max_size=30), st.sampled_from(["voi", "all", "dapo", "grpo", "molecules", "code", "rdkit-eht", "advantage"]),
)
_values = st.recursive(_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)), max_leaves=8)


@st.composite
def configs(draw: st.DrawFn) -> dict:
    data = {}
    for key in draw(st.lists(st.sampled_from(FIELDS + ["bogus", "stepz"]), max_size=5, unique=True)):
        if key in SECTIONS:
            data[key] = {k: draw(_values) for k in draw(st.lists(st.sampled_from(SECTIONS[key] + ["nope"]), max_size=3, unique=True))}
        elif key == "tiers":
            data[key] = draw(st.lists(st.fixed_dictionaries({"verifier": st.sampled_from(["rdkit-eht", "gfn2-xtb", "nope", "x:Y"])}), max_size=3))
        else:
            data[key] = draw(_values)
    return data


def _check(tmp: Path, text: str) -> None:
    path = tmp / "run.toml"
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    try:
        cfg = load_config(path)
    except ConfigError as exc:
        message = str(exc)
        assert message and "\n" not in message and "Traceback" not in message
        assert str(path) in message or "does not exist" in message
    else:
        assert isinstance(cfg, RunConfig)
        _assert_sane(cfg)


def _assert_sane(cfg: RunConfig) -> None:
    """What a config that loads promises: finite ordered windows and bounded sizes."""
    if cfg.suite == "molecules":
        from arl_flows.suites import suite_for

        windows = suite_for(cfg).goal_windows()
        for low, high in windows:
            assert math.isfinite(low) and math.isfinite(high) and low < high, windows
    assert all(1 <= n <= MAX_TIER_CONCURRENCY for n in cfg.tier_concurrency.values()), cfg.tier_concurrency
    assert 1 <= cfg.steps <= MAX_STEPS and 2 <= cfg.trainer.group_size <= MAX_GROUP_SIZE
    assert 1 <= cfg.rollout.prompts_per_step <= MAX_PROMPTS_PER_STEP
    assert cfg.name.isprintable() and 1 <= len(cfg.name) <= MAX_NAME_LENGTH


_edge_floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 3.0, 4.0, -1e308, 1e308]))
_edge_ints = st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([-1, 0, 1, 2, 1024, 1025, 100_000, 100_001]))
BOUNDED = st.fixed_dictionaries({}, optional={
    "steps": _edge_ints,
    "seed": _edge_ints,
    "name": st.one_of(st.text(max_size=300), st.sampled_from(["[/x]", "a\nb", "", "x" * 201])),
    "tier_concurrency": st.dictionaries(st.sampled_from(["gfn2-xtb", "pyscf-b3lyp", "x"]), _edge_ints, max_size=3),
    "rollout": st.fixed_dictionaries({}, optional={
        "goal_windows": st.lists(st.lists(_edge_floats, min_size=2, max_size=2), max_size=3),
        "prompts_per_step": _edge_ints,
    }),
    "trainer": st.fixed_dictionaries({}, optional={"group_size": _edge_ints}),
})  # fmt: skip


@settings(max_examples=MAX, deadline=None, suppress_health_check=list(HealthCheck))
@given(BOUNDED)
def test_bounded_fields(tmp_path_factory: pytest.TempPathFactory, data: dict) -> None:
    """NaN, infinite, reversed, negative and huge values in the bounded fields: refused in one line, or sane."""
    try:
        text = tomli_w.dumps(data)
    except (TypeError, ValueError):
        return
    _check(tmp_path_factory.mktemp("cfg"), text)


@pytest.mark.parametrize("depth", [21, 1_000, 100_000])
def test_deeply_nested_toml(tmp_path: Path, depth: int) -> None:
    """tomllib parses nesting recursively: a deep enough array was a RecursionError."""
    _check(tmp_path, "a = " + "[" * depth + "]" * depth + "\n")
    _check(tmp_path, "a = " + "{b = " * depth + "1" + "}" * depth + "\n")
    with pytest.raises(ConfigError, match="nest"):
        load_config(tmp_path / "run.toml")



@settings(max_examples=MAX, deadline=None, suppress_health_check=list(HealthCheck))
@given(configs())
def test_structured_configs(tmp_path_factory: pytest.TempPathFactory, data: dict) -> None:
    def clean(x: object) -> object:  # TOML has no None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items() if v is not None}
        if isinstance(x, list):
            return [clean(v) for v in x if v is not None]
        return x

    try:
        text = tomli_w.dumps(clean(data))
    except (TypeError, ValueError):
        return  # not representable in TOML (e.g. mixed-type arrays in old writers): nothing to feed
    _check(tmp_path_factory.mktemp("cfg"), text)


@settings(max_examples=MAX, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=300))
def test_arbitrary_text(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    _check(tmp_path_factory.mktemp("cfg"), text)


@pytest.mark.soak
def test_slow_config_fuzzing_runs_thousands() -> None:
    """The soak run re-runs the properties with 2,500 examples each (7,500 configs)."""
    import subprocess
    import sys

    env = os.environ | {"ARL_FUZZ_SLOW": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", "not slow_config"],
                          env=env, capture_output=True, text=True, timeout=1200, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout
