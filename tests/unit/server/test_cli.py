"""`ragev serve keys ...` and the start-up checks of `ragev serve`, in process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_ragev.cli import main
from pytest_ragev.server.keys import split_key
from pytest_ragev.server.store import Store


def test_keys_create_list_revoke(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = str(tmp_path / "ws")
    assert main(["serve", "keys", "create", "--workspace", ws, "--role", "admin",
                 "--capability", "full_access", "--tenant", "7", "--name", "机器人"]) == 0
    out, err = capsys.readouterr()
    key = out.strip()
    parts = split_key(key)
    assert parts is not None and "only time the key is shown" in err
    stored = Store(tmp_path / "ws" / "ragev-server.db").key(parts[0])
    assert stored is not None and stored.tenant == 7 and stored.capability == "full_access"

    assert main(["serve", "keys", "list", "--workspace", ws]) == 0
    listing = capsys.readouterr().out
    assert parts[0] in listing and "active" in listing and "机器人" in listing
    assert parts[1] not in listing

    assert main(["serve", "keys", "revoke", "--workspace", ws, parts[0]]) == 0
    assert main(["serve", "keys", "revoke", "--workspace", ws, parts[0]]) == 2
    assert "no active key" in capsys.readouterr().err
    assert main(["serve", "keys", "list", "--workspace", ws]) == 0
    assert "revoked" in capsys.readouterr().out


def test_bad_options_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--configs", str(tmp_path / "missing")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ragev: error: --configs") and "not a folder" in err
    assert main(["serve", "keys", "create", "--role", "root"]) == 2
    assert main(["serve", "--max-parallel", "0"]) == 2


def test_ragev_help_does_not_import_the_web_stack() -> None:
    code = ("import sys; from pytest_ragev.cli import build_parser; build_parser(); "
            "print(sorted(m for m in ('fastapi', 'uvicorn', 'pydantic', 'starlette') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"
