"""The ``molecules`` suite: design small molecules (QM9 chemistry) whose HOMO-LUMO gap lies in a goal window.

- Prompts: goal windows of the gap (eV), cycled; the policy is the shipped
  SMILES prior (``prior.py``, ``data/smiles_prior``), goal-conditioned by
  gap-bin tokens (``smiles.py``).
- Ladder: extended Hückel (``fast.py``, RDKit) -> GFN2-xTB (``xtb.py``,
  tblite) -> B3LYP (``dft.py``, PySCF); ``lab.py`` and ``reference_or_dft.py``
  for a lab or a reference table at the top.
- Reward: the scheduler's estimate of the window score of the top-tier gap.
- Scheduler features: a folded Morgan fingerprint (``features.py``); a graph
  network (``graph.py``) stacked under the surrogate once the history is large.
- Hindsight: a failed molecule is relabelled with the gap bin it achieved.
"""

from __future__ import annotations

import hashlib
import io
import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from pydantic import BaseModel

from arl_flows.suites import Failure, Suite
from arl_flows.suites.molecules.options import MoleculeOptions
from storage.records import Prompt, Status, Turn, tier_rank
from verifiers import Candidate

if TYPE_CHECKING:
    import typer

    from policies import Policy, PolicyConfig
    from verifiers.scheduler import SurrogateLearner
    from verifiers.scheduler.config import LearnedSurrogateConfig

    from arl_flows.config import RunConfig

# The suite class is loaded to list suites and to build `arl --help`; its methods import rdkit,
# torch (the prior, the graph network), the shipped data and its commands when they are first called.
__all__ = ["MoleculeSuite"]


def _cheap_tiers(tiers: list) -> list:
    """The config's tiers below high fidelity, in its order (a tier the registry cannot name is kept: the ladder's
    build reports it); the quick profile keeps them, so a user's own cheap tier (a property the objective reads)
    is not dropped with DFT."""
    from storage.records import Tier
    from verifiers.registry import registry

    def level(tier: Any) -> Tier | None:
        try:
            return registry.get(tier.verifier).tier
        except Exception:  # noqa: BLE001 - reported where the ladder is built, in one line
            return None

    return [t for t in tiers if level(t) not in (Tier.high_fidelity, Tier.lab)]


def _quick(config: RunConfig) -> RunConfig:
    """About two minutes on 2 cores: 3 small steps, the reference table instead of DFT (same prior as the default).

    The config's own tiers below high fidelity stay as they are (the default's EHT and xTB, a user's cheap tier);
    those of high fidelity and the lab's go (EHT and xTB alone when nothing is left).

    In the druglike space the QM9 reference table knows none of the molecules, so the quick ladder stops at
    GFN2-xTB (its top tier): a DFT call there costs minutes (docs/tiers.md).
    """
    from arl_flows.config import TierConfig  # loads the scheduler (scipy): when the profile is used, not to list suites

    top = [TierConfig(verifier="reference-table", params={"cost_per_call": 12.0})]
    if getattr(config.suite_options, "space", "qm9") == "druglike":
        top = []
    cheap = _cheap_tiers(config.tiers) or [TierConfig(verifier="rdkit-eht"), TierConfig(verifier="gfn2-xtb", params={"threads": 1})]
    return config.model_copy(
        update={
            "name": config.name if config.name != "gap-window" else "gap-window-quick",
            "steps": 3,
            "rollout": config.rollout.model_copy(update={"prompts_per_step": 2}),
            "trainer": config.trainer.model_copy(update={"group_size": 6}),
            "tiers": [*cheap, *top],
            "scheduler": config.scheduler.model_copy(update={"budget_per_step": 40.0, "budget_per_run": 120.0}),
        }
    )


class MoleculeSuite(Suite):
    name = "molecules"
    description = (
        "Design molecules (QM9 chemistry, or drug-like with [options] space) whose HOMO-LUMO gap lies in a goal window."
    )
    Options = MoleculeOptions
    defaults: ClassVar[dict[str, Any]] = {
        "name": "gap-window",
        "tiers": [
            {"verifier": "rdkit-eht"},
            {"verifier": "gfn2-xtb", "params": {"threads": 1}},
            {"verifier": "pyscf-b3lyp", "params": {"threads": 1, "workers": 2}},  # basis: the space's dft_basis
        ],
        "scheduler": {
            "policy": "voi", "voi_target": "advantage", "target_low": 3.0, "target_high": 4.0, "window_softness": 0.5,
            "budget_per_step": 30.0, "budget_per_run": 160.0,
        },
        "tier_concurrency": {"pyscf-b3lyp": 1, "gfn2-xtb": 2},
    }
    legacy_fields: ClassVar[dict[str, str]] = {"prior": "prior", "rollout.goal_windows": "goal_windows"}
    profiles: ClassVar[dict[str, Callable[[RunConfig], RunConfig]]] = {"quick": _quick}

    @classmethod
    def prompts_source(cls, options: BaseModel) -> str:
        windows = getattr(options, "goal_windows", None)
        shown = ", ".join(f"{lo:g}-{hi:g}" for lo, hi in windows) if windows else "the scheduler's target window"
        return f"goal windows of the HOMO-LUMO gap (eV): {shown}"

    @classmethod
    def commands(cls) -> list[tuple[str, typer.Typer]]:
        # Imported when called: the command modules load typer and rich, which a worker importing the suite never needs.
        from arl_flows.suites.molecules.bench import bench_app
        from arl_flows.suites.molecules.cli import prior_app

        return [("prior", prior_app), ("bench", bench_app)]

    def check(self) -> str | None:
        """Whether the shipped surrogate network can start this ladder's surrogate: it reads the values of the lower
        tiers it was trained with, so a ladder with other lower tiers (a tier of one's own added) starts cold."""
        from arl_flows.ladder import build_ladder
        from arl_flows.suites.molecules.pretrained import LOWER_TIERS

        learned = self.config.scheduler.learned
        if not (learned.enabled and learned.shipped):
            return None
        lower = tuple(v.name for v in build_ladder(self.config)[:-1])
        if lower == LOWER_TIERS:
            return None
        return (f"surrogate: the shipped network reads the lower tiers {', '.join(LOWER_TIERS)} and this ladder's are "
                f"{', '.join(lower)}, so the run's surrogate starts cold and learns from the run's own answers")

    def surrogate_learner(self, tiers: Sequence[str], learned: LearnedSurrogateConfig, seed: int) -> SurrogateLearner:
        """A graph network on the molecule and the lower tiers' values (``graph.py``), from the shipped one that
        ``[options] surrogate`` names."""
        from arl_flows.suites.molecules.learner import GraphLearner

        return GraphLearner.from_settings(tiers, learned, seed, model=self.options.surrogate)

    def verifier_params(self, verifier: type, params: dict[str, Any]) -> dict[str, Any]:
        """A tier with validity rules checks the run's chemistry space, unless its own params name one."""
        params_model = getattr(verifier, "Params", None)
        fields = getattr(params_model, "model_fields", {})
        if "constraints" not in fields:
            return params
        options = self.options
        if getattr(verifier, "name", None) == "reference-table" and options.space != "qm9" and "path" not in params:
            # Every molecule above QM9's 9 heavy atoms misses the shipped table, and each miss is charged a call.
            raise ValueError(
                f"the shipped reference table holds QM9's molecules (at most 9 heavy atoms), not the {options.space} "
                "space's: end the ladder with pyscf-b3lyp, or give the table a CSV of the space's molecules (path = ...)")
        if getattr(verifier, "name", None) == "pyscf-b3lyp" and "basis" not in params:  # the space's DFT basis
            from arl_flows.suites.molecules.spaces import get_space

            params = {"basis": get_space(options.space).dft_basis} | params
        given = dict(params.get("constraints") or {})
        if given.get("space", options.space) != options.space:
            # A ladder of two spaces judges a molecule by one space's rules and scores it by the other's: refused.
            raise ValueError(
                f"its constraints name the space {str(given['space'])[:40]!r} but the run's space is {options.space!r} "
                f"([options] space, qm9 by default): set [options] space = {str(given['space'])[:40]!r} (the prior, goal "
                "bins and novelty follow it) or leave the space out of the tier's constraints")
        constraints = {"space": options.space} | given
        if options.max_heavy_atoms is not None:
            constraints.setdefault("max_heavy_atoms", options.max_heavy_atoms)
        return params | {"constraints": constraints}

    def goal_windows(self) -> list[tuple[float, float]]:
        sched = self.config.scheduler
        return self.options.goal_windows or [(sched.target_low, sched.target_high)]

    def load_policy(self, policy_config: PolicyConfig, on_pretrain: Callable[[str], None] | None = None) -> Policy:
        from arl_flows.suites.molecules.prior import load_or_pretrain, prior_dir, shipped_prior
        from policies import Policy

        if self.config.policy_path:
            return Policy.load(self.config.policy_path, policy_config)
        prior = self.options.prior
        if on_pretrain is not None and shipped_prior(prior) is None and not (prior_dir(prior) / "pretrain_report.json").is_file():
            on_pretrain(str(prior_dir(prior)))
        policy, _report = load_or_pretrain(prior, policy_config=policy_config)
        return policy

    def prepare_policy(self) -> dict[str, Any]:
        """The SMILES prior of the config, pretrained if neither shipped nor cached; its pretraining report."""
        from arl_flows.suites.molecules.prior import load_or_pretrain

        _policy, report = load_or_pretrain(self.options.prior)
        return report.model_dump(mode="json")

    def prompts(self, step: int) -> list[Prompt]:
        windows = self.goal_windows()
        n = self.config.rollout.prompts_per_step
        out = []
        for i in range(n):
            low, high = windows[(step * n + i) % len(windows)]
            out.append(self._goal_prompt(low, high, f"{self._prompt_prefix()}gap:{low:.2f}-{high:.2f}"))
        return out

    def _goal_prompt(self, low: float, high: float, prompt_id: str, text: str | None = None) -> Prompt:
        return Prompt(
            id=prompt_id,
            suite=self.name,
            text=text or f"Propose a molecule ({self._space_rules()}) with a HOMO-LUMO gap between {low:g} and {high:g} eV.",
            goal={"property": "gap_ev", "low": low, "high": high, "softness": self.config.scheduler.window_softness},
        )

    def _space_rules(self) -> str:
        """The run's space in a prompt: its heavy elements and size ("C, N, O, F; at most 9 heavy atoms" for QM9)."""
        from arl_flows.suites.molecules.spaces import get_space

        space = get_space(self.options.space)
        heavy = ", ".join(e for e in space.elements if e != "H")
        return f"{heavy}; at most {self.options.max_heavy_atoms or space.max_heavy_atoms} heavy atoms"

    def _prompt_prefix(self) -> str:
        """Prompt ids of the default space are as they always were; another space's carry its name."""
        from arl_flows.suites.molecules.spaces import DEFAULT_SPACE

        return f"{self.name}:" if self.options.space == DEFAULT_SPACE else f"{self.name}:{self.options.space}:"

    def decoding_constraint(self, tokenizer):  # noqa: ANN001, ANN201 - see capabilities.ConstrainedDecoding
        """The space's SMILES grammar (``grammar.py``), unless ``[options] grammar = false``."""
        from arl_flows.suites.molecules.grammar import space_grammar

        kekule = self.options.prior.smiles_form == "kekule"
        return space_grammar(tokenizer, self.options.space, kekule=kekule) if self.options.grammar else None

    def prompt_ids(self, policy: Policy, prompt: Prompt) -> list[int]:
        from arl_flows.suites.molecules.smiles import goal_prompt_ids

        return goal_prompt_ids(policy.tokenizer, prompt.goal["low"], prompt.goal["high"])

    def completion(self, prompt: Prompt, text: str) -> tuple[Candidate, str, list[Turn]]:
        from arl_flows.suites.molecules.chemistry import make_candidate

        smiles = "".join(text.split())  # the SMILES tokenizer decodes with spaces between tokens
        return make_candidate(smiles, prompt.goal), smiles, [Turn(role="user", content=prompt.text), Turn(role="assistant", content=smiles)]

    def candidate(self, text: str, goal: dict[str, Any] | None = None) -> Candidate:
        from arl_flows.suites.molecules.chemistry import make_candidate

        return make_candidate(text, goal)

    # -- goals from outside a run: a gap window ------------------------------------------
    _GOAL_KEYS: ClassVar[frozenset[str]] = frozenset({"low", "high", "window", "softness", "property"})

    @classmethod
    def goal(cls, given: Mapping[str, Any]) -> dict[str, Any]:
        """A gap window, as ``{"window": [low, high]}`` or ``{"low": .., "high": ..}`` in eV (``softness`` optional); {} for none."""
        unknown = sorted(set(given) - cls._GOAL_KEYS)
        if unknown:
            raise ValueError(f"{unknown[0][:40]}: not a molecules goal; give window [low, high] in eV, or low and high")
        low, high = given.get("low"), given.get("high")
        if given.get("window") is not None:
            window = given["window"]
            if isinstance(window, str) or not isinstance(window, Sequence) or len(window) != 2:
                raise ValueError("window: give two numbers [low, high] in eV, e.g. [3.0, 4.0]")
            low, high = window
        if low is None and high is None:
            return {}
        if low is None or high is None:
            raise ValueError("give both the low and the high end of the gap window, or neither")
        try:
            low, high = float(low), float(high)
        except (TypeError, ValueError):
            raise ValueError(f"window ({str(low)[:20]}, {str(high)[:20]}): give two numbers in eV, e.g. [3.0, 4.0]") from None
        if not (math.isfinite(low) and math.isfinite(high)):
            raise ValueError(f"gap window low {low} and high {high} must be finite numbers (eV)")
        if low > high:
            raise ValueError(f"gap window low {low} is above high {high}; swap them")
        goal: dict[str, Any] = {"property": "gap_ev", "low": low, "high": high}
        if given.get("softness") is not None:
            try:
                softness = float(given["softness"])
            except (TypeError, ValueError):
                softness = math.nan
            if not (math.isfinite(softness) and softness >= 0):
                raise ValueError(f"softness {str(given['softness'])[:20]}: give a finite number of eV >= 0 (0: a hard window), e.g. 0.5")
            goal["softness"] = softness
        return goal

    @classmethod
    def goal_from_ground_truth(cls, ground_truth: Any) -> dict[str, Any]:
        """verl's ground truth: the window as ``[low, high]``, ``{"low": .., "high": ..}`` or ``"low,high"``."""
        if isinstance(ground_truth, Mapping):
            return cls.goal(ground_truth)
        if isinstance(ground_truth, str):
            parts = ground_truth.replace(";", ",").split(",")
            if len(parts) != 2:
                raise ValueError(f"ground_truth {ground_truth[:40]!r}: give the gap window as 'low,high', e.g. '3.0,4.0'")
            return cls.goal({"window": parts})
        if isinstance(ground_truth, Sequence) and not isinstance(ground_truth, (bytes, bytearray)) or hasattr(ground_truth, "tolist"):
            return cls.goal({"window": list(ground_truth)})
        raise ValueError(f"ground_truth {ground_truth!r:.40}: give the gap window as [low, high], 'low,high' or "
                         "{'low': .., 'high': ..}")

    @classmethod
    def objective_window(cls, goal: Mapping[str, Any]) -> tuple[float, float] | None:
        """A molecules goal is the objective: the gap window itself."""
        return (float(goal["low"]), float(goal["high"])) if "low" in goal and "high" in goal else None

    def external_prompt(self, text: str, goal: dict[str, Any]) -> Prompt:
        """A trainer's prompt aims at the goal's window, or the run's target window when it gives none."""
        sched = self.config.scheduler
        chosen = self.goal(goal) or {"property": "gap_ev", "low": sched.target_low, "high": sched.target_high}
        chosen.setdefault("softness", sched.window_softness)
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        return Prompt(id=f"{self.name}:ext:{digest}:{chosen['low']:g}-{chosen['high']:g}", suite=self.name, text=text, goal=chosen)

    def sampler(self, policy_path: str | None = None, max_new_tokens: int = 48, temperature: float = 1.0):  # noqa: ANN201
        """The shipped SMILES prior (or a local model), goal-prompted by the goal's window (default: the run's), under the
        space's grammar unless ``[options] grammar = false``."""
        from arl_flows.suites.molecules.prior import load_or_pretrain
        from arl_flows.suites.molecules.smiles import goal_prompt_ids
        from policies import Policy

        policy = Policy.load(policy_path) if policy_path else load_or_pretrain(self.options.prior)[0]
        sched = self.config.scheduler
        constraint = self.decoding_constraint(policy.tokenizer)

        def sample(goal: dict[str, Any], n: int, seed: int) -> list[str]:
            low, high = self.objective_window(goal) or (sched.target_low, sched.target_high)
            rollout = policy.sample([goal_prompt_ids(policy.tokenizer, low, high)], group_size=n, temperature=temperature,
                                    max_new_tokens=max_new_tokens, seed=seed, constraint=constraint)
            return ["".join(t.split()) for t in rollout.texts]

        return sample

    def calibration_candidates(self) -> list[Candidate]:
        """The shipped QM9 subset's molecules, aimed at the run's target window."""
        from arl_flows.suites.molecules.datasets import load_qm9_gaps

        prompt = self.external_prompt("warm start", {})
        pool = [self.completion(prompt, smiles)[0] for smiles, _ in load_qm9_gaps()]
        return [c for c in pool if c.valid]

    def featurize(self, candidate: Candidate) -> np.ndarray:
        from arl_flows.suites.molecules.features import molecule_features

        return molecule_features(candidate)

    def history_candidate(self, key: str) -> Candidate | None:
        from arl_flows.suites.molecules.chemistry import make_candidate

        if not key.startswith(f"{self.name}:") or key.startswith(f"{self.name}:invalid:"):
            return None
        return make_candidate(key.split(":", 1)[1])

    def disagreements(self, scheduler, candidates, verdicts, estimates):  # noqa: ANN001, ANN201 - see Suite.disagreements
        """A top-tier value far outside the surrogate's interval predicted from the lower tiers alone.

        The lower tiers are every ``ok`` value below the top tier; the flag names the highest of them
        (xTB in the default ladder). Candidates without an ``ok`` top-tier value are not judged.
        """
        from verifiers.disagreement import interval_disagreement
        from verifiers.scheduler.surrogate import Observation

        names = [v.name for v in scheduler.ladder]
        top, lower_names = names[-1], names[:-1]
        queries, index = [], []
        for i, cand in enumerate(candidates):
            mine = {v.verifier: v for v in verdicts.get(cand.key, []) if v.status == Status.ok and v.value is not None}
            lowers = [mine[n] for n in lower_names if n in mine]
            if top not in mine or not lowers:
                continue
            values = {v.verifier: float(v.value) for v in lowers}
            queries.append(Observation(cand.key, self.featurize(cand), values, payload=cand.payload))
            index.append((i, lowers[-1], mine[top]))
        if not queries:
            return estimates
        mean, std = scheduler.surrogate.predict(queries)
        out = list(estimates)
        for (i, lower, upper), m, s in zip(index, mean, std, strict=True):
            flag = interval_disagreement(lower, upper, float(m), float(s))
            if flag:
                out[i] = out[i].model_copy(update={"disagreement": flag})
        return out

    def hindsight(self, policy: Policy, failures: list[Failure]):  # noqa: ANN201 - see capabilities.Hindsight
        """Relabel each failed molecule with the bin of the gap it achieved (hindsight experience replay).

        The achieved gap is on the top tier's scale, where the goals are: the
        top tier's own value, or the scheduler's calibrated posterior mean when
        a tier at least ``min_fidelity`` answered and the posterior std is at
        most ``max_value_std`` (a raw xTB gap is about 2 eV off the DFT scale).
        """
        from arl_flows.suites.molecules.hindsight import relabel
        from policies.hindsight import achieved_value, top_scale_value

        hcfg = self.config.hindsight
        if not hcfg.relabel:
            return [], []
        min_rank = tier_rank(hcfg.min_fidelity)
        relabeled = []
        for failure in failures:
            if achieved_value([v for v in failure.verdicts if tier_rank(v.tier) >= min_rank]) is None:
                continue
            achieved = top_scale_value(failure.estimate, hcfg.max_value_std)
            if achieved is not None:
                relabeled.append(relabel(failure.completion_ids, achieved, policy.tokenizer))
        return relabeled, []

    def show_candidate(self, key: str, answer: str) -> str:
        """A molecule by its canonical SMILES (the cache key's body), else the text the policy wrote."""
        if key.startswith(f"{self.name}:") and not key.startswith(f"{self.name}:invalid:"):
            return key.split(":", 1)[1]
        return answer

    value_unit: ClassVar[str] = "eV"  # every tier answers a HOMO-LUMO gap

    def draw_candidates(self, shown: Sequence[str], legends: Sequence[str]) -> bytes | None:
        """2-D structures of the molecules (SMILES) on a grid, each with its legend; None when none parses."""
        from rdkit import Chem, rdBase
        from rdkit.Chem import Draw

        with rdBase.BlockLogs():  # an invalid candidate is left out of the picture, not reported on the terminal
            parsed = [(Chem.MolFromSmiles(smi), legend) for smi, legend in zip(shown, legends)]
        pairs = [(m, legend) for m, legend in parsed if m is not None]
        if not pairs:
            return None
        image = Draw.MolsToGridImage([m for m, _ in pairs], molsPerRow=4, subImgSize=(240, 200), legends=[lg for _, lg in pairs])
        data = getattr(image, "data", None)  # an IPython Image in notebooks, a PIL image otherwise
        if isinstance(data, bytes):
            return data
        buf = io.BytesIO()
        image.save(buf, format="PNG")
        return buf.getvalue()
