"""The ledger: every run, trajectory, verdict, reward, spend and checkpoint, in SQL.

It is also the verdict cache: a verdict is unique on (candidate key,
verifier, version, params hash), so nothing is verified twice at the same
tier and version. :class:`Ledger` is the one public interface; its methods
take and return ``storage.records`` objects (never ORM rows), and each call
is one transaction, so a crash loses nothing written and repeats nothing
verified.

The implementation is split by job, one private module each, as optuna's
storages are: ``_engine`` (the URL, the engine, SQLite's settings, sessions),
``_migrations`` (Alembic), ``_records`` (runs, prompts, trajectories,
rewards, steps, checkpoints, tiers), ``_cache`` (the verdict cache's fast
path), ``_lab`` (lab requests), ``_reports`` (read models for reports) and
``_integrity`` (`arl db check`); ``_errors`` says what went wrong in one line.
The same contract tests (``tests/storage``) run against SQLite and PostgreSQL.
"""

from __future__ import annotations

from storage.ledger._engine import DATABASE_URL_ENV, check_database_url, default_database_url, sqlite_file
from storage.ledger._errors import LedgerError
from storage.ledger._integrity import _Integrity
from storage.ledger._migrations import _Migrations
from storage.ledger._reports import _Reports

__all__ = ["DATABASE_URL_ENV", "Ledger", "LedgerError", "check_database_url", "default_database_url", "sqlite_file"]


class Ledger(_Reports, _Integrity, _Migrations):
    """SQL store of everything a training run produces; domain objects in and out.

    ``Ledger(url=None, *, migrate=True)`` opens the database at ``url``
    (default: :func:`default_database_url`), refuses a database that holds
    someone else's tables, and brings the schema to the newest revision unless
    ``migrate`` is False. Every problem a user can act on is a one-line
    :class:`LedgerError`. The interface, by job:

    Opening and closing
        ``url``, ``safe_url`` (the URL with its password hidden), ``close()``;
        a ledger is also a context manager that closes on exit.

    Migrations
        ``current_revision()``, ``upgrade(revision)``, ``downgrade(revision)``.

    Records
        ``create_run()``, ``get_run()`` (a unique id prefix is enough),
        ``list_runs()``, ``set_run_status()``; ``add_prompts()``,
        ``get_prompts()``; ``add_trajectories()``, ``step_trajectories()``, ``run_trajectories()``,
        ``delete_step_trajectories()``; ``add_reward_estimates()``;
        ``record_step()`` (with its checkpoint, in one transaction),
        ``training_steps()``, ``checkpoints()``; ``record_tiers()``.

    The verdict cache
        ``lookup_verdicts()`` (one verifier identity, many keys: the hot
        path), ``verdicts_for()`` (every verdict about some keys),
        ``put_verdicts()`` (idempotent, with the spend that paid for them in
        the same transaction), ``ok_values()`` (a verifier's history).
        ``verdicts_for()`` leaves out rows that do not read back and counts
        them in ``unreadable_verdicts``; ``lookup_verdicts()`` raises a
        LedgerError on one.

    Lab requests
        ``create_lab_requests()``, ``lab_requests()``, ``lab_requests_named()``, ``submit_lab_result()``,
        ``close_lab_requests()`` (requests a remote tier answered itself).

    Reports
        ``spend_by_tier()``, ``spend_by_verifier()``, ``spend_by_step()``, ``run_summary()``,
        ``top_candidates()``.

    Integrity
        ``integrity_problems()`` (plain words; a damaged file is reported,
        never raised), ``unreadable_rows()`` (rows whose status, tier, JSON
        or timestamp does not read back; part of the former).
    """

    def __init__(self, url: str | None = None, *, migrate: bool = True) -> None:
        super().__init__(url)
        if migrate:
            self._refuse_foreign_database()
            self.upgrade()
