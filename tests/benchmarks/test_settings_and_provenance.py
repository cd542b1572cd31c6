"""The benchmarks' own settings and the provenance record every benchmark report carries."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from benchmarks.provenance import PACKAGES, format_provenance, provenance, with_provenance
from benchmarks.settings import bench_settings

ROOT = Path(__file__).resolve().parents[2]


def test_torch_threads_follow_the_environment_and_a_bad_value_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARL_BENCH_TORCH_THREADS", raising=False)
    assert bench_settings().torch_threads == 1
    monkeypatch.setenv("ARL_BENCH_TORCH_THREADS", "3")
    assert bench_settings().torch_threads == 3
    for bad in ("many", "0"):
        monkeypatch.setenv("ARL_BENCH_TORCH_THREADS", bad)
        with pytest.raises(ValueError) as err:
            bench_settings()
        message = str(err.value)
        assert message.startswith("ARL_BENCH_TORCH_THREADS:") and "\n" not in message and repr(bad) in message


def test_provenance_names_the_commit_the_packages_and_the_machine() -> None:
    record = provenance()
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode == 0:  # a git checkout (a source tree without .git records None)
        assert record["commit"] == head.stdout.strip() and isinstance(record["dirty"], bool)
    assert tuple(record["packages"]) == PACKAGES == ("arl", "torch", "rdkit", "pyscf", "tblite", "prefect")
    import torch

    assert record["packages"]["torch"] == torch.__version__
    assert record["packages"]["arl"] is not None
    assert record["machine"]["cpu_count"] == os.cpu_count() and record["machine"]["cpu_model"]
    assert record["machine"]["platform"]
    json.dumps(record)  # a report is JSON


def test_a_report_gets_one_record_and_keeps_the_one_it_has() -> None:
    report = {"pool": 10}
    stamped = with_provenance(report)
    assert stamped["pool"] == 10 and "provenance" not in report  # a copy
    assert with_provenance({"provenance": {"commit": "abc"}}) == {"provenance": {"commit": "abc"}}
    line = format_provenance(stamped["provenance"])
    assert "\n" not in line and "torch " in line and f"{os.cpu_count()} CPUs" in line

