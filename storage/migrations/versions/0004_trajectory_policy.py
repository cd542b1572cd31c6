"""Trajectories record the policy that sampled them: its version, the completion's tokens and their log-probs.

The asynchronous pipeline learns from groups sampled by older weights; the
decoupled loss needs the behaviour policy's log-probs, and a resumed run
rebuilds a group it had sampled but not yet learned from them. Rows written
before this revision leave the columns NULL (nothing recorded).

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("trajectories") as batch:
        batch.add_column(sa.Column("policy_version", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("completion_ids", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("behaviour_logprobs", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("trajectories") as batch:
        batch.drop_column("behaviour_logprobs")
        batch.drop_column("completion_ids")
        batch.drop_column("policy_version")
