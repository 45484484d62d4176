"""Which charts a run page draws: the shared panels the service gave each metric (`panel` in
`GET /runs/{id}`, ordered and titled by the vocabulary), a heatmap per per-layer family, a band
chart per logged histogram, and a chart of its own for every other metric.

Which panel a metric goes on is the service's answer, never a guess from its name here; this
module only lays out what the API says (and groups layers and histogram quantiles, which share
no panel of the vocabulary). So does how a line is drawn: a metric the service understood as the
step's own work only (`understood.compute_only`) is dashed beside the whole step's, and on a
panel of shares (`share` in the vocabulary: MFU, the wait for data) a metric logged in percent is
drawn as the fraction it is, so that 41 (%) and 0.41 meet on one percentage axis.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from holter_charts.vocabulary import Vocabulary

Section = Literal["main", "system", "ranks"]
SECTIONS: tuple[Section, ...] = ("main", "system", "ranks")  # in the order their charts are listed
# A share logged with a value beyond this is in percent whatever its name says: a fraction of a
# device's peak or of a step stays at or under 1 (a little over, with a rough FLOP count).
PERCENT_ABOVE = 1.5


@dataclass(frozen=True)
class Panel:
    """One chart of the run page: a signal family drawn as lines, or per-layer metrics as a
    heatmap. `section` says where the page puts it: the main grid, the collapsed System section
    for system vitals (CPU, memory, disk, network, a GPU's clocks and memory), or the Ranks
    section for a distributed job's rank series and timings (drawn there across the ranks, as a
    rank × step heatmap, never as a chart of rank 0's alone)."""

    key: str
    title: str
    metrics: tuple[str, ...]
    kind: Literal["lines", "heatmap", "band"] = "lines"
    layers: tuple[int, ...] = ()
    section: Section = "main"
    share: bool = False  # a percentage axis: its metrics are shares (of the device's peak, of the step)
    percent: tuple[str, ...] = ()  # on a share panel, the metrics logged in percent (drawn divided by 100)
    compute_only: tuple[str, ...] = ()  # the step's own work without its wait for data: dashed


def layer_of(metric: Mapping[str, Any]) -> tuple[str, int] | None:
    """(family, index) of a metric that is a numbered layer of a stack (`act_norm/layer.3`), as
    the service says in `GET /runs/{id}` (`layer`, from its vocabulary: the charts never read a
    layer from a name themselves); such metrics are drawn as one layer × step heatmap per family."""
    layer = metric.get("layer")
    if not isinstance(layer, Mapping):
        return None
    family, index = layer.get("family"), layer.get("index")
    return (family, index) if isinstance(family, str) and isinstance(index, int) else None


def plan_panels(metrics: Iterable[Mapping[str, Any]], vocab: Vocabulary) -> list[Panel]:
    """The run page's charts for a run's metrics (as `GET /runs/{id}` lists them, each with the
    panel and kind the service gave it): the vocabulary's shared panels in its order (train and
    eval loss together, the train loss first), a heatmap per per-layer family (two layers or
    more), then every other metric on its own chart, alphabetically. A chart whose metrics are
    all of system kinds (the service's vocabulary says which) goes in the System section, one
    whose metrics are all rank series (rank 0's `holter/dist/...` timings) in the Ranks section. Every
    chart has a key of its own (two names may make one slug: `cpu.percent`, `cpu_percent`)."""
    by_name = {m["name"]: m for m in metrics}
    names = sorted(by_name)
    families: dict[str, dict[int, str]] = {}
    for name in names:
        layered = layer_of(by_name[name])
        if layered:
            families.setdefault(layered[0], {})[layered[1]] = name
    in_heatmap = {name for members in families.values() if len(members) >= 2 for name in members.values()}
    bands = histogram_families(names)
    in_band = {name for members in bands.values() for name in members}
    shared: dict[str, list[str]] = {}
    alone: list[str] = []
    for name in names:
        if name in in_heatmap or name in in_band:
            continue
        panel = by_name[name].get("panel")
        if panel and not by_name[name].get("step_metric"):  # a metric on another x axis never shares a step chart
            shared.setdefault(panel, []).append(name)
        else:
            alone.append(name)
    panels: list[Panel] = []
    for key, members in sorted(shared.items(), key=lambda item: vocab.panel_order(item[0])):
        members.sort(key=lambda m: (vocab.kind_order(by_name[m].get("kind")), m))
        share = vocab.is_share_panel(key)
        panels.append(
            Panel(
                key=key,
                title=vocab.panel_title(key),
                metrics=tuple(members),
                share=share,
                percent=tuple(m for m in members if share and logged_in_percent(by_name[m])),
                compute_only=tuple(m for m in members if is_compute_only(by_name[m])),
            )
        )
    for family, members in sorted(families.items()):
        if len(members) >= 2:
            layers = tuple(sorted(members))
            title = family.replace("*", "").replace("//", "/").strip("/._-") + " per layer"
            panels.append(
                Panel(
                    key=_slug(family),
                    title=title,
                    metrics=tuple(members[i] for i in layers),
                    kind="heatmap",
                    layers=layers,
                )
            )
    panels.extend(
        Panel(key=f"{_slug(base)}-band", title=f"{base} (distribution)", metrics=members, kind="band")
        for base, members in sorted(bands.items())
    )
    panels.extend(
        Panel(
            key=_slug(name),
            title=_titled(name, by_name[name].get("step_metric")),
            metrics=(name,),
            compute_only=(name,) if is_compute_only(by_name[name]) else (),
        )
        for name in alone
    )
    return _sectioned(_unique_keys(panels), by_name, vocab)


def is_compute_only(metric: Mapping[str, Any]) -> bool:
    """Whether the service understood a metric (as `GET /runs/{id}` lists it) as timing the step's
    own work, without its wait for data."""
    return bool((metric.get("understood") or {}).get("compute_only"))


def logged_in_percent(metric: Mapping[str, Any]) -> bool:
    """Whether a share (as `GET /runs/{id}` lists it) is logged in percent: as the service
    understood it where the name or its framework says (`understood.unit`), else from its last
    value (a bare `mfu` is 38 in one framework's runs and 0.38 in another's)."""
    unit = (metric.get("understood") or {}).get("unit")
    if unit in ("percent", "fraction"):
        return unit == "percent"
    last = metric.get("last_value")
    return isinstance(last, (int, float)) and math.isfinite(last) and abs(last) > PERCENT_ABOVE


def whole_step_partner(metric: str, metrics: Iterable[str]) -> str | None:
    """The whole step's counterpart of a compute-only metric among `metrics`, by name (Holter's
    client logs `.../compute_tokens_per_s` beside `.../tokens_per_s`), or None."""
    other = metric.replace("compute_", "", 1)
    return other if other != metric and other in set(metrics) else None


def _unique_keys(panels: list[Panel]) -> list[Panel]:
    """The panels, a key that is taken already getting a number: a page holds one chart per key."""
    seen: set[str] = set()
    out: list[Panel] = []
    for panel in panels:
        key, n = panel.key, 1
        while key in seen:
            n += 1
            key = f"{panel.key}-{n}"
        seen.add(key)
        out.append(panel if key == panel.key else replace(panel, key=key))
    return out


def _sectioned(panels: list[Panel], by_name: Mapping[str, Mapping[str, Any]], vocab: Vocabulary) -> list[Panel]:
    """Each panel in its section: system vitals in the System section and rank series in the Ranks
    section, after the main grid's charts."""
    placed = [replace(panel, section=_section_of(panel, by_name, vocab)) for panel in panels]
    return [p for section in SECTIONS for p in placed if p.section == section]


def _section_of(panel: Panel, by_name: Mapping[str, Mapping[str, Any]], vocab: Vocabulary) -> Section:
    kinds = [by_name[m].get("kind") for m in panel.metrics]
    if all(vocab.is_system_kind(kind) for kind in kinds):
        return "system"
    if all(vocab.is_rank_kind(kind) for kind in kinds):
        return "ranks"
    return "main"


# The quantile metrics a logged histogram becomes (holter.Histogram; client/holter/media.py), lowest first.
HISTOGRAM_QUANTILES = ("min", "p5", "p25", "median", "p75", "p95", "max")


def histogram_families(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Metrics logged as one histogram: every `BASE/min`, `BASE/p5`, ... `BASE/max` present, by BASE."""
    present = set(names)
    bases = {name[: -len("/median")] for name in present if name.endswith("/median")}
    return {
        base: tuple(f"{base}/{q}" for q in HISTOGRAM_QUANTILES)
        for base in sorted(bases)
        if all(f"{base}/{q}" in present for q in HISTOGRAM_QUANTILES)
    }


def _titled(name: str, step_metric: str | None) -> str:
    """A chart's title; a metric logged against another metric (define_metric's step_metric) says which."""
    return f"{name} · by {step_metric}" if step_metric else name


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "metric"


def trace_indexes(panel: Panel, metric: str) -> tuple[int, int]:
    """(raw, smoothed) trace indexes of `metric` in a line panel's figure."""
    i = panel.metrics.index(metric)
    return 2 * i, 2 * i + 1


def nonfinite_trace_index(panel: Panel) -> int:
    """The index of a line panel's NaN/Inf marker trace (after every metric's two traces)."""
    return 2 * len(panel.metrics)
