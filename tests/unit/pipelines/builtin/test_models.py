"""Embedding and rerank models are checked when the config is read, not per question.

None of these tests needs sentence-transformers: the extra's presence is simulated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import pytest_ragev.pipelines.builtin.models as builtin
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.install import install_command
from tests.unit.pipelines.builtin._builtin import pipeline


@pytest.fixture
def without_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builtin, "_ST_MODULE", "no_such_sentence_transformers_module")


@pytest.fixture
def with_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builtin, "_extra_installed", lambda: True)


@pytest.mark.parametrize(
    ("options", "key", "builtin_choice"),
    [
        ({"retrieval": "vector", "embedding_model": "models/nope"}, "embedding_model", "hashing"),
        ({"retrieval": "hybrid", "embedding_model": "models/nope"}, "embedding_model", "hashing"),
        ({"rerank_model": "models/ce"}, "rerank_model", "lexical"),
    ],
)
@pytest.mark.usefixtures("without_extra")
def test_a_model_without_the_extra_names_file_key_and_install_command(
    tmp_path: Path, options: dict[str, Any], key: str, builtin_choice: str
) -> None:
    with pytest.raises(ConfigError) as excinfo:
        pipeline(tmp_path, **options)
    message = str(excinfo.value)
    assert message.startswith(f"{tmp_path / 'ragev.toml'}: [pipeline] {key} = ")
    assert install_command("embeddings") in message
    assert f"{key} = {builtin_choice!r}" in message
    assert "\n" not in message


@pytest.mark.usefixtures("without_extra")
def test_builtin_models_need_no_extra(tmp_path: Path) -> None:
    pipe = pipeline(tmp_path, retrieval="hybrid", embedding_model="hashing",
                    rerank_model="lexical")
    assert pipe.config.embedding_model == "hashing" and pipe.config.rerank_model == "lexical"
    # An embedding model that keyword retrieval never loads is not checked.
    assert pipeline(tmp_path, embedding_model="models/nope").config.retrieval == "keyword"


@pytest.mark.usefixtures("with_extra")
def test_missing_empty_and_file_model_paths_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ragev.toml: \[pipeline\] embedding_model = "
                                          r"'models/nope' is neither a local model folder"):
        pipeline(tmp_path, retrieval="vector", embedding_model="models/nope")
    (tmp_path / "models" / "empty").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"holds no config\.json or modules\.json"):
        pipeline(tmp_path, retrieval="vector", embedding_model="models/empty")
    with pytest.raises(ConfigError, match=r"ragev.toml: \[pipeline\] rerank_model = '[^']*empty': "
                                          r"the folder .* holds no config\.json or modules\.json"):
        pipeline(tmp_path, rerank_model="models/empty")
    (tmp_path / "models" / "file.bin").write_bytes(b"x")
    with pytest.raises(ConfigError, match="is a file, not a model folder"):
        pipeline(tmp_path, rerank_model="models/file.bin")


@pytest.mark.usefixtures("with_extra")
def test_model_folders_resolve_against_the_config_file(tmp_path: Path) -> None:
    for marker in ("config.json", "modules.json"):
        folder = tmp_path / "models" / marker.split(".")[0]
        folder.mkdir(parents=True)
        (folder / marker).write_text("{}", encoding="utf-8")
        pipe = pipeline(tmp_path, retrieval="vector", embedding_model=f"models/{folder.name}",
                        rerank_model=f"models/{folder.name}")
        assert pipe.config.embedding_model == str(folder)
        assert pipe.config.rerank_model == str(folder)


@pytest.mark.usefixtures("with_extra")
def test_an_installed_model_package_is_accepted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "site" / "fake_model_pkg_ragev"
    (package / "model").mkdir(parents=True)
    (package / "model" / "modules.json").write_text("[]", encoding="utf-8")
    (package / "__init__.py").write_text(
        "from pathlib import Path\n"
        "def get_model_path():\n    return str(Path(__file__).parent / 'model')\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    pipe = pipeline(tmp_path, retrieval="vector", embedding_model="fake-model-pkg-ragev")
    # The name as written stays in the config (and the KB key), not a site-packages path.
    assert pipe.config.embedding_model == "fake-model-pkg-ragev"
    assert builtin.installed_model_folder("fake-model-pkg-ragev", key="k") == package / "model"


def test_variant_errors_name_the_variant(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as excinfo:
        pipeline(tmp_path, variant="small", chunk_size=0)
    assert str(excinfo.value).startswith(
        f"{tmp_path / 'ragev.toml'}: variant 'small': [pipeline] chunk_size = 0 is invalid"
    )


def test_model_loading_leaves_the_offline_variables_as_they_were(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    import os

    with builtin._offline():
        assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["TRANSFORMERS_OFFLINE"] == "1"
    assert "HF_HUB_OFFLINE" not in os.environ
    assert os.environ["TRANSFORMERS_OFFLINE"] == "0"
    monkeypatch.setattr(builtin, "_ST_MODULE", "no_such_module")
    with pytest.raises(ConfigError, match="needs the embeddings extra"):
        builtin.make_embedder("models/x", key="ragev.toml: [pipeline] embedding_model")
    assert "HF_HUB_OFFLINE" not in os.environ
