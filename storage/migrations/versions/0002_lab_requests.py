"""Lab requests: asked-for external measurements whose verdicts stay pending until answered.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "lab_requests",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.String(64), nullable=True),
        sa.Column("candidate_key", sa.String(400), nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("verifier", sa.String(100), nullable=False),
        sa.Column("version", sa.String(50), nullable=False),
        sa.Column("params_hash", sa.String(32), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
        sa.Column("value", sa.Float(), nullable=True),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_lab_requests_run_id", "lab_requests", ["run_id"])
    op.create_index("ix_lab_requests_candidate_key", "lab_requests", ["candidate_key"])
    op.create_index("ix_lab_requests_status", "lab_requests", ["status"])


def downgrade() -> None:
    op.drop_table("lab_requests")
