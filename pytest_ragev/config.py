"""``ragev.toml`` and the command line, resolved once into frozen settings.

Precedence: command line > ini (``[tool.pytest.ini_options]``) > config file > default.
Every problem is a :class:`ConfigError` with one line naming the file, the key and the fix.
Nothing here imports pytest: the plugin passes the option values in.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import os
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_ragev.core.errors import ConfigError
from pytest_ragev.core.types import PipelineSettings

PROFILES = ("weknora", "standard")

_TOP_LEVEL_KEYS = (
    "dataset",
    "pipeline",
    "metrics",
    "thresholds",
    "report",
    "baseline",
    "gate",
    "run",
    "variants",
)
_DATASET_KEYS = ("path", "id")
_METRICS_KEYS = ("profile",)
_REPORT_KEYS = ("json", "markdown", "html", "top_regressions")
_BASELINE_KEYS = ("path",)
_RUN_KEYS = ("concurrency", "cache", "progress_interval")
_VARIANT_KEYS = ("name", "pipeline")
_VARIANT_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")

#: Words that make a key name a secret wherever they appear in it (``client_secret``,
#: ``db_password``, ``Proxy-Authorization``). Key names are split into words at ``_``,
#: ``-``, ``.``, spaces and camelCase humps before matching.
_SECRET_WORDS = frozenset({
    "password", "passwd", "passphrase", "secret", "secrets", "credential", "credentials",
    "authorization", "bearer", "apikey", "cookie",
})
#: Key names that are secrets as a whole word (``auth = "user:pass"``), not as a part.
#: (A lone ``key`` or ``token`` is a secret too: the ``<word>_key`` / ``<word>_token``
#: rules of :func:`is_secret_key` already decide those.)
_SECRET_NAMES = frozenset({"auth"})
#: A last word that ends a secret even when glued to the word before (``authtoken``).
_SECRET_SUFFIXES = ("apikey", "password", "passwd", "passphrase", "secret", "token")
#: ``<word>_token`` knobs that count or name tokenizer tokens, not credentials.
_TOKEN_KNOBS = frozenset({
    "max", "min", "num", "n", "total", "eos", "bos", "pad", "unk", "sep", "cls", "mask",
    "stop", "start", "end", "special",
})
#: ``<word>_key`` knobs that name a field or a lookup key, not a credential.
_KEY_KNOBS = frozenset({
    "sort", "cache", "answer", "kb", "group", "partition", "primary", "foreign", "join",
    "index", "lookup", "dedup", "hash", "shard", "routing", "id", "field", "dict", "metadata",
    "order", "record", "row", "doc", "document", "result", "response", "json", "text",
    "content", "score", "passage", "query", "question", "context", "contexts",
})
#: ``<word>_key`` anywhere in a key names a credential (``private_key_pem``).
_KEY_QUALIFIERS = frozenset({
    "api", "private", "access", "secret", "signing", "encryption", "ssh", "client", "master",
    "license", "service", "account", "auth", "session", "subscription", "admin", "app",
})
#: Last words of keys that name where a secret lives (``api_key_env``): safe to show.
_POINTER_WORDS = frozenset({"env", "file"})
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_NOT_WORD = re.compile(r"[^A-Za-z0-9]+")
#: ``${VAR}``: a reference to an environment variable, expanded only when used; group 1
#: is the variable's name.
REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: What may surround the references of a value that holds no literal secret.
_TEMPLATE_REST = re.compile(r"^(?:(?:bearer|basic|token|digest|apikey|api-key)(?=\s|$))?[\W_]*$",
                            re.I)
REDACTED = "***"


def suggest(word: str, choices: Iterable[str]) -> str:
    """A ``did you mean`` tail for an unknown ``word``, or the list of valid choices."""
    options = sorted(choices)
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if close:
        return f"did you mean {close[0]!r}?"
    return "valid keys: " + ", ".join(options)


def _check_keys(table: Mapping[str, Any], allowed: Iterable[str], where: str, source: Path) -> None:
    allowed = tuple(allowed)
    for key in table:
        if key not in allowed:
            raise ConfigError(
                f"{source}: unknown key {where}{key!r}; {suggest(key, allowed)}"
            )


def _table(value: Any, where: str, source: Path, fix: str | None = None) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(
            f"{source}: {where} must be a table, got {type(value).__name__}; "
            + (fix or f"write it as [{where.strip('[]')}]")
        )
    return value


def _typed(value: Any, kind: type | tuple[type, ...], key: str, source: Path, hint: str) -> Any:
    # bool is an int in Python; a TOML `true` is never a valid number here.
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        ok = False
    else:
        ok = isinstance(value, kind)
    if not ok:
        raise ConfigError(f"{source}: {key} = {value!r} has the wrong type; {hint}")
    return value


@dataclass(frozen=True, repr=False)
class VariantConfig:
    """One ``[[variants]]`` entry: a name and overrides of the ``[pipeline]`` table."""

    name: str
    pipeline: Mapping[str, Any]

    def __repr__(self) -> str:
        return f"VariantConfig(name={self.name!r}, pipeline={redact(self.pipeline)!r})"


@dataclass(frozen=True)
class RagevConfig:
    """The parsed ``ragev.toml``, paths resolved against its folder."""

    source: Path
    dataset_path: Path
    dataset_id: str | None
    pipeline: PipelineSettings
    profile: str = "weknora"
    thresholds: Mapping[str, float] = field(default_factory=dict)
    report_json: Path | None = None
    report_markdown: Path | None = None
    report_html: Path | None = None
    top_regressions: int = 10
    baseline_path: Path | None = None
    gate: Mapping[str, Any] = field(default_factory=dict)
    concurrency: int | None = None
    cache: bool | None = None
    progress_interval: float = 2.0
    variants: tuple[VariantConfig, ...] = ()

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
    _check_keys(raw, _TOP_LEVEL_KEYS, "", source)
    base_dir = source.parent

    dataset = _table(raw.get("dataset", {}), "[dataset]", source)
    _check_keys(dataset, _DATASET_KEYS, "[dataset] ", source)
    if "path" not in dataset:
        raise ConfigError(
            f"{source}: [dataset] path is missing; add path = \"<folder with the five "
            "Parquet files>\" (relative to the config file)"
        )
    ds_path_raw = _typed(
        dataset["path"], str, "[dataset] path", source, "write the folder as a string"
    )
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
    dataset_id = dataset.get("id")
    if dataset_id is not None:
        _typed(dataset_id, str, "[dataset] id", source, "write the dataset id as a string")
        _check_name(dataset_id, "[dataset] id", source)

    pipeline_table = dict(_table(raw.get("pipeline", {}), "[pipeline]", source))
    name = pipeline_table.pop("name", "builtin")
    _typed(name, str, "[pipeline] name", source,
           'use "builtin", "http" or "module:callable"')
    pipeline = PipelineSettings(name=name, options=pipeline_table, base_dir=base_dir)

    metrics = _table(raw.get("metrics", {}), "[metrics]", source)
    _check_keys(metrics, _METRICS_KEYS, "[metrics] ", source)
    profile = metrics.get("profile", "weknora")
    if profile not in PROFILES:
        raise ConfigError(
            f"{source}: [metrics] profile = {profile!r} is unknown; use one of "
            + ", ".join(repr(p) for p in PROFILES)
        )

    thresholds_table = _table(raw.get("thresholds", {}), "[thresholds]", source)
    thresholds: dict[str, float] = {}
    for metric, value in thresholds_table.items():
        _typed(value, (int, float), f"[thresholds] {metric}", source,
               "write a number between 0 and 1")
        if not 0.0 <= float(value) <= 1.0:
            raise ConfigError(
                f"{source}: [thresholds] {metric} = {value!r} is outside [0, 1]; "
                "metrics are fractions, write e.g. 0.5"
            )
        thresholds[metric] = float(value)

    report = _table(raw.get("report", {}), "[report]", source)
    _check_keys(report, _REPORT_KEYS, "[report] ", source)
    paths: dict[str, Path | None] = {}
    for key in ("json", "markdown", "html"):
        value = report.get(key)
        if value is not None:
            _typed(value, str, f"[report] {key}", source, "write a file path as a string")
        paths[key] = (base_dir / value) if value else None
    top = report.get("top_regressions", 10)
    _typed(top, int, "[report] top_regressions", source, "write a whole number such as 10")
    if top < 0:
        raise ConfigError(f"{source}: [report] top_regressions = {top} is negative; use 0 or more")

    baseline = _table(raw.get("baseline", {}), "[baseline]", source)
    _check_keys(baseline, _BASELINE_KEYS, "[baseline] ", source)
    baseline_raw = baseline.get("path")
    if baseline_raw is not None:
        _typed(baseline_raw, str, "[baseline] path", source, "write a file path as a string")

    gate = _table(raw.get("gate", {}), "[gate]", source)

    run = _table(raw.get("run", {}), "[run]", source)
    _check_keys(run, _RUN_KEYS, "[run] ", source)
    concurrency = run.get("concurrency")
    if concurrency is not None:
        _typed(concurrency, int, "[run] concurrency", source, "write a whole number >= 1")
        if concurrency < 1:
            raise ConfigError(f"{source}: [run] concurrency = {concurrency} must be >= 1")
    cache = run.get("cache")
    if cache is not None:
        _typed(cache, bool, "[run] cache", source, "write true or false")
    interval = run.get("progress_interval", 2.0)
    _typed(interval, (int, float), "[run] progress_interval", source, "write seconds, e.g. 2")
    if interval <= 0:
        raise ConfigError(f"{source}: [run] progress_interval = {interval} must be > 0")

    variants_raw = raw.get("variants", [])
    if not isinstance(variants_raw, list):
        raise ConfigError(
            f"{source}: variants must be an array of tables; write each as [[variants]]"
        )
    variants: list[VariantConfig] = []
    seen: set[str] = set()
    for index, entry in enumerate(variants_raw):
        where = f"[[variants]] #{index + 1} "
        entry = _table(entry, f"[[variants]] #{index + 1}", source,
                       'write each variant as a [[variants]] table with name = "..."')
        vname = entry.get("name")
        if isinstance(vname, str):
            where = f"[[variants]] #{index + 1} ({vname!r}) "
        _check_keys(entry, _VARIANT_KEYS, where, source)
        if vname is None:
            raise ConfigError(f'{source}: {where}has no name; add name = "chunk-256"')
        _typed(vname, str, f"{where}name", source, "write the variant name as a string")
        _check_name(vname, f"{where}name", source)
        if vname in seen:
            raise ConfigError(f"{source}: {where}name {vname!r} is used twice; names must differ")
        seen.add(vname)
        overrides = _table(entry.get("pipeline", {}), f"{where}pipeline", source,
                           "write the overrides as pipeline.<knob> = ... under [[variants]]")
        variants.append(VariantConfig(name=vname, pipeline=overrides))

    return RagevConfig(
        source=source,
        dataset_path=dataset_path,
        dataset_id=dataset_id,
        pipeline=pipeline,
        profile=profile,
        thresholds=thresholds,
        report_json=paths["json"],
        report_markdown=paths["markdown"],
        report_html=paths["html"],
        top_regressions=top,
        baseline_path=(base_dir / baseline_raw) if baseline_raw else None,
        gate=gate,
        concurrency=concurrency,
        cache=cache,
        progress_interval=float(interval),
        variants=tuple(variants),
    )


def _check_name(name: str, key: str, source: Path) -> None:
    # Names become parts of pytest node ids: "::", "/", "[" or spaces would break selection.
    if not _VARIANT_NAME.match(name):
        raise ConfigError(
            f"{source}: {key} = {name!r} is not a valid name; use letters, digits, '-', '_' "
            "or '.', starting with a letter or digit"
        )


def check_metric_names(config: RagevConfig, known: Iterable[str]) -> None:
    """Reject thresholds on metrics that neither the engine nor a custom-metric hook provides."""
    known = tuple(known)
    for metric in config.thresholds:
        if metric not in known:
            raise ConfigError(
                f"{config.source}: [thresholds] {metric!r} is not a metric; "
                f"{suggest(metric, known)} (metrics: {', '.join(known)})"
            )


def deep_merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``overrides`` applied; nested tables merge key by key."""
    merged = dict(base)
    for key, value in overrides.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


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


def flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys for nested tables: ``{"chat": {"model": "x"}}`` -> ``{"chat.model": "x"}``."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, dotted + "."))
        else:
            flat[dotted] = value
    return flat


def _words(key: str) -> list[str]:
    return [word for word in _NOT_WORD.split(_CAMEL.sub("_", key).lower()) if word]


def is_secret_key(key: str) -> bool:
    """Whether a settings or header key names a secret (``api_key``, ``X-Auth-Token``).

    Whole words decide, not substrings: ``max_tokens``, ``tokenize`` and ``keyword_weight``
    are knobs; ``api_key``, ``private_key``, ``access_token``, ``password``, ``client_secret``,
    ``credentials``, ``passphrase`` and ``Authorization`` are secrets. ``<field>_key`` and
    ``<count>_token`` knobs (``sort_key``, ``text_key``, ``pad_token``) are not, and keys
    that point at a secret (``api_key_env``, ``password_file``) are safe to show.
    """
    words = _words(key)
    if not words or words[-1] in _POINTER_WORDS or words[-2:] == ["env", "var"]:
        return False
    if any(word in _SECRET_WORDS for word in words):
        return True
    pairs = itertools.pairwise(words)
    if any(word == "key" and before in _KEY_QUALIFIERS for before, word in pairs):
        return True
    last = words[-1]
    if last == "pass" and len(words) > 1:  # db_pass, smtp_pass
        return True
    before = words[-2] if len(words) > 1 else None
    if last == "key":
        return before is None or before not in _KEY_KNOBS
    if last == "token":
        return before is None or before not in _TOKEN_KNOBS
    if len(words) == 1 and last in _SECRET_NAMES:
        return True
    return any(last.endswith(suffix) and last != suffix for suffix in _SECRET_SUFFIXES)


def is_reference_only(value: str) -> bool:
    """Whether ``value`` holds ``${VAR}`` references and no literal secret.

    ``"${RAG_TOKEN}"``, ``"Bearer ${RAG_TOKEN}"`` and ``"${USER}:${PASS}"`` are templates,
    recorded as written; ``"sk-abc${X}"`` or ``"Bearer sk-abc"`` hold a literal and are not.
    """
    if not REFERENCE.search(value):
        return False
    rest = REFERENCE.sub(" ", value).strip()
    return bool(_TEMPLATE_REST.match(rest))


def _hide(value: Any) -> Any:
    # The value of a secret key: templates and empty values stay, every literal goes.
    if value is None or value == "":
        return value
    if isinstance(value, str):
        return value if is_reference_only(value) else REDACTED
    if isinstance(value, Mapping):
        return {str(key): _hide(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_hide(item) for item in value]
    return REDACTED


def redact(value: Any) -> Any:
    """A copy of a settings value with every secret replaced by ``***``.

    A secret is the value of a key :func:`is_secret_key` accepts, unless it is only a
    ``${VAR}`` template (:func:`is_reference_only`): the template names a variable and
    holds no secret. Keys that *point at* a secret (``api_key_env``) stay visible.
    """
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            key_str = str(key)
            out[key_str] = _hide(item) if is_secret_key(key_str) else redact(item)
        return out
    if isinstance(value, list | tuple):
        return [redact(item) for item in value]
    if isinstance(value, Path):
        return str(value)
    return value


def settings_hash(snapshot: Mapping[str, Any]) -> str:
    """sha256 over the canonical JSON of a (redacted) settings snapshot."""
    canonical = json.dumps(snapshot, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                           default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
