"""Event keys: one prefix per author, the keys as stored before there was a module for them."""

from __future__ import annotations

from holter_server.vocabulary.event_keys import (
    KeyPrefix,
    finding_key,
    job_alert_key,
    reference_key,
    status_key,
    threshold_key,
    tripwire_key,
)


def test_the_keys_keep_the_form_stored_runs_already_hold() -> None:
    assert finding_key("grad_norm_precursor", "loss", 120) == "finding:grad_norm_precursor:loss@120"
    assert status_key("run_stalled", "2026-01-02T03:04:05+00:00") == "status:run_stalled@2026-01-02T03:04:05+00:00"
    assert threshold_key(7, "loss") == "threshold:7:loss"
    assert tripwire_key("nonfinite", 42) == "tripwire:nonfinite@42"
    assert reference_key("eval_loss", 900) == "reference:eval_loss@900"
    assert job_alert_key("oom") == "alert:oom"


def test_a_current_state_finding_has_one_key_per_metric_whatever_its_start() -> None:
    assert finding_key("layer_dominance", "grad_norm/layer.5", 10) == finding_key(
        "layer_dominance", "grad_norm/layer.5", 900
    )


def test_each_prefix_is_its_own_like_pattern() -> None:
    assert KeyPrefix.FINDING.like() == "finding:%"
    assert len({prefix.value for prefix in KeyPrefix}) == len(KeyPrefix)
    assert all(prefix.value.endswith(":") for prefix in KeyPrefix)
