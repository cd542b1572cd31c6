"""Verdicts lose their ``score`` column: a reward is computed from the value by the run's objective.

The column held a second reward (a goal-window score with its own softness, or
a pass fraction) that no reward or policy read. What it carried is still in the
row: the value, and for the code suite's tests tier ``values.passed`` and
``values.total``. A downgrade restores the column empty (NULL).

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("verdicts") as batch:
        batch.drop_column("score")


def downgrade() -> None:
    with op.batch_alter_table("verdicts") as batch:
        batch.add_column(sa.Column("score", sa.Float(), nullable=True))
