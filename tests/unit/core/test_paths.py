"""Paths as reports and committed files write them."""

from __future__ import annotations

import os
from pathlib import Path

from pytest_ragev.core.paths import display_roots, portable_path, relative_text, shown_path


def test_portable_path_is_relative_to_the_base_wherever_the_path_lies(tmp_path: Path) -> None:
    assert portable_path(tmp_path / "eval" / "数据", tmp_path) == "eval/数据"
    assert portable_path(tmp_path, tmp_path) == "."
    # Outside the base: still relative, so another checkout records the same text.
    other = tmp_path.parent / "elsewhere" / "faq"
    assert portable_path(other, tmp_path) == "../elsewhere/faq"
    assert portable_path(Path("/"), Path("/a/b")) == "../.."


def test_report_paths_are_shown_from_the_rootdir_then_the_config_folder(tmp_path: Path) -> None:
    root, config_dir = tmp_path / "repo", tmp_path / "configs"
    roots = display_roots(str(root), config_dir)
    assert roots == (root, config_dir)
    assert display_roots("", Path("/")) == ()  # never the filesystem root
    assert shown_path(root / "out" / "r.html", roots) == "out/r.html"
    assert shown_path(config_dir / "base.json", roots) == "base.json"
    assert shown_path(tmp_path / "x.json", roots) == str(tmp_path / "x.json")
    line = f"ragev: baseline written to {root}{os.sep}ragev-baseline.json"
    assert relative_text(line, roots) == "ragev: baseline written to ragev-baseline.json"
