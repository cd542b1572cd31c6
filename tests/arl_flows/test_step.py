"""The one step function: its stages run in order through the hooks, and each writes the ledger when the contract says.

No Prefect here: the default hooks run inline. The run is the toy suite's (``tests/helpers/toy_suite.py``):
the step's contract holds for any suite. The flows (``FlowHooks``) and
the learning benchmark use the same ``run_step``; their own tests run it with
their hooks.
"""

from __future__ import annotations

from storage.ledger import Ledger


def test_run_step_calls_each_hook_once_the_ledger_holds_what_came_before(toy_home, sqlite_url) -> None:  # noqa: ANN001
    from arl_flows.config import load_config
    from arl_flows.step import StepHooks, run_step
    from arl_flows.training import RunSession
    from tests.helpers.toy_suite import toy_overrides

    ledger = Ledger(sqlite_url)
    session = RunSession.open(load_config(overrides=toy_overrides(steps=1)), ledger)  # 2 prompts x 4 samples
    run_id = session.run.id
    events: list[str] = []
    returned: list = []

    class Recording(StepHooks):
        max_batch = 3

        def stage(self, step, name, work):  # noqa: ANN001, ANN201
            events.append(f"stage:{name}")
            return work()

        def sampled(self, session, step, state) -> None:  # noqa: ANN001
            rows = ledger.step_trajectories(run_id, step)
            assert len(rows) == len(state.trajectories) == 8 and all(e is None for _, e in rows)  # written, not yet verified
            events.append("sampled")

        def run_tier(self, verifier, batch):  # noqa: ANN001, ANN201
            assert len(batch) <= 3
            # Every batch that returned before this one is in the ledger already.
            stored = {v.cache_key for v in ledger.verdicts_for({v.candidate_key for v in returned})}
            assert stored >= {v.cache_key for v in returned}
            events.append(f"tier:{verifier.name}")
            verdicts = super().run_tier(verifier, batch)
            returned.extend(verdicts)
            return verdicts

        def verified(self, session, step, state) -> None:  # noqa: ANN001
            assert all(e is not None for _, e in ledger.step_trajectories(run_id, step))
            assert ledger.get_run(run_id).steps_done == 0
            # What GRPO trains on is the caller's to replace (the benchmark's proxy rewards); the ledger keeps its own.
            state.estimates = [e.model_copy(update={"mean": 0.25}) for e in state.estimates]
            events.append("verified")

        def finished(self, session, summary) -> None:  # noqa: ANN001
            assert ledger.get_run(run_id).steps_done == 1 and [c.step for c in ledger.checkpoints(run_id)] == [0]
            events.append("finished")

    summary = run_step(session, 0, Recording())
    session.finish()
    stages = [e for e in events if not e.startswith("tier:")]
    assert stages == ["stage:rollout", "sampled", "stage:verify", "verified", "stage:grpo", "stage:hindsight",
                      "stage:checkpoint", "finished"]
    tiers = [e for e in events if e.startswith("tier:")]
    assert tiers and events.index(tiers[0]) > events.index("stage:verify") and events.index(tiers[-1]) < events.index("verified")
    assert summary.reward_mean == 0.25  # GRPO saw the replaced rewards
    assert len(tiers) >= 3 and sum(ledger.spend_by_tier(run_id).values()) > 0
    assert ledger.integrity_problems() == []
