"""The cross-encoder reranker, with a real (tiny) model that the test builds: no download.

Skipped unless torch, transformers and sentence-transformers are installed (the
``embeddings`` extra; CI has no torch). The model is a one-layer BERT with random weights
(fixed seed), one label, and a WordPiece vocabulary written here, saved with
``save_pretrained``: its scores mean nothing, but they are a real model's, and the test
computes each one itself, straight from transformers, to check what the pipeline makes
of them.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.types import Chunk
from tests.unit.pipelines.builtin._builtin import case, kb_of, pipeline

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
sentence_transformers = pytest.importorskip("sentence_transformers")

CORPUS = {
    1: "The car battery is flat, so the car did not start.",
    2: "Check the battery terminals before you start the car in winter.",
    3: "Die Batterie vom Auto (car) ist leer, deshalb startet das Auto nicht.",
    4: "汽车电池没电了，所以车没有启动。",
    # 5 and 6 are one text in two passages (a duplicated FAQ answer): they must tie, and
    # keep the order retrieval gave them.
    5: "A car battery stores energy. 电池储存能量。",
    6: "A car battery stores energy. 电池储存能量。",
}
QUESTION = "Why did my car battery not start? 为什么汽车没有启动？"
#: Every word of the corpus and the question, lower-cased like BERT's tokenizer, and each
#: Chinese character (BERT splits Chinese into characters).
WORDS = [
    "the", "car", "battery", "is", "flat", "so", "did", "not", "start", "check", "terminals",
    "before", "you", "in", "winter", "a", "stores", "energy", "why", "my",
    "die", "batterie", "vom", "auto", "ist", "leer", "deshalb", "startet", "das", "nicht",
]
CHARACTERS = sorted(set("汽车电池没电了所以车没有启动为什么储存能量") | set(",.?()，。？"))
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def save_tiny_cross_encoder(folder: Path, *, num_labels: int = 1) -> Any:
    """Write a one-layer BERT cross-encoder and its tokenizer into ``folder``; return both."""
    folder.mkdir(parents=True)
    vocabulary = SPECIAL + WORDS + CHARACTERS
    (folder / "vocab.txt").write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(
        json.dumps({"tokenizer_class": "BertTokenizer", "do_lower_case": True}), encoding="utf-8"
    )
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    torch.manual_seed(17)
    config = transformers.BertConfig(
        vocab_size=len(vocabulary), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128, num_labels=num_labels,
        initializer_range=0.2,
    )
    model = transformers.BertForSequenceClassification(config).eval()
    if num_labels == 1:
        # A random BERT gives nearly one logit to every pair (its [CLS] vector is mostly
        # the [CLS] embedding): rescale the head so the logits on this test's pairs have
        # mean 0 and standard deviation 2, i.e. scores from about 0.05 to 0.95.
        with torch.no_grad():
            logits = torch.cat([
                model(**tokenizer(QUESTION, text, return_tensors="pt")).logits[:, 0]
                for text in CORPUS.values()
            ])
            scale = 2.0 / float(logits.std())
            model.classifier.weight.mul_(scale)
            model.classifier.bias.copy_((model.classifier.bias - logits.mean()) * scale)
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))
    return model, tokenizer


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any, Any]:
    folder = tmp_path_factory.mktemp("cross-encoder") / "tiny"
    model, tokenizer = save_tiny_cross_encoder(folder)
    return folder, model, tokenizer


def own_score(model: Any, tokenizer: Any, question: str, text: str) -> float:
    """The model's sigmoid(raw logit) for one pair, computed here, not by the pipeline."""
    with torch.no_grad():
        logits = model(**tokenizer(question, text, return_tensors="pt")).logits
    assert tuple(logits.shape) == (1, 1)
    return float(torch.sigmoid(logits[0, 0]))


def answer(tmp_path: Path, **options: Any) -> list[Chunk]:
    pipe = pipeline(tmp_path, **{"embedding_top_k": 10, **options})
    retrieved = pipe.answer(case(QUESTION), kb_of(pipe, CORPUS)).retrieved
    pipe.close()
    assert retrieved is not None
    return list(retrieved)


@pytest.fixture(scope="module")
def retrieval(tmp_path_factory: pytest.TempPathFactory) -> list[Chunk]:
    """The keyword retrieval list the reranker starts from (no reranker)."""
    chunks = answer(tmp_path_factory.mktemp("plain"))
    assert len(chunks) == len(CORPUS)
    return chunks


@pytest.fixture(scope="module")
def scores(tiny_model: tuple[Path, Any, Any], retrieval: list[Chunk]) -> dict[int, float]:
    """Passage id -> the model's own sigmoid(raw logit) for (question, chunk)."""
    _, model, tokenizer = tiny_model
    own = {c.passage_id: own_score(model, tokenizer, QUESTION, c.text) for c in retrieval}
    distinct = sorted(set(own.values()))
    # The seeded model spreads its scores: no near-ties for float noise to flip.
    assert min(b - a for a, b in itertools.pairwise(distinct)) > 1e-3
    # Not all inside (0.5, 0.731), where a sigmoid of a sigmoid would put them.
    assert not all(0.5 < s < 0.74 for s in distinct)
    return {pid: score for pid, score in own.items() if pid is not None}


def expected_order(retrieval: list[Chunk], scores: dict[int, float]) -> list[int]:
    """Retrieval order stably sorted by the model's own score: ties keep retrieval order."""
    ids = [c.passage_id for c in retrieval if c.passage_id is not None]
    return sorted(ids, key=lambda pid: -scores[pid])


def test_the_reranked_order_and_scores_are_the_models_own_sigmoid_of_the_logit(
    tmp_path: Path, tiny_model: tuple[Path, Any, Any], retrieval: list[Chunk],
    scores: dict[int, float],
) -> None:
    folder = tiny_model[0]
    order = expected_order(retrieval, scores)
    assert order != [c.passage_id for c in retrieval]  # the reranker has something to do
    reranked = answer(tmp_path, rerank_model=str(folder))
    assert [c.passage_id for c in reranked] == order
    for chunk in reranked:
        assert chunk.passage_id is not None
        assert chunk.score == pytest.approx(scores[chunk.passage_id], abs=1e-5)
    # The duplicates tie exactly and stay in their retrieval order, side by side.
    ids = [c.passage_id for c in reranked]
    retrieved = [c.passage_id for c in retrieval]
    first, second = sorted((5, 6), key=retrieved.index)
    assert ids.index(first) + 1 == ids.index(second)
    assert reranked[ids.index(first)].score == reranked[ids.index(second)].score


def test_rerank_threshold_drops_chunks_below_it_and_rerank_top_k_cuts(
    tmp_path: Path, tiny_model: tuple[Path, Any, Any], retrieval: list[Chunk],
    scores: dict[int, float],
) -> None:
    folder = str(tiny_model[0])
    order = expected_order(retrieval, scores)
    distinct = sorted(set(scores.values()), reverse=True)
    # Between the 2nd and 3rd best scores: a single-sigmoid threshold in [0, 1].
    threshold = (distinct[1] + distinct[2]) / 2
    kept = [pid for pid in order if scores[pid] >= threshold]
    assert 2 <= len(kept) < len(order)
    assert [c.passage_id for c in answer(tmp_path, rerank_model=folder,
                                         rerank_threshold=threshold)] == kept
    assert [c.passage_id for c in answer(tmp_path, rerank_model=folder,
                                         rerank_top_k=2)] == order[:2]
    assert [c.passage_id for c in answer(tmp_path, rerank_model=folder, rerank_top_k=1,
                                         rerank_threshold=threshold)] == order[:1]


def test_when_the_threshold_drops_every_chunk_the_retrieval_list_is_kept(
    tmp_path: Path, tiny_model: tuple[Path, Any, Any], retrieval: list[Chunk],
    scores: dict[int, float],
) -> None:
    threshold = (max(scores.values()) + 1.0) / 2  # above every chunk's score
    kept = answer(tmp_path, rerank_model=str(tiny_model[0]), rerank_threshold=threshold)
    assert kept == retrieval  # the retrieval order and the retrieval scores


def test_loading_the_model_never_touches_the_network(
    tmp_path: Path, tiny_model: tuple[Path, Any, Any], retrieval: list[Chunk],
    scores: dict[int, float], monkeypatch: pytest.MonkeyPatch,
) -> None:
    connections: list[object] = []

    def refuse(self: socket.socket, address: object) -> None:
        connections.append(address)
        raise OSError(f"test: no network ({address!r})")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    offline_during_load: list[str | None] = []
    load = sentence_transformers.CrossEncoder.__init__

    def recording_load(self: Any, *args: Any, **kwargs: Any) -> None:
        offline_during_load.append(os.environ.get("HF_HUB_OFFLINE"))
        load(self, *args, **kwargs)

    monkeypatch.setattr(sentence_transformers.CrossEncoder, "__init__", recording_load)
    reranked = answer(tmp_path, rerank_model=str(tiny_model[0]))
    assert [c.passage_id for c in reranked] == expected_order(retrieval, scores)
    assert offline_during_load == ["1"]
    assert "HF_HUB_OFFLINE" not in os.environ  # the user's environment is restored
    assert connections == []


def test_a_model_with_more_than_one_label_is_a_one_line_usage_error(tmp_path: Path) -> None:
    folder = tmp_path / "two-labels"
    save_tiny_cross_encoder(folder, num_labels=2)
    with pytest.raises(ConfigError) as excinfo:
        answer(tmp_path, rerank_model=str(folder))
    message = str(excinfo.value)
    assert message.startswith(f"{tmp_path / 'ragev.toml'}: [pipeline] rerank_model = ")
    assert "2 scores per (question, chunk) pair" in message and "num_labels = 1" in message
    assert "\n" not in message


def test_a_folder_without_the_model_is_a_one_line_usage_error(
    tmp_path: Path, tiny_model: tuple[Path, Any, Any],
) -> None:
    # config.json makes it look like a model at start; the weights and tokenizer are missing.
    folder = tmp_path / "models" / "half"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text((tiny_model[0] / "config.json").read_text("utf-8"),
                                        encoding="utf-8")
    with pytest.raises(ConfigError) as excinfo:
        answer(tmp_path, rerank_model="models/half")
    message = str(excinfo.value)
    assert message.startswith(f"{tmp_path / 'ragev.toml'}: [pipeline] rerank_model = ")
    assert f"the model in {str(folder)!r} did not load" in message
    assert "\n" not in message
