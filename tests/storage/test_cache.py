"""storage.cache: cache files and folders appear whole or not at all, and a failure to keep one is no error."""

from __future__ import annotations

from pathlib import Path

from storage.cache import keep_file, keep_folder


def test_a_file_is_kept_whole_and_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    target = tmp_path / "a" / "table.json"
    keep_file(target, lambda p: p.write_text("{}"))
    assert target.read_text() == "{}"

    def fails(p: Path) -> None:
        p.write_text("half")
        raise OSError("disk full")

    keep_file(tmp_path / "a" / "other.json", fails)
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == ["table.json"]  # no partial file, no error


def test_an_unwritable_folder_is_no_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    keep_file(tmp_path / "file" / "below" / "x.json", lambda p: p.write_text("{}"))  # its parent cannot be made
    keep_folder(tmp_path / "file" / "below" / "copy", tmp_path)
    assert (tmp_path / "file").read_text() == ""


def test_the_first_complete_folder_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "k").mkdir(parents=True)
    (first / "k" / "weights").write_text("1")
    (second / "k").mkdir(parents=True)
    (second / "k" / "weights").write_text("2")
    keep_folder(tmp_path / "cache" / "prior", first)
    keep_folder(tmp_path / "cache" / "prior", second)
    assert (tmp_path / "cache" / "prior" / "k" / "weights").read_text() == "1"
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["prior"]
