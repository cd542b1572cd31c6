"""``arl_flows.integrations`` re-exports the adapters, each from its own file, and none of them imports it back."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import arl_flows
from arl_flows import best_of_n, integrations, tiered_reward, verl

ROOT = Path(__file__).resolve().parents[2]
# Where each public name of arl_flows.integrations is defined.
HOMES = {
    "CallSummary": tiered_reward, "RewardDetail": tiered_reward, "TieredReward": tiered_reward, "Window": tiered_reward,
    "verification_config": tiered_reward,
    "Ranked": best_of_n, "RerankItem": best_of_n, "RerankResult": best_of_n, "rerank": best_of_n,
    "compute_score": verl, "compute_score_batch": verl,
}


@pytest.mark.parametrize("name", sorted(HOMES))
def test_each_public_name_is_its_home_modules_object(name: str) -> None:
    assert name in integrations.__all__ and name in HOMES[name].__all__
    assert getattr(integrations, name) is getattr(HOMES[name], name)


def test_integrations_exports_exactly_the_adapters_names_and_the_package_its_subset() -> None:
    assert sorted(integrations.__all__) == sorted(HOMES)
    for name in arl_flows.__all__:  # `from arl_flows import TieredReward` goes through integrations
        assert getattr(arl_flows, name) is getattr(integrations, name)


def test_no_module_of_the_package_shadows_a_public_name() -> None:
    """A submodule ``arl_flows.rerank`` would replace the function ``arl_flows.rerank`` once imported."""
    modules = {p.stem for p in (ROOT / "arl_flows").glob("*.py")} | {p.parent.name for p in (ROOT / "arl_flows").glob("*/__init__.py")}
    assert not modules & set(arl_flows.__all__)


def _imported(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return found


@pytest.mark.parametrize("module", ["tiered_reward", "best_of_n", "verl"])
def test_no_adapter_imports_the_module_that_re_exports_it(module: str) -> None:
    assert "arl_flows.integrations" not in _imported(ROOT / "arl_flows" / f"{module}.py")


def test_integrations_only_re_exports() -> None:
    tree = ast.parse((ROOT / "arl_flows" / "integrations.py").read_text(encoding="utf-8"))
    defined = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    assert not defined, [n.name for n in defined]
