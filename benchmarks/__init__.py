"""Benchmark harnesses: in the source checkout, never in the wheel (the tests' own helpers are in ``tests/helpers``).

Run a benchmark from the repository root as ``python -m benchmarks.NAME``
(``python -m benchmarks.crash --trials 20``); the tests import these modules
as ``benchmarks.crash`` and so on (pytest puts the repository root on the
import path, ``pythonpath`` in pyproject.toml). ``arl bench ...`` is
:mod:`.cli`'s command group, which the molecules suite mounts when this
checkout is importable; its commands hand their options to :mod:`.commands`,
which checks them and runs the harness.
Every report records where it came from (:mod:`.provenance`).

- :mod:`.cli`: the ``arl bench`` commands and their options;
- :mod:`.commands`: what each ``arl bench`` command runs and prints;
- :mod:`.baselines`: the scheduler's ``oracle`` and ``cascade`` baselines,
  passed to the scheduler as instances (they need the truth);
- :mod:`.replay`: the scheduler benchmarks (retrieval, advantage accuracy)
  over verdicts computed once and replayed with their measured cost;
- :mod:`.molecule_pool`: a QM9 pool, every tier's verdict on it (kept in a
  ledger and reused), the replay ladder and the surrogate's calibration;
- :mod:`.learning`: learning under a verification budget, per regime;
- :mod:`.pipeline`: the synchronous step against the asynchronous pipeline;
- :mod:`.provenance`: the commit, package versions and machine of a report;
- :mod:`.settings`: the benchmarks' own ``ARL_BENCH_*`` variables;
- :mod:`.call_log`: the start/done lines of a top tier's calls (``$ARL_COUNT_LOG``);
- :mod:`.counting_tier`: a top tier that logs its own invocations (crash and
  concurrency harnesses);
- scripts: ``crash``, ``first_run``, ``grpo_step``, ``ledger``, ``rerank``,
  ``sandbox``, ``surrogate_ranking``, ``tiers``, ``trl_grpo``, ``code_tasks``.
"""
