"""SamplesFile (``--ragev-samples``): one scored line per record, never failing the run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.record import Record
from pytest_ragev.core.types import MetricInput
from pytest_ragev.evaluation import score_records
from pytest_ragev.metrics import score
from pytest_ragev.plugin.samples import SamplesFile, sample_line


def _record(**changes: object) -> Record:
    fields: dict[str, object] = dict(
        qid=3, question="长城有多长？", retrieval_gt=[[3, 4]], grades={3: 1.0, 4: 1.0},
        retrieval_ids=[4, 9, 3], generated_text="长城全长超过两万公里。",
        generated_gt="长城超过两万公里。")
    fields.update(changes)
    return Record(**fields)  # type: ignore[arg-type]


def _weknora(record: Record) -> Record:
    return score_records([record], profile="weknora")[0]


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_line_is_the_report_sample_plus_the_variant() -> None:
    base = json.loads(sample_line(_record()))
    assert base["variant"] is None and base["question"] == "长城有多长？"
    assert {k: v for k, v in base.items() if k != "variant"} == _record().to_report_json()
    variant = json.loads(sample_line(_record(variant="k10")))
    assert variant == _record(variant="k10").to_report_json()
    assert sample_line(_record()).endswith("}\n") and "长城" in sample_line(_record())
    # With the question's content hash, as the JSON report's samples carry it.
    hashed = json.loads(sample_line(_record(), "c4a685ca3286be43"))
    assert hashed == {**_record().to_report_json(), "hash": "c4a685ca3286be43",
                      "variant": None}


def test_lines_are_scored_as_the_engine_scores_and_only_with_what_applies(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.jsonl"
    path.write_text("an earlier run's line\n", encoding="utf-8")
    samples = SamplesFile(path, scorer=_weknora)
    assert samples.open() is None
    assert path.read_text(encoding="utf-8") == ""  # emptied for this run
    samples.add(_record())
    samples.add(_record(qid=4, retrieval_gt=[], grades={}))
    samples.add(_record(qid=5, has_answer=False, generated_gt=""))
    samples.add(_record(qid=6, error="TimeoutError: no answer"))
    lines = {line["qid"]: line for line in _lines(path)}
    expected = score([MetricInput([[3, 4]], [4, 9, 3], "长城全长超过两万公里。",
                                  "长城超过两万公里。")])[0]
    assert lines[3]["metrics"] == pytest.approx(expected)
    assert "recall" not in lines[4]["metrics"] and "rougel" in lines[4]["metrics"]  # type: ignore[operator]
    assert "bleu1" not in lines[5]["metrics"] and "recall" in lines[5]["metrics"]  # type: ignore[operator]
    assert lines[6]["metrics"] == {} and lines[6]["error"] == "TimeoutError: no answer"


def test_a_scorer_that_fails_leaves_the_metrics_out_and_warns_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    def broken(record: Record) -> Record:
        raise ConfigError(f"custom metric 'x' returned nan for q{record.qid}")

    samples = SamplesFile(tmp_path / "s.jsonl", scorer=broken)
    assert samples.open() is None
    samples.add(_record(qid=1))
    samples.add(_record(qid=2))
    assert [line["metrics"] for line in _lines(tmp_path / "s.jsonl")] == [{}, {}]
    err = capsys.readouterr().err
    assert err.count("ragev: warning: --ragev-samples: q1 could not be scored") == 1
    assert "q2" not in err


def test_a_failed_write_warns_once_and_the_run_goes_on(
    tmp_path: Path, capsys: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "out"
    samples = SamplesFile(folder / "s.jsonl", scorer=_weknora)
    assert samples.open() is None
    shutil.rmtree(folder)  # the folder went away during the run
    samples.add(_record(qid=1))
    samples.add(_record(qid=2))
    err = capsys.readouterr().err
    assert err.count("ragev: warning: --ragev-samples: could not write to") == 1


def test_open_names_the_problem(tmp_path: Path) -> None:
    problem = SamplesFile(tmp_path, scorer=_weknora).open()  # a folder
    assert problem is not None and problem.startswith(f"--ragev-samples: cannot write {tmp_path}")


def test_a_stream_is_not_emptied_and_is_written_through(tmp_path: Path) -> None:
    samples = SamplesFile(Path("/dev/null"), scorer=_weknora)
    assert samples.open() is None
    samples.add(_record())  # written through (a rename over /dev/null would replace it)
    assert Path("/dev/null").is_char_device()
