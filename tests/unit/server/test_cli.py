"""`ragev serve keys ...` and the start-up checks of `ragev serve`, in process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from pytest_ragev.cli import main
from pytest_ragev.dataset import write_dataset
from pytest_ragev.server.catalog import Catalog
from pytest_ragev.server.cli import _first_key, startup_lines
from pytest_ragev.server.keys import split_key, verify
from pytest_ragev.server.settings import ServerSettings
from pytest_ragev.server.store import Store
from tests._data import ANSWERS, CORPUS, QAS, QRELS, QUERIES


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


def test_startup_lines_name_the_url_the_configs_and_each_error(tmp_path: Path) -> None:
    settings = ServerSettings(workspace=tmp_path / "ws", configs=tmp_path)
    empty = startup_lines(settings, Catalog(tmp_path), url="http://127.0.0.1:8000/")
    assert empty == [
        "http://127.0.0.1:8000/ (the dashboard; the API under http://127.0.0.1:8000/api/v1/)",
        f"workspace {tmp_path / 'ws'}, shared cache {tmp_path / 'ws' / 'cache'}",
        f"no config in {tmp_path}: a request runs the built-in config 'default' (the built-in "
        "sample with the built-in pipeline)"]
    write_dataset(tmp_path / "faq", queries=QUERIES, corpus=CORPUS, answers=ANSWERS,
                  qrels=QRELS, qas=QAS)
    (tmp_path / "faq.toml").write_text('[dataset]\npath = "faq"\n', encoding="utf-8")
    (tmp_path / "kaputt.toml").write_text("[dataset\n", encoding="utf-8")
    (tmp_path / "gone.toml").write_text('[dataset]\npath = "nowhere"\n', encoding="utf-8")
    lines = startup_lines(settings, Catalog(tmp_path), url="http://0.0.0.0:9/",
                          key_file=tmp_path / "ws" / "admin.key")
    assert lines[2].startswith(f"the workspace had no API key: an admin key that may run "
                               f"evaluations is in {tmp_path / 'ws' / 'admin.key'}")
    assert lines[3] == f"1 config loaded from {tmp_path}: faq"
    assert [line.split(":", 1)[0] for line in lines[4:]] == [
        "config gone has an error", "config kaputt has an error"]
    assert all(str(tmp_path) + "/" not in line for line in lines[4:])


def test_the_first_start_makes_one_admin_key_readable_by_its_owner(tmp_path: Path) -> None:
    settings = ServerSettings(workspace=tmp_path, configs=tmp_path)
    store = Store(tmp_path / "ragev-server.db")
    made = _first_key(store, settings)
    assert made == tmp_path / "admin.key" and made.stat().st_mode & 0o777 == 0o600
    parts = split_key(made.read_text(encoding="utf-8").strip())
    assert parts is not None
    stored = store.key(parts[0])
    assert stored is not None and verify(stored, parts[1])
    assert stored.principal.may("run") and stored.tenant == 1
    assert _first_key(store, settings) is None  # the workspace has a key now: none more
    assert len(store.keys()) == 1
