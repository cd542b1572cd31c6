"""Run summaries and reports count novel hits apart from all hits, from the fast tier's ``novel`` value."""

from __future__ import annotations

import pytest

from arl_flows.config import load_config
from arl_flows.report import build_report, hits_line, run_hits
from storage.ledger import Ledger
from storage.records import Prompt, RewardEstimate, Tier, TrainingStepRecord, Trajectory, Verdict

# (SMILES, top-tier gap or None, fast tier's novel): hits are top-tier gaps in the quick profile's window 3-4 eV.
ROWS = [("CCO", 3.6, 0.0), ("CCCl", 3.2, 1.0), ("CCS", 3.9, 1.0), ("c1ccccc1", 5.1, 1.0), ("CC=O", None, 1.0)]


def _ledger(url: str, space: str, with_novel: bool = True) -> tuple[Ledger, str]:
    ledger = Ledger(url)
    config = load_config(None, "quick", overrides={"options": {"space": space}})
    run = ledger.create_run("hits", config.model_dump(mode="json") | {"steps": 1})
    prompt = Prompt(id="molecules:p0", suite="molecules", text="gap 3-4", goal={"low": 3.0, "high": 4.0})
    ledger.add_prompts([prompt])
    trajs = [Trajectory(run_id=run.id, prompt_id=prompt.id, step=0, group_id="g0", final_answer=smi,
                        candidate_key=f"molecules:{smi}") for smi, *_ in ROWS]
    ledger.add_trajectories(trajs)
    verdicts = []
    for smi, top, novel in ROWS:
        key = f"molecules:{smi}"
        values = {"novel": novel} if with_novel else {}
        verdicts.append(Verdict(candidate_key=key, verifier="rdkit-eht", version="3", params_hash="p", tier=Tier.fast,
                                status="ok", value=2.0, values=values))
        if top is not None:
            # The quick profile's top tier: the reference table for qm9; druglike's quick ladder (which the QM9
            # table cannot answer) ends at another tier.
            verdicts.append(Verdict(candidate_key=key, verifier=config.tiers[-1].verifier, version="1", params_hash="p",
                                    tier=Tier.lab, status="ok", value=top))
    ledger.put_verdicts(verdicts)
    ledger.add_reward_estimates([RewardEstimate(trajectory_id=t.id, run_id=run.id, step=0, mean=0.5, std=0.1) for t in trajs])
    ledger.record_step(TrainingStepRecord(run_id=run.id, step=0, metrics={"reward/mean": 0.5, "reward/max": 0.5}))
    return ledger, run.id


@pytest.mark.parametrize("space", ["qm9", "druglike"])
def test_novel_hits_are_counted_apart(sqlite_url: str, space: str) -> None:
    ledger, run_id = _ledger(sqlite_url, space)
    hits = run_hits(ledger, run_id)
    assert (hits["hits"], hits["novel_hits"], hits["low"], hits["high"]) == (3, 2, 3.0, 4.0)
    line = hits_line(hits, "eV")
    assert line == "hits (top-tier value 3 to 4 eV): 3, 2 of them novel"
    assert line in build_report(ledger, run_id).markdown


def test_without_a_novelty_report_hits_are_counted_alone(sqlite_url: str) -> None:
    ledger, run_id = _ledger(sqlite_url, "qm9", with_novel=False)
    hits = run_hits(ledger, run_id)
    assert hits["hits"] == 3 and hits["novel_hits"] is None
    assert hits_line(hits) == "hits (top-tier value 3 to 4): 3"
