"""Benchmark harnesses and test-only helpers: in the source checkout, never in the wheel.

Run a benchmark from the repository root as ``python -m benchmarks.NAME``
(``python -m benchmarks.crash --trials 20``); the tests import these modules
as ``benchmarks.crash`` and so on (pytest puts the repository root on the
import path, ``pythonpath`` in pyproject.toml). ``arl bench ...`` (the
molecules suite's command group) validates its options in the product and
imports the harness it runs from here.

- :mod:`.replay`: the scheduler benchmarks (retrieval, advantage accuracy)
  over verdicts computed once and replayed with their measured cost;
- :mod:`.molecule_pool`: a QM9 pool, every tier's verdict on it (kept in a
  ledger and reused), the replay ladder and the surrogate's calibration;
- :mod:`.learning`: learning under a verification budget, per regime;
- :mod:`.faults`: a fault-injecting wrapper around an isolated verifier;
- :mod:`.counting_tier`: a top tier that logs its own invocations (crash and
  concurrency harnesses);
- scripts: ``crash``, ``first_run``, ``grpo_step``, ``ledger``, ``rerank``,
  ``sandbox``, ``surrogate_ranking``, ``tiers``, ``trl_grpo``, ``code_tasks``.
"""
