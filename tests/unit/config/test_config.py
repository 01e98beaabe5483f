"""Unit tests for ragev.toml parsing, variants and redaction."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ragev.config import load_config, variant_pipeline
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.gate import GateRules


def write(tmp_path: Path, body: str) -> Path:
    (tmp_path / "data").mkdir(exist_ok=True)
    path = tmp_path / "ragev.toml"
    path.write_text(body, encoding="utf-8")
    return path


def test_minimal_config_resolves_paths_against_its_folder(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, '[dataset]\npath = "data"\n'))
    assert config.dataset_path == (tmp_path / "data").resolve()
    assert config.dataset_id is None
    assert config.pipeline.name == "builtin"
    assert config.pipeline.base_dir == tmp_path.resolve()
    assert config.profile == "weknora"
    assert config.thresholds == {}


def test_full_config(tmp_path: Path) -> None:
    config = load_config(
        write(
            tmp_path,
            """
[dataset]
path = "data"
id = "faq"

[pipeline]
name = "builtin"
chunk_size = 256
chat = { model = "extractive", max_tokens = 64 }

[metrics]
profile = "standard"

[thresholds]
recall = 0.5
rougel = 0

[report]
json = "out/report.json"

[baseline]
path = "ragev-baseline.json"

[run]
concurrency = 3
cache = false

[[variants]]
name = "chunk-128"
pipeline.chunk_size = 128
""",
        )
    )
    assert config.dataset_id == "faq"
    assert config.pipeline.options == {
        "chunk_size": 256,
        "chat": {"model": "extractive", "max_tokens": 64},
    }
    assert config.profile == "standard"
    assert config.thresholds == {"recall": 0.5, "rougel": 0.0}
    assert config.report_json == tmp_path.resolve() / "out/report.json"
    assert config.baseline_path == tmp_path.resolve() / "ragev-baseline.json"
    assert config.baseline_answer_chars == "auto"  # the default
    assert config.concurrency == 3 and config.cache is False
    (variant,) = config.variants
    settings = variant_pipeline(config, variant)
    assert settings.variant == "chunk-128"
    assert settings.options["chunk_size"] == 128
    assert settings.options["chat"] == {"model": "extractive", "max_tokens": 64}
    assert variant_pipeline(config, None) is config.pipeline


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ('[dataset]\npath = "data"\n[thresold]\nrecall = 0.5\n', "unknown key 'thresold'; did you mean 'thresholds'?"),
        ('[dataset]\npth = "data"\n', "unknown key [dataset] 'pth'; did you mean 'path'?"),
        ("[dataset]\n", "[dataset] path is missing"),
        ('[dataset]\npath = "nope"\n', "[dataset] path = 'nope' does not exist"),
        ('[dataset]\npath = 3\n', "[dataset] path = 3 is invalid; write the folder as a string"),
        ('[dataset]\npath = "data"\n[thresholds]\nrecall = 1.5\n', "[thresholds] recall = 1.5 is invalid; use a number in [0, 1]"),
        ('[dataset]\npath = "data"\n[thresholds]\nrecall = "high"\n', "[thresholds] recall = 'high' is invalid; use a number in [0, 1]"),
        ('[dataset]\npath = "data"\n[thresholds]\nrecall = true\n', "[thresholds] recall = True is invalid; use a number in [0, 1]"),
        ('[dataset]\npath = "data"\n[metrics]\nprofile = "trec"\n', "[metrics] profile = 'trec' is invalid; not a metric profile; use one of: weknora, standard"),
        ('[dataset]\npath = "data"\n[run]\nconcurrency = 0\n', "[run] concurrency = 0 is invalid; use a whole number >= 1, e.g. concurrency = 4"),
        # #16 item 14: TOML's nan and inf are floats too; an empty path used to switch off.
        ('[dataset]\npath = "data"\n[run]\nprogress_interval = nan\n', "[run] progress_interval = nan is invalid; use a number in (0, ∞), e.g. progress_interval = 2"),
        ('[dataset]\npath = "data"\n[run]\nprogress_interval = inf\n', "[run] progress_interval = inf is invalid; use a number in (0, ∞)"),
        ('[dataset]\npath = "data"\n[run]\ntimeout = 0\n', "[run] timeout = 0 is invalid; use a number in (0, ∞), e.g. timeout = 120"),
        ('[dataset]\npath = "data"\n[run]\ndeadline = -inf\n', "[run] deadline = -inf is invalid; use a number in (0, ∞), e.g. deadline = 3600"),
        ('[dataset]\npath = "data"\n[pipeline]\nchat.temperature = nan\n', "[pipeline] chat.temperature = nan is invalid; the reports and the baseline record every knob, and JSON has no NaN or infinity: write a finite number"),
        ('[dataset]\npath = "data"\n[pipeline]\nweights = [1.0, -inf]\n', "[pipeline] weights[1] = -inf is invalid"),
        ('[dataset]\npath = "data"\n[[variants]]\nname = "v1"\npipeline.alpha = inf\n', "[[variants]] #1 ('v1') pipeline.alpha = inf is invalid"),
        ('[dataset]\npath = "data"\n[report]\njson = ""\n', "[report] json = '' is invalid; write a file path, e.g. json = \"ragev-report.json\", or remove the key"),
        ('[dataset]\npath = "data"\n[report]\nhtml = ""\n', "[report] html = '' is invalid; write a file path, e.g. html = \"ragev.html\""),
        ('[dataset]\npath = "data"\n[baseline]\npath = ""\n', "[baseline] path = '' is invalid; write a file path, e.g. path = \"ragev-baseline.json\", or remove the key"),
        ('[dataset]\npath = "data"\n[baseline]\nanswer_chars = 5\n', "[baseline] answer_chars = 5 is invalid; write a whole number >= 20 (the characters of a long answer the baseline keeps), \"all\" or \"auto\", e.g. answer_chars = 200"),
        ('[dataset]\npath = "data"\n[baseline]\nanswer_chars = "none"\n', "[baseline] answer_chars = 'none' is invalid; write a whole number >= 20"),
        ('[dataset]\npath = "data"\n[baseline]\nanswer_chars = true\n', "[baseline] answer_chars = True is invalid"),
        ('[dataset]\npath = "data"\n[baseline]\nanswer_chars = 80.0\n', "[baseline] answer_chars = 80.0 is invalid"),
        ('[dataset]\npath = "data"\n[[variants]]\npipeline.chunk_size = 1\n', "[[variants]] #1 has no name"),
        ('[dataset]\npath = "data"\n[[variants]]\nname = "a b"\n', "is not a valid name"),
        ('[dataset]\npath = "data"\n[[variants]]\nname = "v1"\npipeline = 3\n',
         "[[variants]] #1 ('v1') pipeline must be a table, got int; write the overrides as "
         "pipeline.<knob> = ... under [[variants]]"),
        ('[dataset]\npath = "data"\n[[variants]]\nname = "v1"\npipline.x = 3\n',
         "unknown key [[variants]] #1 ('v1') 'pipline'; did you mean 'pipeline'?"),
        ('variants = [1]\n[dataset]\npath = "data"\n',
         "[[variants]] #1 must be a table, got int; write each variant as a [[variants]] table"),
        ('[dataset]\npath = "data/file.parquet"\n',
         "[dataset] path = 'data/file.parquet' is a file, not a folder"),
        ('[dataset]\npath = "data"\n[[variants]]\nname = "a"\n[[variants]]\nname = "a"\n', "is used twice"),
        ('[dataset]\npath = "data"\nid = "x::y"\n', "[dataset] id = 'x::y' is not a valid name"),
        ("[dataset\n", "not valid TOML"),
    ],
)
def test_config_errors_are_one_line_with_file_key_and_fix(
    tmp_path: Path, body: str, expected: str
) -> None:
    path = write(tmp_path, body)
    (tmp_path / "data" / "file.parquet").write_bytes(b"")
    with pytest.raises(ConfigError) as excinfo:
        load_config(path)
    message = str(excinfo.value)
    assert expected in message
    assert str(path.resolve()) in message
    assert "\n" not in message


def test_missing_config_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ragev config file not found; pass an existing file "
                       "to --ragev-config"):
        load_config(tmp_path / "absent.toml")


def test_missing_config_named_by_the_ini_file_names_the_ini_key(tmp_path: Path) -> None:
    ini = tmp_path / "pytest.ini"
    with pytest.raises(ConfigError) as excinfo:
        load_config(tmp_path / "eval" / "absent.toml", ini=ini)
    message = str(excinfo.value)
    assert message.startswith(f"{ini}: ragev_config = 'eval/absent.toml': ragev config file "
                              "not found")
    assert "fix the ragev_config key in pytest.ini" in message
    assert "--ragev-config" not in message
    (tmp_path / "folder.toml").mkdir()
    with pytest.raises(ConfigError, match="ragev config file is a folder, not a file"):
        load_config(tmp_path / "folder.toml", ini=ini)


def test_settings_reprs_hide_secrets(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, (
        '[dataset]\npath = "data"\n[pipeline]\nname = "mine"\napi_key = "sk-canary-1"\n'
        'max_tokens = 77\nheaders = { Authorization = "Bearer sk-canary-2" }\n'
        '[[variants]]\nname = "v"\npipeline.private_key = "sk-canary-3"\n')))
    variant = variant_pipeline(config, config.variants[0])
    for shown in (repr(config), repr(config.pipeline), repr(config.variants[0]), repr(variant),
                  str(variant)):
        assert "sk-canary" not in shown
        assert "***" in shown
    assert "'max_tokens': 77" in repr(config.pipeline)
    assert repr(variant).startswith("PipelineSettings(name='mine', options={'api_key': '***'")
    assert variant.options["private_key"] == "sk-canary-3"  # the value itself is untouched


def test_thresholds_of_custom_metrics_may_be_any_finite_figure(tmp_path: Path) -> None:
    # The twelve lie in [0, 1]; latency in seconds or tokens per answer do not.
    config = load_config(write(tmp_path, (
        '[dataset]\npath = "data"\n[thresholds]\nrecall = 0.5\nlatency_s = 2.5\n'
        "prompt_tokens = 4000\ndelta_cost = -0.25\n"
    )))
    assert config.thresholds == {"recall": 0.5, "latency_s": 2.5, "prompt_tokens": 4000.0,
                                 "delta_cost": -0.25}
    for bad in ('latency_s = "fast"', "latency_s = nan", "latency_s = inf"):
        with pytest.raises(ConfigError, match=r"\[thresholds\] latency_s = .* is invalid; use a number"):
            load_config(write(tmp_path, f'[dataset]\npath = "data"\n[thresholds]\n{bad}\n'))


def test_report_task_user(tmp_path: Path) -> None:
    assert load_config(write(tmp_path, '[dataset]\npath = "data"\n')).task_user is False
    config = load_config(write(tmp_path, '[dataset]\npath = "data"\n[report]\ntask_user = true\n'))
    assert config.task_user is True
    with pytest.raises(ConfigError, match=r"\[report\] task_user = 'yes' is invalid; write true"):
        load_config(write(tmp_path, '[dataset]\npath = "data"\n[report]\ntask_user = "yes"\n'))


def test_baseline_answer_chars(tmp_path: Path) -> None:
    for written, read in (("200", 200), ("20", 20), ('"all"', "all"), ('"auto"', "auto")):
        body = f'[dataset]\npath = "data"\n[baseline]\npath = "b.json"\nanswer_chars = {written}\n'
        assert load_config(write(tmp_path, body)).baseline_answer_chars == read


def test_repeat_slices_and_slice_thresholds(tmp_path: Path) -> None:
    path = write(tmp_path, '[dataset]\npath = "data"\n[run]\nrepeat = 5\n'
                 '[gate]\nslices = ["tag", "lang"]\nmin_slice = 20\n'
                 '[thresholds]\nrecall = 0.5\n'
                 '[thresholds.slice.zh]\nrougel = 0.3\n'
                 '[thresholds.slice."tag:billing"]\nrecall = 0.8\n')
    config = load_config(path)
    assert config.repeat == 5
    assert config.thresholds == {"recall": 0.5}
    assert config.slice_thresholds == {"zh": {"rougel": 0.3}, "tag:billing": {"recall": 0.8}}
    rules = GateRules.from_config(config, metric_names=["recall", "rougel"])
    assert rules.slices == ("lang", "tag") and rules.min_slice == 20
    assert load_config(write(tmp_path, '[dataset]\npath = "data"\n')).repeat == 1


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("[run]\nrepeat = 0\n", "[run] repeat = 0 is invalid; use a whole number >= 1"),
        ('[gate]\nslices = ["langs"]\n', "did you mean"),
        ('[gate]\nslices = "lang"\n', 'write a list of slice kinds, e.g. slices = ["lang", "tag"]'),
        ("[thresholds]\nslice = 0.3\n", "[thresholds.slice]"),
    ],
)
def test_repeat_and_slice_errors_are_one_line(tmp_path: Path, body: str, expected: str) -> None:
    path = write(tmp_path, '[dataset]\npath = "data"\n' + body)
    with pytest.raises(ConfigError) as excinfo:
        GateRules.from_config(load_config(path), metric_names=["recall"])
    message = str(excinfo.value)
    assert expected in message and str(path.resolve()) in message and "\n" not in message
