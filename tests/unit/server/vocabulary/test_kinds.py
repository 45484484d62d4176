"""One answer to "what kind is this metric": a run's declaration wins over the name, in the
vocabulary and in every rule that is handed the run's `MetricKinds`."""

from __future__ import annotations

import pytest
from holter_server.analysis.incidents import group_incidents
from holter_server.detect.events import Event
from holter_server.detect.findings import nonfinite_origin
from holter_server.postmortem.summary import write_summary
from holter_server.vocabulary.kinds import MetricKinds, kind_of

# a name no rule recognises, declared a loss by its run
ODD = "zz_objective"
DECLARED = {ODD: "loss"}


def _declared_only() -> MetricKinds:
    # the run's metrics read once without ODD (its events were stored before its name was read)
    return MetricKinds({"grad_norm": "grad_norm"}, declarations=DECLARED)


def test_kind_of_prefers_the_declaration_to_the_name() -> None:
    assert kind_of("train/loss", {"train/loss": "eval_loss"}) == "eval_loss"
    assert kind_of("eval/acc_top1", {"eval/*": "loss"}) == "loss"


def test_kind_of_falls_back_to_the_name_without_declarations() -> None:
    assert kind_of("train/loss") == "loss"
    assert kind_of(ODD) == "unknown"


def test_metric_kinds_reads_a_name_it_does_not_hold_with_the_declarations() -> None:
    kinds = _declared_only()
    assert kinds["grad_norm"] == "grad_norm"
    assert kinds[ODD] == "loss"
    assert kinds.get(ODD) == "loss"
    assert MetricKinds()[ODD] == "unknown"


def test_metric_kinds_of_a_plain_mapping_keeps_its_kinds() -> None:
    assert MetricKinds.of({ODD: "loss"})[ODD] == "loss"
    kinds = _declared_only()
    assert MetricKinds.of(kinds) is kinds


def _divergence(metric: str) -> Event:
    return Event("divergence", metric, 100, 120, "critical", 5.0, f"{metric} diverged")


@pytest.mark.parametrize(("kinds", "attached"), [(None, False), (_declared_only(), True)])
def test_findings_attach_a_tripwire_to_a_metric_declared_a_loss(kinds: MetricKinds | None, attached: bool) -> None:
    event = nonfinite_origin(
        step=105,
        forward={"name": "layer.3", "value": "nan"},
        gradient=None,
        events=[_divergence(ODD)],
        kinds=kinds,
    )
    assert (event.metric == ODD) is attached


def _spike(metric: str, step: int) -> Event:
    return Event("spike", metric, step, step + 1, "warning", 6.0, f"{metric} spiked", peak_step=step)


@pytest.mark.parametrize(("kinds", "rule"), [(None, "single"), (_declared_only(), "bad_batch")])
def test_incidents_fold_a_bad_batch_on_a_metric_declared_a_loss(kinds: MetricKinds | None, rule: str) -> None:
    incidents = group_incidents([_spike(ODD, 500), _spike("grad_norm", 500)], kinds)
    assert incidents[0].rule == rule
    if rule == "bad_batch":
        assert len(incidents) == 1 and incidents[0].leader == 0


@pytest.mark.parametrize(("kinds", "told"), [(None, False), (_declared_only(), True)])
def test_the_post_mortem_tells_a_spike_of_a_metric_declared_a_loss_as_a_loss_spike(
    kinds: MetricKinds | None, told: bool
) -> None:
    spike = {
        "kind": "spike",
        "metric": ODD,
        "start_step": 500,
        "end_step": 501,
        "severity": "warning",
        "score": 6.0,
        "summary": f"{ODD} spiked",
        "status": "open",
        "details": {},
    }
    text = write_summary(name="run", status="finished", last_step=1000, events=[spike], kinds=kinds)
    assert ("1 loss spike" in text) is told
