"""[gate] tables become rules: defaults, per-metric merges, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_ragev.config import load_config
from pytest_ragev.core.errors import ConfigError
from pytest_ragev.gate import (
    GateRules,
    MetricRule,
)
from tests.unit.gate._runs import METRICS


def test_from_table_defaults_and_per_metric_merge() -> None:
    rules = GateRules.from_table(
        {
            "max_drop": 0.01,
            "significance": 0.1,
            "seed": 7,
            "resamples": 5000,
            "metrics": {"ndcg10": {"max_drop_pct": 5, "mode": "tolerance"}},
        },
        source="ragev.toml",
        metric_names=METRICS,
    )
    assert rules.seed == 7 and rules.resamples == 5000
    assert rules.rule_for("recall") == MetricRule(max_drop=0.01, significance=0.1)
    ndcg = rules.rule_for("ndcg10")
    assert (ndcg.max_drop, ndcg.max_drop_pct, ndcg.significance, ndcg.mode) == (
        0.01, 5.0, 0.1, "tolerance",
    )
    assert GateRules.from_table({}, source="x", metric_names=METRICS) == GateRules()


@pytest.mark.parametrize(("tables", "top"), [
    ("", 10),
    ("[report]\ntop_regressions = 4\n", 4),                           # [gate] falls back
    ("[report]\ntop_regressions = 4\n[gate]\nseed = 3\n", 4),
    ("[report]\ntop_regressions = 4\n[gate]\ntop_regressions = 0\n", 0),  # [gate] wins
    ("[gate]\ntop_regressions = 7\n", 7),
])
def test_from_config_reads_gate_with_the_report_fallback(
    tmp_path: Path, tables: str, top: int
) -> None:
    (tmp_path / "data").mkdir()
    path = tmp_path / "ragev.toml"
    path.write_text('[dataset]\npath = "data"\n' + tables, encoding="utf-8")
    rules = GateRules.from_config(load_config(path), metric_names=METRICS)
    assert rules.top_regressions == top
    assert rules.seed == (3 if "seed" in tables else 0)


def test_from_config_names_the_file_and_knows_the_callers_metrics(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    path = tmp_path / "配置.toml"
    path.write_text('[dataset]\npath = "data"\n[gate.metrics.faithfulness]\nmax_drop = 0.1\n',
                    encoding="utf-8")
    with pytest.raises(ConfigError, match=r"配置\.toml: \[gate\.metrics\.faithfulness\]: unknown"):
        GateRules.from_config(load_config(path), metric_names=METRICS)
    custom = GateRules.from_config(load_config(path), metric_names=[*METRICS, "faithfulness"])
    assert custom.rule_for("faithfulness").max_drop == 0.1


def test_dataset_variant_and_power_keys() -> None:
    defaults = GateRules()
    assert (defaults.strict_dataset, defaults.require_all_variants,
            defaults.min_detectable_drop) == (False, False, 0.05)
    rules = GateRules.from_table(
        {"strict_dataset": True, "require_all_variants": True, "min_detectable_drop": 0.1},
        source="ragev.toml", metric_names=METRICS,
    )
    assert (rules.strict_dataset, rules.require_all_variants, rules.min_detectable_drop) == (
        True, True, 0.1,
    )


@pytest.mark.parametrize(
    ("table", "fragment"),
    [
        ({"max_dorp": 0.1}, "unknown key [gate] 'max_dorp'; did you mean 'max_drop'?"),
        ({"significance": 1.5}, "significance = 1.5 is invalid; use a number in (0, 0.5)"),
        ({"significance": 0}, "significance = 0 is invalid; use a number in (0, 0.5)"),
        ({"significance": "0.05"}, "significance = '0.05' is invalid; use a number in (0, 0.5)"),
        ({"max_drop": True}, "max_drop = True is invalid; use a number in [0, ∞)"),
        ({"max_drop": -0.1}, "max_drop = -0.1 is invalid; use a number in [0, ∞), e.g. max_drop = 0.01"),
        ({"mode": "signifcant"}, "mode = 'signifcant' is invalid; not a gate mode; did you mean 'significant'?"),
        ({"resamples": 10.5}, "resamples = 10.5 is invalid; use a whole number >= 100"),
        ({"resamples": 10}, "resamples = 10 is invalid; use a whole number >= 100"),
        ({"metrics": {"recal": {"max_drop": 0.1}}}, "unknown metric 'recal'; did you mean 'recall'?"),
        ({"metrics": {"recall": {"seed": 1}}}, "unknown key [gate.metrics.recall] 'seed'"),
        ({"metrics": {"recall": 0.1}}, "[gate.metrics.recall] must be a table, got float"),
        ({"enabled": "no"}, "enabled = 'no' is invalid; write true or false"),
        ({"correction": "bonferroni"}, "correction = 'bonferroni' is invalid; not a correction"),
        ({"strict_dataset": 1}, "strict_dataset = 1 is invalid; write true or false"),
        ({"require_all_variants": "yes"}, "require_all_variants = 'yes' is invalid; write true"),
        ({"min_detectable_drop": 1.5}, "min_detectable_drop = 1.5 is invalid; use a number in "
                                       "[0, 1]"),
        ({"strict_datset": True}, "did you mean 'strict_dataset'?"),
        ({"significance": 0.00005}, "significance = 5e-05 can never be reached with "
                                   "resamples = 10000"),
        ({"resamples": 100, "metrics": {"recall": {"significance": 0.005}}},
         "[gate.metrics.recall] significance = 0.005 can never be reached"),
    ],
)
def test_from_table_errors_are_one_line(table: dict[str, object], fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        GateRules.from_table(table, source="conf/ragev.toml", metric_names=METRICS)
    message = str(info.value)
    assert fragment in message
    assert message.startswith(("conf/ragev.toml: [gate", "conf/ragev.toml: unknown key [gate"))
    assert "\n" not in message


def test_zero_baseline_pct_tolerance_does_not_divide() -> None:
    rule = MetricRule(max_drop_pct=10)
    assert rule.tolerance(0.0) == 0.0
    assert rule.tolerance(0.5) == pytest.approx(0.05)
    assert MetricRule(max_drop=0.1, max_drop_pct=10).tolerance(0.5) == pytest.approx(0.1)
