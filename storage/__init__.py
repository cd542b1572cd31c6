"""Domain records and the SQL ledger.

``storage.records`` is light (pydantic only) and imported by every package;
``storage.ledger`` (SQLAlchemy, Alembic) is loaded on first use of ``Ledger``.
"""

from typing import Any

from storage.records import (
    TIER_ORDER,
    CheckpointRecord,
    LabRequest,
    Prompt,
    RewardEstimate,
    RunRecord,
    RunStatus,
    SpendRecord,
    Status,
    Tier,
    TrainingStepRecord,
    Trajectory,
    Turn,
    TurnKind,
    Verdict,
    VerifierSpec,
    candidate_key,
    new_id,
    params_hash,
    ladder_order,
    tier_rank,
)

__all__ = [
    "TIER_ORDER",
    "CheckpointRecord",
    "LabRequest",
    "Ledger",
    "LedgerError",
    "Prompt",
    "RewardEstimate",
    "RunRecord",
    "RunStatus",
    "SpendRecord",
    "Status",
    "Tier",
    "TrainingStepRecord",
    "Trajectory",
    "Turn",
    "TurnKind",
    "Verdict",
    "VerifierSpec",
    "candidate_key",
    "new_id",
    "params_hash",
    "ladder_order",
    "tier_rank",
]


def __getattr__(name: str) -> Any:
    if name in ("Ledger", "LedgerError"):
        from storage import ledger

        return getattr(ledger, name)
    raise AttributeError(f"module 'storage' has no attribute {name!r}")
