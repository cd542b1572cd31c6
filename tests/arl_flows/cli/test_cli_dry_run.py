"""`arl run --dry-run`: the config is checked and the run described; nothing is started, created or verified."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from storage.ledger import Ledger
from tests.helpers.cli_runner import arl, assert_user_error


def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("ARL_HOME", str(home))
    monkeypatch.delenv("ARL_DATABASE_URL", raising=False)
    return home


def test_dry_run_describes_the_run_and_creates_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = _home(tmp_path, monkeypatch)
    config = tmp_path / "run.toml"
    config.write_text('name = "look-first"\nsteps = 4\npipeline = "async"\ntier_concurrency = { "pyscf-b3lyp" = 1 }\n'
                      "[scheduler]\nbudget_per_run = 90.0\n")
    code, out, err = arl(["run", "--config", str(config), "--dry-run"])
    assert code == 0, err[-2000:]
    lines = out.splitlines()
    assert lines[0].startswith("dry run: the config is valid; nothing was started")
    assert "'look-first'" in out and "suite 'molecules'" in out and "policy the suite's own" in out
    assert "steps: 4; batch: 4 prompts x 8 samples = 32 candidates a step" in out
    assert "pipeline: async" in out
    # What the run aims at, and the suite's options the config sets (a newcomer could not see the space).
    assert "objective: the top tier's value in the window 3 to 4 (softness 0.5)" in out
    assert "prompts: goal windows of the HOMO-LUMO gap (eV)" in out and "[options]" not in out
    # The molecules ladder, cheapest first, each with its cost model (DFT grows with the cube of the size).
    ladder = [line.strip() for line in lines if line.startswith("  ")]
    assert [line.split(" ")[0] for line in ladder] == ["rdkit-eht", "gfn2-xtb", "pyscf-b3lyp"], out
    assert "(high_fidelity)" in ladder[2] and "x size^3 a call" in ladder[2] and "at most 1 at once" in ladder[2]
    assert "budget: 90 CPU-s a run" in out
    assert f"ledger: sqlite:///{home / 'ledger.db'}" in out and f"ARL_HOME: {home}" in out
    assert f"`arl config show --config {config}`" in out
    # No ledger, no Prefect database, no run folder, no prior trained or cached.
    assert not (home / "ledger.db").exists()
    left = sorted(p.name for p in home.iterdir()) if home.exists() else []
    assert set(left) <= {"logs", "prefect-logging.yml"}, left  # what `arl` itself sets up for Prefect's log file


def test_dry_run_of_a_resume_names_the_run_and_leaves_it_as_it_was(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from arl_flows.config import load_config

    _home(tmp_path, monkeypatch)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    ledger = Ledger(url)
    cfg = load_config(None, "quick")
    run = ledger.create_run(cfg.name, cfg.model_dump(mode="json"))
    code, out, err = arl(["run", "--resume", run.id[:10], "--dry-run", "--url", url])
    assert code == 0, err[-2000:]
    assert f"resuming {run.id} from its last completed step" in out and "reference-table (lab)" in out
    assert f"(run {run.id[:12]}'s stored config, profile 'default')" in out  # not "the built-in config"
    assert Ledger(url).get_run(run.id).status == run.status and len(Ledger(url).list_runs()) == 1
    # A --config beside --resume may say where and how long the run goes on, not change what it learns.
    same = tmp_path / "same.toml"
    same.write_text(f'name = "{cfg.name}"\nsteps = 5\ntask_runner = "dask"\n')
    code, out, err = arl(["run", "--resume", run.id, "--config", str(same), "--profile", "quick", "--dry-run", "--url", url])
    assert code == 0 and "resuming" in out, err[-2000:]
    other = tmp_path / "other.toml"  # the default design run: another ladder, batch and budget
    other.write_text(f'name = "{cfg.name}"\n')
    code, out, err = arl(["run", "--resume", run.id, "--config", str(other), "--dry-run", "--url", url])
    assert_user_error(code, err, out=out)
    assert f"--resume {run.id[:12]} with --config {other}: it changes " in " ".join(err.split())
    assert "tiers" in err and "resume without --config" in " ".join(err.split())
    # `arl config show` writes every option out; the run stored none (defaults): the same options, no change
    # (newcomer pass: "it changes options"). A changed option is named.
    shown_config = tmp_path / "shown.toml"
    code, out, err = arl(["config", "show", "--profile", "quick"])
    assert code == 0, err[-2000:]
    shown_config.write_text(out)
    code, out, err = arl(["run", "--resume", run.id, "--config", str(shown_config), "--dry-run", "--url", url])
    assert code == 0 and "resuming" in out, err[-2000:]
    shown_config.write_text(shown_config.read_text().replace('space = "qm9"', 'space = "druglike"'))
    code, out, err = arl(["run", "--resume", run.id, "--config", str(shown_config), "--dry-run", "--url", url])
    assert_user_error(code, err, out=out)
    assert "options.space" in err
    # A run stored by an older ARL lacks fields added since (their defaults): resuming it with its own file is no change.
    examples = Path(__file__).resolve().parents[3] / "examples"
    older = load_config(examples / "molecules.toml").model_dump(mode="json")
    del older["scheduler"]["budget_carry"]
    del older["streaming"]["lend_idle_slots"]
    aged = ledger.create_run(older["name"], older)
    code, out, err = arl(["run", "--resume", aged.id, "--config", str(examples / "molecules.toml"), "--dry-run", "--url", url])
    assert code == 0 and "resuming" in out, err[-2000:]
    # A stored value this ARL refuses is the stored config's, not a flag the user never gave.
    unported = ledger.create_run("old", cfg.model_dump(mode="json") | {"dask_address": "tcp://sched", "task_runner": "dask"})
    code, out, err = arl(["run", "--resume", unported.id, "--dry-run", "--url", url])
    assert_user_error(code, err, out=out)
    assert f"run {unported.id[:12]}'s stored config: cluster.address: 'tcp://sched' names no scheduler port" in err


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("stepz = 3\n", "stepz: unknown field"),
        ("tiers = [{ verifier = 'rdkit-eht' }, { verifier = 'no-such-tier' }]\n", "tiers: no verifier named 'no-such-tier'"),
        ("tiers = [{ verifier = 'rdkit-eht' }, { verifier = 'nomodule_xyz:Tier' }]\n", "tiers: cannot import module 'nomodule_xyz'"),
        ("suite = 'code'\npolicy_path = '/nonexistent/model'\n", "not a local transformers model directory"),
        ("[scheduler]\nbudget_per_run = -1.0\n", "budget_per_run"),
        # A real tier with params its model refuses: the rung, the field and what to fix, not pydantic's dump.
        ("tiers = [{ verifier = 'rdkit-eht', params = { geometry = { seed = 'abc' } } }, { verifier = 'pyscf-b3lyp' }]\n",
         "tiers[0] (rdkit-eht): geometry.seed: should be a valid integer, unable to parse string as an integer (got 'abc')"),
        ("tiers = [{ verifier = 'rdkit-eht', params = { geometri = {} } }, { verifier = 'pyscf-b3lyp' }]\n",
         "tiers[0] (rdkit-eht): geometri: unknown field; did you mean 'geometry'?"),
        # Another suite's verifier in a molecules ladder (`arl verify --tiers` refused it; the dry run called it valid).
        ("tiers = [{ verifier = 'code-format' }, { verifier = 'pyscf-b3lyp' }]\n",
         "tiers[0] (code-format): the verifier belongs to suite 'code', not 'molecules'"),
        ("tiers = [1, 'pyscf-b3lyp']\n", "write a tier as { verifier = \"NAME\", params = {...} } or \"NAME\", got 1"),
    ],
)
def test_a_bad_config_fails_the_dry_run_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toml: str,
                                                    expected: str) -> None:
    _home(tmp_path, monkeypatch)
    config = tmp_path / "bad.toml"
    config.write_text(toml)
    code, out, err = arl(["run", "--config", str(config), "--dry-run"])
    assert_user_error(code, err, out=out)
    assert expected in err and "dry run" not in out
    assert str(config) in err and "pydantic" not in err and "EHTParams" not in err


def test_dry_run_names_the_space_and_the_objective_terms(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch)
    examples = Path(__file__).resolve().parents[3] / "examples"
    code, out, err = arl(["run", "--config", str(examples / "druglike.toml"), "--dry-run"])
    assert code == 0, err[-2000:]
    assert "objective: the top tier's value in the window 4.5 to 5.5" in out and "space = 'druglike'" in out
    code, out, err = arl(["run", "--config", str(examples / "objective.toml"), "--dry-run"])
    assert code == 0, err[-2000:]
    assert "objective: [objective], geometric mean of window value, maximize qed, minimize sa_score" in out


@pytest.mark.parametrize(("slip", "meant"), [("QED", "qed"), ("sa", "sa_score"), ("gap", "gap_ev"), ("sa_scor", "sa_score")])
def test_an_objective_property_no_tier_reports_but_one_nearly_does_is_refused(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, slip: str, meant: str) -> None:
    """A term on a property no verdict carries counts as 1: a slip dropped the QED term from the reward silently."""
    _home(tmp_path, monkeypatch)
    examples = Path(__file__).resolve().parents[3] / "examples"
    config = tmp_path / "objective.toml"
    config.write_text((examples / "objective.toml").read_text().replace('property = "qed"', f'property = "{slip}"'))
    code, out, err = arl(["run", "--config", str(config), "--dry-run"])
    assert_user_error(code, err, out=out)
    assert f"objective: property '{slip}' is reported by no tier of the ladder; did you mean '{meant}'?" in " ".join(err.split())
    # Close to none, on a ladder whose tiers all say what they report: the term would count as met on every
    # molecule (newcomer pass: "maximize logp" with no logP tier). A tier of the user's own that declares nothing
    # may report it: not checked then.
    nobody = tmp_path / "nobody.toml"
    nobody.write_text((examples / "objective.toml").read_text().replace('property = "qed"', 'property = "logp"'))
    code, out, err = arl(["run", "--config", str(nobody), "--dry-run"])
    assert_user_error(code, err, out=out)
    assert "property 'logp' is reported by no tier of the ladder; add a tier that reports it" in " ".join(err.split())
    own = tmp_path / "own.toml"
    own.write_text(nobody.read_text().replace('{ verifier = "rdkit-eht" },', '{ verifier = "rdkit-eht" }, '
                                              '{ verifier = "tests.helpers.fault_targets:ExactMassVerifier" },', 1))
    code, out, err = arl(["run", "--config", str(own), "--dry-run"])
    assert code == 0, err[-2000:]


def test_a_device_or_task_runner_this_machine_lacks_is_a_note_in_the_dry_run_and_an_error_in_the_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`device = "gpu"` passed the dry run and crashed the run as 'a bug in ARL'; so did a missing prefect-ray."""
    import importlib.util

    import torch

    _home(tmp_path, monkeypatch)
    config = tmp_path / "run.toml"
    config.write_text('device = "gpu"\n')
    code, out, err = arl(["run", "--config", str(config), "--dry-run"])
    assert_user_error(code, err, out=out)
    assert "device: 'gpu' is not a torch device; write 'cpu', 'cuda', 'cuda:N'" in err
    missing = [("device = 'cuda:7'\n", "device 'cuda:7': this machine")] if torch.cuda.device_count() < 8 else []
    if importlib.util.find_spec("prefect_ray") is None:
        missing.append(("task_runner = 'ray'\n", "task_runner 'ray' needs prefect-ray: pip install 'arl[ray]'"))
    assert missing, "this machine has both: nothing to check"
    for text, message in missing:
        config.write_text(text)
        code, out, err = arl(["run", "--config", str(config), "--dry-run"])
        assert code == 0 and f"note: {message}" in " ".join(out.split()), out + err
        code, out, err = arl(["run", "--config", str(config), "--steps", "1"])
        assert_user_error(code, err, out=out)
        assert message in " ".join(err.split()) and "internal error" not in err


@pytest.mark.parametrize(("name", "params"), [("rdkit-eht", {}), ("gfn2-xtb", {"threads": 1}), ("reference-table", {}),
                                             ("pyscf-b3lyp", {"basis": "sto-3g", "threads": 1, "workers": 1})])
def test_a_tier_declares_the_values_it_reports(name: str, params: dict) -> None:
    from arl_flows.suites.molecules import make_candidate
    from verifiers import Closable, registry

    verifier = registry.get(name)(params)
    try:
        (verdict,) = verifier.verify_batch([make_candidate("CO")])  # methanol: in QM9's table, seconds of DFT
    finally:
        if isinstance(verifier, Closable):
            verifier.close()
    assert verdict.status.value == "ok" and set(verdict.values) == type(verifier).reports


def test_a_ladder_with_a_tier_that_declares_nothing_is_not_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """reference-or-dft reports gap_631g_ev and declares nothing: a term on it is not taken for a slip of gap_ev."""
    _home(tmp_path, monkeypatch)
    config = tmp_path / "run.toml"
    config.write_text("tiers = ['rdkit-eht', 'gfn2-xtb', 'reference-or-dft']\n[objective]\n[[objective.terms]]\n"
                      "kind = 'window'\nproperty = 'gap_631g_ev'\nlow = 3.0\nhigh = 4.0\n")
    code, out, err = arl(["run", "--config", str(config), "--dry-run"])
    assert code == 0, err[-2000:]


def test_a_tier_can_be_written_as_its_name_alone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch)
    config = tmp_path / "run.toml"
    config.write_text("tiers = ['rdkit-eht', { verifier = 'pyscf-b3lyp', params = { basis = '6-31g' } }]\n")
    code, out, err = arl(["run", "--config", str(config), "--dry-run"])
    assert code == 0, err[-2000:]
    ladder = [line.strip().split(" ")[0] for line in out.splitlines() if line.startswith("  ")]
    assert ladder == ["rdkit-eht", "pyscf-b3lyp"], out


def test_a_dry_run_refuses_an_arl_home_that_is_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for home in (tmp_path / "home_file", tmp_path / "home_file" / "below"):
        (tmp_path / "home_file").write_text("not a folder")
        monkeypatch.setenv("ARL_HOME", str(home))
        code, out, err = arl(["run", "--dry-run"])
        assert_user_error(code, err, out=out)
        assert f"ARL_HOME {home} " in err and "not a folder; point ARL_HOME at a folder" in err and "dry run" not in out


@pytest.mark.slow  # a fresh interpreter that loads the suite and its tiers: about 16 s on 2 loaded cores
def test_dry_run_never_imports_prefect(tmp_path: Path) -> None:
    code = (
        "import atexit, sys\n"
        "from arl_flows.cli import main\n"
        "atexit.register(lambda: print('prefect loaded:', any(m.split('.')[0] == 'prefect' for m in sys.modules)))\n"
        "sys.argv = ['arl', 'run', '--dry-run']\n"
        "main()\n"
    )
    env = os.environ | {"ARL_HOME": str(tmp_path / "home")}
    env.pop("ARL_DATABASE_URL", None)
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "dry run: the config is valid" in done.stdout and "prefect loaded: False" in done.stdout, done.stdout[-2000:]


def test_dry_run_of_a_batch_job_cluster_says_what_would_hold_its_jobs_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The druglike example on SLURM: its DFT limit of 1 would leave 15 of 16 jobs idle, and nothing said so."""
    import shutil

    home = _home(tmp_path, monkeypatch)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    root = Path(__file__).resolve().parents[3]
    config = tmp_path / "druglike-slurm.toml"
    config.write_text((root / "examples" / "druglike.toml").read_text()
                      + '\n[cluster]\nkind = "slurm"\nmax_jobs = 16\nmemory = "4GB"\nqueue = "chem"\n')
    bin_dir = tmp_path / "bin"  # a submit command on the PATH, as on a login node (this machine may have none)
    bin_dir.mkdir()
    (bin_dir / "sbatch").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "sbatch").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    if shutil.which("sbatch") != str(bin_dir / "sbatch"):
        pytest.skip("another sbatch comes first on the PATH")
    pytest.importorskip("dask_jobqueue")
    code, out, err = arl(["run", "--config", str(config), "--dry-run"])
    assert code == 0, err[-2000:]
    flat = " ".join(out.split())
    assert "pipeline: async (default: top-tier calls of about" in flat and "async above 1 s)" in flat
    assert "cluster: slurm jobs of 1 core(s), 4GB, walltime 01:00:00, 0 to 16 at once, queue 'chem'" in flat
    assert ("note: tier_concurrency pyscf-b3lyp = 1 lets 1 call(s) run at once, of the 16 the jobs can take; "
            "raise it to 16 to use them all") in flat
    # No PREFECT_API_URL here: a temporary server; in a test worker where an earlier test set Prefect up in-process,
    # that test's server on 127.0.0.1. Either is on this machine's loopback address.
    assert "on this machine's loopback address, which workers on other nodes cannot reach" in flat
    assert "(checked, not connected: a dry run opens no database)" in flat
    assert not (home / "ledger.db").exists()
    # Without the scheduler's submit command (not a login node): a note in the dry run (a config may be checked on
    # a laptop), one line before anything starts in a run.
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    code, out, err = arl(["run", "--config", str(config), "--dry-run"])
    assert code == 0 and "note: [cluster] kind = 'slurm' submits jobs with sbatch, which is not on this machine's PATH" in " ".join(out.split())
    code, out, err = arl(["run", "--config", str(config)])
    assert_user_error(code, err, out=out)
    assert "submits jobs with sbatch, which is not on this machine's PATH; run `arl run` where you submit jobs" in err


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgres://u:pw@127.0.0.1:5432/arl", "unsupported database 'postgres' in 'postgres://u:***@127.0.0.1:5432/arl'"),
        ("mysql://u@h/arl", "ARL supports sqlite and postgresql"),
        ("localhost:5432/arl", "bad database URL 'localhost:5432/arl': use e.g."),
        # psycopg2 is not what the postgres extra installs: the fix is the URL's driver, not another install
        ("postgresql+psycopg2://u:pw@127.0.0.1:5432/arl", "write postgresql+psycopg://, the driver the postgres extra installs"),
    ],
)
def test_dry_run_checks_the_ledger_url_without_connecting(url: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _home(tmp_path, monkeypatch)
    monkeypatch.setenv("ARL_DATABASE_URL", url)
    code, out, err = arl(["run", "--profile", "quick", "--dry-run"])
    assert_user_error(code, err, out=out)
    assert "write postgresql://" in err if url.startswith("postgres:") else True
    assert expected in err and "pw@" not in err, err  # the password is never printed


@pytest.mark.parametrize(("args", "message"), [
    (["--task-runner", "dusk"], "--task-runner 'dusk': allowed values are 'threads', 'dask' or 'ray'"),
    (["--pipeline", "asink"], "--pipeline 'asink': allowed values are 'sync' or 'async'"),
    (["--dask-address", "foo"], "--dask-address 'foo': 'foo' names no scheduler port"),
    (["--name", " "], "--name is empty; give the run a name"),
])
def test_a_bad_flag_value_names_the_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str) -> None:
    """`arl run --task-runner dusk` said 'default config: task_runner: ...': the user never wrote a config."""
    _home(tmp_path, monkeypatch)
    code, out, err = arl(["run", *args, "--dry-run"])
    assert_user_error(code, err, out=out)
    assert f"error: {message}" in " ".join(err.split())


def test_a_dask_scheduler_that_does_not_answer_stops_the_run_before_it_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """newcomer pass: the first step sampled, waited Dask's 30 s and the run was marked failed with a bare timeout."""
    import socket

    home = _home(tmp_path, monkeypatch)
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code, out, err = arl(["run", "--profile", "quick", "--steps", "1", "--dask-address", f"tcp://127.0.0.1:{port}"])
    assert_user_error(code, err, out=out)
    assert f"no Dask scheduler answers at tcp://127.0.0.1:{port}" in err and "nothing was started" in err
    assert not (home / "ledger.db").exists() or "train" not in arl(["runs", "list"])[1]


def test_a_run_whose_dask_scheduler_is_gone_resumes_on_this_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """newcomer pass: resuming a `--dask-address` run after its scheduler stopped said "run without --dask-address",
    which the user had not given; `--task-runner threads` was refused ("a [cluster] of kind 'dask' runs on Dask")."""
    import socket

    from arl_flows.config import load_config

    _home(tmp_path, monkeypatch)
    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    with socket.socket() as sock:  # a port nothing listens on once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg = load_config(None, "quick", overrides={"dask_address": f"tcp://127.0.0.1:{port}"})
    run = Ledger(url).create_run(cfg.name, cfg.model_dump(mode="json"))
    code, out, err = arl(["run", "--resume", run.id, "--url", url])
    assert_user_error(code, err, out=out)
    said = " ".join(err.split())
    assert f"no Dask scheduler answers at tcp://127.0.0.1:{port}" in said and "without --dask-address" not in said
    assert f"arl run --resume {run.id[:12]} --task-runner threads" in said and "nothing was started" in said
    code, out, err = arl(["run", "--resume", run.id, "--task-runner", "threads", "--dry-run", "--url", url])
    assert code == 0 and "task runner: threads;" in out and "[cluster]" not in out.split("objective:")[0], err[-2000:]
