"""Files in ARL's cache (``settings().cache``): derived data keyed by its inputs, written whole or not at all.

A cache file is written under a unique temporary name in its own folder and then renamed into place, so that
several processes (xdist workers, a run and its tier workers, hosts sharing a folder) only ever see the old file,
the new one or none. A cache is an optimisation: a file that cannot be written is left unwritten, and a reader
treats any file it cannot read as missing.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

__all__ = ["keep_file", "keep_folder"]


def keep_file(path: Path, write: Callable[[Path], None]) -> None:
    """Write ``path`` through ``write(temporary_path)``, then rename it into place; any ``OSError`` is swallowed."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial")
        os.close(fd)
    except OSError:
        return
    try:
        write(Path(name))
        os.replace(name, path)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            os.unlink(name)  # gone already once renamed


def keep_folder(path: Path, source: Path) -> None:
    """Copy the folder ``source`` to ``path`` unless it is there; another process's complete copy wins."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.", suffix=".partial"))
    except OSError:
        return
    try:
        shutil.copytree(source, staging, dirs_exist_ok=True)
        staging.rename(path)  # fails if a copy is there already: keep that one
    except OSError:
        pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)
