"""A training step records the ids of the groups it learned from in a column of its own.

The asynchronous learner's resume skips groups a recorded step learned from.
Before this revision their ids sat in the step's metrics blob under
``pipeline/groups``; the upgrade moves them into ``group_ids`` (and the
downgrade back), so no reader looks for control data among the metrics. A
synchronous step leaves the column empty.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_BLOB_KEY = "pipeline/groups"  # where revision 0004 kept them
_steps = sa.table(
    "training_steps", sa.column("run_id", sa.String), sa.column("step", sa.Integer),
    sa.column("metrics", sa.JSON), sa.column("group_ids", sa.JSON),
)


def upgrade() -> None:
    with op.batch_alter_table("training_steps") as batch:
        batch.add_column(sa.Column("group_ids", sa.JSON(), nullable=True))
    conn = op.get_bind()
    for run_id, step, metrics in conn.execute(sa.select(_steps.c.run_id, _steps.c.step, _steps.c.metrics)).all():
        if isinstance(metrics, dict) and _BLOB_KEY in metrics:
            kept = {k: v for k, v in metrics.items() if k != _BLOB_KEY}
            conn.execute(
                _steps.update().where(_steps.c.run_id == run_id, _steps.c.step == step)
                .values(metrics=kept, group_ids=list(metrics[_BLOB_KEY] or []))
            )


def downgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(sa.select(_steps.c.run_id, _steps.c.step, _steps.c.metrics, _steps.c.group_ids)).all()
    for run_id, step, metrics, group_ids in rows:
        if group_ids:
            conn.execute(
                _steps.update().where(_steps.c.run_id == run_id, _steps.c.step == step)
                .values(metrics={**(metrics or {}), _BLOB_KEY: list(group_ids)})
            )
    with op.batch_alter_table("training_steps") as batch:
        batch.drop_column("group_ids")
