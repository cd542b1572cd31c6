"""Plain helpers the tests share (no fixtures, no tests): imported as ``tests.helpers.NAME``.

- :mod:`.cli_runner`: the real ``arl`` entry point run in process, and the shape of a user error;
- :mod:`.faults`: a fault-injecting wrapper around an isolated verifier;
- :mod:`.fault_targets`: a cheap isolated verifier for the fault-injection tests;
- :mod:`.faulty_work`: work functions and verifiers that misbehave on demand (isolation, registry);
- :mod:`.postgres`: throw-away PostgreSQL databases (created and dropped by admin URL);
- :mod:`.venvs`: ARL's wheel built and installed into a fresh venv that borrows this environment's packages;
- :mod:`.tiny_policy`: a tiny GPT-2 policy on a tokenizer, for the loss and distillation tests;
- :mod:`.trl_loss`: a real TRL GRPOTrainer for calling its loss path directly (loss parity, update throughput);
- :mod:`.toy_suite`: a minimal suite (words, a cheap and a costly tier) for the core's tests;
- :mod:`.synthetic_ladder`: made-up tier ladders and candidate pools for the scheduler and benchmark tests;
- :mod:`.tiny_prior`: the tiny SMILES prior of the flow and benchmark tests, and a small run's overrides.
"""
