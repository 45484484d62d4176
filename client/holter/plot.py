"""wandb's chart presets (`wandb.plot.line`, `.scatter`, `.bar`, `.histogram`, `.line_series`,
`.roc_curve`, `.pr_curve`, `.confusion_matrix`, `.plot_table`): accepted so that a script logging
them runs, and not stored. Holter draws its own charts from the numbers a run logs; a chart built
from a table is a file, which Holter does not keep (the first one says so on stderr).

    run.log({"roc": holter.plot.roc_curve(y_true, y_probas)})   # accepted, nothing stored
"""

from __future__ import annotations

from typing import Any

from holter.media import Media


class CustomChart(Media):
    """What every `holter.plot` function returns: a chart wandb would draw from a table;
    accepted when logged, not stored."""


def _chart(*args: Any, **kwargs: Any) -> CustomChart:
    return CustomChart()


def line(*args: Any, **kwargs: Any) -> CustomChart:
    """wandb's `plot.line(table, x, y, title=...)`: accepted, not stored."""
    return _chart()


def scatter(*args: Any, **kwargs: Any) -> CustomChart:
    """wandb's `plot.scatter(table, x, y, title=...)`: accepted, not stored."""
    return _chart()


def bar(*args: Any, **kwargs: Any) -> CustomChart:
    """wandb's `plot.bar(table, label, value, title=...)`: accepted, not stored."""
    return _chart()


def histogram(*args: Any, **kwargs: Any) -> CustomChart:
    """wandb's `plot.histogram(table, value, title=...)`: accepted, not stored (log a
    `holter.Histogram` to keep a distribution's quantiles)."""
    return _chart()


def line_series(*args: Any, **kwargs: Any) -> CustomChart:
    """wandb's `plot.line_series(xs, ys, keys=..., title=...)`: accepted, not stored."""
    return _chart()


def roc_curve(*args: Any, **kwargs: Any) -> CustomChart:
    """wandb's `plot.roc_curve(y_true, y_probas, labels=...)`: accepted, not stored."""
    return _chart()


def pr_curve(*args: Any, **kwargs: Any) -> CustomChart:
    """wandb's `plot.pr_curve(y_true, y_probas, labels=...)`: accepted, not stored."""
    return _chart()


def confusion_matrix(*args: Any, **kwargs: Any) -> CustomChart:
    """wandb's `plot.confusion_matrix(probs=..., y_true=..., preds=..., class_names=...)`: accepted, not stored."""
    return _chart()


def plot_table(*args: Any, **kwargs: Any) -> CustomChart:
    """wandb's `plot_table(vega_spec_name, data_table, fields)`: accepted, not stored."""
    return _chart()


visualize = plot_table

__all__ = [
    "CustomChart",
    "bar",
    "confusion_matrix",
    "histogram",
    "line",
    "line_series",
    "plot_table",
    "pr_curve",
    "roc_curve",
    "scatter",
    "visualize",
]
