"""The baseline life cycle of a session (run_gate), on real files, without pytest runs."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from pytest_ragev.core.errors import BaselineError
from pytest_ragev.core.record import Record
from pytest_ragev.core.results import MetricSummary, RunResult
from pytest_ragev.gate import (
    GateInputs,
    GateRules,
    load_snapshot,
    obtained_path,
    run_gate,
    write_snapshot,
)
from pytest_ragev.gate.snapshot import Snapshot

RULES = GateRules(resamples=2_000)
QIDS = tuple(range(1, 31))
#: The dataset's content hashes (Dataset.question_hashes) for every qid the tests use.
HASHES = {qid: f"hash-of-{qid}" for qid in range(1, 100)}


def run(
    recall: float = 0.8,
    *,
    variant: str | None = None,
    qids: tuple[int, ...] = QIDS,
    fingerprint: str = "f" * 64,
) -> RunResult:
    """A run whose recall is ``recall`` on every question (German and Chinese texts)."""
    samples = [
        Record(
            qid=qid, question=f"Wie hoch ist der Turm {qid}? 塔有多高？", retrieval_gt=[[qid]],
            retrieval_ids=[qid] if recall else [999], generated_text="Er ist 330 Meter hoch.",
            generated_gt="330 Meter.", metrics={"recall": recall}, variant=variant,
        )
        for qid in qids
    ]
    return RunResult(
        dataset_id="mini", fingerprint=fingerprint, dataset_stats={"questions": len(qids)},
        profile="weknora", params={"pipeline": {"name": "builtin"}}, params_hash="h",
        samples=samples, summary={"recall": MetricSummary("recall", recall, len(qids))},
        variant=variant,
    )


def inputs(path: Path | None, **kw: object) -> GateInputs:
    base = {"rules": RULES, "baseline_path": path, "configured": (None,), "plugin_version": "0.2.0",
            "every_qid": QIDS, "hashes": HASHES, "corpus_fingerprint": "c" * 64}
    base.update(kw)
    return GateInputs(**base)  # type: ignore[arg-type]


def snap(*runs: RunResult) -> Snapshot:
    return Snapshot.from_runs(runs, plugin_version="0.2.0", hashes=HASHES,
                              corpus_fingerprint="c" * 64)


def test_without_a_baseline_path_nothing_is_compared_and_update_fails(tmp_path: Path) -> None:
    outcome = run_gate([run()], inputs(None))
    assert outcome.passed and not outcome.comparisons and not outcome.notes
    updated = run_gate([run()], inputs(None, update=True))
    assert updated.failures == (
        "ragev: --ragev-update-baseline needs a baseline path; set [baseline] path in the "
        "config or pass --ragev-baseline PATH",
    )
    assert not list(tmp_path.iterdir())


def test_a_missing_baseline_is_created_and_fails_the_run(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "ragev-baseline.json"
    outcome = run_gate([run()], inputs(path))
    assert outcome.failures == (f"ragev: baseline not found, created {path}; commit it and rerun",)
    assert load_snapshot(path).base.summary["recall"].mean == 0.8
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_a_missing_baseline_is_not_created_from_variants_alone(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    outcome = run_gate([run(variant="k10")], inputs(path, configured=(None, "k10")))
    assert "only variants were selected" in outcome.failures[0]
    assert not path.exists()


def test_an_unchanged_run_passes_and_removes_a_stale_obtained_file(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    write_snapshot(path, snap(run()))
    written = path.read_bytes()
    obtained = obtained_path(path)
    obtained.write_text("{}", encoding="utf-8")
    outcome = run_gate([run()], inputs(path))
    assert outcome.passed and len(outcome.comparisons) == 1
    assert outcome.comparisons[0].metrics[0].status == "unchanged"
    assert outcome.notes[-1] == f"ragev: removed the stale {obtained} (this run passed)"
    assert not obtained.exists() and path.read_bytes() == written


def test_a_regression_fails_writes_the_obtained_snapshot_and_leaves_the_baseline(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ragev-baseline.json"
    write_snapshot(path, snap(run(0.8)))
    written = path.read_bytes()
    outcome = run_gate([run(0.0)], inputs(path))
    assert len(outcome.failures) == 1 and outcome.failures[0].startswith("ragev: recall 0.000 <")
    assert [d.qid for d in outcome.regressions] == list(QIDS[:10])  # top_regressions = 10
    obtained = obtained_path(path)
    assert load_snapshot(obtained).base.summary["recall"].mean == 0.0
    assert outcome.notes[-1] == (
        f"ragev: this run's snapshot written to {obtained}; diff it against {path}"
    )
    assert path.read_bytes() == written  # never written without the flag


def test_update_replaces_and_a_partial_update_keeps_the_other_runs(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    configured = (None, "k10", "k20")
    full = run_gate([run(0.5), run(0.6, variant="k10"), run(0.7, variant="k20")],
                    inputs(path, update=True, configured=configured))
    assert full.passed and full.notes == (f"ragev: baseline written to {path}",)
    partial = run_gate([run(0.9, variant="k10")], inputs(path, update=True, configured=configured))
    assert partial.notes[0] == (
        f"ragev: baseline written to {path} (updated: k10; kept from the previous file: base, k20)"
    )
    snapshot = load_snapshot(path)
    assert snapshot.base.summary["recall"].mean == 0.5
    assert snapshot.variants["k10"].summary["recall"].mean == 0.9
    assert snapshot.variants["k20"].summary["recall"].mean == 0.7


def test_a_partial_update_refuses_a_damaged_file_a_full_one_replaces_it(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    path.write_text("{ not json", encoding="utf-8")
    with pytest.raises(BaselineError, match="a partial update keeps the file's other runs"):
        run_gate([run(variant="k10")], inputs(path, update=True, configured=(None, "k10")))
    assert path.read_text(encoding="utf-8") == "{ not json"
    run_gate([run(), run(variant="k10")], inputs(path, update=True, configured=(None, "k10")))
    assert set(load_snapshot(path).variants) == {"k10"}


def test_a_damaged_baseline_is_not_compared_and_stays_as_it_was(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    data = snap(run()).to_data()
    data["base"]["questions"][0]["metrics"]["recall"] = "hoch"
    text = json.dumps(data)
    path.write_text(text, encoding="utf-8")
    outcome = run_gate([run()], inputs(path))
    assert outcome.not_compared is not None
    assert "base.questions[0].metrics.recall" in outcome.not_compared
    assert outcome.failures == (f"ragev: gate not compared: {outcome.not_compared}",)
    assert not outcome.comparisons
    assert path.read_text(encoding="utf-8") == text
    assert not obtained_path(path).exists()


def test_an_interrupted_run_leaves_the_baseline_untouched(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    for update in (False, True):
        outcome = run_gate([run(0.0)], inputs(path, interrupted=True, update=update))
        assert outcome.notes == (f"ragev: run interrupted: baseline {path} left untouched",)
        assert outcome.passed and not path.exists()


def test_an_update_with_no_question_run_fails_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    outcome = run_gate([], inputs(path, update=True))
    assert "no question ran" in outcome.failures[0] and not path.exists()


def test_a_limit_run_is_compared_with_the_full_baseline(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    write_snapshot(path, snap(run(fingerprint="full" * 16)))
    # --ragev-limit 5: the limited dataset has a fingerprint of its own.
    limited = run(qids=QIDS[:5], fingerprint="part" * 16)
    outcome = run_gate([limited], inputs(path, limit=5, source_fingerprint="full" * 16))
    assert outcome.passed and outcome.comparisons[0].common_qids == list(QIDS[:5])
    assert outcome.comparisons[0].removed == list(QIDS[5:])
    assert outcome.comparisons[0].changed == []
    updated = run_gate([limited], inputs(path, update=True, limit=5,
                                         source_fingerprint="full" * 16))
    assert any("holds only the first 5 questions" in note for note in updated.notes)
    assert any("now holds 5 of 30 questions" in note for note in updated.notes)


def test_a_variant_run_alone_is_gated_against_its_own_recorded_run(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    write_snapshot(path, snap(run(0.8), run(0.0, variant="k10")))
    outcome = run_gate([run(0.0, variant="k10")], inputs(path, configured=(None, "k10")))
    assert outcome.passed and outcome.comparisons[0].variant == "k10"


def test_the_variants_table_compares_each_variant_with_the_base_run(tmp_path: Path) -> None:
    outcome = run_gate([run(0.8), run(0.2, variant="k10")], inputs(None))
    assert outcome.variant_table is not None
    cell = outcome.variant_table.rows[0].cells["recall"]
    assert cell.delta == pytest.approx(-0.6) and cell.marker == "▼"


# ------------------------------------------------------------- an edited dataset

def test_an_edited_dataset_compares_the_unchanged_questions_and_lists_the_others(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ragev-baseline.json"
    write_snapshot(path, snap(run(0.8)))
    # Question 30 removed, 31 and 32 added, 7 edited (its answer): a new dataset fingerprint.
    qids = (*QIDS[:-1], 31, 32)
    edited = {**HASHES, 7: "hash-of-7-edited"}
    current = run(0.8, qids=qids, fingerprint="e" * 64)
    outcome = run_gate([current], inputs(path, hashes=edited))
    assert outcome.passed and outcome.not_compared is None
    comparison = outcome.comparisons[0]
    assert comparison.added == [31, 32] and comparison.removed == [30]
    assert comparison.changed == [7]
    assert 7 not in comparison.common_qids and len(comparison.common_qids) == 28
    assert comparison.metrics[0].n == 28
    # Same corpus: nothing to say about retrieval.
    assert not any("corpus changed" in note for note in outcome.notes)


def test_an_edited_question_is_neither_compared_nor_listed_as_regressed(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    write_snapshot(path, snap(run(0.8)))
    worse = run(0.8, fingerprint="e" * 64)
    # Question 3's reference answer was rewritten and its score collapsed: not a regression.
    samples = [s if s.qid != 3 else dataclasses.replace(s, metrics={"recall": 0.0})
               for s in worse.samples]
    current = dataclasses.replace(worse, samples=samples)
    outcome = run_gate([current], inputs(path, hashes={**HASHES, 3: "new"}))
    assert outcome.passed and outcome.regressions == ()
    assert outcome.comparisons[0].metrics[0].status == "unchanged"


def test_a_corpus_change_is_reported_as_such(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    write_snapshot(path, snap(run(0.8)))
    current = run(0.8, fingerprint="e" * 64)
    outcome = run_gate([current], inputs(path, corpus_fingerprint="d" * 64))
    assert outcome.corpus_change is not None
    assert any(note.startswith("ragev: warning: the corpus changed since the baseline")
               for note in outcome.notes)
    assert outcome.passed


def test_strict_dataset_is_not_compared_on_an_edited_dataset(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    write_snapshot(path, snap(run(0.8)))
    strict = GateRules(resamples=2_000, strict_dataset=True)
    outcome = run_gate([run(0.8, fingerprint="e" * 64)], inputs(path, rules=strict))
    assert outcome.not_compared is not None
    assert "strict_dataset = true" in outcome.not_compared
    assert not outcome.comparisons and not obtained_path(path).exists()
    # The same dataset passes under the strict rule.
    assert run_gate([run(0.8)], inputs(path, rules=strict)).not_compared is None


def test_another_metric_profile_is_not_compared(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    write_snapshot(path, snap(run(0.8)))
    other = dataclasses.replace(run(0.8), profile="standard")
    outcome = run_gate([other], inputs(path))
    assert outcome.not_compared is not None and "metric profile 'weknora'" in outcome.not_compared
    assert outcome.failures[0].startswith("ragev: gate not compared: ")


def test_a_baseline_of_an_earlier_pytest_ragev_is_not_compared_until_rewritten(
    tmp_path: Path
) -> None:
    path = tmp_path / "ragev-baseline.json"
    data = snap(run(0.8)).to_data()
    data["schema_version"] = 2
    path.write_text(json.dumps(data), encoding="utf-8")
    outcome = run_gate([run(0.8)], inputs(path))
    assert outcome.not_compared == (
        f"{path} was made by an earlier pytest-ragev (schema_version 2); rewrite it with "
        "--ragev-update-baseline")
    assert outcome.failures == (f"ragev: gate not compared: {outcome.not_compared}",)
    # The rewrite: a complete update replaces the file it cannot read.
    run_gate([run(0.8)], inputs(path, update=True))
    assert run_gate([run(0.8)], inputs(path)).passed


# ------------------------------------------------------------- variants the baseline lacks

def test_new_variants_are_warned_about_in_one_line_and_go_to_the_obtained_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "ragev-baseline.json"
    write_snapshot(path, snap(run(0.8)))
    configured = (None, "k10", "k20")
    runs = [run(0.8), run(0.5, variant="k10"), run(0.4, variant="k20")]
    outcome = run_gate(runs, inputs(path, configured=configured))
    assert outcome.passed and outcome.not_compared is None
    assert outcome.new_variants == ("k10", "k20")
    assert [c.variant for c in outcome.comparisons] == [None]
    warnings = [note for note in outcome.notes if "new, not compared" in note]
    assert warnings == [
        f"ragev: warning: variant 'k10', 'k20' are new, not compared ({path} has no run of "
        "them); record them with --ragev-update-baseline --ragev-variant k10 --ragev-variant "
        "k20 (the other runs in the file are kept)"
    ]
    obtained = load_snapshot(obtained_path(path))
    assert set(obtained.variants) == {"k10", "k20"}
    assert obtained.variants["k10"].summary["recall"].mean == 0.5


def test_require_all_variants_makes_a_missing_variant_not_compared(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    write_snapshot(path, snap(run(0.8)))
    rules = GateRules(resamples=2_000, require_all_variants=True)
    runs = [run(0.8), run(0.5, variant="k10"), run(0.4, variant="k20")]
    outcome = run_gate(runs, inputs(path, rules=rules, configured=(None, "k10", "k20")))
    assert outcome.not_compared == (
        f"{path} has no run of variant 'k10', 'k20' (it has: none) and [gate] "
        "require_all_variants = true; record them with --ragev-update-baseline --ragev-variant "
        "k10 --ragev-variant k20 (the other runs in the file are kept)"
    )
    assert not outcome.comparisons and not obtained_path(path).exists()


def test_no_baseline_switches_the_gate_off(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    write_snapshot(path, snap(run(0.8)))
    outcome = run_gate([run(0.0)], inputs(path, no_baseline=True))
    assert outcome.passed and not outcome.comparisons and outcome.baseline_path is None
    assert outcome.notes == (
        "ragev: --ragev-no-baseline: not gated against a baseline this run (thresholds still "
        "apply)",
    )
    assert not obtained_path(path).exists()


def test_a_baseline_that_cannot_be_created_is_one_failure_line(tmp_path: Path) -> None:
    (tmp_path / "baselines").write_text("a file where the folder must go", encoding="utf-8")
    path = tmp_path / "baselines" / "ragev-baseline.json"
    outcome = run_gate([run()], inputs(path))  # no exception: the reports still get written
    assert outcome.write_error is not None and outcome.failures == (outcome.write_error,)
    line = outcome.write_error
    assert line.startswith(f"ragev: could not write the baseline {path}: ") and "\n" not in line
    assert "[baseline] path" in line


def test_an_update_over_a_folder_fails_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    path.mkdir()
    outcome = run_gate([run()], inputs(path, update=True))
    assert outcome.write_error is not None and not outcome.passed
    assert "Is a directory" in outcome.write_error and path.is_dir()


def test_a_full_disk_keeps_the_previous_baseline_intact(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ragev-baseline.json"
    write_snapshot(path, snap(run(0.8)))
    written = path.read_bytes()

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("os.fsync", full)
    updated = run_gate([run(0.5)], inputs(path, update=True))
    assert updated.write_error is not None and "No space left on device" in updated.write_error
    regressed = run_gate([run(0.0)], inputs(path))  # the obtained snapshot cannot be written
    assert regressed.write_error is not None
    assert regressed.write_error.startswith("ragev: could not write the run's snapshot")
    assert regressed.write_error in regressed.failures
    assert path.read_bytes() == written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ragev-baseline.json"]  # no temp files


def test_phases_are_told_when_a_baseline_is_written(tmp_path: Path) -> None:
    path = tmp_path / "ragev-baseline.json"
    heard: list[str] = []
    run_gate([run()], inputs(path), phase=heard.append)
    assert heard == ["baseline write"]
    heard.clear()
    run_gate([run()], inputs(path), phase=heard.append)  # compared, passed: nothing written
    assert heard == []
    run_gate([run(0.0)], inputs(path), phase=heard.append)  # regressed: *.obtained.json
    assert heard == ["baseline write"]


def test_a_large_plain_baseline_suggests_the_compressed_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pytest_ragev.gate import workflow

    monkeypatch.setattr(workflow, "LARGE_BASELINE", 100)
    path = tmp_path / "ragev-baseline.json"
    outcome = run_gate([run()], inputs(path, update=True))
    size = path.stat().st_size
    assert outcome.notes[-1] == (
        f"ragev: note: {path} is {size / 1e6:.0f} MB; set [baseline] path to "
        "ragev-baseline.json.gz to store it gzip-compressed, about 4x smaller (git diff reads "
        "it through a textconv: see docs/baselines.md)"
    )
    packed = tmp_path / "ragev-baseline.json.gz"
    outcome = run_gate([run()], inputs(packed, update=True))
    assert not any("gzip" in note for note in outcome.notes)
    assert load_snapshot(packed).to_data() == load_snapshot(path).to_data()
