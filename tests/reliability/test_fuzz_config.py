"""Fuzzed TOML run configs: every input is a RunConfig or one clear ConfigError line, never a crash."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arl_flows.config import ConfigError, RunConfig, load_config

tomli_w = pytest.importorskip("tomli_w")

FIELDS = list(RunConfig.model_fields)
SECTIONS = {"prior": ["n_layer", "n_embd", "max_minutes", "lr"], "trainer": ["group_size", "temperature", "lr", "loss"],
            "scheduler": ["policy", "objective", "target_low", "target_high", "budget_per_step", "window_softness"],
            "rollout": ["prompts_per_step", "goal_windows"], "hindsight": ["enabled", "threshold", "min_fidelity"]}

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


MAX = 2500 if os.environ.get("ARL_FUZZ_SLOW") else 60


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


@pytest.mark.slow
def test_slow_config_fuzzing_runs_thousands() -> None:
    """The slow suite re-runs both properties with 2,500 examples each (5,000 configs)."""
    import subprocess
    import sys

    env = os.environ | {"ARL_FUZZ_SLOW": "1"}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", "not slow_config"],
                          env=env, capture_output=True, text=True, timeout=1200, cwd=Path(__file__).resolve().parents[2])
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "2 passed" in done.stdout
