"""The molecules suite passes the suite contract kit (``arl_flows.suites.testing``)."""

from __future__ import annotations

from arl_flows.suites.molecules.suite import MoleculeSuite
from arl_flows.suites.testing import SuiteContract


class TestMoleculeSuite(SuiteContract):
    suite_class = MoleculeSuite
    completions = [("O", True), ("c1ccncc1", True), ("C C O", True), ("C1CC", False), ("", False)]


class TestDruglikeMoleculeSuite(SuiteContract):
    suite_class = MoleculeSuite
    options = {"space": "druglike"}
    completions = [("CC(=O)Nc1ccc(O)cc1", True), ("ClCCBr", True), ("CCS(=O)(=O)N", True), ("C1CC", False), ("", False)]
