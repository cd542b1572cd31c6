"""Throw-away PostgreSQL databases on a server the caller names by its admin URL (tests and the ledger benchmark)."""

from __future__ import annotations

import uuid

__all__ = ["create_database", "drop_database"]


def create_database(admin_url: str, prefix: str) -> tuple[str, str]:
    """Create a database named ``<prefix>_<random hex>``; return its name and its URL (password kept)."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    engine.dispose()
    return name, make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_database(admin_url: str, name: str) -> None:
    """Drop database ``name``, closing any connection still open to it."""
    from sqlalchemy import create_engine, text

    engine = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    engine.dispose()
