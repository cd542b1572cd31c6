"""SQLAlchemy 2 table models of the ledger.

Private to ``storage``: the ledger's public methods take and return the
pydantic records of ``storage.records``, never these rows. The Alembic
migrations in ``storage/migrations/versions`` create exactly these tables.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON, datetime: DateTime(timezone=True)}


class RunRow(Base):
    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    config: Mapped[dict[str, Any]]
    status: Mapped[str] = mapped_column(String(20))
    steps_done: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class PromptRow(Base):
    __tablename__ = "prompts"

    id: Mapped[str] = mapped_column(String(200), primary_key=True)
    suite: Mapped[str] = mapped_column(String(50))
    text: Mapped[str] = mapped_column(Text)
    goal: Mapped[dict[str, Any]]
    meta: Mapped[dict[str, Any]]


class TrajectoryRow(Base):
    __tablename__ = "trajectories"
    __table_args__ = (Index("ix_trajectories_run_step", "run_id", "step"),)

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), nullable=True)
    prompt_id: Mapped[str] = mapped_column(ForeignKey("prompts.id"))
    step: Mapped[int] = mapped_column(Integer)
    group_id: Mapped[str] = mapped_column(String(64), index=True)
    turns: Mapped[list[Any]]
    final_answer: Mapped[str] = mapped_column(Text)
    candidate_key: Mapped[str] = mapped_column(String(400), index=True)
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    policy_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    completion_ids: Mapped[list[Any] | None] = mapped_column(nullable=True)
    behaviour_logprobs: Mapped[list[Any] | None] = mapped_column(nullable=True)
    created_at: Mapped[datetime]


class VerdictRow(Base):
    __tablename__ = "verdicts"
    __table_args__ = (
        UniqueConstraint("candidate_key", "verifier", "version", "params_hash", name="uq_verdict_cache"),
        Index("ix_verdicts_verifier_status", "verifier", "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    candidate_key: Mapped[str] = mapped_column(String(400))
    verifier: Mapped[str] = mapped_column(String(100))
    version: Mapped[str] = mapped_column(String(50))
    params_hash: Mapped[str] = mapped_column(String(32))
    tier: Mapped[str] = mapped_column(String(20))
    status: Mapped[str] = mapped_column(String(20))
    value: Mapped[float | None] = mapped_column(Float, nullable=True)
    values: Mapped[dict[str, Any]]
    uncertainty: Mapped[float | None] = mapped_column(Float, nullable=True)
    feedback: Mapped[str] = mapped_column(Text, default="")
    cost_s: Mapped[float] = mapped_column(Float, default=0.0)
    wall_s: Mapped[float] = mapped_column(Float, default=0.0)
    request_id: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime]
    job_id: Mapped[str | None] = mapped_column(String(200), nullable=True)


class RewardEstimateRow(Base):
    __tablename__ = "reward_estimates"

    trajectory_id: Mapped[str] = mapped_column(ForeignKey("trajectories.id", ondelete="CASCADE"), primary_key=True)
    run_id: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    step: Mapped[int] = mapped_column(Integer)
    mean: Mapped[float] = mapped_column(Float)
    std: Mapped[float] = mapped_column(Float)
    fidelity: Mapped[str | None] = mapped_column(String(20), nullable=True)
    verdict_ids: Mapped[list[Any]]
    components: Mapped[dict[str, Any]]
    # NULL in rows written before these columns existed: read back from ``components`` (storage.ledger._records).
    value_mean: Mapped[float | None] = mapped_column(Float, nullable=True)
    value_std: Mapped[float | None] = mapped_column(Float, nullable=True)
    invalid: Mapped[bool | None] = mapped_column(Boolean, nullable=True)


class TrainingStepRow(Base):
    __tablename__ = "training_steps"

    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    step: Mapped[int] = mapped_column(Integer, primary_key=True)
    metrics: Mapped[dict[str, Any]]
    group_ids: Mapped[list[Any] | None] = mapped_column(nullable=True)  # NULL: written before the column existed
    created_at: Mapped[datetime]


class CheckpointRow(Base):
    __tablename__ = "checkpoints"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    step: Mapped[int] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(Text)
    sha256: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]


class VerifierTierRow(Base):
    __tablename__ = "verifier_tiers"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    tier: Mapped[str] = mapped_column(String(20))
    fidelity: Mapped[int] = mapped_column(Integer)
    version: Mapped[str] = mapped_column(String(50))
    params: Mapped[dict[str, Any]]
    expected_cost: Mapped[float] = mapped_column(Float)
    description: Mapped[str] = mapped_column(Text, default="")
    origin: Mapped[str] = mapped_column(String(50))
    updated_at: Mapped[datetime]


class SpendRow(Base):
    __tablename__ = "spend"
    __table_args__ = (Index("ix_spend_run_tier", "run_id", "tier"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    tier: Mapped[str] = mapped_column(String(20))
    verifier: Mapped[str] = mapped_column(String(100))
    cost_s: Mapped[float] = mapped_column(Float)
    calls: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime]


class LabRequestRow(Base):
    __tablename__ = "lab_requests"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    run_id: Mapped[str | None] = mapped_column(String(64), nullable=True, index=True)
    candidate_key: Mapped[str] = mapped_column(String(400), index=True)
    payload: Mapped[str] = mapped_column(Text, default="")
    verifier: Mapped[str] = mapped_column(String(100))
    version: Mapped[str] = mapped_column(String(50))
    params_hash: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(20), index=True)
    value: Mapped[float | None] = mapped_column(Float, nullable=True)
    notes: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime]
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
