"""The judge's prompts, versioned: what each judged metric asks, word for word.

A prompt's version is part of every verdict's key: a new wording (a new version) judges
again instead of replaying verdicts given to another question. docs/quality.md quotes
these texts.

The prompts are written in English and say to judge in whatever language the question,
the answer and the reference are in: models that judge well do so across languages
(the judge compares meaning, not words). Each asks for one JSON object
``{"score": <number in [0, 1]>, "reason": "<text>"}``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

_REPLY = (
    'Reply with one JSON object and nothing else: {"score": <a number from 0 to 1>, '
    '"reason": "<one or two sentences, in the language of the question>"}.'
)


@dataclass(frozen=True)
class Prompt:
    """One judged metric's instructions (``system``) and the message that carries a
    question's texts (``user``, with ``{question}``, ``{answer}``, ``{reference}`` and
    ``{passages}`` placeholders)."""

    metric: str
    version: str
    system: str
    user: str

    def messages(self, *, question: str, answer: str, reference: str,
                 passages: Sequence[str]) -> list[dict[str, str]]:
        """The chat messages that ask for one verdict."""
        numbered = "\n\n".join(f"[{i}] {text}" for i, text in enumerate(passages, start=1))
        values = {"question": question, "answer": answer, "reference": reference,
                  "passages": numbered or "(none)"}
        user = self.user
        for name, value in values.items():
            user = user.replace("{" + name + "}", value)
        return [{"role": "system", "content": self.system}, {"role": "user", "content": user}]


CORRECTNESS = Prompt(
    metric="correctness",
    version="correctness/1",
    system=(
        "You grade an answer to a question against a reference answer. Judge whether the "
        "answer states the facts the reference states, and nothing that contradicts it. "
        "Compare meaning, not wording: a paraphrase, a translation into another language, "
        "a shorter or a longer answer is fully correct when its facts are the reference's. "
        "Score 1 when every fact of the reference is in the answer and nothing in the "
        "answer contradicts it; 0 when the answer is wrong, contradicts the reference, "
        "does not answer, or says it does not know; a share in between when only part of "
        "the reference's facts are there. " + _REPLY
    ),
    user="Question:\n{question}\n\nReference answer:\n{reference}\n\nAnswer to grade:\n{answer}",
)

FAITHFULNESS = Prompt(
    metric="faithfulness",
    version="faithfulness/1",
    system=(
        "You check whether an answer is supported by the passages it was written from. "
        "Split the answer into its claims (statements of fact). A claim is supported when "
        "the passages state it or it follows from them; it is unsupported when the passages "
        "do not contain it or contradict it, whatever is true in the world. Score the share "
        "of the answer's claims that are supported: 1 when every claim is, 0 when none is. "
        "An answer that makes no claim (it says it does not know, or asks back) scores 1. "
        "The passages and the answer may be in different languages. " + _REPLY
    ),
    user="Passages:\n{passages}\n\nAnswer:\n{answer}",
)

CONTEXT_RELEVANCE = Prompt(
    metric="context_relevance",
    version="context_relevance/1",
    system=(
        "You judge whether the passages a search returned for a question are relevant to "
        "it. A passage is relevant when it contains information that helps answer the "
        "question, in any language. Score the share of the passages that are relevant: 1 "
        "when all are, 0 when none is (or there are none). " + _REPLY
    ),
    user="Question:\n{question}\n\nPassages:\n{passages}",
)

#: The prompt of each judged metric.
PROMPTS: dict[str, Prompt] = {p.metric: p for p in (CORRECTNESS, FAITHFULNESS,
                                                    CONTEXT_RELEVANCE)}

#: Sent after a reply that was not the JSON object asked for (once per verdict).
REPAIR = (
    "Your reply was not the JSON object asked for. " + _REPLY
)
