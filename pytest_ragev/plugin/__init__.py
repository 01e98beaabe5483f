"""pytest entry point of pytest-ragev (``pytest11: ragev``).

Loaded in every pytest run of an environment that has the plugin installed, so it
imports nothing heavy: the dataset layer, the metric engine and the pipelines load
only when a ragev config is active.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from pytest_ragev.core.types import Answer, QAPair

if TYPE_CHECKING:
    from pytest_ragev.config import RagevConfig, RunOptions
    from pytest_ragev.core.record import Record
    from pytest_ragev.plugin.run import ActiveRun
    from pytest_ragev.plugin.session import RagevSession

#: The name the session object registers under.
SESSION_PLUGIN = "ragev-session"


def _positive_int(flag: str, example: str) -> Callable[[str], int]:
    """The argparse type of ``flag``: a whole number >= 1, the message naming the fix."""

    def parse(value: str) -> int:
        fix = f"pass a whole number >= 1, e.g. {flag} {example}"
        try:
            number = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{value!r} is not a whole number; {fix}") from None
        if number < 1:
            raise argparse.ArgumentTypeError(f"{value!r} is less than 1; {fix}")
        return number

    return parse


def _path_arg(flag: str, example: str, off: str) -> Callable[[str], str]:
    """The argparse type of a path option: an empty path is refused with the fix.

    ``--ragev-report ''`` (a shell variable that was not set) used to fall back to the
    config's path or to no report without a word; ``off`` says how to have none.
    """

    def parse(value: str) -> str:
        if not value.strip():
            blank = "an empty path" if not value else "a blank path"
            raise pytest.UsageError(
                f"{flag} {value!r} is {blank}; pass a file path, e.g. {flag} {example}, "
                f"or {off}"
            )
        return value

    return parse


def _task_id(value: str) -> str:
    # It is a file name part for some callers and shown in every report: keep it plain.
    if not value or len(value) > 200 or not all(ch.isalnum() or ch in "-_." for ch in value):
        raise argparse.ArgumentTypeError(
            f"{value!r} is not a task id; use letters, digits, '-', '_' and '.' (200 at most)"
        )
    return value


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ragev", "RAG evaluation (pytest-ragev)")
    group.addoption(
        "--ragev-config", dest="ragev_config", metavar="PATH", default=None,
        type=_path_arg("--ragev-config", "ragev.toml",
                       "leave the option out to use the ragev_config ini key, if set"),
        help="ragev.toml to evaluate; with no test paths, only the evaluation runs.",
    )
    group.addoption(
        "--ragev-report", dest="ragev_report", metavar="PATH", default=None,
        type=_path_arg("--ragev-report", "ragev-report.json",
                       "leave the option out to use [report] json, if set"),
        help="write the JSON report (WeKnora EvaluationDetail shape) to PATH.",
    )
    group.addoption(
        "--ragev-limit", dest="ragev_limit", metavar="N",
        type=_positive_int("--ragev-limit", "20"), default=None,
        help="evaluate only the first N questions by id (quick local loops).",
    )
    group.addoption(
        "--ragev-concurrency", dest="ragev_concurrency", metavar="N",
        type=_positive_int("--ragev-concurrency", "4 (1 = strictly serial)"),
        default=None,
        help="pipeline calls run ahead in N threads (default: CPUs - 1; 1 = strictly serial).",
    )
    group.addoption(
        "--ragev-repeat", dest="ragev_repeat", metavar="R",
        type=_positive_int("--ragev-repeat", "5"), default=None,
        help="answer each question R times and gate on the mean of its R scores "
        "(default: [run] repeat, else 1).",
    )
    group.addoption(
        "--ragev-slices", dest="ragev_slices", action="store_true", default=False,
        help="print each language's and tag's means in the terminal summary (shown "
        "unasked when a slice regressed).",
    )
    group.addoption(
        "--ragev-baseline", dest="ragev_baseline", metavar="PATH", default=None,
        type=_path_arg("--ragev-baseline", "ragev-baseline.json",
                       "leave the option out to use [baseline] path, if set "
                       "(--ragev-no-baseline gates on none)"),
        help="baseline snapshot to gate against (overrides [baseline] path).",
    )
    group.addoption(
        "--ragev-update-baseline", dest="ragev_update_baseline", action="store_true",
        default=False, help="write or replace the baseline with this run's results and pass.",
    )
    group.addoption(
        "--ragev-no-baseline", dest="ragev_no_baseline", action="store_true", default=False,
        help="do not gate against the baseline this run, for exploration (thresholds still "
        "apply; the baseline file is neither read nor written).",
    )
    group.addoption(
        "--ragev-summary", dest="ragev_summary", metavar="short|full", default="short",
        choices=("short", "full"),
        help="terminal summary: 'short' (default: one line per unchanged comparison, no "
        "table the variants table already shows) or 'full' (every table).",
    )
    group.addoption(
        "--ragev-variant", dest="ragev_variant", metavar="NAME", action="append", default=[],
        help="run only this variant ('base' for the base config); repeatable.",
    )
    group.addoption(
        "--ragev-no-cache", dest="ragev_no_cache", action="store_true", default=False,
        help="neither read nor write cached pipeline answers and knowledge bases.",
    )
    group.addoption(
        "--ragev-rejudge", dest="ragev_rejudge", action="store_true", default=False,
        help="ask the [judge] for every verdict anew instead of replaying recorded ones "
             "(the new verdicts replace them in the verdict store).",
    )
    group.addoption(
        "--ragev-profile", dest="ragev_profile", metavar="NAME", default=None,
        choices=("weknora", "standard"),
        help="metric profile: 'weknora' (default) or 'standard' (trec_eval/rouge-score/NLTK).",
    )
    group.addoption(
        "--ragev-task-id", dest="ragev_task_id", metavar="ID", type=_task_id, default=None,
        help="the task id of the JSON report (default: evaluation_<unix ms>_<hex>_<dataset>), "
        "for a caller that names its tasks, such as `ragev serve`.",
    )
    group.addoption(
        "--ragev-samples", dest="ragev_samples", metavar="FILE", default=None,
        help="append one JSON line per question to FILE as each question is answered "
        "(its sample as the JSON report writes it, scored, plus its variant), to follow a "
        "run while it goes; emptied when the run starts.",
    )
    group.addoption(
        "--ragev-markdown", dest="ragev_markdown", metavar="PATH", default=None,
        type=_path_arg("--ragev-markdown", "ragev.md",
                       "leave the option out to use [report] markdown, if set"),
        help="write the Markdown summary to PATH (else $GITHUB_STEP_SUMMARY when set).",
    )
    group.addoption(
        "--ragev-html", dest="ragev_html", metavar="PATH", default=None,
        type=_path_arg("--ragev-html", "ragev.html",
                       "leave the option out to use [report] html, if set"),
        help="write a self-contained HTML report to PATH.",
    )
    group.addoption(
        "--ragev-shard", dest="ragev_shard", metavar="K/N", default=None,
        help="answer only shard K of N (1-based) of the questions, assigned by a hash of "
        "the question id, and write a partial JSON report for `ragev report merge` "
        "(not gated).",
    )
    group.addoption(
        "--ragev-shard-balance", dest="ragev_shard_balance", metavar="REPORT", default=None,
        type=_path_arg("--ragev-shard-balance", "ragev-report.json",
                       "leave the option out to assign the shards by the question id alone"),
        help="balance the shards by the per-question latency (meta latency_s) an earlier "
        "JSON report recorded; questions it lacks go by their id's hash.",
    )
    group.addoption(
        "--ragev-answers-out", dest="ragev_answers_out", metavar="FILE.parquet", default=None,
        type=_path_arg("--ragev-answers-out", "answers.parquet",
                       "leave the option out to write no answers file"),
        help="write every answer of the run to a Parquet file (qid, variant, retrieved_ids, "
        "retrieved_texts, answer, meta) that [pipeline] name = \"replay\" scores again.",
    )
    parser.addini(
        "ragev_config", type="string", default="",
        help="ragev.toml to evaluate (relative to the ini file); --ragev-config wins.",
    )
    parser.addini(
        "ragev_shard", type="string", default="",
        help="the shard this run answers, K/N (as --ragev-shard, which wins).",
    )
    parser.addini(
        "ragev_shard_balance", type="string", default="",
        help="a JSON report whose latencies balance the shards (relative to the ini file; "
        "--ragev-shard-balance wins).",
    )


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_ragev.plugin import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


def _config_path(config: pytest.Config, cli: str | None) -> tuple[Path | None, bool]:
    """The ragev config file (``cli``, the ``--ragev-config`` value, else the
    ``ragev_config`` ini key) and whether it came from the command line."""
    if cli:
        return Path(cli), True
    ini = config.getini("ragev_config")
    if ini:
        base = config.inipath.parent if config.inipath else config.rootpath
        return base / str(ini), False
    return None, False


@pytest.hookimpl(wrapper=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> Any:
    """Load the ``conftest.py`` files beside (and above) the ragev config early.

    pytest loads the initial conftests of the test paths only; with
    ``--ragev-config eval/ragev.toml`` run from the project root, ``eval/conftest.py``
    would load only when collection reaches ``eval/``: after session start, where the
    pipeline name, custom metrics and thresholds are checked, and never on the xdist
    controller, which does not collect. So load it here, as pytest loads the conftests
    of its initial paths (same confcutdir, import mode and ``--noconftest``).
    """
    result = yield
    namespace = early_config.known_args_namespace
    # Options are not parsed into config.getoption yet: read the early namespace.
    found, _ = _config_path(early_config, getattr(namespace, "ragev_config", None))
    if found is None:
        return result
    path = early_config.invocation_params.dir / found  # an absolute ini path stays as is
    if not path.is_file():
        return result  # pytest_configure reports it as one line
    _load_conftests(early_config, path.resolve().parent)
    return result


def _load_conftests(early_config: pytest.Config, folder: Path) -> None:
    # pytest has no public API for this; it does the same for each initial path in
    # PytestPluginManager._set_initial_conftests. Guarded, so a future rename degrades
    # to today's behaviour (conftests load when collection reaches the folder).
    manager = early_config.pluginmanager
    load = getattr(manager, "_loadconftestmodules", None)
    if load is None:
        return
    importmode = early_config.known_args_namespace.importmode
    try:
        load(folder, importmode, early_config.rootpath,
             consider_namespace_packages=early_config.getini("consider_namespace_packages"))
    except TypeError:  # pytest 8.0: no consider_namespace_packages yet
        load(folder, importmode, early_config.rootpath)


def _path_option(config: pytest.Config, name: str, *, resolve: bool = True) -> Path | None:
    value = config.getoption(name)
    if not value:
        return None
    if resolve:
        return Path(value).resolve()
    # A report path keeps its last link: /dev/stdout resolves to whatever stdout is (the
    # build.log of `> build.log`, a pipe), and the report goes to the stream, not there.
    path = Path(os.path.abspath(value))
    return path.parent.resolve() / path.name


def _shard(config: pytest.Config) -> Any:
    """The ``ShardSpec`` of ``--ragev-shard`` (else of the ``ragev_shard`` ini key), or
    ``None``; a bad value is a usage error naming the fix."""
    from pytest_ragev.core.errors import ConfigError
    from pytest_ragev.core.shard import ShardSpec

    value = config.getoption("ragev_shard")
    where = "--ragev-shard"
    if value is None:
        value = str(config.getini("ragev_shard") or "").strip() or None
        where = "ini key ragev_shard ="
    if value is None:
        return None
    try:
        return ShardSpec.parse(value, where=where)
    except ConfigError as exc:
        raise pytest.UsageError(str(exc)) from None


def _ini_path(config: pytest.Config, name: str) -> Path | None:
    """A path the ini key ``name`` gives, relative to the ini file (``None``: unset)."""
    value = str(config.getini(name) or "").strip()
    if not value:
        return None
    base = config.inipath.parent if config.inipath else config.rootpath
    return (base / value).resolve()


def _start_run(config: pytest.Config, ragev: RagevConfig, options: RunOptions) -> ActiveRun:
    # The active part of a run imports the dataset layer, the metric engine and the
    # pipelines: only runs that answer questions pay for them.
    from pytest_ragev.plugin.run import ActiveRun

    return ActiveRun(config, ragev, options)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    path, from_cli = _config_path(config, config.getoption("ragev_config"))
    if path is None:
        return
    from pytest_ragev.config import RunOptions, load_config
    from pytest_ragev.core.errors import RagevError
    from pytest_ragev.plugin.session import RagevSession, session_key

    ini_file = None if from_cli else (config.inipath or config.rootpath / "pytest.ini")
    try:
        ragev = load_config(path, ini=ini_file)
    except RagevError as exc:
        raise pytest.UsageError(str(exc)) from None
    explicit = config.args_source == pytest.Config.ArgsSource.ARGS
    options = RunOptions(
        report_json=_path_option(config, "ragev_report", resolve=False),
        report_markdown=_path_option(config, "ragev_markdown", resolve=False),
        report_html=_path_option(config, "ragev_html", resolve=False),
        limit=config.getoption("ragev_limit"),
        concurrency=config.getoption("ragev_concurrency"),
        baseline=_path_option(config, "ragev_baseline"),
        update_baseline=bool(config.getoption("ragev_update_baseline")),
        variants=tuple(config.getoption("ragev_variant") or ()),
        no_cache=bool(config.getoption("ragev_no_cache")),
        rejudge=bool(config.getoption("ragev_rejudge")),
        profile=config.getoption("ragev_profile"),
        no_baseline=bool(config.getoption("ragev_no_baseline")),
        summary=config.getoption("ragev_summary") or "short",
        task_id=config.getoption("ragev_task_id"),
        samples=_path_option(config, "ragev_samples", resolve=False),
        repeat=config.getoption("ragev_repeat"),
        slices=bool(config.getoption("ragev_slices")),
        shard=_shard(config),
        shard_balance=(_path_option(config, "ragev_shard_balance")
                       or _ini_path(config, "ragev_shard_balance")),
        answers_out=_path_option(config, "ragev_answers_out"),
    )
    if from_cli and not explicit:
        # `pytest --ragev-config ragev.toml` with no test paths: run only the evaluation.
        config.args = [str(ragev.source)]
    session = RagevSession(config, ragev, options, start_run=_start_run)
    config.stash[session_key] = session
    config.pluginmanager.register(session, SESSION_PLUGIN)


def _session(config: pytest.Config) -> RagevSession | None:
    """The run's session, or ``None`` in a run without a ragev config.

    The plugin manager is asked first: a pytest run that merely has the plugin
    installed never imports the session module (the config parser, the collectors:
    some 40 ms) just to find its stash key empty.
    """
    if not config.pluginmanager.has_plugin(SESSION_PLUGIN):
        return None
    from pytest_ragev.plugin.session import session_key

    return config.stash.get(session_key, None)


def pytest_unconfigure(config: pytest.Config) -> None:
    session = _session(config)
    if session is None:
        return
    from pytest_ragev.plugin.session import session_key

    del config.stash[session_key]
    session.thaw()  # never left frozen, even when the session did not finish
    names = [SESSION_PLUGIN]
    if session.started is not None:
        from pytest_ragev.plugin.run import PLUGIN_NAMES

        names += PLUGIN_NAMES
    for name in names:
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin, name)


def _run_or_skip(request: pytest.FixtureRequest) -> ActiveRun:
    session = _session(request.config)
    if session is None:
        pytest.skip("no ragev config: pass --ragev-config or set ragev_config in the ini file")
    return session.run


@pytest.fixture
def ragev_case(request: pytest.FixtureRequest) -> QAPair:
    """The QA pair of this test; the test is parametrized over the dataset's pairs.

    Example::

        def test_answer(ragev_case, ragev_answer, ragev_record):
            ragev_record(retrieved=ragev_answer.retrieved, text=ragev_answer.text)
    """
    _run_or_skip(request)
    # Reached only when pytest_generate_tests did not parametrize (no pairs at all).
    pytest.skip("the ragev dataset has no questions")


@pytest.fixture(scope="session")
def ragev_kb(request: pytest.FixtureRequest) -> Any:
    """The session's evaluation knowledge base for the base configuration (built once)."""
    run = _run_or_skip(request)
    return run.answerer.knowledge_base(run.plan.settings(None))


@pytest.fixture
def ragev_answer(request: pytest.FixtureRequest, ragev_case: QAPair) -> Answer:
    """The configured pipeline's :class:`Answer` to this test's question."""
    return _run_or_skip(request).answerer.answer(ragev_case, None)


@pytest.fixture
def ragev_record(request: pytest.FixtureRequest) -> Callable[..., Record]:
    """Record what a hand-written test retrieved and generated for its ``ragev_case``.

    Call it once per test: ``ragev_record(retrieved=[...], text="...")``. ``retrieved``
    takes passage ids, chunk texts or chunk objects, as ``Answer.retrieved`` does. The
    record feeds the same metrics, thresholds and reports as the generated items.
    """
    from pytest_ragev.core.attribution import check_collection

    run = _run_or_skip(request)
    callspec = getattr(request.node, "callspec", None)
    case = callspec.params.get("ragev_case") if callspec is not None else None
    if not isinstance(case, QAPair):
        raise pytest.UsageError(
            f"{request.node.nodeid}: ragev_record needs the ragev_case fixture in the same "
            "test; add ragev_case to its arguments"
        )
    recorded: list[bool] = []

    def record(*, retrieved: Any = (), text: str = "", meta: Any = None) -> Record:
        if recorded:
            raise RuntimeError("ragev_record was called twice in one test; record once")
        recorded.append(True)
        # Checked before list(): list("Paris") would be five one-character chunks, a
        # dict its keys, a set an arbitrary order (the hook path checks the same).
        __tracebackhide__ = True  # the failure points at the test's own call
        try:
            check_collection(retrieved, "ragev_record(retrieved=...)")
        except TypeError as exc:
            run.answerer.record_manual_error(request.node, case, f"TypeError: {exc}")
            raise TypeError(str(exc)) from None
        answer = Answer(retrieved=list(retrieved), text=text, meta=dict(meta or {}))
        return run.answerer.record_manual(request.node, case, answer)

    return record
