"""ARL's wheel built and installed into a fresh venv whose third-party packages come from this environment.

The packaging, plugin and example tests install ARL (or a plugin) the way a
user does, into a venv of their own, without downloading anything.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import subprocess
import sys
import sysconfig
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["InstalledWheel", "build_wheel", "new_venv", "pip_install", "third_party_site"]


@dataclass(frozen=True)
class InstalledWheel:
    """ARL built as a wheel and installed into a fresh venv (the ``installed_wheel`` fixture of tests/conftest.py)."""

    wheel: Path
    python: Path
    site: Path

    @property
    def arl(self) -> Path:
        return self.python.with_name("arl")


@contextlib.contextmanager
def _building(source: Path) -> Iterator[None]:
    """Hold the build of ``source`` for this process: pip builds in the source tree (``build/``, ``*.egg-info``), and
    two test workers building the same checkout at once broke each other's build (a CI run: ``pip wheel`` exit 1)."""
    digest = hashlib.sha256(str(source.resolve()).encode()).hexdigest()[:16]
    with open(Path(tempfile.gettempdir()) / f"arl-build-{digest}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _run_pip(args: list[str], **kwargs: object) -> None:
    """Run pip; a failure raises with pip's own output in the message (a bare exit status says nothing)."""
    done = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=600, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"pip {' '.join(args[:2])} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")


def build_wheel(source: Path, out: Path) -> Path:
    """``pip wheel`` of a project folder, offline (no build isolation), into ``out``."""
    before = set(out.glob("*.whl"))
    with _building(source):
        _run_pip(["wheel", str(source), "--no-deps", "--no-build-isolation", "-q", "-w", str(out)], cwd=out)
    (wheel,) = set(out.glob("*.whl")) - before
    return wheel


def new_venv(path: Path) -> tuple[Path, Path]:
    """A fresh venv without ARL whose third-party packages come from this environment: (python, site-packages)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=300)
    python = path / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "_arl_test_deps.pth").write_text(f"{third_party_site(path.parent / f'{path.name}-deps')}\n")
    return python, site


def third_party_site(dest: Path, source: Path | None = None) -> Path:
    """``source`` (this environment's site-packages) as links in ``dest``, less the ARL plugins installed there.

    A venv a test builds reads its third-party packages from here, as a path
    entry: its ``.pth`` files are not run, so a suite or tier the user
    installed into this environment in editable mode would show in the venv
    as entry points without modules. ARL's own distribution stays.
    """
    source = source or Path(sysconfig.get_paths()["purelib"])
    dest.mkdir(parents=True, exist_ok=True)
    for entry in source.iterdir():
        if not _is_user_arl_plugin(entry) and not (dest / entry.name).exists():
            (dest / entry.name).symlink_to(entry)
    return dest


def _is_user_arl_plugin(entry: Path) -> bool:
    """A distribution's metadata folder that declares ``arl.*`` entry points and is not ARL's own."""
    if not entry.name.endswith((".dist-info", ".egg-info")) or entry.name.split("-")[0].lower() == "arl":
        return False
    points = entry / "entry_points.txt"
    return points.is_file() and "[arl." in points.read_text(encoding="utf-8", errors="replace")


def pip_install(python: Path, wheel: Path, *options: str) -> None:
    """Install one wheel into the venv of ``python`` (no dependencies, nothing downloaded).

    With ``"--no-build-isolation", "-e"`` in ``options``, ``wheel`` is a project folder installed in editable mode.

    Without the test's ``PYTHONPATH``: a checkout on it (with the ``arl.egg-info`` that ``pip wheel`` leaves
    there) would make pip see ARL as installed already and skip the wheel.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    args = ["--python", str(python), "install", "--no-deps", "-q", *options, str(wheel)]
    if wheel.is_dir():  # a project folder (``-e``): built in its tree, like build_wheel
        with _building(wheel):
            _run_pip(args, env=env)
    else:
        _run_pip(args, env=env)
