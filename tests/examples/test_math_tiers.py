"""The math suite's three tiers, by table: right, wrong, rewritten, unparsable, and where the tiers disagree."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.usefixtures("math_suite_on_path")

D, I = "derivative", "antiderivative"

# (kind, expr, answer) -> (format, symbolic, numeric): a status, or the value of an ok verdict.
TABLE: list[tuple[str, str, str, Any, Any, Any]] = [
    (D, "x**2*sin(x)", "2*x*sin(x)+x**2*cos(x)", 1.0, 1.0, 1.0),          # the reference
    (D, "x**2*sin(x)", "x*(2*sin(x)+x*cos(x))", 1.0, 1.0, 1.0),           # equivalent, written differently
    (D, "x**2*sin(x)", "2*x*sin(x) + x^2*cos(x)", 1.0, 1.0, 1.0),         # spaces and ^ are normalized
    (D, "x**2*sin(x)", "2*x*sin(x)", 1.0, 0.0, 0.0),                      # wrong
    (I, "cos(x)", "sin(x)+7", 1.0, 1.0, 1.0),                             # any constant of integration
    (I, "cos(x)", "-sin(x)", 1.0, 0.0, 0.0),                              # wrong sign: off everywhere
    (D, "x**2*sin(x)", "2*x*sin(x", "invalid", "invalid", "invalid"),    # unparsable
    (D, "x", "__import__('os').system('true')", "invalid", "invalid", "invalid"),  # never evaluated
    (D, "x", "9**9**9", "invalid", "invalid", "invalid"),                 # never computed
    (D, "x", "y+1", "invalid", "invalid", "invalid"),                     # unknown name
    # simplify cannot prove these; they hold for the tasks' x > 0, where the numeric tier samples
    (D, "x*log(x**2)", "2*log(x)+2", 1.0, 0.0, 1.0),
    (D, "sqrt(x**2)", "1", 1.0, 0.0, 1.0),
    (D, "x*asin(x)+x*acos(x)", "pi/2", 1.0, 0.0, 1.0),
    (D, "sin(5*x)", "5*cos(x)*(16*cos(x)**4-20*cos(x)**2+5)", 1.0, 0.0, 1.0),
    # cancellation past 4x the working precision leaves a point open (not used), never a difference
    (D, "x", "(exp(200*x)+1)**2-exp(400*x)-2*exp(200*x)", 1.0, 1.0, 1.0),
    # within 4x the digits the retry at higher precision settles it
    (D, "x", "(exp(60*x)+1)**2-exp(120*x)-2*exp(60*x)", 1.0, 1.0, 1.0),
    # Python's lexer would read these differently (hex, float, huge float); the grammar refuses them
    (D, "x", "0x10", "invalid", "invalid", "invalid"),
    (D, "x", "9E99999999", "invalid", "invalid", "invalid"),
    (D, "x**2", "2x", "invalid", "invalid", "invalid"),
    # off by constants far below any fixed tolerance: wrong at every point
    (D, "x**2", "2*x+10**-45", 1.0, 0.0, 0.0),
    (D, "x**2", "2*x+1/10**45", 1.0, 0.0, 0.0),
    (D, "x**2*sin(x)", "x*(2*sin(x)+x*cos(x))+10**-64*10**-45", 1.0, 0.0, 0.0),
    (D, "x**2*sin(x)", "x*(2*sin(x)+x*cos(x))+exp(-200)*sin(x)", 1.0, 0.0, 0.0),
    (D, "x**2", "2*x+exp(-1000*x)", 1.0, 0.0, 0.0),
    # right on [0, 3], wrong beyond: the points cover the domain
    (D, "x**2", "2*x+sqrt((x-3)**2)+x-3", 1.0, 0.0, "below 1"),
    (D, "x**2", "2*x+sqrt((x-100)**2)+x-100", 1.0, 0.0, "below 1"),
    # what an answer causes is its verdict, never "failed" (which would earn the surrogate's guess instead of 0;
    # fifth attack pass): undefined as a whole (its derivative would hide it), not real for x > 0, constants past
    # max_digits
    (I, "2*x", "x**2+1/0", 1.0, "invalid", "invalid"),
    (I, "2*x", "x**2+log(0)", 1.0, "invalid", "invalid"),
    (D, "x**2", "x+1/(x-x)", 1.0, "invalid", "invalid"),
    (I, "2*x", "x**2+log(-1)", 1.0, 0.0, 0.0),
    (I, "1/x", "log(-x)", 1.0, 0.0, 0.0),
    (I, "cos(x)", "sin(x)+sqrt(-1)", 1.0, 0.0, 0.0),
    (I, "1/x", "log(2*x)", 1.0, 1.0, 1.0),
    (D, "x**2", "2*x+x*exp(-99999999)", 1.0, 0.0, "invalid"),
    # digits of other scripts are not the grammar's (one answer, several keys)
    (D, "x**2", "\u0662*x", "invalid", "invalid", "invalid"),
    (D, "x**2", "\uff12*x", "invalid", "invalid", "invalid"),
]


@pytest.fixture(scope="module")
def ladder() -> Any:
    """The three tiers with their default params; one worker pool per isolated tier for the whole module."""
    from arl_math.fast import MathFormat
    from arl_math.numeric import NumericAgreement
    from arl_math.symbolic import SymbolicEquivalence

    tiers = (MathFormat(), SymbolicEquivalence(), NumericAgreement())
    yield tiers
    for tier in tiers[1:]:
        tier.close()


def _expect(verdict: Any, expected: Any) -> None:
    if expected == "below 1":
        assert verdict.status.value == "ok" and verdict.value < 1.0, verdict
    elif isinstance(expected, str):
        assert verdict.status.value == expected, verdict
        assert verdict.feedback
    else:
        assert verdict.status.value == "ok" and verdict.value == expected, verdict
        assert verdict.cost_s > 0


@pytest.mark.slow  # 35 s on 2 loaded cores, about 17 s idle
def test_the_ladder_by_table(ladder: Any) -> None:
    from arl_math.candidates import make_candidate

    candidates = [make_candidate(answer, {"kind": kind, "expr": expr}) for kind, expr, answer, *_ in TABLE]
    columns = [tier.verify_batch(candidates) for tier in ladder]
    for row, *verdicts in zip(TABLE, *columns, strict=True):
        for verdict, expected in zip(verdicts, row[3:], strict=True):
            _expect(verdict, expected)
    # What the symbolic tier says when it does not prove: a residual, and whether it decided.
    sym = columns[1]
    assert sym[3].values["decided"] is False and "cos" in sym[3].values["residual"]
    assert sym[10].feedback.startswith("simplify(answer - reference) = ")
    # an answer off by a constant says so, exactly
    numeric = {row[2]: v for row, v in zip(TABLE, columns[2])}
    assert "off by the constant 1/1000000000000000000000000000000000000000000000" in numeric["2*x+10**-45"].feedback


def test_disagreements_are_flagged_and_cancellation_is_not_one(ladder: Any) -> None:
    from arl_math.candidates import make_candidate
    from verifiers.disagreement import pass_fail_disagreement

    rows = [(D, "x*log(x**2)", "2*log(x)+2"), (D, "x", "(exp(200*x)+1)**2-exp(400*x)-2*exp(200*x)"), (D, "x", "1")]
    candidates = [make_candidate(a, {"kind": k, "expr": e}) for k, e, a in rows]
    _, symbolic, numeric = ladder
    pairs = list(zip(symbolic.verify_batch(candidates), numeric.verify_batch(candidates)))
    kinds = [getattr(pass_fail_disagreement(s, n), "kind", None) for s, n in pairs]
    # cancellation past the precision is not a difference, so simplify's proof stands unopposed
    assert kinds == ["lower_fail_upper_pass", None, None]
    assert pairs[1][1].values["undecided"] > 0


def test_a_simplify_that_overruns_is_a_timeout_and_the_numeric_tier_still_decides(ladder: Any) -> None:
    from arl_math.candidates import make_candidate
    from arl_math.symbolic import SymbolicEquivalence

    slow = make_candidate("(sin(x)+cos(x)+tan(x))**12-(sin(x)+cos(x)+tan(x))**12+1", {"kind": D, "expr": "x"})
    with SymbolicEquivalence({"timeout_s": 0.001}) as symbolic:
        [s] = symbolic.verify_batch([slow])
    [n] = ladder[2].verify_batch([slow])
    assert s.status.value == "timeout" and s.value is None and s.cost_s > 0
    assert n.status.value == "ok" and n.value == 1.0


def test_a_task_undefined_everywhere_is_failed_and_such_an_answer_invalid(ladder: Any) -> None:
    """No usable point because of the task is "could not verify"; because of the answer, the answer is invalid."""
    from arl_math.candidates import make_candidate

    task = make_candidate("x", {"kind": I, "expr": "1/(x-x)"})  # the task's 1/0 everywhere: no usable point
    answer = make_candidate("1/(x-x)", {"kind": D, "expr": "x"})
    [v, w] = ladder[2].verify_batch([task, answer])
    assert v.status.value == "failed" and v.value is None and "could be evaluated" in v.feedback
    assert w.status.value == "invalid" and "undefined" in w.feedback
    [s] = ladder[1].verify_batch([answer])
    assert s.status.value == "invalid"
    [n] = ladder[2].verify_batch([make_candidate("log(-x)", {"kind": I, "expr": "1/x"})])
    assert n.value == 0.0 and "not a real function" in n.feedback


def test_the_parser_never_evaluates_and_bounds_what_it_builds() -> None:
    from arl_math.expressions import InvalidAnswer, parse_answer, tree_size

    assert tree_size(parse_answer("9**9")) == 3  # kept as a tree, not computed
    for text, says in [("x.args", "'.'"), ("x**100", "larger than 64"), ("(2**8)**8", "power of a power"),
                       ("sin", "not an expression"), ("log(x,2)", "','"), ("x" * 300, "characters")]:
        with pytest.raises(InvalidAnswer, match=says):
            parse_answer(text)


def test_the_grammar_is_what_is_evaluated() -> None:
    """Two operands side by side are an error, never a Python literal; numbers are exact; nesting is bounded."""
    from arl_math.expressions import X, AnswerLimits, InvalidAnswer, parse_answer

    for text in ["0x10", "2E5", "9E99999999", "1E-99999999*x", "2x", "x(x)", "2(x)", "sin(x)x", "0b1", "1j"]:
        with pytest.raises(InvalidAnswer):
            parse_answer(text)
    assert parse_answer("0.1*x", evaluate=True) == X / 10  # the decimal's exact value, not a float
    assert parse_answer("2**-x**2", evaluate=True) == 2 ** (-(X**2))  # ** binds as in Python
    assert parse_answer("-x**2", evaluate=True) == -(X**2)
    assert parse_answer("x/2/3", evaluate=True) == X / 6
    assert parse_answer("2^x", evaluate=True) == 2**X
    wide = AnswerLimits(max_chars=10_000)
    for text, says in [("(" * 4000 + "x" + ")" * 4000, "deeper than"), ("-" * 9000 + "x", "deeper than"),
                       ("x+" * 3000 + "x", "more than 200")]:
        with pytest.raises(InvalidAnswer, match=says):
            parse_answer(text, wide)


def test_the_parser_takes_any_text_and_answers_a_tree_or_a_reason() -> None:
    import random

    from arl_math.expressions import InvalidAnswer, parse_answer

    rng = random.Random(0)
    alphabet = "0123456789.x()+-*/^Esinpqrlogxe"
    accepted = 0
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 14)))
        try:
            parse_answer(text)
            accepted += 1
        except InvalidAnswer as exc:
            assert str(exc) and "\n" not in str(exc)
    assert accepted > 0


def test_arl_verify_says_in_one_line_which_goal_keys_the_suite_needs() -> None:
    from typer.testing import CliRunner

    from arl_flows.cli import UserError, app

    result = CliRunner().invoke(app, ["verify", "--suite", "arl_math.suite:MathSuite", "--answer", "2*x"])
    assert isinstance(result.exception, UserError) and "kind one of derivative, antiderivative" in str(result.exception)
    result = CliRunner().invoke(app, ["verify", "--suite", "arl_math.suite:MathSuite", "--answer", "2*x",
                                      "--goal", "kind=derivative", "--goal", "expr=x**"])
    assert isinstance(result.exception, UserError) and "is not an expression" in str(result.exception)


def test_hindsight_relabels_a_wrong_antiderivative_with_the_task_it_solves() -> None:
    from transformers import GPT2Config

    from arl_flows.config import standalone_suite
    from arl_flows.suites import Failure
    from arl_math.prior import build_tokenizer, prompt_ids
    from policies import Policy
    from storage.records import Prompt, RewardEstimate, Trajectory

    suite = standalone_suite("arl_math.suite:MathSuite")
    tok = build_tokenizer()
    policy = Policy.from_config(GPT2Config(vocab_size=len(tok), n_positions=64, n_embd=8, n_layer=1, n_head=1), tok)
    asked = suite._prompt(type("T", (), {"id": "antiderivative:cos(x)", "kind": "antiderivative", "expr": "cos(x)",
                                         "text": "integrate cos(x)"})())
    wrong = tok("x*sin(x)", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    derivative_task = suite._prompt(type("T", (), {"id": "derivative:x", "kind": "derivative", "expr": "x", "text": "d/dx x"})())
    long = tok("x**5*sin(x**3)*exp(x**2)*cos(x)", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    def failed(prompt: Prompt, completion_ids: list[int]) -> Failure:
        traj = Trajectory(prompt_id=prompt.id, step=0, group_id="g", final_answer="", candidate_key="math:k")
        return Failure(traj, prompt, completion_ids, [], RewardEstimate(trajectory_id=traj.id, mean=0.0, std=0.0))

    relabeled, hinted = suite.hindsight(policy, [failed(asked, wrong), failed(derivative_task, wrong), failed(asked, long)])
    # derivative answers have no task they solve for sure; a new task too long for the context is left out
    assert hinted == [] and len(relabeled) == 1
    assert relabeled[0].prompt_ids == prompt_ids(tok, "antiderivative", "x*cos(x)+sin(x)")
    assert relabeled[0].completion_ids == wrong
