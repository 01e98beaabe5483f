"""Retrieval datasets built from FAQ documents that Debian ships: questions and their answers.

Each FAQ entry becomes one question (its heading) and one passage (its answer, without the
heading); the answer is the question's one relevant passage, every other answer is a
distractor. Six datasets, four scripts:

- ``debian-en``, ``debian-zh``, ``debian-ru``, ``debian-ja``: the Debian FAQ (HTML) from
  ``debian-faq``, ``debian-faq-zh-cn``, ``debian-faq-ru``, ``debian-faq-ja``; SPI's
  permission to copy and distribute verbatim and modified copies (stated in the FAQ);
- ``python-en``: ``faq/*.rst.txt`` of ``python3.11-doc``; the PSF licence;
- ``perl-en``: ``perlfaq1-9.pod`` of ``perl-doc``; Perl's Artistic licence or the GPL.

The four Debian FAQs are translations of one text, so their question ids agree across
languages. The text is read from the installed packages and written under
``benchmarks/.data/`` (git-ignored): nothing of it is committed. Install the sources with::

    apt-get install debian-faq debian-faq-zh-cn debian-faq-ru debian-faq-ja perl-doc python3-doc

``bench_retrieval_quality.py`` reads them straight from the packages; to evaluate one with
the plugin itself, write the Parquet folders (``benchmarks/.data/<name>/``) with::

    .venv/bin/python benchmarks/faq_datasets.py
"""

from __future__ import annotations

import glob
import html.parser
import re
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / ".data"
DEBIAN_FAQ = Path("/usr/share/doc/debian/FAQ")
PYTHON_FAQ = Path("/usr/share/doc/python3.11/html/_sources/faq")
PERL_POD = Path("/usr/share/perl")
#: Answers shorter than this (characters) are headings or pointers, not answers.
MIN_ANSWER = 40


@dataclass(frozen=True)
class FaqDataset:
    """Questions, passages and the one relevant passage of each question."""

    name: str
    queries: dict[int, str]
    corpus: dict[int, str]
    qrels: dict[int, list[int]]


def _entries_to_dataset(name: str, entries: list[tuple[str, str]]) -> FaqDataset:
    queries: dict[int, str] = {}
    corpus: dict[int, str] = {}
    qrels: dict[int, list[int]] = {}
    seen: set[str] = set()
    for question, answer in entries:
        question, answer = question.strip(), answer.strip()
        if len(answer) < MIN_ANSWER or not question or question in seen:
            continue
        seen.add(question)
        qid = len(queries) + 1
        queries[qid] = question
        corpus[qid] = answer
        qrels[qid] = [qid]
    return FaqDataset(name, queries, corpus, qrels)


# -- Debian FAQ (DocBook HTML)
_BLOCK = {"p", "pre", "li", "dt", "dd", "tr", "div", "table", "ul", "ol", "dl", "h4", "h5"}
_NUMBER = re.compile(r"^\s*\d+(\.\d+)*\.?\s*")


class _DocbookSections(html.parser.HTMLParser):
    """Section titles (h2/h3 class="title") and the text that follows each, navigation left out."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.sections: list[list[str]] = []  # [title, text...]
        self._title: list[str] | None = None
        self._skip = 0  # depth inside navigation / table of contents
        self._stack: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = (dict(attrs).get("class") or "").split()
        if tag == "div":
            self._stack.append("skip" if self._skip or {"navheader", "navfooter", "toc"}
                               & set(classes) else "div")
            if self._stack[-1] == "skip":
                self._skip += 1
            return
        if tag in ("h2", "h3") and "title" in classes and not self._skip:
            self._title = []
        elif tag in ("h1",) and not self._skip:
            self._title = None
            self.sections.append(["", ""])  # a chapter title ends the previous section
            self._stack.append("h1")
        if tag in _BLOCK and self.sections:
            self.sections[-1].append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "div" and self._stack:
            if self._stack.pop() == "skip":
                self._skip -= 1
            return
        if tag in ("h2", "h3") and self._title is not None:
            self.sections.append([_NUMBER.sub("", " ".join("".join(self._title).split()))])
            self._title = None
            return
        if tag in _BLOCK and self.sections:
            self.sections[-1].append("\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._title is not None:
            self._title.append(data)
        elif self.sections:
            # Source line breaks inside a paragraph are spaces; block tags end paragraphs.
            self.sections[-1].append(data.replace("\n", " "))


def _paragraphs(parts: list[str]) -> str:
    text = "".join(parts)
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n|\n", text)]
    return "\n".join(p for p in paragraphs if p)


def debian_faq(language: str) -> FaqDataset:
    """The Debian FAQ in ``language`` (``en``, ``zh-cn``, ``ru``, ``ja``)."""
    folder = DEBIAN_FAQ if language == "en" else DEBIAN_FAQ / language
    chapters = ["basic-defs", "getting-debian", "choosing", "compatibility", "software",
                "nextrelease", "ftparchives", "pkg-basics", "pkgtools", "uptodate", "kernel",
                "customizing", "support", "contributing", "redistributing", "faqinfo"]
    entries: list[tuple[str, str]] = []
    for chapter in chapters:
        path = folder / f"{chapter}.{language}.html"
        if not path.exists():
            raise SystemExit(f"{path} is missing: apt-get install debian-faq"
                             + ("" if language == "en" else f" debian-faq-{language}"))
        parser = _DocbookSections()
        parser.feed(path.read_text(encoding="utf-8"))
        entries += [(s[0], _paragraphs(s[1:])) for s in parser.sections if s[0]]
    short = {"zh-cn": "zh"}.get(language, language)
    return _entries_to_dataset(f"debian-{short}", entries)


# -- Python FAQ (reStructuredText)
_RST_ROLE = re.compile(r":[a-z:]+:`~?([^`<]*?)(?:\s*<[^>]*>)?`")
_RST_LINK = re.compile(r"`([^`<]+?)\s*<[^>]*>`_+")


def _rst_plain(text: str) -> str:
    text = _RST_ROLE.sub(r"\1", text)
    text = _RST_LINK.sub(r"\1", text)
    return text.replace("``", "").replace("**", "")


def python_faq() -> FaqDataset:
    entries: list[tuple[str, str]] = []
    for path in sorted(PYTHON_FAQ.glob("*.rst.txt")):
        if path.name == "index.rst.txt":
            continue
        lines = path.read_text(encoding="utf-8").splitlines()
        title: str | None = None
        body: list[str] = []
        position = 0
        while position < len(lines):
            line = lines[position]
            following = lines[position + 1] if position + 1 < len(lines) else ""
            is_title = (line.strip() and following and len(set(following)) == 1
                        and following[0] in "=-^~*#" and len(following) >= len(line.rstrip()))
            if is_title:
                if title is not None:
                    entries.append((title, _answer_from_rst(body)))
                title, body = _rst_plain(line.strip()), []
                position += 2
                continue
            body.append(line)
            position += 1
        if title is not None:
            entries.append((title, _answer_from_rst(body)))
    # Chapter and group headings are not questions.
    return _entries_to_dataset("python-en", [(q, a) for q, a in entries if q.endswith("?")])


def _answer_from_rst(lines: list[str]) -> str:
    kept = [line for line in lines if not line.lstrip().startswith(".. ")
            and not re.fullmatch(r"\s*:\w+:.*", line)]
    paragraphs = re.split(r"\n\s*\n", "\n".join(kept))
    return "\n".join(" ".join(_rst_plain(p).split()) for p in paragraphs if p.strip())


# -- perlfaq (POD)
_POD_CODE = re.compile(r"[A-Z]<+\s*([^<>]*?)\s*>+")


def _pod_plain(text: str) -> str:
    for _ in range(4):  # nested codes, innermost first
        text = _POD_CODE.sub(lambda m: m.group(1).split("|")[0], text)
    return text


def perl_faq() -> FaqDataset:
    entries: list[tuple[str, str]] = []
    paths = sorted(glob.glob(str(PERL_POD / "*" / "pod" / "perlfaq[1-9].pod")))
    if not paths:
        raise SystemExit("perlfaq*.pod are missing: apt-get install perl-doc")
    for path in paths:
        title: str | None = None
        body: list[str] = []
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            if line.startswith("=head"):
                if title is not None:
                    entries.append((title, _answer_from_pod(body)))
                title = _pod_plain(line.split(None, 1)[1]) if line.startswith("=head2") else None
                body = []
            elif line.startswith("=") and not line.startswith("=item"):
                continue
            else:
                body.append(line[len("=item"):] if line.startswith("=item") else line)
        if title is not None:
            entries.append((title, _answer_from_pod(body)))
    return _entries_to_dataset("perl-en", entries)


def _answer_from_pod(lines: list[str]) -> str:
    paragraphs = re.split(r"\n\s*\n", "\n".join(lines))
    return "\n".join(" ".join(_pod_plain(p).split()) for p in paragraphs if p.strip())


def all_datasets() -> list[FaqDataset]:
    """The six datasets, in a fixed order."""
    return [debian_faq("en"), debian_faq("zh-cn"), debian_faq("ru"), debian_faq("ja"),
            python_faq(), perl_faq()]


def write(dataset: FaqDataset, root: Path = DATA) -> Path:
    """Write ``dataset`` as a pytest-ragev dataset folder (reference answer = the passage)."""
    from pytest_ragev.dataset import write_dataset

    return write_dataset(
        root / dataset.name,
        queries=dataset.queries,
        corpus=dataset.corpus,
        answers={qid: dataset.corpus[pids[0]] for qid, pids in dataset.qrels.items()},
        qrels=dataset.qrels,
        qas={qid: qid for qid in dataset.qrels},
    )


def main() -> None:
    for dataset in all_datasets():
        folder = write(dataset)
        chars = sum(map(len, dataset.corpus.values()))
        print(f"{dataset.name:10} {len(dataset.queries):4} questions, {chars:7} characters "
              f"-> {folder}")


if __name__ == "__main__":
    main()
