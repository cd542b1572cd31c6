"""Help text survives rich markup: a config section named in brackets (``[options.prior]``) is shown, not eaten.

typer renders help with rich, where ``[prior]`` is a style tag: `arl prior show --help` printed "whose  table to use".
"""

from __future__ import annotations

import re

import typer

from arl_flows.cli import app

# An unescaped [word] that rich would take for a style tag (and drop); "\[word]" prints as "[word]".
_TAG = re.compile(r"(?<!\\)\[/?[a-z_][a-z0-9_.]*\]")


def _commands(command, path: str = "arl"):  # noqa: ANN001, ANN202 - typer's own click types
    yield path, command
    if hasattr(command, "commands"):  # a group
        for name, sub in command.commands.items():
            yield from _commands(sub, f"{path} {name}")


def test_no_help_text_holds_a_bracketed_word_that_rich_would_drop() -> None:
    eaten, seen = [], []
    for path, command in _commands(typer.main.get_command(app)):
        texts = [("help", command.help or ""), *((p.name, getattr(p, "help", None) or "") for p in command.params)]
        eaten += [f"{path} {where}: {tag}" for where, text in texts for tag in _TAG.findall(text)]
        seen.append(path)
    assert eaten == [], eaten
    assert {"arl prior show", "arl runs eval", "arl bench learning"} <= set(seen)


def test_an_escaped_section_name_is_printed() -> None:
    from typer.testing import CliRunner

    out = CliRunner().invoke(app, ["prior", "show", "--help"], terminal_width=200).stdout
    assert "whose [options.prior] table" in out, out


def test_arl_alone_shows_its_help_and_version_is_an_option() -> None:
    """`arl` (and `arl lab`) alone printed the help, then an empty 'Error:' and exited 2; `--version` did not exist."""
    from importlib import metadata

    from tests.helpers.cli_runner import arl

    for args in ([], ["lab"]):
        code, out, err = arl(args)
        assert code == 0 and "Usage: arl" in out and "Error" not in err + out, (args, out, err)
    code, out, err = arl(["--version"])
    assert code == 0 and out.strip() == f"arl {metadata.version('arl')}"
