"""Rule matching and thresholds."""

from __future__ import annotations

import math

import pytest
from holter_server.alerts.rules import DEFAULT_RULES, EventFacts, RuleSpec, first_crossing, matches, threshold_applies

EVENT = EventFacts(
    project="gpt2", run_tags=("ablation",), metric="act_norm/layer.3", kind="divergence", severity="critical"
)


def test_an_empty_rule_matches_warnings_and_worse() -> None:
    assert matches(RuleSpec(), EVENT)
    assert not matches(RuleSpec(), EventFacts("p", (), "loss", "spike", "info"))


def test_each_filter_can_exclude() -> None:
    assert not matches(RuleSpec(project="other"), EVENT)
    assert not matches(RuleSpec(run_tag="baseline"), EVENT)
    assert not matches(RuleSpec(metric_pattern="loss*"), EVENT)
    assert not matches(RuleSpec(kinds=("spike",)), EVENT)
    assert matches(
        RuleSpec(
            project="gpt2",
            run_tag="ablation",
            metric_pattern="act_norm/*",
            kinds=("divergence",),
            min_severity="critical",
        ),
        EVENT,
    )


def test_a_metric_pattern_never_matches_run_level_events() -> None:
    assert not matches(RuleSpec(metric_pattern="*"), EventFacts("p", (), None, "run_stalled", "warning"))


def test_threshold_rules_do_not_match_events() -> None:
    assert not matches(RuleSpec(threshold_op="above", threshold_value=1.0), EVENT)


def test_thresholds_find_the_first_crossing() -> None:
    above = RuleSpec(threshold_op="above", threshold_value=5.0)
    assert first_crossing(above, [1, 2, 3], [4.0, 6.0, 7.0]) == (2, 6.0)
    assert first_crossing(RuleSpec(threshold_op="below", threshold_value=0.5), [1, 2], [0.9, 0.8]) is None
    step, value = first_crossing(RuleSpec(threshold_op="nonfinite"), [1, 2, 3], [1.0, math.inf, math.nan])
    assert (step, value) == (2, math.inf)


def test_threshold_rules_apply_by_project_tag_and_pattern() -> None:
    rule = RuleSpec(project="gpt2", metric_pattern="loss", threshold_op="above", threshold_value=1.0)
    assert threshold_applies(rule, "gpt2", (), "loss")
    assert not threshold_applies(rule, "gpt2", (), "eval_loss")
    assert not threshold_applies(rule, "other", (), "loss")


@pytest.mark.parametrize(
    ("metric", "kind", "severity"),
    [
        ("losses/approx_kl", "divergence", "critical"),  # PPO's KL out of its band
        ("reward", "divergence", "warning"),  # a reward collapse
        ("losses/entropy", "entropy_collapse", "warning"),
    ],
)
def test_an_rl_policys_blow_up_and_collapse_are_alerted_by_default(metric, kind, severity) -> None:
    event = EventFacts("p", (), metric, kind, severity)
    defaults = [RuleSpec(kinds=tuple(r["kinds"]), min_severity=r["min_severity"]) for r in DEFAULT_RULES]
    assert any(matches(rule, event) for rule in defaults)
