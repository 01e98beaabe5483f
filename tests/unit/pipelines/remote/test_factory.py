"""``name = "module:callable"``: a user's factory module written next to the config."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_ragev import Answer, ConfigError, PipelineError, PipelineSettings, QAPair
from pytest_ragev.core.digest import sha256_json
from pytest_ragev.pipelines.remote import FactoryPipeline, build_remote_pipeline, load_factory

CASE = QAPair(qid=3, question="What is 2+2?", pids=(1,), passages=("four",), aid=1, answer="4")

MODULE = '''
from pytest_ragev import Answer, Chunk


class Echo:
    def __init__(self, settings):
        self.k = settings.options.get("top_k", 1)
        self.closed = False

    def answer(self, case):
        return Answer(retrieved=[Chunk("four", 1)] * self.k, text=case.question.upper())

    def close(self):
        self.closed = True


def build(settings):
    return Echo(settings)


class Nested:
    @staticmethod
    def make(settings):
        return Echo(settings)


def no_answer(settings):
    return object()


def wrong_type(settings):
    class Bad:
        def answer(self, case):
            return "just text"
    return Bad()


NOT_CALLABLE = 42


def raising(settings):
    raise RuntimeError("cannot reach\\nthe vector db")
'''


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Path]:
    """A config folder holding a uniquely named pipelines module (xdist-safe)."""
    name = f"ragev_user_pipes_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(MODULE), encoding="utf-8")
    (tmp_path / "broken_dep_mod.py").write_text("import ragev_surely_absent_dep\n")
    yield tmp_path
    for module in (name, "broken_dep_mod"):
        sys.modules.pop(module, None)
    while str(tmp_path.resolve()) in sys.path:
        sys.path.remove(str(tmp_path.resolve()))


def module_name(project: Path) -> str:
    return next(p.stem for p in project.glob("ragev_user_pipes_*.py"))


def settings(project: Path, callable_name: str, **options: object) -> PipelineSettings:
    return PipelineSettings(name=f"{module_name(project)}:{callable_name}", options=options,
                            base_dir=project)


def test_local_module_is_found_and_wrapped(project: Path) -> None:
    pipe = build_remote_pipeline(settings(project, "build", top_k=2, api_key="literal"))
    assert isinstance(pipe, FactoryPipeline)
    answer = pipe.answer(CASE, None)
    assert isinstance(answer, Answer) and answer.text == "WHAT IS 2+2?"
    assert len(answer.retrieved) == 2
    snap = pipe.snapshot()
    assert snap["top_k"] == 2 and snap["api_key"] == "***"
    assert pipe.kb_key() is None
    assert pipe.answer_key() == build_remote_pipeline(
        settings(project, "build", top_k=2, api_key="literal")).answer_key()
    assert pipe.answer_key() != build_remote_pipeline(
        settings(project, "build", top_k=3, api_key="literal")).answer_key()
    inner = pipe.inner
    pipe.close()
    assert inner.closed  # type: ignore[attr-defined]


def test_answer_key_is_the_package_digest_of_name_and_knobs(project: Path) -> None:
    # One digest helper for every key: the canonical JSON of core.digest, not a second one.
    table = {"top_k": 2, "prompt": "Antworte kurz: {question}", "语言": "中文"}
    pipe = build_remote_pipeline(settings(project, "build", **table))
    assert pipe.answer_key() == sha256_json(
        {"name": f"{module_name(project)}:build", "options": table})


def test_dotted_attribute(project: Path) -> None:
    pipe = load_factory(f"{module_name(project)}:Nested.make", settings(project, "x"))
    assert pipe.answer(CASE, None).text == "WHAT IS 2+2?"


def test_wrong_answer_type(project: Path) -> None:
    pipe = build_remote_pipeline(settings(project, "wrong_type"))
    with pytest.raises(PipelineError, match=r"answer\(\) returned str for qid 3"):
        pipe.answer(CASE, None)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("ragev_no_such_module_xyz:build", r"no module named 'ragev_no_such_module_xyz' "
                                           r"\(looked in .*\)"),
        ("broken_dep_mod:build", r"importing 'broken_dep_mod' failed: no module named "
                                 r"'ragev_surely_absent_dep'"),
        ("{mod}:nope", r"has no attribute 'nope'; it defines: .*build"),
        ("{mod}:Nested.nope", r"'{mod}:Nested' has no attribute 'nope'; it defines: make$"),
        ("{mod}:Nested.make.x", r"'{mod}:Nested.make' has no attribute 'x'"),
        ("{mod}:NOT_CALLABLE", r"'NOT_CALLABLE' is of type int, not a callable"),
        ("{mod}:no_answer", r"returned an object of type object without an answer\(case\) method"),
        ("{mod}:", r"is not module:callable"),
    ],
)
def test_errors(project: Path, name: str, message: str) -> None:
    full = name.replace("{mod}", module_name(project))
    message = message.replace("{mod}", module_name(project))
    with pytest.raises(ConfigError, match=message) as caught:
        build_remote_pipeline(PipelineSettings(name=full, base_dir=project),
                              source=project / "ragev.toml")
    assert "\n" not in str(caught.value)


def test_errors_name_the_variant(project: Path) -> None:
    for name in (f"{module_name(project)}:nope", "http", f"{module_name(project)}:raising"):
        with pytest.raises((ConfigError, PipelineError)) as caught:
            build_remote_pipeline(
                PipelineSettings(name=name, base_dir=project, variant="v2",
                                 options={"url": "ftp://x"} if name == "http" else {}),
                source=project / "ragev.toml",
            )
        assert str(caught.value).startswith(f"{project / 'ragev.toml'}: variant 'v2': ")


def test_a_factory_that_raises_is_one_pipeline_error(project: Path) -> None:
    name = f"{module_name(project)}:raising"
    with pytest.raises(PipelineError) as caught:
        build_remote_pipeline(PipelineSettings(name=name, base_dir=project),
                              source=project / "ragev.toml")
    assert str(caught.value) == (
        f"{project / 'ragev.toml'}: [pipeline] name = {name!r}: the factory raised "
        "RuntimeError: cannot reach the vector db; call raising(settings) by hand to see "
        "the traceback"
    )
    assert isinstance(caught.value.__cause__, RuntimeError)
