"""The scheduler: which candidate gets which verifier, under a CPU-second budget.

A round-based planner (:class:`Scheduler`, :class:`StepPlan`) that the caller
drives: it asks for batches per verifier, the caller runs them wherever it
likes and hands back the verdicts, and the step ends with reward estimates
(mean, std, fidelity) per trajectory, spend per tier, queued lab requests and
a decision log. The routing policy is ``voi`` (value of information per
cost) or a baseline, one file each in :mod:`.policies`; the posterior
over the top-tier value comes from a calibrated multi-fidelity surrogate
(:mod:`.surrogate`). Nothing here imports Prefect, the policies package or
the ledger: the flow reads and writes the ledger around a step.
The benchmarks behind ``arl bench`` replay verdicts through this planner
from outside the product packages (``benchmarks/replay.py``).
"""

from verifiers.scheduler.policies import make_policy, policy_names, register_policy, register_settings
from verifiers.scheduler.policies.all import AllPolicy
from verifiers.scheduler.policies.fast_only import FastOnlyPolicy
from verifiers.scheduler.policies.random import RandomPolicy
from verifiers.scheduler.policies.voi import VoiPolicy
from verifiers.scheduler.config import SchedulerConfig, TierCaps, VoiTarget
from verifiers.scheduler.escalation import Action, EscalationPolicy, PlanView
from verifiers.scheduler.features import size_features
from verifiers.scheduler.learned import LearnedModel, PretrainedLearner, SurrogateLearner, SurrogateLearnerFactory
from verifiers.scheduler.planner import Decision, Scheduler, StepPlan, StepResult
from verifiers.scheduler.reward import discovery_value, objective_moments
from verifiers.scheduler.spend import charge, charge_one, spend_records
from verifiers.scheduler.surrogate import Observation, Surrogate, SurrogatePrior
from verifiers.scheduler.window import hit_probability, reward_moments, window_score

__all__ = [
    "Action",
    "AllPolicy",
    "Decision",
    "EscalationPolicy",
    "FastOnlyPolicy",
    "LearnedModel",
    "Observation",
    "PlanView",
    "PretrainedLearner",
    "RandomPolicy",
    "Scheduler",
    "SchedulerConfig",
    "StepPlan",
    "StepResult",
    "Surrogate",
    "SurrogateLearner",
    "SurrogateLearnerFactory",
    "SurrogatePrior",
    "TierCaps",
    "VoiPolicy",
    "VoiTarget",
    "charge",
    "charge_one",
    "discovery_value",
    "hit_probability",
    "make_policy",
    "policy_names",
    "register_policy",
    "register_settings",
    "objective_moments",
    "reward_moments",
    "size_features",
    "spend_records",
    "window_score",
]
