"""Verdicts record the batch job (or Dask worker) that computed them.

A top-tier call may run as a SLURM or PBS job; the job id ties a verdict
to the scheduler's own records (``squeue``, ``sacct``, the job completion
log). Rows written before this revision leave it NULL (computed in the run's
own process, or not recorded).

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("verdicts") as batch:
        batch.add_column(sa.Column("job_id", sa.String(200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("verdicts") as batch:
        batch.drop_column("job_id")
