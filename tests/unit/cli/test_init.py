"""``ragev init``: the scaffold's files, what it refuses, its dataset id and TOML strings.

That ``pytest --ragev-config`` passes on the scaffold is checked end to end in
``tests/plugin/test_cli_init.py``.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_ragev.cli import init
from pytest_ragev.config import load_config
from pytest_ragev.dataset import write_dataset
from tests.unit._cli import one_error_line, run_cli

#: The config's rule for a dataset id (config._VARIANT_NAME): what init must produce.
VALID_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")


def make_dataset(folder: Path) -> Path:
    return write_dataset(
        folder,
        queries={1: "长城有多长？", 2: "Wie hoch ist die Zugspitze?"},
        corpus={1: "长城全长超过两万公里。", 2: "Die Zugspitze ist 2962 Meter hoch.",
                3: "Der Rhein fließt durch Köln."},
        answers={11: "超过两万公里。", 12: "2962 Meter."},
        qrels=[(1, 1), (2, 2)], qas=[(1, 11), (2, 12)],
    )


def test_init_writes_a_config_the_plugin_loads(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = make_dataset(tmp_path / "eval" / "中文 数据")
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "init", "eval/中文 数据", "--dir", "eval")
    assert code == 0 and err == ""
    assert out.splitlines() == [
        "wrote eval/ragev.toml (dataset id 'dataset': 2 questions, 3 passages; the built-in "
        "pipeline)",
        "wrote eval/conftest.py (your pipeline's hook, commented out)",
        "next: cd eval && pytest --ragev-config ragev.toml",
    ]
    config = load_config(tmp_path / "eval" / "ragev.toml")
    assert config.dataset_path == data.resolve()
    assert config.dataset_id == "dataset" and config.pipeline.name == "builtin"
    assert config.report_json == tmp_path / "eval" / "ragev-report.json"
    assert config.baseline_path is None and not config.thresholds
    raw = tomllib.loads((tmp_path / "eval" / "ragev.toml").read_text(encoding="utf-8"))
    assert raw["dataset"]["path"] == "中文 数据"  # relative to the config file
    conftest = (tmp_path / "eval" / "conftest.py").read_text(encoding="utf-8")
    assert "def pytest_ragev_answer" in conftest
    compile(conftest, "conftest.py", "exec")
    # Uncommented, the hook is valid Python too (that it runs is the end-to-end test's).
    compile(uncommented(conftest), "conftest.py", "exec")


def uncommented(conftest: str) -> str:
    """The scaffold's conftest with its commented hook switched on."""
    return re.sub(r"^# ?", "", conftest, flags=re.MULTILINE)


def test_init_into_the_current_folder(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_dataset(tmp_path / "tower-data")
    monkeypatch.chdir(tmp_path)
    code, out, _ = run_cli(capsys, "init", "tower-data", "--id", "tower_v2")
    assert code == 0 and out.splitlines()[-1] == "next: pytest --ragev-config ragev.toml"
    config = load_config(tmp_path / "ragev.toml")
    assert config.dataset_id == "tower_v2" and (tmp_path / "conftest.py").is_file()


def test_existing_files_are_kept_unless_forced(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = make_dataset(tmp_path / "data")
    project = tmp_path / "project"
    project.mkdir()
    (project / "conftest.py").write_text("# my own fixtures\n", encoding="utf-8")
    code, out, err = run_cli(capsys, "init", str(data), "--dir", str(project))
    one_error_line(code, err, f"{project / 'conftest.py'} already exists", "nothing was written",
                   "--force")
    assert out == "" and not (project / "ragev.toml").exists()
    assert (project / "conftest.py").read_text(encoding="utf-8") == "# my own fixtures\n"
    # --no-conftest leaves the project's conftest alone.
    code, _, _ = run_cli(capsys, "init", str(data), "--dir", str(project), "--no-conftest")
    assert code == 0 and (project / "ragev.toml").is_file()
    assert (project / "conftest.py").read_text(encoding="utf-8") == "# my own fixtures\n"
    (project / "ragev.toml").write_text("# mine\n", encoding="utf-8")
    code, _, err = run_cli(capsys, "init", str(data), "--dir", str(project))
    one_error_line(code, err, "ragev.toml and ", "conftest.py already exist")
    assert (project / "ragev.toml").read_text(encoding="utf-8") == "# mine\n"
    code, _, _ = run_cli(capsys, "init", str(data), "--dir", str(project), "--force")
    assert code == 0 and "pytest_ragev_answer" in (project / "conftest.py").read_text(
        encoding="utf-8")
    assert load_config(project / "ragev.toml").dataset_path == data.resolve()


def test_the_dataset_is_validated_first(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    data = make_dataset(tmp_path / "data")
    (data / "qrels.parquet").unlink()
    code, _, err = run_cli(capsys, "init", str(data), "--dir", str(tmp_path / "new"))
    one_error_line(code, err, "qrels.parquet is missing")
    assert not (tmp_path / "new").exists()
    code, _, err = run_cli(capsys, "init", str(tmp_path / "nowhere"))
    one_error_line(code, err, "nowhere")


def test_dataset_warnings_are_printed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = write_dataset(tmp_path / "data", queries={1: "Где находится Кёльн?"},
                         corpus={1: "Кёльн находится в Германии."}, qrels=[(1, 1)])
    code, _, err = run_cli(capsys, "init", str(data), "--dir", str(tmp_path))
    assert code == 0
    assert err == ("ragev: warning: 1 question without a reference answer (first: qid 1): "
                   "excluded from generation means\n")


def test_bad_options_are_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    data = make_dataset(tmp_path / "data")
    blocker = tmp_path / "a-file"
    blocker.write_text("", encoding="utf-8")
    code, _, err = run_cli(capsys, "init", str(data), "--dir", str(blocker))
    one_error_line(code, err, "is a file, not a folder")
    code, _, err = run_cli(capsys, "init", str(data), "--dir", str(tmp_path), "--id", "my data")
    one_error_line(code, err, "--id 'my data' is not a valid name")


def test_without_dataset_the_one_in_the_project_is_found(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(capsys, "init")
    one_error_line(code, err, "no dataset folder (one holding queries.parquet) in the current "
                   "folder or 2 levels below it", "ragev init path/to/dataset")
    assert out == "" and list(tmp_path.iterdir()) == []
    # Hidden folders (a virtualenv, a VCS) and anything deeper than two levels are skipped.
    make_dataset(tmp_path / ".venv" / "data")
    make_dataset(tmp_path / "a" / "b" / "c")
    code, _, err = run_cli(capsys, "init")
    one_error_line(code, err, "no dataset folder")
    data = make_dataset(tmp_path / "eval" / "问答")
    code, out, err = run_cli(capsys, "init")
    assert code == 0 and err == "", err
    assert load_config(tmp_path / "ragev.toml").dataset_path == data.resolve()
    assert out.splitlines()[0].startswith("wrote ragev.toml (dataset id 'dataset': 2 questions")
    # --dir is where the search starts: the project folder itself may be the dataset.
    code, _, err = run_cli(capsys, "init", "--dir", str(data))
    assert code == 0, err
    assert load_config(data / "ragev.toml").dataset_path == data.resolve()


def test_several_datasets_must_be_named(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    make_dataset(tmp_path / "de")
    make_dataset(tmp_path / "zh" / "v2")
    code, out, err = run_cli(capsys, "init", "--dir", str(tmp_path))
    one_error_line(code, err, f"2 dataset folders in {tmp_path} ({tmp_path.as_posix()}/de, "
                   f"{tmp_path.as_posix()}/zh/v2); name the one to evaluate: ragev init "
                   f"{tmp_path.as_posix()}/de")
    assert out == "" and not (tmp_path / "ragev.toml").exists()


@given(st.text(max_size=30))
def test_the_dataset_id_is_always_a_valid_name(name: str) -> None:
    ident = init.dataset_id(name)
    assert VALID_ID.match(ident)
    if VALID_ID.match(name) and not name.endswith(("-", "_", ".")):
        assert ident == name


@given(st.text(max_size=40))
def test_toml_strings_read_back(value: str) -> None:
    assert tomllib.loads(f"key = {init._toml_string(value)}")["key"] == value


def test_the_config_template_parses_for_any_path(tmp_path: Path) -> None:
    for path in ('data "quoted"', "C:\\data\\eval", "数据/子目录", "tab\there", "line\nbreak"):
        text = init.config_text(path, "ds", dataset_note=path, config_path="ragev.toml")
        assert tomllib.loads(text)["dataset"]["path"] == path
