"""``ragev dataset convert``: output that always loads, errors naming file and line, no leftovers.

The converters read BEIR folders and JSONL QA files; the command converts into a staging
folder beside DST, loads it there and only then moves it into place.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pytest_ragev.core.errors import DatasetError
from pytest_ragev.dataset import DATASET_FILES, load_dataset, write_dataset
from pytest_ragev.dataset import convert as _dataset_tools
from pytest_ragev.dataset.convert import _IdMap
from tests.unit._cli import run_cli

_NUMBERISH_IDS = st.tuples(st.sampled_from(["", "+", "-", " "]), st.integers(0, 30)).map(
    lambda parts: f"{parts[0]}{parts[1]}"
)


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    return path


def _beir(
    folder: Path,
    *,
    corpus: list[dict[str, Any]] | None = None,
    queries: list[dict[str, Any]] | None = None,
    qrels: str = "query-id\tcorpus-id\tscore\n1\t1\t1\n2\t2\t1\n",
) -> Path:
    _jsonl(folder / "corpus.jsonl", corpus if corpus is not None else [
        {"_id": "1", "text": "Passage one."},
        {"_id": "2", "text": "Passage two."},
        {"_id": "3", "text": "A distractor."},
    ])
    _jsonl(folder / "queries.jsonl", queries if queries is not None else [
        {"_id": "1", "text": "Question one?", "answer": "One."},
        {"_id": "2", "text": "Question two?", "answer": "Two."},
    ])
    (folder / "qrels").mkdir(exist_ok=True)
    (folder / "qrels" / "test.tsv").write_text(qrels)
    return folder


def _assert_failed_cleanly(
    code: int, out: str, err: str, tmp_path: Path, destination: Path, *expected: str
) -> None:
    """Exit 2, one error line with ``expected``, no "wrote", nothing left behind."""
    assert code == 2, err
    assert err.startswith("ragev: error: ") and err.count("\n") == 1, err
    for part in expected:
        assert part in err, err
    assert "wrote" not in out
    assert not destination.exists()
    leftovers = [path.name for path in destination.parent.iterdir() if path.name.endswith(".tmp")]
    assert leftovers == []


# --- 1. broken output is never written -----------------------------------------------------------


def test_beir_duplicate_qrels_line_fails_naming_file_and_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    beir = _beir(tmp_path / "beir", qrels="query-id\tcorpus-id\tscore\n1\t1\t1\n2\t2\t1\n1\t1\t1\n")
    out_dir = tmp_path / "out"
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "beir",
                             str(beir), str(out_dir))
    _assert_failed_cleanly(
        code, out, err, tmp_path, out_dir,
        "qrels/test.tsv line 4: query-id '1' and corpus-id '1' are judged twice "
        "(first on line 2); keep one line per pair",
    )


def test_beir_integer_ids_that_collide_are_renumbered(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    beir = _beir(
        tmp_path / "beir",
        corpus=[{"_id": "7", "text": "Seven."}, {"_id": "007", "text": "Double-o seven."}],
        queries=[{"_id": 1, "text": "Which agent?"}],
        qrels="1\t007\t1\n",
    )
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "beir", str(beir),
                             str(tmp_path / "out"))
    assert code == 0, err
    assert "renumbered ids of corpus (see id_map.parquet)" in out
    ds = load_dataset(tmp_path / "out")
    assert dict(ds.corpus) == {1: "Seven.", 2: "Double-o seven."}
    assert ds.pair(1).passages == ("Double-o seven.",)
    assert pq.read_table(tmp_path / "out" / "id_map.parquet").to_pylist() == [
        {"table": "corpus", "id": 1, "source_id": "7"},
        {"table": "corpus", "id": 2, "source_id": "007"},
    ]


def test_beir_negative_passage_ids_are_renumbered_so_the_output_loads(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The loader refuses negative passage ids (the metrics' placeholders); question ids
    may stay negative."""
    beir = _beir(
        tmp_path / "beir",
        corpus=[{"_id": "-3", "text": "Минус три."}, {"_id": 4, "text": "Четыре."}],
        queries=[{"_id": "-1", "text": "Сколько?"}],
        qrels="-1\t-3\t1\n",
    )
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "beir", str(beir),
                             str(tmp_path / "out"))
    assert code == 0, err
    assert "renumbered ids of corpus (see id_map.parquet)" in out
    ds = load_dataset(tmp_path / "out")
    assert dict(ds.corpus) == {1: "Минус три.", 2: "Четыре."}
    assert ds.pair(-1).passages == ("Минус три.",)


@given(st.lists(_NUMBERISH_IDS, unique=True))
def test_passage_id_maps_are_never_negative(source_ids: list[str]) -> None:
    assert all(number >= 0 for number in _IdMap(source_ids, passages=True).ids)


def test_jsonl_ragas_keys_are_reported_not_ignored(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    qa_file = _jsonl(tmp_path / "qa.jsonl", [
        {"question": "Who?", "contexts": ["Somebody did."], "ground_truth": "Somebody."},
    ])
    out_dir = tmp_path / "out"
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "jsonl", str(qa_file),
                             str(out_dir))
    _assert_failed_cleanly(
        code, out, err, tmp_path, out_dir,
        "qa.jsonl line 1: unknown key 'contexts' (known keys: id, question, answer, passages, "
        "passage_ids, category, tags); rename it to 'passages'",
    )
    qa_file.write_text(json.dumps({"question": "Who?", "passages": ["Somebody did."],
                                   "ground_truth": "Somebody."}) + "\n")
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "jsonl", str(qa_file),
                             str(out_dir))
    _assert_failed_cleanly(code, out, err, tmp_path, out_dir, "unknown key 'ground_truth'",
                           "rename it to 'answer'")


def test_jsonl_without_any_passage_names_the_source(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    qa_file = _jsonl(tmp_path / "qa.jsonl", [{"question": "Who?", "answer": "Me."}])
    out_dir = tmp_path / "out"
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "jsonl", str(qa_file),
                             str(out_dir))
    _assert_failed_cleanly(code, out, err, tmp_path, out_dir,
                           f"{qa_file}: no line lists relevant passages")
    assert "corpus.parquet" not in err


def test_output_that_does_not_load_is_not_written(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The load check runs on the staged folder; its error names DST, and DST stays away."""

    def broken(source: Path, destination: Path, **_: Any) -> _dataset_tools.ConvertSummary:
        write_dataset(destination, queries={1: "q"}, corpus={1: "p"}, qrels=[(1, 1), (1, 1)])
        return _dataset_tools.ConvertSummary(1, 1, 0, 2, ())

    monkeypatch.setattr(_dataset_tools, "convert_beir", broken)
    beir = _beir(tmp_path / "beir")
    out_dir = tmp_path / "deep" / "er" / "out"
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "beir",
                             str(beir), str(out_dir))
    assert code == 2
    assert "nothing was written" in err
    assert f"{out_dir}/qrels.parquet: columns 'qid','pid' hold the pair (1, 1) twice" in err
    assert ".tmp" not in err
    assert "wrote" not in out
    assert not (tmp_path / "deep").exists()  # parent folders made for the staging are gone


def test_failed_conversion_leaves_an_existing_dataset_untouched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    beir = _beir(tmp_path / "beir")
    out_dir = tmp_path / "out"
    assert run_cli(capsys, "dataset", "convert", "--from", "beir", str(beir), str(out_dir))[0] == 0
    before = {name: (out_dir / name).read_bytes() for name in DATASET_FILES}
    (beir / "qrels" / "test.tsv").write_text("1\t1\t1\n1\t99\t1\n")
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "beir", str(beir),
                             str(out_dir), "--force")
    assert code == 2 and "line 2: corpus-id '99' is not in corpus.jsonl" in err
    assert "wrote" not in out
    assert {name: (out_dir / name).read_bytes() for name in DATASET_FILES} == before
    assert sorted(path.name for path in tmp_path.iterdir()) == ["beir", "out"]


def test_force_removes_a_stale_id_map(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    named = _beir(
        tmp_path / "named",
        corpus=[{"_id": "doc-a", "text": "A."}, {"_id": "doc-b", "text": "B."}],
        qrels="1\tdoc-a\t1\n2\tdoc-b\t1\n",
    )
    code, _, _ = run_cli(capsys, "dataset", "convert", "--from", "beir", str(named), str(out_dir))
    assert code == 0 and (out_dir / "id_map.parquet").exists()
    numbered = _beir(tmp_path / "numbered")
    code, _, err = run_cli(capsys, "dataset", "convert", "--from", "beir",
                           str(numbered), str(out_dir))
    assert code == 2 and "already holds queries.parquet" in err
    code, _, err = run_cli(capsys, "dataset", "convert", "--from", "beir", str(numbered),
                           str(out_dir), "--force")
    assert code == 0, err
    assert not (out_dir / "id_map.parquet").exists()
    assert sorted(path.name for path in out_dir.iterdir()) == sorted(DATASET_FILES)
    assert dict(load_dataset(out_dir).corpus) == {1: "Passage one.", 2: "Passage two.",
                                                  3: "A distractor."}


def test_an_id_map_alone_needs_force(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "id_map.parquet").write_bytes(b"old")
    code, _, err = run_cli(capsys, "dataset", "convert", "--from", "beir",
                           str(_beir(tmp_path / "beir")), str(out_dir))
    assert code == 2 and "already holds id_map.parquet" in err
    assert (out_dir / "id_map.parquet").read_bytes() == b"old"


def test_sample_writes_through_a_staging_folder_too(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    source = _beir(tmp_path / "beir")
    out_dir = tmp_path / "out"
    assert run_cli(capsys, "dataset", "convert", "--from", "beir",
                   str(source), str(out_dir))[0] == 0
    sample_dir = tmp_path / "new" / "sample"
    code, out, err = run_cli(capsys, "dataset", "sample", str(out_dir), str(sample_dir),
                             "--questions", "1")
    assert code == 0, err
    assert out.startswith(f"wrote {sample_dir}: 1 questions")
    assert len(load_dataset(sample_dir).pairs) == 1
    assert sorted(path.name for path in (tmp_path / "new").iterdir()) == ["sample"]


# --- 2. duplicate source ids --------------------------------------------------------------------


@pytest.mark.parametrize("file", ["corpus.jsonl", "queries.jsonl"])
def test_beir_duplicate_string_id_names_file_and_second_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, file: str
) -> None:
    rows = [{"_id": "x-1", "text": "first"}, {"_id": "x-2", "text": "second"},
            {"_id": "x-1", "text": "again"}]
    beir = _beir(tmp_path / "beir", **{file.split(".")[0]: rows}, qrels="x-1\tx-2\t1\n")
    out_dir = tmp_path / "out"
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "beir",
                             str(beir), str(out_dir))
    noun = "passage" if file == "corpus.jsonl" else "query"
    _assert_failed_cleanly(
        code, out, err, tmp_path, out_dir,
        f"{file} line 3: _id 'x-1' appears twice (first on line 1); give every {noun} its own _id",
    )


def test_beir_same_id_as_number_and_string_is_a_duplicate(tmp_path: Path) -> None:
    beir = _beir(tmp_path / "beir", corpus=[{"_id": 5, "text": "a"}, {"_id": "5", "text": "b"}])
    with pytest.raises(DatasetError, match=r"corpus.jsonl line 2: _id '5' appears twice"):
        _dataset_tools.convert_beir(beir, tmp_path / "out")


# --- 3. qrels layouts and header detection -----------------------------------------------------


def _convert_qrels(tmp_path: Path, qrels: str) -> list[tuple[int, tuple[int, ...]]]:
    beir = _beir(
        tmp_path / "beir",
        corpus=[{"_id": "d1", "text": "One."}, {"_id": "d2", "text": "Two."}],
        queries=[{"_id": "q1", "text": "First?"}, {"_id": "q2", "text": "Second?"}],
        qrels=qrels,
    )
    _dataset_tools.convert_beir(beir, tmp_path / "out")
    return [(pair.qid, pair.pids) for pair in load_dataset(tmp_path / "out").pairs]


@pytest.mark.parametrize(
    "qrels",
    [
        "q1\td1\nq2\td2\n",  # two columns, string ids, no header: line 1 is a judgement
        "q1 0 d1 1\nq2 0 d2 1\n",  # TREC, space-separated
        "q1\tQ0\td1\t1\nq2\tQ0\td2\t1\n",  # TREC, tab-separated
        "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t1\n",  # BEIR with header
        "query_id corpus_id\nq1 d1\n\nq2 d2\n",  # header names, spaces, a blank line
        "qid\titer\tdocno\trel\nq1\t0\td1\t1\nq2\t0\td2\t1\n",  # TREC header
    ],
)
def test_qrels_layouts(tmp_path: Path, qrels: str) -> None:
    assert _convert_qrels(tmp_path, qrels) == [(1, (1,)), (2, (2,))]


def test_qrels_first_line_with_unknown_ids_is_an_error_not_a_header(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match=r"test.tsv line 1: query-id 'q9' is not in queries"):
        _convert_qrels(tmp_path, "q9\td9\t1\nq2\td2\t1\n")


@pytest.mark.parametrize(
    ("qrels", "expected"),
    [
        ("query-id\tcorpus-id\tscore\n", "test.tsv holds no judgements; add lines"),
        ("\n\n", "test.tsv holds no judgements"),
        ("q1\td1\tyes\n", "test.tsv line 1: score 'yes' is not an integer"),
        ("q1 d1 1 2 3\n", "test.tsv line 1: expected 'query-id<TAB>corpus-id<TAB>score'"),
        ("q1\td1\t1\nq1 0 d1 2\n", "line 2: query-id 'q1' and corpus-id 'd1' are judged twice"),
    ],
)
def test_qrels_errors(tmp_path: Path, qrels: str, expected: str) -> None:
    with pytest.raises(DatasetError) as caught:
        _convert_qrels(tmp_path, qrels)
    assert expected in str(caught.value)
    assert not (tmp_path / "out").exists()


# --- 4. JSONL ids -------------------------------------------------------------------------------


def test_jsonl_string_ids_are_renumbered_with_an_id_map(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    corpus = _jsonl(tmp_path / "corpus.jsonl", [
        {"id": "doc-1", "text": "Paris is in France."},
        {"id": "doc-2", "text": "Rome is in Italy."},
        {"id": "doc-3", "text": "A distractor."},
    ])
    qa_file = _jsonl(tmp_path / "qa.jsonl", [
        {"id": "q1", "question": "Where is Paris?", "answer": "France.",
         "passage_ids": ["doc-1"]},
        {"id": "q2", "question": "Where is Rome?", "passage_ids": ["doc-2"],
         "passages": ["Rome is the capital of Italy."]},
    ])
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "jsonl", str(qa_file),
                             str(tmp_path / "out"), "--corpus", str(corpus))
    assert code == 0, err
    assert "2 questions, 4 passages, 1 answers, 3 qrels" in out
    assert "renumbered ids of queries, corpus (see id_map.parquet)" in out
    ds = load_dataset(tmp_path / "out")
    assert ds.pair(1).passages == ("Paris is in France.",) and ds.pair(1).answer == "France."
    assert ds.pair(2).pids == (2, 4)  # the new text takes the next free id
    assert ds.corpus[4] == "Rome is the capital of Italy."
    assert pq.read_table(tmp_path / "out" / "id_map.parquet").to_pylist() == [
        {"table": "queries", "id": 1, "source_id": "q1"},
        {"table": "queries", "id": 2, "source_id": "q2"},
        {"table": "corpus", "id": 1, "source_id": "doc-1"},
        {"table": "corpus", "id": 2, "source_id": "doc-2"},
        {"table": "corpus", "id": 3, "source_id": "doc-3"},
    ]


def test_jsonl_integer_ids_are_kept(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    qa_file = _jsonl(tmp_path / "qa.jsonl", [
        {"id": 40, "question": "A?", "passages": ["a"]},
        {"id": "41", "question": "B?", "passages": ["b"]},
    ])
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "jsonl", str(qa_file),
                             str(tmp_path / "out"))
    assert code == 0, err
    assert "renumbered" not in out and not (tmp_path / "out" / "id_map.parquet").exists()
    assert [pair.qid for pair in load_dataset(tmp_path / "out").pairs] == [40, 41]


@pytest.mark.parametrize(
    ("corpus", "lines", "expected"),
    [
        ([{"id": "a", "text": "x"}, {"id": "a", "text": "y"}], [],
         "corpus.jsonl line 2: id 'a' appears twice (first on line 1)"),
        ([{"text": "x"}], [], "corpus.jsonl line 1: field 'id' is missing, blank"),
        ([], [{"id": "q", "question": "?"}, {"id": "q", "question": "!"}],
         "qa.jsonl line 2: id 'q' appears twice (first on line 1)"),
        ([], [{"id": 1.5, "question": "?"}], "qa.jsonl line 1: field 'id' is 1.5"),
        ([], [{"id": " ", "question": "?"}], "qa.jsonl line 1: field 'id' is ' '"),
        ([{"id": "a", "text": "x"}], [{"question": "?", "passage_ids": ["b"]}],
         "qa.jsonl line 1: passage id 'b' is not a known passage in"),
        ([], [{"question": "?", "answer": ["a"]}], "field 'answer' is a list; give it a string"),
    ],
)
def test_jsonl_id_errors(
    tmp_path: Path, corpus: list[dict[str, Any]], lines: list[dict[str, Any]], expected: str
) -> None:
    corpus_file = _jsonl(tmp_path / "corpus.jsonl", corpus) if corpus else None
    qa_file = _jsonl(tmp_path / "qa.jsonl", lines or [{"question": "?", "passages": ["p"]}])
    with pytest.raises(DatasetError) as caught:
        _dataset_tools.convert_jsonl(qa_file, tmp_path / "out", corpus_file=corpus_file)
    assert expected in str(caught.value)


_NUMBERISH = st.tuples(st.sampled_from(["", "+", "-", "0", " "]), st.integers(0, 30)).map(
    lambda parts: f"{parts[0]}{parts[1]}"
)


@example(["7", "007"])
@example(["5", "+5", "x"])
@given(st.lists(st.one_of(_NUMBERISH, st.integers(-(2**70), 2**70).map(str),
                          st.from_regex(r"[ +\-0-9a-z_]{1,6}", fullmatch=True)), unique=True))
def test_id_map_gives_distinct_ids_and_keeps_distinct_integers(source_ids: list[str]) -> None:
    id_map = _IdMap(source_ids)
    assert len(set(id_map.ids)) == len(source_ids)
    assert all(-(2**63) <= number < 2**63 for number in id_map.ids)
    assert [id_map.get(value) for value in source_ids] == id_map.ids
    if not id_map.renumbered:
        assert id_map.ids == [int(value) for value in source_ids]


# --- 5. messages and blank answers --------------------------------------------------------------


def test_wrong_kind_of_source_says_what_to_pass(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    qa_file = _jsonl(tmp_path / "qa.jsonl", [{"question": "?", "passages": ["p"]}])
    code, _, err = run_cli(capsys, "dataset", "convert", "--from", "beir", str(qa_file),
                           str(tmp_path / "o"))
    assert code == 2
    assert f"{qa_file} is a file; --from beir takes a BEIR folder" in err
    assert "use --from jsonl" in err and "does not exist" not in err
    beir = _beir(tmp_path / "beir")
    code, _, err = run_cli(capsys, "dataset", "convert", "--from", "jsonl", str(beir),
                           str(tmp_path / "o"))
    assert code == 2
    assert f"{beir} is a folder; --from jsonl takes a JSONL QA file" in err
    assert "it looks like a BEIR folder: use --from beir" in err and "does not exist" not in err
    code, _, err = run_cli(capsys, "dataset", "convert", "--from", "beir", str(tmp_path / "none"),
                           str(tmp_path / "o"))
    assert code == 2 and "BEIR folder" in err and "does not exist" in err
    (beir / "queries.jsonl").unlink()
    code, _, err = run_cli(capsys, "dataset", "convert", "--from", "beir", str(beir),
                           str(tmp_path / "o"))
    assert code == 2 and "queries.jsonl is missing; a BEIR folder holds" in err
    assert not (tmp_path / "o").exists()


def test_blank_answers_count_as_no_answer_in_both_converters(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    qa_file = _jsonl(tmp_path / "qa.jsonl", [
        {"question": "A?", "answer": "Yes.", "passages": ["a"]},
        {"question": "B?", "answer": "", "passages": ["b"]},
        {"question": "C?", "answer": "  ", "passages": ["c"]},
        {"question": "D?", "answer": None, "passages": ["d"]},
    ])
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "jsonl", str(qa_file),
                             str(tmp_path / "from-jsonl"))
    assert code == 0 and "4 questions, 4 passages, 1 answers" in out
    assert "3 questions without a reference answer (first: qid 2)" in err
    beir = _beir(tmp_path / "beir", queries=[
        {"_id": "1", "text": "A?", "answer": "Yes."}, {"_id": "2", "text": "B?", "answer": ""},
    ])
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "beir", str(beir),
                             str(tmp_path / "from-beir"))
    assert code == 0 and "2 questions, 3 passages, 1 answers" in out
    for folder in ("from-jsonl", "from-beir"):
        ds = load_dataset(tmp_path / folder)
        assert ds.stats.answers == 1 and ds.pair(2).answer is None
        assert ds.stats.questions_without_answer == len(ds.pairs) - 1


def test_jsonl_metadata_keys_are_left_out_with_a_warning_and_category_becomes_a_tag(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    qa_file = _jsonl(tmp_path / "qa.jsonl", [
        {"question": "Who?", "answer": "Me.", "passages": ["I did."], "category": "people"},
        {"question": "When?", "answer": "Now.", "passages": ["It is now."], "source": "faq",
         "category": "time", "tags": ["billing", "lang:en", "billing"]},
        {"question": "长城有多长？", "answer": "两万公里。", "passages": ["长城很长。"]},
    ])
    out_dir = tmp_path / "out"
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "jsonl", str(qa_file),
                             str(out_dir))
    assert code == 0, err
    assert out.startswith(f"wrote {out_dir}: 3 questions")
    assert err.strip() == (
        f"ragev: warning: {qa_file}: left out key(s) 'source', which the dataset "
        "format has no place for (known keys: id, question, answer, passages, passage_ids, "
        "category, tags)"
    )
    ds = load_dataset(out_dir)
    assert [pair.answer for pair in ds.pairs] == ["Me.", "Now.", "两万公里。"]
    assert [pair.tags for pair in ds.pairs] == [
        ("people",), ("time", "billing", "lang:en"), ()]
    assert ds.stats.tags == {"billing": 1, "lang:en": 1, "people": 1, "time": 1}
    code, out, err = run_cli(capsys, "dataset", "stats", str(out_dir))
    assert code == 0 and "questions per tag: billing 1, lang:en 1, people 1, time 1" in out


def test_jsonl_tags_of_a_wrong_type_are_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    qa_file = _jsonl(tmp_path / "qa.jsonl", [
        {"question": "Wer?", "passages": ["Ich."], "tags": {"de": True}},
    ])
    code, out, err = run_cli(capsys, "dataset", "convert", "--from", "jsonl", str(qa_file),
                         str(tmp_path / "out"))
    _assert_failed_cleanly(code, out, err, tmp_path, tmp_path / "out",
                           "qa.jsonl line 1: field 'tags' is dict; write a string or a list")


def test_beir_query_categories_and_tags_become_tags(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    beir = tmp_path / "beir"
    beir.mkdir()
    _jsonl(beir / "corpus.jsonl", [{"_id": "d1", "text": "Der Turm ist 330 m hoch."},
                                   {"_id": "d2", "text": "Москва — столица России."}])
    _jsonl(beir / "queries.jsonl", [
        {"_id": "q1", "text": "Wie hoch ist der Turm?", "metadata": {"category": "setup"}},
        {"_id": "q2", "text": "Какая столица России?", "tags": "billing"},
    ])
    (beir / "qrels").mkdir()
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n"
                                             "q2\td2\t1\n")
    code, _out, err = run_cli(capsys, "dataset", "convert", "--from", "beir", str(beir),
                          str(tmp_path / "out"))
    assert code == 0, err
    ds = load_dataset(tmp_path / "out")
    assert [pair.tags for pair in ds.pairs] == [("setup",), ("billing",)]
