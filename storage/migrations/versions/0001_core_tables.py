"""Core ledger tables: runs, prompts, trajectories, verdicts (the verdict cache),
reward estimates, training steps, checkpoints, verifier tiers, spend.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("steps_done", sa.Integer(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )
    op.create_table(
        "prompts",
        sa.Column("id", sa.String(200), primary_key=True),
        sa.Column("suite", sa.String(50), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("goal", sa.JSON(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
    )
    op.create_table(
        "trajectories",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=True),
        sa.Column("prompt_id", sa.String(200), sa.ForeignKey("prompts.id"), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.String(64), nullable=False),
        sa.Column("turns", sa.JSON(), nullable=False),
        sa.Column("final_answer", sa.Text(), nullable=False),
        sa.Column("candidate_key", sa.String(400), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("truncated", sa.Boolean(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_trajectories_run_step", "trajectories", ["run_id", "step"])
    op.create_index("ix_trajectories_group_id", "trajectories", ["group_id"])
    op.create_index("ix_trajectories_candidate_key", "trajectories", ["candidate_key"])
    op.create_table(
        "verdicts",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("candidate_key", sa.String(400), nullable=False),
        sa.Column("verifier", sa.String(100), nullable=False),
        sa.Column("version", sa.String(50), nullable=False),
        sa.Column("params_hash", sa.String(32), nullable=False),
        sa.Column("tier", sa.String(20), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("values", sa.JSON(), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("uncertainty", sa.Float(), nullable=True),
        sa.Column("feedback", sa.Text(), nullable=False),
        sa.Column("cost_s", sa.Float(), nullable=False),
        sa.Column("wall_s", sa.Float(), nullable=False),
        sa.Column("request_id", sa.String(64), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.UniqueConstraint("candidate_key", "verifier", "version", "params_hash", name="uq_verdict_cache"),
    )
    op.create_index("ix_verdicts_verifier_status", "verdicts", ["verifier", "status"])
    op.create_table(
        "reward_estimates",
        sa.Column("trajectory_id", sa.String(64), sa.ForeignKey("trajectories.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("mean", sa.Float(), nullable=False),
        sa.Column("std", sa.Float(), nullable=False),
        sa.Column("fidelity", sa.String(20), nullable=True),
        sa.Column("verdict_ids", sa.JSON(), nullable=False),
        sa.Column("components", sa.JSON(), nullable=False),
    )
    op.create_index("ix_reward_estimates_run_id", "reward_estimates", ["run_id"])
    op.create_table(
        "training_steps",
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("step", sa.Integer(), primary_key=True),
        sa.Column("metrics", sa.JSON(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "checkpoints",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_checkpoints_run_id", "checkpoints", ["run_id"])
    op.create_table(
        "verifier_tiers",
        sa.Column("name", sa.String(100), primary_key=True),
        sa.Column("tier", sa.String(20), nullable=False),
        sa.Column("fidelity", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(50), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("expected_cost", sa.Float(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("origin", sa.String(50), nullable=False),
        sa.Column("updated_at", TS, nullable=False),
    )
    op.create_table(
        "spend",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("run_id", sa.String(64), sa.ForeignKey("runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("tier", sa.String(20), nullable=False),
        sa.Column("verifier", sa.String(100), nullable=False),
        sa.Column("cost_s", sa.Float(), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_spend_run_tier", "spend", ["run_id", "tier"])


def downgrade() -> None:
    for table in (
        "spend",
        "verifier_tiers",
        "checkpoints",
        "training_steps",
        "reward_estimates",
        "verdicts",
        "trajectories",
        "prompts",
        "runs",
    ):
        op.drop_table(table)
