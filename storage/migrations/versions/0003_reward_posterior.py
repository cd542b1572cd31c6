"""Reward estimates: the top-tier value's posterior (mean, std) and the invalid flag as columns.

They were keys of the JSON ``components`` column; rows written before this
revision keep them there (the columns stay NULL) and are read back from it.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("reward_estimates") as batch:
        batch.add_column(sa.Column("value_mean", sa.Float(), nullable=True))
        batch.add_column(sa.Column("value_std", sa.Float(), nullable=True))
        batch.add_column(sa.Column("invalid", sa.Boolean(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("reward_estimates") as batch:
        batch.drop_column("invalid")
        batch.drop_column("value_std")
        batch.drop_column("value_mean")
