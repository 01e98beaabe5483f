"""The embedded default pipeline: chunk, index, retrieve, rerank, generate, offline.

``[pipeline] name = "builtin"``. :class:`BuiltinPipeline` reads its knobs from
:mod:`.config`, keeps its knowledge base in :mod:`.store`, loads models through
:mod:`.models` and writes answers with :mod:`.generate` (or an OpenAI-compatible chat
model).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_ragev.core.digest import sha256_json
from pytest_ragev.core.errors import name_variant
from pytest_ragev.core.types import Answer, Chunk, PipelineSettings, QAPair
from pytest_ragev.pipelines.builtin import vectors as vector_search
from pytest_ragev.pipelines.builtin.analyzers import Analyzer, corpus_language
from pytest_ragev.pipelines.builtin.bm25 import BM25Index
from pytest_ragev.pipelines.builtin.chunking import chunk_corpus
from pytest_ragev.pipelines.builtin.config import parse_config
from pytest_ragev.pipelines.builtin.endpoints import EndpointEmbedder, EndpointReranker
from pytest_ragev.pipelines.builtin.generate import extractive_answer
from pytest_ragev.pipelines.builtin.models import Embedder, cross_encoder, make_embedder
from pytest_ragev.pipelines.builtin.store import (
    KB_FORMAT,
    ChunkTable,
    KnowledgeBase,
    Progress,
    Warn,
    code_digest,
    load_or_build,
)
from pytest_ragev.pipelines.builtin.tokens import Tokenizer, bm25_tokens
from pytest_ragev.pipelines.remote.chat import ChatClient, ChatConfig

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt


@dataclass(frozen=True)
class _Hit:
    chunk: int
    score: float
    #: The retriever's unnormalised score (raw BM25) when ``score`` is clipped; for fusion.
    raw: float | None = None


#: A reranker: ``(kb, question, chunk texts) -> scores``, or ``None`` when it cannot score.
Reranker = Callable[[KnowledgeBase, str, Sequence[str]], "list[float] | None"]


class BuiltinPipeline:
    """Retrieve from the :class:`KnowledgeBase`, rerank, generate. Thread-safe."""

    def __init__(self, settings: PipelineSettings, *, source: Path | str) -> None:
        self.settings = settings
        self.config = parse_config(settings, source=source)
        self._where = name_variant(f"{source}: [pipeline]", source, settings.variant)
        #: The terms of keyword retrieval (and of the lexical reranker's idf weights).
        self.analyzer = Analyzer(self.config.analyzer, self.config.language)
        self._embedder: Embedder | None = None
        self._reranker: Reranker | None = None
        self._chat: ChatClient | None = None
        self._lock = threading.Lock()
        # Models behind an API: their clients are there from the start, for the
        # environment check and the preflight before the first question.
        self._endpoint_embedder = None if self.config.embedding is None else EndpointEmbedder(
            self.config.embedding, query_prefix=self.config.query_prefix,
            passage_prefix=self.config.passage_prefix)
        self._endpoint_reranker = (None if self.config.rerank is None
                                   else EndpointReranker(self.config.rerank))
        if self.config.chat_model != "extractive":
            table = {k: v for k, v in self.config.chat_table.items()
                     if k not in ("fallback_response", "context_chunks")}
            self._chat = ChatClient(ChatConfig.from_table(table, source=source))

    # -- identity
    def snapshot(self) -> dict[str, Any]:
        config = asdict(self.config)
        for key, table in (("embedding", self.config.embedding), ("rerank", self.config.rerank)):
            # The tables' own snapshots: the variable's NAME, literal credentials hidden.
            config[key] = None if table is None else table.snapshot()
        chat_table = config.pop("chat_table")
        chat: dict[str, Any] = {
            "model": config.pop("chat_model"),
            "max_tokens": config.pop("max_tokens"),
            "fallback_response": config.pop("fallback_response"),
            "context_chunks": config.pop("context_chunks"),
        }
        if self._chat is not None:
            chat.update(self._chat.config.snapshot())
        elif chat_table:
            chat.update({k: v for k, v in chat_table.items() if k not in chat})
        config["separators"] = list(self.config.separators)
        config["chat"] = chat
        return config

    def kb_key(self) -> str | None:
        knobs = self.config.kb_knobs()
        return sha256_json({"format": KB_FORMAT, "code": code_digest(), **knobs})

    def answer_key(self) -> str:
        snapshot = self.snapshot()
        if self._chat is not None:
            snapshot["chat"] = self._chat.config.answer_knobs()
        for key, table in (("embedding", self.config.embedding), ("rerank", self.config.rerank)):
            if table is not None:  # a new timeout or key keeps the cached answers
                snapshot[key] = table.answer_knobs()
        return sha256_json({"code": code_digest(), "knobs": snapshot})

    # -- the knowledge base
    def build_knowledge_base(
        self,
        corpus: Mapping[int, str],
        *,
        fingerprint: str,
        cache_dir: Path | None = None,
        progress: Progress | None = None,
        warn: Warn | None = None,
    ) -> KnowledgeBase:
        """Chunk and index the whole corpus, or load the cached KB of the same inputs.

        ``fingerprint`` identifies the corpus alone (see :func:`corpus_fingerprint`): the
        KB does not depend on the questions, so editing them must not rebuild it.
        ``warn`` receives the one-line cache warnings (see :func:`load_or_build`).
        """
        key = sha256_json({"fingerprint": fingerprint, "kb": self.kb_key()})
        return load_or_build(cache_dir, key, lambda: self._build(corpus, key, progress),
                             warn=warn)

    def _build(
        self, corpus: Mapping[int, str], key: str, progress: Progress | None
    ) -> KnowledgeBase:
        config = self.config
        # Held as columns (one text blob): a million chunks are no million objects.
        chunks = ChunkTable.from_chunks(chunk_corpus(
            corpus, chunk_size=config.chunk_size, chunk_overlap=config.chunk_overlap,
            separators=config.separators,
        ), spill=True)
        # Progress counts chunks tokenised, plus chunks embedded when vectors are built.
        embed = config.retrieval != "keyword"
        total = len(chunks) * (2 if embed else 1)
        step = max(total // 100, 1)
        if progress is not None and total:
            progress(0, total)

        analyze = self.analyzer.tokens
        # "auto" analyses a chunk that shows no language in the corpus's (sampled first).
        language = (corpus_language(len(chunks), chunks.text) if self.analyzer.reads_corpus_language
                    else None)

        def tokens() -> Iterator[list[str]]:
            # Streamed into the index: no list of every chunk's tokens is ever held.
            for position, text in enumerate(chunks.texts()):
                yield analyze(text, language)
                if progress is not None and (position + 1) % step == 0 and position + 1 < total:
                    progress(position + 1, total)

        index = BM25Index.build(tokens(), k1=config.bm25_k1, b=config.bm25_b)
        vectors = None
        if embed:
            vectors = self._embed(list(chunks.texts()), progress, total)
        if progress is not None:
            progress(total, total)  # the one final call
        return KnowledgeBase(chunks, index, vectors, key=key, language=language)

    def _embed(
        self, texts: list[str], progress: Progress | None, total: int
    ) -> npt.NDArray[np.float16]:
        import numpy as np

        embedder = self.embedder()
        if isinstance(embedder, EndpointEmbedder):
            # Concurrent batches inside: progress after each batch the server answers.
            offset = total - len(texts)

            def step(done: int, of: int) -> None:
                if progress is not None and offset + done < total:
                    progress(offset + done, total)

            return vector_search.stored(embedder.encode_passages(texts, progress=step))
        if progress is None or not texts:
            return vector_search.stored(embedder.encode_passages(texts))
        batch = max(len(texts) // 50, 256)
        parts = []
        for start in range(0, len(texts), batch):
            parts.append(vector_search.stored(embedder.encode_passages(texts[start:start + batch])))
            done = total - len(texts) + min(start + batch, len(texts))
            if done < total:
                progress(done, total)
        return np.concatenate(parts)

    def embedder(self) -> Embedder:
        if self._endpoint_embedder is not None:
            return self._endpoint_embedder
        with self._lock:
            if self._embedder is None:
                assert self.config.embedding_model is not None
                self._embedder = make_embedder(
                    self.config.embedding_model, key=f"{self._where} embedding_model",
                    query_prefix=self.config.query_prefix,
                    passage_prefix=self.config.passage_prefix,
                )
            return self._embedder

    # -- retrieval
    def keyword_hits(self, kb: KnowledgeBase, question: str, top_k: int) -> list[_Hit]:
        query = self.analyzer.tokens(question, kb.language)
        hits = []
        for chunk, raw in kb.index.search(query, top_k):
            normalised = kb.index.normalised(raw, query)
            if normalised >= self.config.keyword_threshold:
                hits.append(_Hit(chunk, normalised, raw))
        return hits

    def vector_hits(self, kb: KnowledgeBase, question: str, top_k: int) -> list[_Hit]:
        assert kb.vectors is not None
        query = self.embedder().encode_queries([question])[0]
        hits = []
        for chunk, similarity in vector_search.top(vector_search.scores(kb.vectors, query), top_k):
            # Cosine similarity of normalised vectors, clipped to [0, 1] for the threshold.
            score = min(similarity, 1.0)
            if score >= self.config.vector_threshold:
                hits.append(_Hit(chunk, score))
        return hits

    def retrieve(self, kb: KnowledgeBase, question: str) -> list[_Hit]:
        config = self.config
        top_k = config.embedding_top_k
        if config.retrieval == "keyword":
            return self.keyword_hits(kb, question, top_k)
        if config.retrieval == "vector":
            return self.vector_hits(kb, question, top_k)
        # Fuse deep pools, not the final top k: a chunk ranked 12th by both lists belongs
        # above one ranked 1st by one list and absent from the other.
        pool = max(config.fusion_pool, top_k)
        rankings = [
            (self.vector_hits(kb, question, pool), config.vector_weight),
            (self.keyword_hits(kb, question, pool), config.keyword_weight),
        ]
        if config.fusion == "rrf":
            return reciprocal_rank_fusion(rankings, k=config.rrf_k, top_k=top_k)
        return convex_fusion(rankings, top_k=top_k)

    def rerank(self, kb: KnowledgeBase, question: str, hits: list[_Hit]) -> list[_Hit]:
        config = self.config
        if (not config.rerank_model and config.rerank is None) or not hits:
            return hits
        texts = [kb.chunks[h.chunk].text for h in hits]
        scores = self.reranker()(kb, question, texts)
        if scores is None:
            return hits  # the reranker cannot score this question: keep the retrieval order
        # A stable sort: chunks the reranker scores alike keep their retrieval order.
        ranked = sorted(
            (_Hit(h.chunk, s) for h, s in zip(hits, scores, strict=True)),
            key=lambda hit: -hit.score,
        )
        kept = [h for h in ranked if h.score >= config.rerank_threshold][: config.rerank_top_k]
        # The seed's rule: when reranking leaves nothing, keep the retrieval list.
        return kept or hits

    def reranker(self) -> Reranker:
        if self._endpoint_reranker is not None:
            return self._endpoint_reranker
        with self._lock:
            if self._reranker is None:
                model = self.config.rerank_model
                assert model is not None
                if model == "lexical":
                    analyze = self.analyzer.tokens

                    def lexical(kb: KnowledgeBase, question: str,
                                texts: Sequence[str]) -> list[float] | None:
                        # The question's terms weighed by their idf in the KB's index:
                        # normaliser([t]) is idf(t) / (1 + k1), 0 for unknown terms.
                        return lexical_rerank(
                            question, texts, weight=lambda term: kb.index.normaliser([term]),
                            tokenize=lambda text: analyze(text, kb.language))

                    self._reranker = lexical
                else:
                    score = cross_encoder(model, key=f"{self._where} rerank_model")
                    self._reranker = lambda kb, question, texts: score(question, texts)
            return self._reranker

    # -- generation
    def answer(self, case: QAPair, kb: Any) -> Answer:
        if not isinstance(kb, KnowledgeBase):
            raise TypeError(
                "the builtin pipeline needs its own knowledge base; a conftest "
                "pytest_ragev_build_knowledge_base returned something else"
            )
        hits = self.rerank(kb, case.question, self.retrieve(kb, case.question))
        retrieved = [
            Chunk(text=kb.chunks[h.chunk].text, passage_id=kb.chunks[h.chunk].passage_id,
                  score=h.score)
            for h in hits
        ]
        contexts = [c.text for c in retrieved[: self.config.context_chunks]]
        if not contexts:
            return Answer(retrieved=[], text=self.config.fallback_response,
                          meta={"fallback": True})
        if self._chat is not None:
            result = self._chat.complete(case.question, contexts)
            meta: dict[str, Any] = {"latency_s": result.latency_s, "attempts": result.attempts}
            if result.usage:
                # The server's token counts, where the summary's token totals read them.
                meta["usage"] = dict(result.usage)
            return Answer(retrieved=retrieved, text=result.text, meta=meta)
        return Answer(retrieved=retrieved, text=extractive_answer(
            case.question, contexts, max_tokens=self.config.max_tokens))

    # -- before the run
    def _services(self) -> list[Any]:
        """The clients of the models behind an API: embedding, rerank, chat."""
        services: list[Any] = []
        if self._endpoint_embedder is not None:
            services.append(self._endpoint_embedder.client)
        if self._endpoint_reranker is not None:
            services.append(self._endpoint_reranker.client)
        if self._chat is not None:
            services.append(self._chat)
        return services

    def missing_environment(self) -> list[str]:
        """The environment variables the models behind an API need and the environment
        lacks (every table's, in one list)."""
        return [line for service in self._services() for line in service.missing_environment()]

    def preflight(self, case: QAPair) -> str | None:
        """One look at each model's server behind an API (see
        :meth:`pytest_ragev.clients.EndpointClient.preflight`); offline models need none."""
        for service in self._services():
            reason: str | None = service.preflight()
            if reason is not None:
                return reason
        return None

    @property
    def io_bound(self) -> bool:
        """Whether answering waits on a model behind an API more than it computes."""
        return bool(self._services())

    def close(self) -> None:
        self._embedder = None
        self._reranker = None


def reciprocal_rank_fusion(
    rankings: Sequence[tuple[Sequence[_Hit], float]], *, k: int = 60, top_k: int = 10
) -> list[_Hit]:
    """Weighted RRF: ``score(d) = Σ weight / (k + rank)`` over the lists, rank from 1."""
    fused: dict[int, float] = {}
    for hits, weight in rankings:
        for rank, hit in enumerate(hits, start=1):
            fused[hit.chunk] = fused.get(hit.chunk, 0.0) + weight / (k + rank)
    order = sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:top_k]
    return [_Hit(chunk, score) for chunk, score in order]


def convex_fusion(
    rankings: Sequence[tuple[Sequence[_Hit], float]], *, top_k: int = 10
) -> list[_Hit]:
    """A convex combination of min-max normalised scores (Bruch et al., TOIS 2023).

    Each list's scores (raw BM25 where a hit carries one, else its score) are mapped to
    [0, 1] by ``(s - min) / (max - min)`` over the list (all 1 when they are equal); a
    list gives 0 to a chunk it did not return. ``score(d) = Σ weight · norm(d) / Σ weight``
    over the lists, in [0, 1]; ties break on chunk order. Unlike RRF it keeps how far
    apart the scores are, so a keyword list of weak matches moves little and one clear
    keyword match moves much.
    """
    total = sum(weight for hits, weight in rankings)
    fused: dict[int, float] = {}
    for hits, weight in rankings:
        if not hits or weight <= 0:
            continue
        values = [hit.raw if hit.raw is not None else hit.score for hit in hits]
        low, high = min(values), max(values)
        for hit, value in zip(hits, values, strict=True):
            norm = (value - low) / (high - low) if high > low else 1.0
            fused[hit.chunk] = fused.get(hit.chunk, 0.0) + weight * norm / total
    order = sorted(fused.items(), key=lambda item: (-item[1], item[0]))[:top_k]
    return [_Hit(chunk, score) for chunk, score in order]


def lexical_rerank(
    question: str, texts: Sequence[str], weight: Callable[[str], float] | None = None,
    tokenize: Tokenizer = bm25_tokens,
) -> list[float] | None:
    """The weighted share of the question's distinct retrieval tokens each text contains.

    ``score = Σ weight(t) over question tokens t in the text / Σ weight(t) over all
    question tokens``, in [0, 1]. The pipeline weighs a token by its BM25 idf in the
    knowledge base, so "how", "do" and "I" count for little and rare content words for
    much (unweighted, the share lowered nDCG@10 on every FAQ set measured). ``None``
    when the question has no token of positive weight: nothing to score by. ``tokenize``
    makes the tokens (the pipeline passes its analyzer's, so they are the index's terms).
    """
    query = sorted(set(tokenize(question)))
    weights = {t: (weight(t) if weight is not None else 1.0) for t in query}
    total = sum(w for w in weights.values() if w > 0)
    if total <= 0:
        return None
    out = []
    for text in texts:
        present = set(tokenize(text))
        out.append(sum(w for t, w in weights.items() if w > 0 and t in present) / total)
    return out
