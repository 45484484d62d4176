"""Which charts a run page draws: the service's panel for each metric, layers, histograms."""

from __future__ import annotations

from holter_charts.panels import layer_of, plan_panels, whole_step_partner
from holter_server.vocabulary import understand_all
from holter_server.vocabulary.names import layer_index
from holter_server.vocabulary.signals import panel_of


def served_layer(name: str) -> dict | None:
    """A metric's `layer` as GET /runs/{id} serves it (`MetricPublic.layer`)."""
    layered = layer_index(name)
    return {"family": layered[0], "index": layered[1]} if layered else None


def as_the_api_lists(names: list[str]) -> list[dict]:
    """Metrics as GET /runs/{id} lists them: each with the kind, panel and layer the service gave it."""
    return [
        {"name": n, "kind": u.kind, "panel": panel_of(u.kind), "layer": served_layer(n)}
        for n, u in understand_all(names).items()
    ]


def test_panels_group_the_metrics_by_the_panel_the_service_gave_them(vocab) -> None:
    names = [
        "loss",
        "eval_loss",
        "grad_norm",
        "logprob_mismatch",
        "tokens_per_s",
        "lr",
        *(f"act_norm/layer.{i}" for i in range(4)),
        "training/rollout_probs_diff_mean",
        "my_probe",
    ]
    panels = plan_panels(as_the_api_lists(names), vocab)
    titles = [p.title for p in panels]
    assert titles[:4] == ["Loss", "Gradient norm", "Logprob mismatch (rollout vs trainer)", "Throughput"]
    assert panels[0].metrics == ("loss", "eval_loss")  # train and eval on one chart, train first
    assert "training/rollout_probs_diff_mean" in panels[2].metrics  # verl's name for the mismatch
    heat = next(p for p in panels if p.kind == "heatmap")
    assert heat.layers == (0, 1, 2, 3) and heat.metrics[0] == "act_norm/layer.0"
    assert titles[-2:] == ["lr", "my_probe"]


def test_a_metric_s_panel_is_the_service_s_not_a_guess_from_its_name(vocab) -> None:
    # a metric named like a loss but declared something else is drawn where the service puts it
    metrics = [
        {"name": "loss", "kind": "loss", "panel": "loss"},
        {"name": "aux_loss", "kind": "unknown", "panel": None},
        {"name": "norm", "kind": "grad_norm", "panel": "grad_norm"},
    ]
    panels = plan_panels(metrics, vocab)
    assert [(p.title, p.metrics) for p in panels] == [
        ("Loss", ("loss",)),
        ("Gradient norm", ("norm",)),
        ("aux_loss", ("aux_loss",)),
    ]


QUANTILES = ("min", "p5", "p25", "median", "p75", "p95", "max")


def test_a_logged_histogram_s_quantiles_are_one_band_chart(vocab) -> None:
    names = ["loss", *(f"weights/{q}" for q in QUANTILES), "partial/median", "partial/p5"]
    panels = plan_panels(as_the_api_lists(names), vocab)
    (band,) = [p for p in panels if p.kind == "band"]
    assert band.title == "weights (distribution)" and band.metrics == tuple(f"weights/{q}" for q in QUANTILES)
    assert not any(set(p.metrics) & set(band.metrics) for p in panels if p is not band)
    assert {"partial/median", "partial/p5"} <= {
        m for p in panels if p.kind == "lines" for m in p.metrics
    }  # not a whole histogram


def test_a_metric_on_another_x_axis_gets_its_own_chart_saying_which(vocab) -> None:
    metrics = [
        {"name": "loss", "kind": "loss", "panel": "loss"},
        {"name": "val/loss", "kind": "eval_loss", "panel": "loss", "step_metric": "epoch"},
    ]
    panels = plan_panels(metrics, vocab)
    assert [(p.title, p.metrics) for p in panels] == [("Loss", ("loss",)), ("val/loss · by epoch", ("val/loss",))]


def test_the_heatmap_groups_the_layers_the_service_served_not_the_names(vocab) -> None:
    metrics = [
        {"name": "act_norm/layer.0", "kind": "activation_norm", "panel": None},  # no layer served
        {"name": "act_norm/layer.1", "kind": "activation_norm", "panel": None},
        {"name": "probe_a", "kind": "unknown", "panel": None, "layer": {"family": "probe*", "index": 0}},
        {"name": "probe_b", "kind": "unknown", "panel": None, "layer": {"family": "probe*", "index": 1}},
    ]
    assert layer_of(metrics[0]) is None and layer_of(metrics[3]) == ("probe*", 1)
    (heat,) = [p for p in plan_panels(metrics, vocab) if p.kind == "heatmap"]
    assert heat.metrics == ("probe_a", "probe_b") and heat.layers == (0, 1)


def test_system_vitals_go_to_the_system_section_after_the_main_charts(vocab) -> None:
    names = [
        "loss",
        "holter/system/cpu.percent",
        "holter/system/gpu.0.memory_used_frac",
        "lr",
        "holter/system/memory.rss_mb",
    ]
    panels = plan_panels(as_the_api_lists(names), vocab)
    sections = [(p.section, p.metrics) for p in panels]
    assert [s for s, _ in sections] == ["main", "main", "system", "system", "system"]
    assert {m for s, ms in sections if s == "system" for m in ms} == {
        n for n in names if n.startswith("holter/system/")
    }


def test_rank_0_s_timings_go_to_the_ranks_section_never_the_main_grid(vocab) -> None:
    # a job's run lists rank 0's holter/dist/* beside its curves, read as the `rank` kind
    names = [
        "loss",
        "holter/dist/compute_s",
        "holter/dist/wait_s",
        "holter/dist/step_s",
        "holter/dist/local_grad_norm",
        "holter/system/cpu.percent",
    ]
    listed = as_the_api_lists(names)
    assert {m["name"]: m["kind"] for m in listed if m["name"].startswith("holter/dist/")} == dict.fromkeys(
        names[1:5], "rank"
    )
    panels = plan_panels(listed, vocab)
    assert [p.section for p in panels] == ["main", "system", "ranks", "ranks", "ranks", "ranks"]
    assert [p.metrics for p in panels if p.section == "main"] == [("loss",)]
    assert {m for p in panels if p.section == "ranks" for m in p.metrics} == set(names[1:5])
    # a metric declared `rank` goes with them, whatever its name
    declared = plan_panels([{"name": "my_rank_clock", "kind": "rank", "panel": None}], vocab)
    assert [p.section for p in declared] == ["ranks"]


def test_two_names_with_one_slug_get_a_chart_each(vocab) -> None:
    panels = plan_panels(as_the_api_lists(["holter/system/cpu.percent", "holter/system/cpu_percent"]), vocab)
    assert len(panels) == 2 and len({p.key for p in panels}) == 2


def listed_with_understanding(values: dict[str, float]) -> list[dict]:
    """Metrics as GET /runs/{id} lists them with how the service understood each and its last value."""
    return [
        {"name": n, "kind": u.kind, "panel": panel_of(u.kind), "understood": u.to_dict(), "last_value": values[n]}
        for n, u in understand_all(list(values)).items()
    ]


def test_mfu_gets_a_chart_of_its_own_from_the_vocabulary_never_the_throughput_axis(vocab) -> None:
    metrics = listed_with_understanding({"holter/throughput/tokens_per_s": 52_000.0, "holter/throughput/mfu": 0.41})
    panels = {p.key: p for p in plan_panels(metrics, vocab)}
    assert panels["mfu"].metrics == ("holter/throughput/mfu",) and panels["mfu"].title == vocab.panel_title("mfu")
    assert panels["throughput"].metrics == ("holter/throughput/tokens_per_s",)
    assert panels["mfu"].share and not panels["throughput"].share


def test_a_share_logged_in_percent_is_known_by_its_unit_else_by_its_values(vocab) -> None:
    metrics = listed_with_understanding(
        {"mfu(%)": 0.9, "holter/throughput/mfu": 0.41, "throughput/device/mfu": 38.5, "perf/mfu/actor": 0.3}
    )
    (mfu,) = [p for p in plan_panels(metrics, vocab) if p.key == "mfu"]
    # mfu(%) says percent by its name (a slow CPU run logs 0.9 %); a bare name's 38.5 cannot be a fraction
    assert set(mfu.percent) == {"mfu(%)", "throughput/device/mfu"}


def test_the_step_s_own_work_is_marked_beside_the_whole_step_s(vocab) -> None:
    names = ["holter/throughput/tokens_per_s", "holter/throughput/compute_tokens_per_s", "holter/step_time"]
    metrics = listed_with_understanding(dict.fromkeys([*names, "holter/compute_time"], 1.0))
    panels = {p.key: p for p in plan_panels(metrics, vocab)}
    assert panels["throughput"].compute_only == ("holter/throughput/compute_tokens_per_s",)
    assert panels["step_time"].compute_only == ("holter/compute_time",)


def test_a_compute_only_metric_s_whole_step_partner_is_found_by_name() -> None:
    shown = ["holter/throughput/tokens_per_s", "holter/throughput/compute_tokens_per_s", "holter/compute_time"]
    assert whole_step_partner("holter/throughput/compute_tokens_per_s", shown) == "holter/throughput/tokens_per_s"
    assert whole_step_partner("holter/compute_time", shown) is None  # holter/time is not logged
