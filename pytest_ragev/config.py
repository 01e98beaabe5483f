"""``ragev.toml`` and the command line, resolved once into frozen settings.

Precedence: command line > ini (``[tool.pytest.ini_options]``) > config file > default.
Every problem is a :class:`ConfigError` with one line naming the file, the key and the fix.
Nothing here imports pytest: the plugin passes the option values in.
"""

from __future__ import annotations

import math
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.redact import redact
from pytest_ragev.core.shard import ShardSpec
from pytest_ragev.core.tables import Table, deep_merge, suggest
from pytest_ragev.core.types import BUILTIN_METRICS, JUDGED_METRICS, PipelineSettings

PROFILES = ("weknora", "standard")

_TOP_LEVEL_KEYS = (
    "dataset",
    "pipeline",
    "metrics",
    "thresholds",
    "item_thresholds",
    "report",
    "baseline",
    "gate",
    "run",
    "judge",
    "pricing",
    "variants",
)
#: The top-level tables and keys of a ragev.toml: a TOML file holding none of them is not
#: a ragev config (``ragev serve`` tells its configs from other TOML files by them).
TOP_LEVEL_KEYS = _TOP_LEVEL_KEYS
_DATASET_KEYS = ("path", "id")
_METRICS_KEYS = ("profile", "tokenizer", "similarity", "judged")
_REPORT_KEYS = ("json", "markdown", "html", "top_regressions", "task_user")
_BASELINE_KEYS = ("path", "answer_chars")
_RUN_KEYS = ("concurrency", "cache", "progress_interval", "preflight", "timeout",
             "deadline", "repeat")
_REPORT_EXAMPLES = {"json": "ragev-report.json", "markdown": "ragev.md", "html": "ragev.html"}
_VARIANT_KEYS = ("name", "pipeline")
_VARIANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")

@dataclass(frozen=True)
class TokenPrice:
    """What a million tokens cost, the prompt's and the completion's."""

    prompt: float = 0.0
    completion: float = 0.0

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        """The price of that many tokens."""
        return (prompt_tokens * self.prompt + completion_tokens * self.completion) / 1e6


@dataclass(frozen=True)
class Pricing:
    """The ``[pricing]`` table: token prices of the pipeline and of the judge."""

    currency: str = "USD"
    pipeline: TokenPrice | None = None
    judge: TokenPrice | None = None

    def to_json(self) -> dict[str, Any]:
        """The table as reports record it (read back by :meth:`from_json`)."""
        def price(value: TokenPrice | None) -> dict[str, float] | None:
            return None if value is None else {"prompt": value.prompt,
                                               "completion": value.completion}
        return {"currency": self.currency, "pipeline": price(self.pipeline),
                "judge": price(self.judge)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Pricing:
        """Inverse of :meth:`to_json` (a value that is not a price is no price)."""
        def price(value: Any) -> TokenPrice | None:
            if not isinstance(value, Mapping):
                return None
            prompt, completion = value.get("prompt", 0), value.get("completion", 0)
            if not all(isinstance(x, int | float) and not isinstance(x, bool)
                       and math.isfinite(x) and x >= 0 for x in (prompt, completion)):
                return None
            return TokenPrice(float(prompt), float(completion))
        return cls(currency=str(data.get("currency", "USD")), pipeline=price(data.get("pipeline")),
                   judge=price(data.get("judge")))


@dataclass(frozen=True, repr=False)
class VariantConfig:
    """One ``[[variants]]`` entry: a name and overrides of the ``[pipeline]`` table."""

    name: str
    pipeline: Mapping[str, Any]

    def __repr__(self) -> str:
        return f"VariantConfig(name={self.name!r}, pipeline={redact(self.pipeline)!r})"


@dataclass(frozen=True)
class RunOptions:
    """Command-line and ini settings that override or complete the config file."""

    report_json: Path | None = None
    report_markdown: Path | None = None
    report_html: Path | None = None
    limit: int | None = None
    concurrency: int | None = None
    baseline: Path | None = None
    update_baseline: bool = False
    variants: tuple[str, ...] = ()
    no_cache: bool = False
    #: ``--ragev-rejudge``: ask the judge for every verdict anew.
    rejudge: bool = False
    profile: str | None = None
    #: ``--ragev-no-baseline``: no baseline gate this run (thresholds still apply).
    no_baseline: bool = False
    #: ``--ragev-summary``: ``"short"`` (default) or ``"full"`` terminal summary.
    summary: str = "short"
    #: ``--ragev-task-id``: the JSON report's task id (else one is made).
    task_id: str | None = None
    #: ``--ragev-samples``: one JSON line per question, written as the records arrive.
    samples: Path | None = None
    #: ``--ragev-repeat``: how many times each question is answered (``None``: the config's).
    repeat: int | None = None
    #: ``--ragev-slices``: print the slices table in the terminal summary.
    slices: bool = False
    #: ``--ragev-shard K/N``: this run answers shard K of N and writes a partial report.
    shard: ShardSpec | None = None
    #: ``--ragev-shard-balance``: a JSON report whose per-question latencies balance the
    #: shards (``None``: by the hash of the qid alone).
    shard_balance: Path | None = None
    #: ``--ragev-answers-out``: every answer of the run, written as a Parquet file.
    answers_out: Path | None = None


@dataclass(frozen=True)
class RagevConfig:
    """The parsed ``ragev.toml``, paths resolved against its folder."""

    source: Path
    dataset_path: Path
    dataset_id: str | None
    pipeline: PipelineSettings
    profile: str = "weknora"
    tokenizer: str = "default"
    thresholds: Mapping[str, float] = field(default_factory=dict)
    #: ``[thresholds.slice.<name>]``: per slice (as written), metric -> floor or ceiling.
    slice_thresholds: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    item_thresholds: Mapping[str, float] = field(default_factory=dict)
    report_json: Path | None = None
    report_markdown: Path | None = None
    report_html: Path | None = None
    top_regressions: int = 10
    task_user: bool = False
    baseline_path: Path | None = None
    #: ``[baseline] answer_chars``: characters of a long answer the baseline keeps, or
    #: ``"all"`` / ``"auto"`` (see ``gate.baseline.answer_limit``).
    baseline_answer_chars: int | str = "auto"
    gate: Mapping[str, Any] = field(default_factory=dict)
    concurrency: int | None = None
    cache: bool | None = None
    progress_interval: float = 2.0
    #: Check a remote pipeline's service with one request before any question.
    preflight: bool = True
    #: ``[run] timeout``: seconds one question's pipeline call may take (``None``: no limit).
    timeout: float | None = None
    #: ``[run] deadline``: seconds the whole run may answer for, then it is interrupted.
    deadline: float | None = None
    #: ``[run] repeat``: how many times each question is answered (1: once).
    repeat: int = 1
    variants: tuple[VariantConfig, ...] = ()
    #: ``[metrics] similarity``: score the answer's meaning against the reference's.
    similarity: bool = False
    #: ``[metrics] judged``: the metrics a judge scores, in report order.
    judged: tuple[str, ...] = ()
    #: The ``[judge]`` table as written (validated by the run plan, which knows the
    #: client's rules); empty without one.
    judge: Mapping[str, Any] = field(default_factory=dict)
    #: ``[pricing]``: what a million tokens cost, for the pipeline and the judge.
    pricing: Pricing | None = None

    @property
    def base_dir(self) -> Path:
        """The folder of the config file; relative paths resolve against it."""
        return self.source.parent


def load_config(path: str | os.PathLike[str], *, ini: Path | None = None) -> RagevConfig:
    """Read and validate a ``ragev.toml``; raise :class:`ConfigError` on any problem.

    ``ini`` is the ini file whose ``ragev_config`` key named ``path`` (``None`` when it
    came from ``--ragev-config``), so a missing file is reported where it was named.
    """
    source = Path(path).resolve()
    if not source.is_file():
        what = "is a folder, not a file" if source.is_dir() else "not found"
        if ini is not None:
            try:
                written = Path(path).relative_to(ini.parent).as_posix()
            except ValueError:
                written = str(path)
            raise ConfigError(
                f"{ini}: ragev_config = {written!r}: ragev config file {what} (resolved to "
                f"{source}, relative to the ini file); fix the ragev_config key in {ini.name}"
            )
        raise ConfigError(
            f"{path}: ragev config file {what}; pass an existing file to --ragev-config"
        )
    try:
        raw = tomllib.loads(source.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML ({exc}); fix the syntax") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{source}: not UTF-8 text; save the file as UTF-8") from None
    return parse_config(raw, source=source)


def parse_config(raw: Mapping[str, Any], *, source: Path) -> RagevConfig:
    """Validate the TOML document ``raw`` read from ``source``."""
    top = Table(raw, where="", source=source)
    top.check_keys(_TOP_LEVEL_KEYS)
    base_dir = source.parent

    dataset = top.sub("dataset")
    dataset.check_keys(_DATASET_KEYS)
    if "path" not in dataset:
        raise ConfigError(
            f"{source}: [dataset] path is missing; add path = \"<folder with the five "
            "Parquet files>\" (relative to the config file)"
        )
    ds_path_raw = dataset.string("path", fix="write the folder as a string")
    assert ds_path_raw is not None
    dataset_path = (base_dir / ds_path_raw).resolve()
    if not dataset_path.exists():
        raise ConfigError(
            f"{source}: [dataset] path = {ds_path_raw!r} does not exist (resolved to "
            f"{dataset_path}); paths are relative to the config file"
        )
    if not dataset_path.is_dir():
        raise ConfigError(
            f"{source}: [dataset] path = {ds_path_raw!r} is a file, not a folder (resolved to "
            f"{dataset_path}); point it at the folder that holds the five Parquet files"
        )
    dataset_id = dataset.string("id", fix="write the dataset id as a string")
    if dataset_id is not None:
        _check_name(dataset_id, "[dataset] id", source)

    pipeline_table = dict(top.sub("pipeline").table)
    name = pipeline_table.pop("name", "builtin")
    if not isinstance(name, str):
        raise ConfigError(f"{source}: [pipeline] name = {name!r} is invalid; use \"builtin\", "
                          "\"http\" or \"module:callable\"")
    _check_finite(pipeline_table, "[pipeline]", source)
    pipeline = PipelineSettings(name=name, options=pipeline_table, base_dir=base_dir)

    metrics = top.sub("metrics")
    metrics.check_keys(_METRICS_KEYS)
    profile = metrics.choice("profile", "weknora", PROFILES, what="metric profile")
    # "default", "ja", "ko" or "module:callable": resolved (and its extra checked) by the
    # run plan, which may import the metric engine.
    tokenizer = metrics.string("tokenizer", "default",
                               fix='use "default", "ja", "ko" or "module:callable"')
    assert tokenizer is not None
    similarity = bool(metrics.boolean("similarity", False))
    judged = _judged(metrics)
    judge_table = top.sub("judge", fix="write [judge] with base_url and model below it")
    if judged and not judge_table.table:
        raise metrics.fail("judged", list(judged), "add a [judge] table naming the model that "
                           'judges (base_url, model; see docs/quality.md), or remove judged')
    pricing = _pricing(top.sub("pricing"))

    thresholds_table = top.sub("thresholds")
    slice_thresholds = _slice_thresholds(thresholds_table)
    thresholds = _thresholds(thresholds_table, skip=("slice",))
    item_thresholds = _thresholds(top.sub("item_thresholds"))

    report = top.sub("report")
    report.check_keys(_REPORT_KEYS)
    paths: dict[str, Path | None] = {}
    for key, example in _REPORT_EXAMPLES.items():
        written = report.string(key, fix="write a file path as a string")
        if written == "":
            # An empty path used to switch the report off without a word.
            raise report.fail(key, written, f'write a file path, e.g. {key} = "{example}", or '
                              "remove the key to write no such report")
        paths[key] = (base_dir / written) if written is not None else None
    top_regressions = report.integer("top_regressions", 10, low=0, example="10")
    assert top_regressions is not None
    task_user = report.boolean("task_user", False)

    baseline = top.sub("baseline")
    baseline.check_keys(_BASELINE_KEYS)
    baseline_raw = baseline.string("path", fix="write a file path as a string")
    if baseline_raw == "":
        raise baseline.fail("path", baseline_raw, 'write a file path, e.g. path = '
                            '"ragev-baseline.json", or remove the key to gate on no baseline')
    answer_chars = _answer_chars(baseline)

    gate = top.sub("gate")

    run = top.sub("run")
    run.check_keys(_RUN_KEYS)
    concurrency = run.integer("concurrency", None, low=1, example="4")
    cache = run.boolean("cache")
    interval = run.number("progress_interval", 2.0, low=0.0, low_open=True, example="2")
    assert interval is not None
    preflight = run.boolean("preflight", True)
    timeout = run.number("timeout", None, low=0.0, low_open=True, example="120")
    deadline = run.number("deadline", None, low=0.0, low_open=True, example="3600")
    repeat = run.integer("repeat", 1, low=1, example="5")
    assert repeat is not None

    variants_raw = raw.get("variants", [])
    if not isinstance(variants_raw, list):
        raise ConfigError(
            f"{source}: variants must be an array of tables; write each as [[variants]]"
        )
    variants: list[VariantConfig] = []
    seen: set[str] = set()
    for index, entry_raw in enumerate(variants_raw):
        where = f"[[variants]] #{index + 1}"
        vname = entry_raw.get("name") if isinstance(entry_raw, Mapping) else None
        if isinstance(vname, str):
            where = f"[[variants]] #{index + 1} ({vname!r})"
        entry = Table(entry_raw, where=where, source=source,
                      fix='write each variant as a [[variants]] table with name = "..."')
        entry.check_keys(_VARIANT_KEYS)
        if vname is None:
            raise ConfigError(f'{source}: {where} has no name; add name = "chunk-256"')
        entry.string("name", fix="write the variant name as a string")
        _check_name(vname, f"{where} name", source)
        if vname in seen:
            raise ConfigError(f"{source}: {where} name {vname!r} is used twice; names must differ")
        seen.add(vname)
        overrides = entry.sub("pipeline", where=f"{where} pipeline",
                              fix="write the overrides as pipeline.<knob> = ... under [[variants]]")
        _check_finite(overrides.table, f"{where} pipeline", source)
        variants.append(VariantConfig(name=vname, pipeline=overrides.table))

    return RagevConfig(
        source=source,
        dataset_path=dataset_path,
        dataset_id=dataset_id,
        pipeline=pipeline,
        profile=profile,
        tokenizer=tokenizer,
        thresholds=thresholds,
        slice_thresholds=slice_thresholds,
        item_thresholds=item_thresholds,
        report_json=paths["json"],
        report_markdown=paths["markdown"],
        report_html=paths["html"],
        top_regressions=top_regressions,
        task_user=bool(task_user),
        baseline_path=(base_dir / baseline_raw) if baseline_raw else None,
        baseline_answer_chars=answer_chars,
        gate=gate.table,
        concurrency=concurrency,
        cache=cache,
        progress_interval=interval,
        preflight=bool(preflight),
        timeout=timeout,
        deadline=deadline,
        repeat=repeat,
        variants=tuple(variants),
        similarity=similarity,
        judged=judged,
        judge=dict(judge_table.table),
        pricing=pricing,
    )


def _answer_chars(table: Table) -> int | str:
    """``[baseline] answer_chars``: a whole number >= 20, "all" or "auto" (the default)."""
    value = table.get("answer_chars", "auto")
    if value in ("all", "auto"):
        return str(value)
    if type(value) is int and value >= _MIN_ANSWER_CHARS:
        return value
    raise table.fail("answer_chars", value, f'write a whole number >= {_MIN_ANSWER_CHARS} (the '
                     'characters of a long answer the baseline keeps), "all" or "auto", e.g. '
                     'answer_chars = 200')


#: Fewer characters say too little of an answer to tell in a diff what it became.
_MIN_ANSWER_CHARS = 20


def _thresholds(table: Table, skip: tuple[str, ...] = ()) -> dict[str, float]:
    """``metric = number`` pairs; the metric names are checked by the run plan. Keys in
    ``skip`` are sub-tables read elsewhere (``[thresholds.slice]``)."""
    values: dict[str, float] = {}
    for metric in table.table:
        if metric in skip:
            continue
        # The built-in metrics lie in [0, 1]; a custom metric may be any figure (seconds,
        # tokens, cost): its own bounds are checked once the hooks have named it
        # (RunPlan.build).
        if metric in BUILTIN_METRICS:
            value = table.number(metric, None, low=0.0, high=1.0, example="0.5")
        else:
            value = table.number(metric, None, example="0.5")
        assert value is not None
        values[metric] = value
    return values


def _slice_thresholds(table: Table) -> dict[str, dict[str, float]]:
    """``[thresholds.slice.<name>]`` tables: ``name`` as written (a slice key such as
    ``"lang:zh"`` or a bare name such as ``zh``), each ``metric = number``; the slices are
    known once the dataset is (the evaluation checks them)."""
    if "slice" not in table:
        return {}
    slices = table.sub("slice", where="[thresholds.slice]",
                       fix='write each as [thresholds.slice."lang:zh"] (or [thresholds.slice.'
                       'billing]) with metric = value below it')
    found: dict[str, dict[str, float]] = {}
    for name in slices.table:
        plain = name.replace("_", "").replace("-", "").isalnum()
        where = f"[thresholds.slice.{name}]" if plain else f'[thresholds.slice."{name}"]'
        sub = slices.sub(name, where=where, fix=f"write it as {where} with metric = value "
                         "below it, e.g. rougel = 0.3")
        found[str(name)] = _thresholds(sub)
    return found


def _judged(metrics: Table) -> tuple[str, ...]:
    """``[metrics] judged``: a list of the judged metrics, each once, in report order."""
    value = metrics.get("judged", [])
    example = 'judged = ["correctness", "faithfulness", "context_relevance"]'
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise metrics.fail("judged", value, f"write a list of metric names, e.g. {example}")
    for name in value:
        if name not in JUDGED_METRICS:
            raise metrics.fail("judged", value, f"{name!r} is not a judged metric; "
                               f"{suggest(name, JUDGED_METRICS, noun='judged metrics')}")
    if len(set(value)) != len(value):
        raise metrics.fail("judged", value, "name each metric once")
    return tuple(name for name in JUDGED_METRICS if name in value)


_PRICING_KEYS = ("currency", "pipeline", "judge")


def _pricing(table: Table) -> Pricing | None:
    """``[pricing]``: ``currency`` and the per-million-token prices of ``pipeline`` and
    ``judge`` (``{ prompt = 0.15, completion = 0.60 }`` each); ``None`` without one."""
    if not table.table:
        return None
    table.check_keys(_PRICING_KEYS)
    currency = table.string("currency", "USD", fix='write a currency name, e.g. "USD"')
    assert currency is not None
    prices: dict[str, TokenPrice | None] = {}
    for who in ("pipeline", "judge"):
        if who not in table:
            prices[who] = None
            continue
        sub = table.sub(who, fix=f"write {who} = {{ prompt = 0.15, completion = 0.60 }} "
                        "(per million tokens)")
        sub.check_keys(("prompt", "completion"))
        prompt = sub.number("prompt", 0.0, low=0.0, example="0.15")
        completion = sub.number("completion", 0.0, low=0.0, example="0.60")
        assert prompt is not None and completion is not None
        prices[who] = TokenPrice(prompt=prompt, completion=completion)
    return Pricing(currency=currency, pipeline=prices["pipeline"], judge=prices["judge"])


def _check_finite(value: Any, table: str, source: Path, path: str = "") -> None:
    """Refuse TOML's ``nan`` and ``inf`` anywhere in a free-form ``table`` (``[pipeline]``,
    a variant's overrides): its knobs go into every report and the baseline, which are
    strict JSON. ``path`` is the dotted key inside ``table`` (``chat.temperature``)."""
    if isinstance(value, float) and not math.isfinite(value):
        key = f"{table} {path}" if table.endswith("]") else f"{table}.{path}"
        raise ConfigError(
            f"{source}: {key} = {value!r} is invalid; the reports and the baseline record "
            "every knob, and JSON has no NaN or infinity: write a finite number, or leave "
            "the knob out"
        )
    if isinstance(value, Mapping):
        for name, item in value.items():
            _check_finite(item, table, source, f"{path}.{name}" if path else str(name))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_finite(item, table, source, f"{path}[{index}]")


def _check_name(name: str, key: str, source: Path) -> None:
    # Names become parts of pytest node ids: "::", "/", "[" or spaces would break selection.
    if not _VARIANT_NAME.match(name):
        raise ConfigError(
            f"{source}: {key} = {name!r} is not a valid name; use letters, digits, '-', '_' "
            "or '.', starting with a letter or digit"
        )


def variant_pipeline(config: RagevConfig, variant: VariantConfig | None) -> PipelineSettings:
    """The pipeline settings of the base config (``None``) or of one variant."""
    if variant is None:
        return config.pipeline
    options = dict(variant.pipeline)
    name = options.pop("name", config.pipeline.name)
    return replace(
        config.pipeline,
        name=name,
        options=deep_merge(config.pipeline.options, options),
        variant=variant.name,
    )


def select_variants(config: RagevConfig, wanted: Iterable[str]) -> tuple[str | None, ...]:
    """``None`` (the base configuration) then the variants, or only those ``wanted`` names.

    ``base`` (or ``default``) names the base configuration; an unknown name is a
    :class:`ConfigError` with a did-you-mean.
    """
    names = [v.name for v in config.variants]
    wanted = tuple(wanted)
    if not wanted:
        return (None, *names)
    chosen: list[str | None] = []
    for name in wanted:
        if name in ("base", "default"):
            chosen.append(None)
        elif name in names:
            chosen.append(name)
        else:
            raise ConfigError(
                f"--ragev-variant {name!r}: no such variant in {config.source}; "
                f"{suggest(name, ['base', *names])}"
            )
    return tuple(chosen)


def variant_settings(config: RagevConfig, variant: str | None) -> PipelineSettings:
    """The pipeline settings of the base configuration (``None``) or of variant ``variant``."""
    if variant is None:
        return config.pipeline
    return variant_pipeline(config, next(v for v in config.variants if v.name == variant))
