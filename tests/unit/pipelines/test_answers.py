"""The answers file: rows made from answers and records, written, read back, refused."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_ragev import Answer, Chunk
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.pipelines import AnswersFile, answer_row, write_answers

texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
items = st.one_of(st.integers(min_value=0, max_value=2**40), texts,
                  st.builds(Chunk, texts, st.integers(min_value=0, max_value=2**40)))


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(retrieved=st.lists(items, max_size=6), text=texts,
       meta=st.dictionaries(st.sampled_from(["model", "模型", "tokens"]),
                            st.one_of(st.integers(), texts), max_size=3),
       variant=st.one_of(st.none(), st.sampled_from(["a", "变体"])))
def test_an_answer_written_is_read_back_item_for_item(
    tmp_path: Path, retrieved: list[Any], text: str, meta: dict[str, Any],
    variant: str | None,
) -> None:
    path = tmp_path / "answers.parquet"
    assert write_answers(path, [answer_row(7, Answer(retrieved=retrieved, text=text,
                                                     meta=meta), variant=variant)]) == 1
    loaded = AnswersFile.load(path, source="ragev.toml")
    answer = loaded.answers[(variant, 7)]
    assert answer.text == text and dict(answer.meta) == meta
    assert list(answer.retrieved) == retrieved


def load(tmp_path: Path, columns: dict[str, Any]) -> AnswersFile:
    path = tmp_path / "engine.parquet"
    pq.write_table(pa.table(columns), path)
    return AnswersFile.load(path, source="ragev.toml")


@pytest.mark.parametrize(("columns", "message"), [
    ({"qid": [1], "retrieved_ids": [[1, 2]], "retrieved_texts": [["x"]], "answer": ["a"]},
     "q1 has 2 retrieved_ids but 1 retrieved_texts"),
    ({"qid": [1], "retrieved_ids": [[-3]], "answer": ["a"]},
     r"q1 retrieved_ids\[0\] is -3, a negative passage id"),
    ({"qid": [1], "retrieved_ids": [[None]], "retrieved_texts": [[None]], "answer": ["a"]},
     "q1 retrieved item 0 has neither an id nor a text"),
    ({"qid": [1], "answer": ["a"]}, "neither 'retrieved_ids' nor 'retrieved_texts'"),
    ({"qid": [1], "retrieved_ids": [[1]]}, "no 'answer' column"),
    ({"qid": [1], "retrieved_ids": [[1]], "answer": pa.array([None], pa.string())},
     "the answer of q1 is null"),
    ({"qid": [1], "retrieved_ids": [[1]], "answer": [None]},
     "column 'answer' is null, not string"),
    ({"qid": [1], "retrieved_ids": [[1]], "answer": ["a"], "meta": ["{"]},
     "the meta of q1 is not JSON"),
    ({"qid": [1], "retrieved_ids": [["1"]], "answer": ["a"]},
     "column 'retrieved_ids' is list<element: string>, not list<int64>"),
])
def test_a_file_that_cannot_be_scored_is_one_line(
    tmp_path: Path, columns: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message) as caught:
        load(tmp_path, columns)
    assert "\n" not in str(caught.value)
    assert str(caught.value).startswith("ragev.toml: [pipeline] answers = ")


def test_rows_without_a_variant_answer_every_configuration(tmp_path: Path) -> None:
    loaded = load(tmp_path, {"qid": [2, 1], "retrieved_texts": [["长城全长超过两万公里。"], []],
                             "answer": ["Антwort", ""]})
    assert not loaded.by_variant
    assert loaded.answers[(None, 2)].retrieved == ["长城全长超过两万公里。"]
    assert loaded.extra([1, 2], [None, "other"]) == []
    assert loaded.extra([1], [None]) == [(None, 2)]
    missing = tmp_path / "missing.parquet"
    with pytest.raises(ConfigError, match="no such file"):
        AnswersFile.load(missing, source="ragev.toml")
    (tmp_path / "text.parquet").write_text("not parquet", encoding="utf-8")
    with pytest.raises(ConfigError, match="is not a Parquet file"):
        AnswersFile.load(tmp_path / "text.parquet", source="ragev.toml")
