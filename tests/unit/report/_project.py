"""A multilingual project evaluated for real: evaluate() on a Parquet dataset, with
a baseline file and JSON reports on disk, for the tests of saved files."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_ragev import Answer, CustomMetric
from pytest_ragev.config import RunOptions, load_config
from pytest_ragev.core.attribution import PassageIndex
from pytest_ragev.core.record import Record, make_record
from pytest_ragev.dataset import Dataset, load_dataset, write_dataset
from pytest_ragev.evaluation import EvalInputs, Outcome, RunFacts, RunPlan, evaluate, run_params
from pytest_ragev.report import final_report

#: Eight questions in six languages, one relevant passage each, and two distractors.
QUERIES = {
    1: "埃菲尔铁塔是哪一年建成的？",
    2: "Wie hoch ist der Eiffelturm?",
    3: "Какова высота Эвереста?",
    4: "Pythonを作ったのは誰ですか？",
    5: "만리장성의 길이는 얼마입니까?",
    6: "Who wrote Hamlet?",
    7: "长城有多长？",
    8: "Wann wurde Python veröffentlicht?",
}
CORPUS = {
    1: "埃菲尔铁塔于1889年建成，位于巴黎。",
    2: "Der Eiffelturm ist etwa 330 Meter hoch.",
    3: "Высота Эвереста составляет 8849 метров.",
    4: "Pythonはグイド・ヴァンロッサムによって作られました。",
    5: "만리장성은 2만 킬로미터가 넘습니다.",
    6: "Hamlet is a tragedy written by William Shakespeare.",
    7: "长城全长超过两万公里。",
    8: "Python wurde 1991 zum ersten Mal veröffentlicht.",
    9: "Der Louvre ist das meistbesuchte Museum der Welt.",
    10: "Rust 是一种注重内存安全的系统编程语言。",
}
ANSWERS = {100 + q: text for q, text in {
    1: "埃菲尔铁塔于1889年建成。", 2: "Etwa 330 Meter.", 3: "8849 метров.",
    4: "グイド・ヴァンロッサムです。", 5: "2만 킬로미터가 넘습니다.",
    6: "William Shakespeare.", 7: "超过两万公里。", 8: "Im Jahr 1991.",
}.items()}
QRELS = [(q, q) for q in QUERIES]
QAS = [(q, 100 + q) for q in QUERIES]
CONFIG = """\
[dataset]
path = "data"
id = "multi"

[pipeline]
name = "oracle"

[thresholds]
recall = 0.5
latency_s = 2.0

[report]
top_regressions = 3

[baseline]
path = "ragev-baseline.json"

[gate]
mode = "tolerance"
max_drop = 0.05
resamples = 200

[gate.metrics.bleu4]
enabled = false

[[variants]]
name = "k2"
pipeline.top = 2
"""
LATENCY = CustomMetric("latency_s", lambda m: float(m.meta.get("latency_s", 0.0)),
                       direction="lower", bounds=(0.0, None))
#: How the pipeline treats one question: the gold passage, a distractor before it, only
#: distractors, a text that is no passage, or an exception.
BEHAVIOURS = ("gold", "late", "miss", "stray", "error")


@dataclass(frozen=True)
class Project:
    folder: Path
    dataset: Dataset

    def plan(self, **options: object) -> RunPlan:
        config = load_config(self.folder / "ragev.toml")
        return RunPlan.build(config, RunOptions(**options), [LATENCY])  # type: ignore[arg-type]


def make_project(folder: Path) -> Project:
    write_dataset(folder / "data", queries=QUERIES, corpus=CORPUS, answers=ANSWERS,
                  qrels=QRELS, qas=QAS)
    (folder / "ragev.toml").write_text(CONFIG, encoding="utf-8")
    return Project(folder, load_dataset(folder / "data", "multi"))


def records(dataset: Dataset, behaviour: Sequence[str], variant: str | None,
            latency: float) -> list[Record]:
    index = PassageIndex(dataset.corpus)
    out = []
    for case, how in zip(dataset.pairs, behaviour, strict=True):
        if how == "error":
            out.append(make_record(case, None, index=index, variant=variant,
                                   error="TimeoutError: 模型超时 nach 30 s"))
            continue
        retrieved: list[int | str] = {
            "gold": list(case.pids), "late": [9, *case.pids], "miss": [9, 10],
            "stray": ["Этого текста нет в корпусе.", *case.pids],
        }[how]
        text = case.answer if how in ("gold", "late") else "不知道 / weiß nicht"
        meta = {"latency_s": latency * case.qid, "prompt_tokens": 40, "completion_tokens": 7}
        out.append(make_record(case, Answer(retrieved=retrieved, text=text or "", meta=meta),
                               index=index, variant=variant))
    return out


def run(project: Project, plan: RunPlan, behaviour: Sequence[str], latency: float,
        *, interrupted: bool = False) -> Outcome:
    dataset = project.dataset
    answered = [*records(dataset, behaviour, None, latency),
                *records(dataset, list(reversed(behaviour)), "k2", latency)]
    facts = RunFacts(task_id="evaluation_1_ab_multi", start_time="2026-01-02T03:04:05+00:00",
                     total=len(answered) + (3 if interrupted else 0), finished=len(answered),
                     interrupted="interrupted by SIGTERM" if interrupted else None)
    params = {v: run_params(plan, dataset, {"top": 2} if v else {}, v) for v in plan.variants}
    return evaluate(EvalInputs(plan=plan, dataset=dataset, records=answered, facts=facts,
                               params=params))


def write_report(outcome: Outcome, path: Path) -> Path:
    base = outcome.runs[0]
    report = final_report(outcome, dataset_id="multi", params=base.params)
    path.write_text(json.dumps(report, ensure_ascii=False), encoding="utf-8")
    return path
