"""Code suite: sandboxed Python tasks with tiered verification that resists reward hacking.

Tiers: ``code-format`` (fast: format, syntax, static policy, length),
``code-exec`` (simulation: run in the sandbox, compare stdout) and
``code-tests`` (high fidelity: hidden tests in a fresh sandbox, judged
outside it). ``reward`` composes their verdicts into a training reward.
Importing this package registers the three verifiers.
"""

from arl_flows.suites.code.execution import CodeExecution, CodeExecutionParams
from arl_flows.suites.code.fast import CodeFormat, CodeFormatParams, check_code, check_trajectory
from arl_flows.suites.code.format import FormatError, ParsedTrajectory, ParsedTurn, make_candidate, parse_answer
from arl_flows.suites.code.reward import CodeReward, RewardWeights, code_reward, cosine_length_penalty, repeat_penalty
from verifiers.sandbox import SandboxError, SandboxLimits, SandboxResult, isolation_support, run_python
from arl_flows.suites.code.sources import CodeTaskChoice, TaskSource, load_source
from arl_flows.suites.code.tasks import CodeTask, UnknownTask, get_task, load_tasks
from arl_flows.suites.code.tests_tier import CodeTests, CodeTestsParams

__all__ = [
    "CodeExecution",
    "CodeExecutionParams",
    "CodeFormat",
    "CodeFormatParams",
    "CodeReward",
    "CodeTask",
    "CodeTaskChoice",
    "CodeTests",
    "CodeTestsParams",
    "FormatError",
    "ParsedTrajectory",
    "ParsedTurn",
    "RewardWeights",
    "SandboxError",
    "SandboxLimits",
    "SandboxResult",
    "TaskSource",
    "UnknownTask",
    "check_code",
    "check_trajectory",
    "code_reward",
    "cosine_length_penalty",
    "get_task",
    "isolation_support",
    "load_source",
    "load_tasks",
    "make_candidate",
    "parse_answer",
    "repeat_penalty",
    "run_python",
]
