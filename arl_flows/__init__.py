"""Prefect flows and the arl CLI. The only package that imports Prefect.

The verification layer for other trainers is importable from here
(``from arl_flows import TieredReward``); it is loaded on first use, so the
CLI does not pay for torch and the ladder when it only prints help.
"""

from __future__ import annotations

from typing import Any

__all__ = ["RerankItem", "TieredReward", "Window", "compute_score", "compute_score_batch", "rerank"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from arl_flows import integrations

        return getattr(integrations, name)
    raise AttributeError(f"module 'arl_flows' has no attribute {name!r}")
