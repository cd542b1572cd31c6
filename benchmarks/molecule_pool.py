"""A QM9 pool with every tier's verdict on it: the setup of ``arl bench scheduler`` and ``arl bench advantages``.

Every tier's verdict on every pool molecule is computed live once by the real
verifiers and kept in a ledger (a SQLite file by default, any ledger URL
otherwise), exactly as a run keeps its paid verdicts: the next benchmark on
an overlapping pool reads them back with ``lookup_verdicts`` instead of
paying again. The policies are then charged as if they had computed what they
asked for (:mod:`benchmarks.replay`).
"""

from __future__ import annotations

import csv
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from storage.ledger import Ledger
from storage.records import Status, Verdict
from verifiers import Candidate, Verifier
from verifiers.scheduler import Observation, Scheduler, SchedulerConfig
from verifiers.scheduler.config import LearnedSurrogateConfig

from benchmarks.replay import ReplayVerifier, replay_ladder

__all__ = [
    "REFERENCE_POOLS",
    "MoleculePool",
    "PoolError",
    "calibration",
    "load_pool",
    "molecule_pool",
    "molecules_window",
    "resolve_pool",
    "tier_tables",
]

# Novel molecules with real DFT (benchmarks/reference_pools.py).
REFERENCE_POOLS = Path(__file__).parent / "data" / "pools"


def resolve_pool(pool: Path | str | None) -> Path | None:
    """A pool file, or the name of a reference pool (``qm9_novel``, ``druglike_moses``) in ``benchmarks/data/pools/``."""
    if pool is None or Path(pool).is_file():
        return None if pool is None else Path(pool)
    named = REFERENCE_POOLS / f"{pool}.csv"
    if str(pool).isidentifier() and named.is_file():
        return named
    names = sorted(p.stem for p in REFERENCE_POOLS.glob("*.csv") if not p.name.endswith(".smiles.csv"))
    raise PoolError(f"pool {str(pool)[:200]!r} is neither a file nor a reference pool; pass a CSV with 'smiles' and "
                    f"'gap_ev' columns or one of {', '.join(names)}")


class PoolError(ValueError):
    """A pool file or size the user must fix (the message says how)."""


def space_reference_pool(space: str) -> Path | None:
    """The reference pool of drug-sized molecules with DFT computed here that ``space`` is measured on.

    None for qm9, whose benchmarks read the shipped QM9 table; a space without a pool file is a PoolError.
    """
    if space == "qm9":
        return None
    path = REFERENCE_POOLS / f"{space}_moses.csv"
    if not path.is_file():
        raise PoolError(f"the {space} space has no reference pool ({path.name} in {REFERENCE_POOLS}); build one with "
                        "`python -m benchmarks.reference_pools` or pass a pool")
    return path


def load_pool(path: Path | None) -> list[tuple[str, float]]:
    """(SMILES, gap in eV) rows of a CSV with 'smiles' and 'gap_ev' columns (default: the shipped QM9 subset)."""
    from arl_flows.suites.molecules.datasets import QM9_GAP_CSV

    path = Path(path or QM9_GAP_CSV)
    if not path.is_file():
        raise PoolError(f"pool file {path} does not exist; pass a CSV with 'smiles' and 'gap_ev' columns")
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        missing = {"smiles", "gap_ev"} - set(reader.fieldnames or [])
        if missing:
            raise PoolError(f"pool file {path} lacks column(s) {', '.join(sorted(missing))}; it needs 'smiles' and 'gap_ev'")
        rows = []
        for n, row in enumerate(reader, start=2):
            try:
                rows.append((row["smiles"], float(row["gap_ev"])))
            except ValueError:
                raise PoolError(f"{path}:{n}: gap_ev {row['gap_ev']!r} is not a number") from None
    return rows


def tier_tables(
    candidates: list[Candidate],
    ladder: list[Verifier],
    ledger: Ledger,
    chunk: int = 250,
    progress: Callable[[str], None] = lambda _: None,
) -> list[dict[str, Verdict]]:
    """Each tier's verdict on every candidate: from the ledger, else computed live now (and stored there)."""
    tables = []
    keys = [c.key for c in candidates]
    for v in ladder:
        table = ledger.lookup_verdicts(keys, v.name, v.version, v.params_hash)
        todo = [c for c in candidates if c.key not in table]
        if todo:
            progress(f"computing {v.name} on {len(todo)} molecules (kept in the ledger afterwards)")
            t0 = time.perf_counter()
            for start in range(0, len(todo), chunk):
                batch = todo[start : start + chunk]
                out = v.verify_batch(batch)
                ledger.put_verdicts(out, return_stored=False)
                table.update({o.candidate_key: o for o in out})
                progress(f"  {v.name}: {start + len(batch)}/{len(todo)} in {time.perf_counter() - t0:.0f}s")
        tables.append(table)
    return tables


@dataclass
class MoleculePool:
    """A pool split into the evaluated molecules and a disjoint held-out split with every tier known."""

    ladder: list[ReplayVerifier]  # replay stand-ins of ``live``, charged as the live tiers would be
    pool: list[Candidate]
    truth: dict[str, float]  # candidate key -> the pool file's top-tier value
    held_out: list[Observation]
    held_out_candidates: list[Candidate]
    pool_observations: list[Observation]
    live: list[Verifier]
    tables: list[dict[str, Verdict]]
    space: str = "qm9"  # the molecules suite's chemistry space (its tiers' rules and shipped surrogate)


def molecule_pool(
    pool: Path | None,
    limit: int,
    held_out: int,
    seed: int,
    top_cost: float,
    ledger: Ledger,
    low: float,
    high: float,
    progress: Callable[[str], None] = lambda _: None,
    space: str | None = None,
) -> MoleculePool:
    """Pool split, live ladder (verdicts from ``ledger`` or computed once), replay ladder, truth, held-out split.

    ``space`` is the molecules suite's chemistry space (default: QM9's): the pool keeps the molecules it accepts
    and every live tier checks it, as a run's do.
    """
    from arl_flows.suites.molecules import (
        EHTGapVerifier,
        InvalidMolecule,
        MoleculeConstraints,
        ReferenceTableVerifier,
        XTBGapVerifier,
        check_molecule,
        make_candidate,
    )
    from arl_flows.suites.molecules.features import molecule_features

    rows = load_pool(pool)
    if limit < 10:
        raise PoolError(f"--limit {limit} is too small; use at least 10 molecules")
    rng = random.Random(seed)
    rng.shuffle(rows)
    space = space or "qm9"
    constraints = MoleculeConstraints(space=space)
    by_key: dict[str, tuple[Any, float]] = {}
    for smiles, gap in rows:
        c = make_candidate(smiles, {"property": "gap_ev", "low": low, "high": high})
        if not c.valid or c.key in by_key:
            continue
        try:  # the pool holds what the suite accepts (QM9 has ions, which the suite's constraints reject)
            check_molecule(smiles, constraints)
        except InvalidMolecule:
            continue
        by_key[c.key] = (c, gap)
        if len(by_key) >= limit + held_out:
            break
    items = list(by_key.values())
    if len(items) < limit + held_out:
        # A small pool: the held-out split asked for (a --history) if it leaves at least 10 to evaluate, else a fifth.
        if held_out > len(items) - 10:
            held_out = len(items) // 5
        limit = len(items) - held_out
    eval_items, held_items = items[:limit], items[limit : limit + held_out]
    # The space's rules on every tier (the default space is not written: a QM9 pool's cached verdicts keep their key).
    rules = {"constraints": {"space": space}} if space != "qm9" else {}
    live = [
        EHTGapVerifier(rules), XTBGapVerifier(rules),
        ReferenceTableVerifier({"cost_per_call": top_cost, **rules, **({"path": str(pool)} if pool else {})}),
    ]
    candidates = [c for c, _ in items]
    tables = tier_tables(candidates, live, ledger, progress=progress)
    ladder = replay_ladder(live, tables, candidates, top_cost=top_cost)

    def observe(c: Candidate) -> Observation:
        values = {
            v.name: float(t[c.key].value)
            for v, t in zip(live, tables)
            if c.key in t and t[c.key].status == Status.ok and t[c.key].value is not None
        }
        return Observation(c.key, molecule_features(c), values, c.payload)

    return MoleculePool(
        ladder=ladder,
        pool=[c for c, _ in eval_items],
        truth={c.key: gap for c, gap in eval_items},
        held_out=[observe(c) for c, _ in held_items],
        held_out_candidates=[c for c, _ in held_items],
        pool_observations=[observe(c) for c, _ in eval_items],
        live=live,
        tables=tables,
        space=space,
    )



def is_novel_key(key: str, space: str = "qm9") -> bool:
    """Whether the molecule ``key`` (a candidate key, ``molecules:<canonical SMILES>``) is novel in ``space``.

    Novel as the fast tier's exact ``novel`` property says: in neither the space's training set nor QM9.
    """
    from arl_flows.suites.molecules.novelty import is_novel
    from arl_flows.suites.molecules.spaces import get_space

    return is_novel(key.split(":", 1)[-1], get_space(space).training_index)


def novel_hits(keys: Iterable[str], space: str = "qm9") -> int:
    """How many of the molecules ``keys`` are novel in ``space`` (:func:`is_novel_key`)."""
    return sum(1 for key in keys if is_novel_key(key, space))


def space_of(run_overrides: dict[str, Any]) -> str:
    """The chemistry space a benchmark's run overrides name (``[options] space``; the default: qm9)."""
    from arl_flows.suites.molecules.spaces import DEFAULT_SPACE

    options = run_overrides.get("options") or {}
    return str(options.get("space", DEFAULT_SPACE)) if isinstance(options, dict) else DEFAULT_SPACE


def molecules_window() -> dict[str, float]:
    """The molecules suite's default target window (``[scheduler]`` target_low and target_high, eV): the core's
    scheduler has none of its own."""
    from arl_flows.suites.molecules.suite import MoleculeSuite

    return {key: MoleculeSuite.defaults["scheduler"][key] for key in ("target_low", "target_high")}

def calibration(
    data: MoleculePool, seed: int, learned: bool | LearnedSurrogateConfig, model: str = "qm9"
) -> tuple[dict[str, dict[str, float]], int]:
    """Coverage of voi's surrogate's intervals on the pool, trained on the held-out split only.

    ``model``: the shipped surrogate to start from (``[options] surrogate``: ``qm9``, the default, or ``multifidelity``).
    """
    from arl_flows.suites.molecules.features import molecule_features
    from arl_flows.suites.molecules.learner import learner_for

    names = [v.name for v in data.ladder]
    if isinstance(learned, bool):
        learned = LearnedSurrogateConfig(enabled=learned, shipped=learned)
    # The same scheduler settings as voi's, so the network (if any) is the one voi used (trained once per process).
    config = SchedulerConfig(seed=seed, learned=learned, **molecules_window())
    scheduler = Scheduler(data.ladder, config, featurize=molecule_features, learner=learner_for(model))
    scheduler.add_history(data.held_out)
    surrogate = scheduler.surrogate
    coverage = {
        "+".join(names[: k + 1]): surrogate.calibration(data.pool_observations, pattern=names[: k + 1])
        for k in range(len(names) - 1)
    }
    return coverage, surrogate.learned_pairs
