"""Registration three ways: decorator, ``module:Class`` reference, entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import ClassVar

import pytest
from tests.helpers.faulty_work import ConfigOnlyTier

from storage.records import Status, Tier
from verifiers import register_verifier, registry
from arl_flows.suites.molecules import EHTGapVerifier, make_candidate
from verifiers.registry import VerifierNotFound, VerifierRegistry

ROOT = Path(__file__).resolve().parents[2]


def test_built_in_ladder_is_registered_by_decorator() -> None:
    names = {cls.name: cls for cls in registry.for_suite("molecules")}
    for name, tier in [("rdkit-eht", "fast"), ("gfn2-xtb", "simulation"), ("pyscf-b3lyp", "high_fidelity"),
                       ("lab", "lab"), ("reference-table", "lab")]:
        assert names[name].tier == Tier(tier)
        assert names[name].origin == "built-in"
    assert registry.get("rdkit-eht") is EHTGapVerifier


def test_decorator_registers_a_new_class() -> None:
    @register_verifier
    class Decorated(ConfigOnlyTier):  # a subclass with its own name: a new verifier
        name: ClassVar[str] = "test-decorated"

    try:
        assert registry.get("test-decorated") is Decorated
        assert "test-decorated" in registry
    finally:
        registry._classes.pop("test-decorated", None)


def test_module_class_reference() -> None:
    fresh = VerifierRegistry()
    cls = fresh.load_reference("tests.helpers.faulty_work:ConfigOnlyTier")
    assert cls is ConfigOnlyTier and cls.origin == "config"
    verdicts = cls().verify_batch([make_candidate("CCO")])
    assert verdicts[0].value == 3.0
    with pytest.raises(ImportError, match="no attribute"):
        fresh.load_reference("arl_flows.suites.molecules.fast:NoSuchClass")
    with pytest.raises(ValueError, match="module:ClassName"):
        fresh.load_reference("not-a-reference")
    with pytest.raises(VerifierNotFound, match="registered"):
        registry.get("no-such-verifier")


def test_entry_point_discovery(plugin_site: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(plugin_site))
    fresh = VerifierRegistry()
    fresh.load_entry_points()
    cls = fresh.get("crippen-logp")
    assert cls.origin == "entry point" and cls.tier == Tier.fast
    assert cls.__module__ == "arl_custom_tier.logp"
    (verdict,) = cls().verify_batch([make_candidate("c1ccccc1")])
    assert verdict.status == Status.ok and verdict.value == pytest.approx(1.6866, abs=1e-3)  # Crippen logP of benzene


def _arl(args: list[str], site: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]), "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", "from arl_flows.cli import main; main()", *args],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=300,
    )


@pytest.mark.slow  # 34 s on 2 loaded cores, about 17 s idle
def test_plugin_appears_in_cli_and_in_a_run(plugin_site: Path) -> None:
    listed = _arl(["tiers", "list", "--json"], plugin_site)
    assert listed.returncode == 0, listed.stderr
    rows = {row["name"]: row for row in json.loads(listed.stdout)}
    assert rows["crippen-logp"]["origin"] == "entry point"
    assert rows["crippen-logp"]["tier"] == "fast"
    assert rows["rdkit-eht"]["origin"] == "built-in"
    # "fast" is the ladder's fast verifier; a plugin outside the ladder is run by its name.

    run = _arl(["verify", "--smiles", "CCO", "--smiles", "CCCl", "--tiers", "fast,crippen-logp", "--json"], plugin_site)
    assert run.returncode == 0, run.stderr
    verdicts = {(r["verifier"], r["input"]): r for r in json.loads(run.stdout)}
    assert verdicts[("crippen-logp", "CCO")]["status"] == "ok"
    assert verdicts[("crippen-logp", "CCCl")]["status"] == "invalid"
    assert verdicts[("rdkit-eht", "CCO")]["status"] == "ok"
