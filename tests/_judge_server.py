"""A judge on a real HTTP server (127.0.0.1) that answers like a strict grader would,
deterministically, for the tests of judged metrics.

It speaks OpenAI's chat completions: it reads which metric is asked from the system
prompt and scores by plain rules a test can predict:

* correctness: the share of the reference's words (Han characters count one each) that
  the answer holds, in quarters;
* faithfulness: the share of the answer's sentences that a passage contains;
* context_relevance: the share of passages that share a word with the question.

It counts the calls, and can be told to fail: ``slow`` (sleeps), ``error`` (HTTP 500),
``malformed`` (a reply that is not JSON; ``malformed_once``: only the first time),
``unauthorized`` (401).
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field

from tests._remote_server import Reply, ScriptedServer, Seen

_WORD = re.compile(r"[\u4e00-\u9fff]|[^\W_]+", re.UNICODE)


def words(text: str) -> set[str]:
    """Lower-cased words; each Han character is a word of its own."""
    return {w.lower() for w in _WORD.findall(text)}


def _section(text: str, title: str, following: tuple[str, ...]) -> str:
    start = text.find(f"{title}:\n")
    if start < 0:
        return ""
    start += len(title) + 2
    ends = [text.find(f"\n\n{other}:\n", start) for other in following]
    ends = [end for end in ends if end >= 0]
    return text[start:min(ends)] if ends else text[start:]


def _passages(text: str) -> list[str]:
    body = _section(text, "Passages", ("Answer", "Question"))
    if body.strip() == "(none)":
        return []
    return [part.split("] ", 1)[1] if "] " in part else part
            for part in body.split("\n\n") if part.strip()]


def quarter(share: float) -> float:
    return round(share * 4) / 4


def grade(metric: str, user: str) -> tuple[float, str]:
    """The score and reason this judge gives ``metric`` on a user message."""
    if metric == "correctness":
        reference = _section(user, "Reference answer", ("Answer to grade",))
        answer = _section(user, "Answer to grade", ())
        wanted = words(reference)
        share = len(wanted & words(answer)) / len(wanted) if wanted else 0.0
        return quarter(share), f"{len(wanted & words(answer))} of {len(wanted)} reference words"
    if metric == "faithfulness":
        answer = _section(user, "Answer", ())
        passages = " ".join(_passages(user))
        sentences = [s.strip() for s in re.split(r"[.。!?！？]", answer) if s.strip()]
        if not sentences:
            return 1.0, "no claim"
        held = sum(1 for s in sentences if s in passages)
        return quarter(held / len(sentences)), f"{held} of {len(sentences)} claims supported"
    question = _section(user, "Question", ("Passages",))
    passages = _passages(user)
    if not passages:
        return 0.0, "nothing retrieved"
    relevant = sum(1 for p in passages if words(p) & words(question))
    return quarter(relevant / len(passages)), f"{relevant} of {len(passages)} passages relevant"


@dataclass
class JudgeServer:
    """The judge's state: calls counted per metric, faults to inject."""

    server: ScriptedServer
    calls: dict[str, int] = field(default_factory=dict)
    fault: str | None = None
    delay_s: float = 0.0
    #: Requests being served right now, and the most there ever were at once.
    in_flight: int = 0
    most_in_flight: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        return f"{self.server.url}/v1"

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.calls.values())

    def reply(self, seen: Seen) -> Reply:
        if seen.path.endswith("/models"):
            return Reply(200, {"data": [{"id": "judge-1"}]})
        body = seen.body if isinstance(seen.body, dict) else {}
        messages = body.get("messages", [])
        system = messages[0]["content"] if messages else ""
        user = messages[1]["content"] if len(messages) > 1 else ""
        metric = ("correctness" if "reference answer" in system else
                  "faithfulness" if "supported by the passages" in system else
                  "context_relevance")
        with self._lock:
            self.calls[metric] = self.calls.get(metric, 0) + 1
            first = self.calls[metric] == 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return self._answer(metric, messages, system, user, first)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _answer(self, metric: str, messages: list[dict[str, str]], system: str, user: str,
                first: bool) -> Reply:
        usage = {"prompt_tokens": len(system + user) // 4, "completion_tokens": 12}
        if self.fault == "unauthorized":
            return Reply(401, {"error": {"message": "invalid api key"}})
        if self.fault == "error":
            return Reply(500, {"error": {"message": "judge overloaded"}})
        if self.fault == "malformed" or (self.fault == "malformed_once" and len(messages) == 2
                                         and first):
            text = "I think the answer is mostly right."
        else:
            score, reason = grade(metric, user)
            text = json.dumps({"score": score, "reason": reason}, ensure_ascii=False)
        if self.delay_s:
            time.sleep(self.delay_s)  # here, so the request counts as in flight meanwhile
        return Reply(200, {"choices": [{"message": {"role": "assistant", "content": text}}],
                           "usage": usage})


def start_judge() -> JudgeServer:
    """A judge on a new scripted server (close ``judge.server`` when done)."""
    server = ScriptedServer()
    judge = JudgeServer(server)
    server.default = judge.reply
    return judge
