"""``params`` as the original's clients read it: the flat keys of WeKnora's ``ChatManage``.

The plugin's report nests the settings (``params.pipeline.embedding_top_k``); the
original's ``EvaluationDetail.params`` is a ``ChatManage`` with flat keys
(``params.embedding_top_k``). The detail answer carries both: the nested snapshot as the
report has it, and beside it each ``ChatManage`` key this pipeline has a value for.
docs/server.md lists the keys and where each comes from.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: ``ChatManage`` key -> the ``[pipeline]`` knob it is copied from.
PIPELINE_KEYS = {
    "embedding_top_k": "embedding_top_k",
    "vector_threshold": "vector_threshold",
    "keyword_threshold": "keyword_threshold",
    "rerank_top_k": "rerank_top_k",
    "rerank_threshold": "rerank_threshold",
}
#: ``ChatManage.summary_config`` key -> the ``[pipeline.chat]`` knob it is copied from.
SUMMARY_KEYS = {
    "max_tokens": "max_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "seed": "seed",
    "prompt": "prompt",
    "context_template": "context_template",
}


def chat_manage(params: Mapping[str, Any], request: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` with the flat ``ChatManage`` keys added beside its own (never replacing
    one: a flat key the report already has stays as it is).

    ``request`` is the task's request (:func:`~.schemas.request_json`): the knowledge
    base and the model ids it named.
    """
    pipeline = params.get("pipeline")
    pipeline = pipeline if isinstance(pipeline, Mapping) else {}
    chat = pipeline.get("chat")
    chat = chat if isinstance(chat, Mapping) else {}
    flat: dict[str, Any] = {"knowledge_base_ids": [request["knowledge_base_id"]]}
    for key, knob in PIPELINE_KEYS.items():
        if knob in pipeline:
            flat[key] = pipeline[knob]
    api_rerank = pipeline.get("rerank")
    rerank = (request.get("rerank_id") or pipeline.get("rerank_model")
              or (api_rerank.get("model") if isinstance(api_rerank, Mapping) else None))
    if rerank is not None or "rerank_model" in pipeline:
        flat["rerank_model_id"] = rerank or ""
    model = request.get("chat_id") or chat.get("model")
    if model is not None:
        flat["chat_model_id"] = model
    summary = {key: chat[knob] for key, knob in SUMMARY_KEYS.items() if knob in chat}
    if summary:
        flat["summary_config"] = summary
    if "fallback_response" in chat:
        flat["fallback_response"] = chat["fallback_response"]
    return {**flat, **params}
