"""Empty and identical text pairs take shortcuts; the values stay exactly those of the
pair-by-pair definitions."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pytest_ragev import GENERATION_METRICS, METRIC_NAMES, RETRIEVAL_METRICS, MetricInput, score
from pytest_ragev.metrics import generation, score_columns
from pytest_ragev.metrics.text import tokenize_tuples

PROFILES = ("weknora", "standard")

_TEXTS = st.sampled_from(
    ["", " ", "The cat sat on the mat.", "The cat is on the mat.", "计算机的操作系统。",
     "Привет, мир!", "東京都に住んでいます。", "한국어 문장입니다.", "👍", "a b. c"]
)  # fmt: skip


def _plain(hypothesis: str, reference: str, profile: str) -> tuple[float, ...]:
    """The six metrics from two fresh readings of the texts, no shortcut."""
    if profile == "weknora":
        return generation.score_weknora(tokenize_tuples(hypothesis), tokenize_tuples(reference))
    return generation.score_standard(tokenize_tuples(hypothesis), tokenize_tuples(reference))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(_TEXTS, _TEXTS, st.booleans()), max_size=12), st.sampled_from(PROFILES))
def test_shortcuts_give_the_plain_values(
    pairs: list[tuple[str, str, bool]], profile: str
) -> None:
    # The flag makes the pair identical: batches mix empty, identical and other pairs.
    inputs = [MetricInput([[1]], [1], h, h if same else r) for h, r, same in pairs]
    rows = score(inputs, profile=profile, metrics=GENERATION_METRICS)
    for sample, row in zip(inputs, rows, strict=True):
        expected = _plain(sample.generated_text, sample.generated_gt, profile)
        assert tuple(row[name] for name in GENERATION_METRICS) == expected


def test_retrieval_only_inputs_get_zero_text_metrics_in_report_order() -> None:
    inputs = [MetricInput([[1, 2]], [2, 3], "", ""), MetricInput([[1]], [1, 4], "", "")]
    rows = score(inputs)
    assert [list(row) for row in rows] == [list(METRIC_NAMES)] * 2
    retrieval = score(inputs, metrics=RETRIEVAL_METRICS)
    assert rows == [{**row, **dict.fromkeys(GENERATION_METRICS, 0.0)} for row in retrieval]
    rows[0]["bleu1"] = 0.5  # each row is its own dict
    assert rows[1]["bleu1"] == 0.0
    assert score(inputs, metrics=["bleu1", "rouge2"]) == [{"bleu1": 0.0, "rouge2": 0.0}] * 2
    assert score(inputs, metrics=["rougel", "mrr"]) == [
        {"mrr": 1.0, "rougel": 0.0},
        {"mrr": 1.0, "rougel": 0.0},
    ]
    columns = score_columns(inputs)
    assert list(columns) == list(METRIC_NAMES)
    assert all(columns[name].tolist() == [0.0, 0.0] for name in GENERATION_METRICS)


def test_an_empty_answer_against_a_reference_is_not_read() -> None:
    seen: list[str] = []

    def tokenizer(text: str) -> list[list[str]]:
        seen.append(text)
        return [text.split()]

    rows = score([MetricInput([], [], "", "a reference answer")], tokenizer=tokenizer)
    assert rows[0]["rouge1"] == 0.0 and rows[0]["bleu1"] == 0.0
    assert seen == [""]  # asked once whether "" has tokens; the reference never read


def test_a_tokenizer_that_gives_tokens_for_empty_text_is_read_as_usual() -> None:
    def marks_empty(text: str) -> list[list[str]]:
        return [text.split() or ["<empty>"]]

    rows = score([MetricInput([], [], "", "")], tokenizer=marks_empty, profile="standard")
    assert rows[0]["rouge1"] == 1.0 and rows[0]["bleu1"] == 1.0


def test_identical_pairs_are_scored_once_per_distinct_text() -> None:
    reads: list[int] = []
    original = generation.weknora_pair

    def counting(hypothesis: generation._Text, reference: generation._Text) -> tuple[float, ...]:
        reads.append(1)
        return original(hypothesis, reference)

    texts = ["Die Größe der Datei.", "Размер файла.", "Die Größe der Datei."] * 50
    inputs = [MetricInput([], [], text, text) for text in texts]
    generation.weknora_pair = counting  # type: ignore[assignment]
    try:
        rows = score(inputs, metrics=["rouge1"])
        mixed = score([*inputs, MetricInput([], [], "andere Antwort", texts[0])], metrics=["rouge1"])
    finally:
        generation.weknora_pair = original
    assert len(reads) == 2 + 3  # two distinct texts; then those two plus the other pair
    assert {row["rouge1"] for row in rows + mixed[:-1]} == {2 / (2 + 1e-8)}
