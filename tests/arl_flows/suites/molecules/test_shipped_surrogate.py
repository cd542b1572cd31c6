"""The graph network shipped with the molecules suite (arl_flows.suites.molecules.pretrained): split, loading, stacking."""

from __future__ import annotations

import numpy as np
import pytest

from arl_flows.suites.molecules.graph import GraphModelConfig
from arl_flows.suites.molecules.pretrained import LOWER_TIERS, load_lower_tiers, load_shipped, split_of
from verifiers.scheduler import Observation, Surrogate

TOP = "pyscf-b3lyp"


@pytest.fixture(scope="module")
def table() -> dict[str, list[dict]]:
    parts: dict[str, list[dict]] = {"train": [], "calibration": [], "test": []}
    for r in load_lower_tiers():
        if np.isfinite(r["rdkit-eht"]) and np.isfinite(r["gfn2-xtb"]):
            parts[split_of(r["smiles"])].append(r)
    return parts


def _obs(rows: list[dict], shift: float = 0.0, tiers=LOWER_TIERS) -> list[Observation]:
    return [
        Observation(f"molecules:{r['smiles']}", np.zeros(0), {**{t: r[t] for t in tiers}, TOP: r["gap_ev"] + shift}, r["smiles"])
        for r in rows
    ]


def _surrogate() -> Surrogate:
    shipped = load_shipped(LOWER_TIERS, GraphModelConfig())
    assert shipped is not None, "the shipped surrogate is missing or does not match the default network shape"
    s = Surrogate(list(LOWER_TIERS), TOP)
    s.attach_learned(shipped)
    return s


def test_the_split_is_a_stable_hash_of_the_molecule(table) -> None:
    sizes = {k: len(v) for k, v in table.items()}
    total = sum(sizes.values())
    assert 0.22 < sizes["test"] / total < 0.28 and 0.08 < sizes["calibration"] / total < 0.12
    assert split_of("CCO") == split_of("CCO") and {split_of(r["smiles"]) for r in table["test"]} == {"test"}
    assert load_shipped(("rdkit-eht",), GraphModelConfig()) is None  # another ladder: no shipped network
    assert load_shipped(LOWER_TIERS, GraphModelConfig(hidden=32)) is None  # another shape: none either


def test_out_of_the_box_it_is_accurate_and_calibrated_on_molecules_it_never_saw(table) -> None:
    s = _surrogate()
    assert s.n_pairs == 0
    rows = table["test"][::10][:400]
    for pattern, max_mae in ((LOWER_TIERS, 0.2), (LOWER_TIERS[:1], 0.25)):
        cal = s.calibration(_obs(rows), pattern=list(pattern))
        assert cal["mean_abs_error"] < max_mae, cal
        assert 0.82 <= cal["coverage_90"] <= 0.97, cal
    queries = [Observation(o.key, o.features, {}, o.payload) for o in _obs(rows[:20])]
    assert (s.disagreement(queries) > 0).all()  # the members disagree a little everywhere
    assert (s.disagreement(_obs(rows[:20])) == 0).all()  # and not at all where the top tier has answered


def test_the_runs_own_answers_refit_the_stack_but_training_molecules_do_not(table) -> None:
    s = _surrogate()
    probe = [Observation(o.key, o.features, {t: o.values[t] for t in LOWER_TIERS}, o.payload) for o in _obs(table["test"][1:400:20])]
    before, _ = s.predict(probe)
    s.add(_obs(table["train"][:80], shift=1.0))  # the network trained on these: they must not move the stack
    seen, _ = s.predict(probe)
    np.testing.assert_allclose(seen, before)
    s.add(_obs(table["test"][2000:2080], shift=0.6))  # a systematic shift on molecules it never saw
    after, _ = s.predict(probe)
    assert 0.3 < np.median(after - before) < 0.7


def test_a_scheduler_starts_from_the_shipped_network_and_fine_tunes_it_on_enough_answers(table) -> None:
    from arl_flows.suites.molecules import DFTGapVerifier, EHTGapVerifier, XTBGapVerifier
    from arl_flows.suites.molecules.learner import learner_for
    from tests.helpers.scheduler import gap_window_config
    from verifiers.scheduler import Scheduler
    from verifiers.scheduler.config import LearnedSurrogateConfig

    ladder = [EHTGapVerifier(), XTBGapVerifier(), DFTGapVerifier()]
    cold = gap_window_config(learned=LearnedSurrogateConfig(shipped=False))
    assert Scheduler(ladder, cold, learner=learner_for("qm9")).surrogate.learned is None
    config = gap_window_config(learned=LearnedSurrogateConfig(finetune_pairs=60, finetune_epochs=3))
    scheduler = Scheduler(ladder, config, learner=learner_for("qm9"))
    shipped = scheduler.surrogate.learned
    assert shipped is not None and scheduler.surrogate.n_pairs == 0  # from step 0, no history needed
    scheduler.add_history(_obs(table["test"][3000:3040], shift=1.0))  # fewer answers than finetune_pairs
    assert scheduler.surrogate.learned is shipped
    scheduler.add_history(_obs(table["test"][3040:3100], shift=1.0))
    tuned = scheduler.surrogate.learned
    assert tuned is not shipped and tuned.model is not shipped.model  # a fine-tuned copy; the shipped one is intact
    probe = _obs(table["test"][4000:4020])
    values = np.array([[o.values[t] for t in LOWER_TIERS] for o in probe])
    shift = tuned.predict([o.payload for o in probe], values)[0] - shipped.predict([o.payload for o in probe], values)[0]
    assert np.median(shift) > 0.04 and (shift > 0).mean() > 0.9  # it learned from the run's answers (3 epochs on 51)


def test_the_dry_run_says_when_a_ladder_of_ones_own_starts_the_surrogate_cold() -> None:
    """newcomer pass: a tier added to the molecules ladder silently left the shipped network out (it reads the lower
    tiers it was trained with); the run spent 0.3 of 120 CPU-s and never escalated. The suite's check says so."""
    from arl_flows.config import load_config
    from arl_flows.suites import suite_for

    assert suite_for(load_config(None, "default")).check() is None
    assert suite_for(load_config(None, "quick")).check() is None
    own = load_config(overrides={"tiers": [{"verifier": "rdkit-eht"}, {"verifier": "pyscf-b3lyp"}]})
    said = suite_for(own).check()
    assert said is not None and "reads the lower tiers rdkit-eht, gfn2-xtb and this ladder's are rdkit-eht" in said
    assert "starts cold" in said
    off = load_config(overrides={"tiers": [{"verifier": "rdkit-eht"}, {"verifier": "pyscf-b3lyp"}],
                                 "scheduler": {"learned": {"shipped": False}}})
    assert suite_for(off).check() is None  # the user asked for a cold start
