"""`holter kinds`: what a metric can be, how each kind is watched, and whose names Holter
recognises; and the `--kind NAME=KIND` option `analyze` and `import` share."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from holter_server.vocabulary.frameworks import FRAMEWORKS
from holter_server.vocabulary.signals import SIGNAL_KIND_NAMES, SIGNAL_KINDS


def parse_kind_options(values: Sequence[str] | None) -> dict[str, str]:
    """`--kind` values as declarations by metric name or glob: `train/ce=loss`, `eval/*=eval_loss`,
    or a bare `loss` for every metric (`*`). ValueError names a bad value."""
    declared: dict[str, str] = {}
    for value in values or ():
        pattern, sep, kind = value.rpartition("=")
        pattern = pattern.strip() if sep else "*"
        kind = kind.strip()
        if not pattern:
            raise ValueError(f"--kind {value!r}: the metric name before '=' is empty")
        if kind not in SIGNAL_KIND_NAMES:
            raise ValueError(
                f"--kind {value!r}: unknown kind {kind!r}; expected one of: {', '.join(SIGNAL_KIND_NAMES)}"
            )
        declared[pattern] = kind
    return declared


def run(args: argparse.Namespace) -> int:
    """Print the kinds, one a line: name, how it is watched, its chart, what it is."""
    width = max(len(k.name) for k in SIGNAL_KINDS)
    print(
        "Metric kinds (declare one with run.define_metric(name, kind=...), `kinds` on a run or batch, or --kind "
        "NAME=KIND):"
    )
    for kind in SIGNAL_KINDS:
        print(f"  {kind.name:<{width}}  {kind.watch:<5}  {kind.description}")
    print(f"Names recognised from: {', '.join(FRAMEWORKS)}, and common conventions; anything else is 'unknown'.")
    return 0
