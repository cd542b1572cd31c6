"""An invalid molecule a policy wrote never puts RDKit's own error lines on the user's terminal.

`arl run` printed ``[06:07:35] Explicit valence for atom # 2 N, 5, is greater than permitted`` under its table:
the run report drew its best candidates, and the shift detector fingerprinted them, with RDKit's logging on.
"""

from __future__ import annotations

import pytest

from arl_flows.config import load_config
from arl_flows.suites.molecules.pretrained import _fingerprints
from arl_flows.suites.molecules.suite import MoleculeSuite

INVALID = "CC#[NH-]CC#CCC"  # a five-valent nitrogen, written by the tiny prior in a real run


def test_the_report_draws_the_valid_candidates_silently(capfd: pytest.CaptureFixture[str]) -> None:
    suite = MoleculeSuite(load_config())
    png = suite.draw_candidates([INVALID, "CCO"], ["0.10", "0.90"])
    assert png is not None and png.startswith(b"\x89PNG")
    assert suite.draw_candidates([INVALID], ["0.10"]) is None
    assert capfd.readouterr().err == ""


def test_fingerprints_of_an_invalid_candidate_are_none_and_silent(capfd: pytest.CaptureFixture[str]) -> None:
    fps = _fingerprints([INVALID, "CCO", ""])
    assert fps[0] is None and fps[1] is not None and fps[2] is None
    assert capfd.readouterr().err == ""
