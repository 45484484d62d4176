"""Config-aware causes for periods: a sawtooth planted with the period each rule implies is named
with that rule, and a period no rule implies is named with none."""

from __future__ import annotations

import numpy as np
import pytest
from holter_server.analysis.periods import period_causes
from holter_server.detect import classify_series
from holter_server.services.attribution import explain_period
from holter_server.vocabulary.configs import PERIOD_RULES

# Per rule: a config, the period it implies, and how the event names it.
CASES = {
    "steps_per_epoch": (
        {
            "data": {"dataset_size": 64_000},
            "per_device_train_batch_size": 16,
            "gradient_accumulation_steps": 4,
            "world_size": 8,
        },
        125,
        "period 125 = dataset_size / (per_device_train_batch_size × gradient_accumulation_steps × world_size)",
    ),
    "steps_per_epoch_global": (
        {"num_train_samples": 96_000, "global_batch_size": 512},
        187.5,
        "period 187.5 ≈ num_train_samples / global_batch_size",
    ),
    # the run: a data-order sawtooth of period 40 in a config that says steps_per_epoch outright
    "steps_per_epoch_given": ({"steps_per_epoch": 40, "batch_size": 32}, 40, "period 40 = steps_per_epoch"),
    "steps_per_shard": ({"data": {"steps_per_shard": 150}}, 150, "period 150 = steps_per_shard"),
    "gradient_accumulation": ({"gradient_accumulation_steps": 96}, 96, "period 96 = gradient_accumulation_steps"),
    "eval_interval": ({"eval_interval": 250}, 250, "period 250 = eval_interval"),
    "save_interval": ({"trainer": {"save_steps": 300}}, 300, "period 300 = save_steps"),
    "log_interval": ({"log_every": 140}, 140, "period 140 = log_every"),
    "rollouts": ({"rollout": {"rollouts_num": 64}}, 64, "period 64 = rollouts_num"),
    "tokens_per_shard": (
        {"shard_tokens": 100_000_000, "batch_size": 512, "seq_len": 1024},
        190.7,
        "≈ shard_tokens / (batch_size × seq_len)",
    ),
    "tokens_per_shard_step": (
        {"tokens_per_shard": 50_000_000, "tokens_per_step": 262_144},
        190.7,
        "≈ tokens_per_shard / tokens_per_step",
    ),
}


def test_every_rule_has_a_case() -> None:
    assert set(CASES) == {rule.name for rule in PERIOD_RULES}


def planted_sawtooth(period: float) -> list:  # type: ignore[type-arg]
    """A flat step time with a slow step every `period` steps, read by the classifier."""
    n = int(period * 16)
    values = 170 + np.random.default_rng(0).normal(0, 1.7, n)
    values[np.round(np.arange(period, n, period)).astype(int)] = 320
    return [e for e in classify_series(np.arange(n), values, metric="step_time_ms") if e.kind == "sawtooth"]


@pytest.mark.parametrize("rule", sorted(CASES))
def test_a_period_planted_from_each_rule_is_named_with_it(rule: str) -> None:
    config, period, text = CASES[rule]
    (saw,) = planted_sawtooth(period)
    named = explain_period(saw, config)
    assert rule in [c["rule"] for c in named.details["period_causes"]]
    assert text in named.summary and named.summary.startswith(saw.summary)


def test_a_period_no_rule_implies_is_left_as_it_is() -> None:
    (saw,) = planted_sawtooth(77)
    assert explain_period(saw, {"eval_interval": 250, "rollouts_num": 64}) is saw


def test_a_period_matching_two_rules_names_both_closest_first() -> None:
    causes = period_causes(100.4, {"eval_interval": 100, "save_interval": 102})
    assert [c.rule for c in causes] == ["eval_interval", "save_interval"] and causes[0].exact and not causes[1].exact


def test_flags_and_non_numbers_are_not_quantities() -> None:
    assert period_causes(1, {"eval_interval": True}) == [] and period_causes(64, {"rollouts_num": "64"}) == []


def test_holters_own_rhythms_are_told_from_a_jobs_period() -> None:
    from holter_server.analysis.periods import own_cadence, period_seconds

    assert own_cadence(1.04) is not None and "client's send" in own_cadence(1.04)  # type: ignore[operator]
    assert own_cadence(9.5) is not None and own_cadence(5.2) is not None
    assert own_cadence(1.6) is None and own_cadence(0.0) is None
    assert period_seconds([3, 599], [100.75, 249.75], 4.0) == 1.0
    assert period_seconds([3, 599], [None, 249.75], 4.0) is None
