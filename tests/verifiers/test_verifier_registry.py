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


_USER_MODULES = {
    "good.py": '''
from typing import ClassVar
from pydantic import BaseModel, Field
from storage.records import Status, Tier
from verifiers import Verifier


class LooseParams(BaseModel):  # no extra="forbid": pydantic alone would drop a misspelled key
    scale: float = Field(default=1.0, description="A factor.")


class HeavyAtoms(Verifier):
    name: ClassVar[str] = "test-heavy-atoms"
    tier: ClassVar[Tier] = Tier.fast
    version: ClassVar[str] = "1"
    Params = LooseParams

    def verify_batch(self, candidates):
        return [self.verdict(c, Status.ok, value=1.0) for c in candidates]


class BadTier(HeavyAtoms):
    name = "test-bad-tier"
    tier = "cheap"


class BadDefault(HeavyAtoms):
    name = "test-bad-default"

    class Params(BaseModel):
        threads: int = Field(default=-3, ge=1)


class NoVerify(Verifier):
    name = "test-no-verify"
    tier = Tier.fast
    version = "1"
''',
    "broken_syntax.py": "def f(:\n    pass\n",
    "broken_name.py": "x = 1\ny = undefined_thing + 1\n",
    "iso.py": '''
from pydantic import BaseModel
from storage.records import Tier
from verifiers.isolation import IsolatedVerifier


def work(x):
    return x


class OwnParams(BaseModel):
    a: int = 1


class NoIsolationFields(IsolatedVerifier):
    name = "test-no-iso"
    tier = Tier.fast
    version = "1"
    Params = OwnParams
    work_function = staticmethod(work)


class NoWorkFunction(IsolatedVerifier):
    name = "test-no-work"
    tier = Tier.fast
    version = "1"
''',
}


@pytest.fixture
def user_tiers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A package of a user's tier modules, some with the mistakes a newcomer makes; returns its name."""
    package = tmp_path / "user_tiers_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    for name, text in _USER_MODULES.items():
        (package / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    return package.name


def test_mistakes_in_a_users_tier_are_one_line_naming_their_class_or_file(user_tiers: str) -> None:
    """Each was 'internal error ... a bug in ARL' or passed registration and failed at the first verdict."""
    fresh = VerifierRegistry()
    cases = [
        ("good:BadTier", TypeError, "BadTier: tier 'cheap' is not a tier; use one of fast, simulation, high_fidelity, lab"),
        ("good:BadDefault", TypeError, "the default of Params.threads (-3) fails its own check"),
        ("good:NoVerify", TypeError, "NoVerify must implement verify_batch"),
        ("broken_syntax:X", ImportError, "SyntaxError: invalid syntax (/"),
        ("broken_name:X", ImportError, "NameError: name 'undefined_thing' is not defined ("),
        ("iso:NoIsolationFields", TypeError, "its Params lacks timeout_s, memory_mb, workers, threads; derive it from"),
        ("iso:NoWorkFunction", TypeError, "must set work_function = staticmethod("),
    ]
    for ref, kind, message in cases:
        with pytest.raises(kind) as caught:
            fresh.get(f"{user_tiers}.{ref}")
        text = str(caught.value)
        assert message in text and "\n" not in text, text
    assert "broken_syntax.py:1)" in _import_error(fresh, f"{user_tiers}.broken_syntax:X")
    assert "broken_name.py:2)" in _import_error(fresh, f"{user_tiers}.broken_name:X")
    assert fresh.get(f"{user_tiers}.good:HeavyAtoms").name == "test-heavy-atoms"
    # A name that is not registered hints at the form a class takes, or at the closest name.
    with pytest.raises(VerifierNotFound, match=rf"did you mean '{user_tiers}.good:HeavyAtoms'"):
        fresh.get(f"{user_tiers}.good.HeavyAtoms")
    with pytest.raises(VerifierNotFound, match="did you mean 'rdkit-eht'"):
        fresh.get("rdkit-ehtt")
    with pytest.raises(VerifierNotFound, match="a class of your own is named 'package.module:ClassName'"):
        fresh.get("no-such-tier")


def _import_error(fresh: VerifierRegistry, ref: str) -> str:
    with pytest.raises(ImportError) as caught:
        fresh.get(ref)
    return str(caught.value)


def test_a_ladder_refuses_unknown_params_and_concurrency_keys_that_limit_nothing(user_tiers: str) -> None:
    from arl_flows.config import build_config
    from arl_flows.ladder import build_ladder, check_new_config

    ref = f"{user_tiers}.good:HeavyAtoms"

    def ladder(params: dict[str, object], limits: dict[str, int]) -> list[str]:
        config = build_config({"suite": "molecules", "tiers": [{"verifier": ref, "params": params},
                                                               {"verifier": "reference-table"}],
                               "tier_concurrency": limits})
        names = [v.name for v in build_ladder(config)]  # a stored config with these keys still builds (and resumes)
        check_new_config(config)
        return names

    assert ladder({"scale": 2.0}, {"test-heavy-atoms": 2}) == ["test-heavy-atoms", "reference-table"]
    # The suite's defaults name registered verifiers this ladder lacks (pyscf-b3lyp, gfn2-xtb): allowed.
    with pytest.raises(ValueError, match=r"tiers\[0\] \(test-heavy-atoms\): params.scael: unknown field; did you mean 'scale'\?"):
        ladder({"scael": 2.0}, {})
    for key, message in [("test-heavy-atom", "no verifier of that name, so it would limit nothing; did you mean 'test-heavy-atoms'"),
                         (ref, "key the limit by the verifier's name, 'test-heavy-atoms', not its class reference"),
                         ("simulation", "limits are per verifier, not per tier")]:
        with pytest.raises(ValueError, match=f"tier_concurrency.'{key}': {message}"):
            ladder({}, {key: 2})


def test_a_suite_named_by_reference_says_its_tiers_need_installing(monkeypatch: pytest.MonkeyPatch) -> None:
    from arl_flows.config import build_config
    from arl_flows.ladder import build_ladder

    monkeypatch.syspath_prepend(str(ROOT / "examples" / "math_suite"))
    if "math-format" in registry:
        pytest.skip("the math suite is installed here: its tiers are found by name")
    config = build_config({"suite": "arl_math.suite:MathSuite"})
    with pytest.raises(VerifierNotFound, match=r"tiers\[0\]: no verifier named 'math-format': the suite 'arl_math.suite:MathSuite' "
                                               r"is named by reference, and its tiers are found by name only once its package is installed"):
        build_ladder(config)
