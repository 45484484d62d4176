"""What every reader produces: points (metric, step, value, wall time), and the parsing of the
cells, steps and times they are made of."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import NamedTuple

# Wall times above this are milliseconds since the epoch (MLflow, many CSV exports), not seconds:
# 1e11 seconds is the year 5138.
_MILLISECONDS_ABOVE = 1e11

# The step's column (CSV) or key (JSONL), in order of preference. W&B's `_step` counts log calls;
# beside it the Trainer's own `train/global_step` (transformers' WandbCallback logs it with every
# row) or Lightning's `trainer/global_step` is the training step, so those win.
STEP_NAMES = ("step", "global_step", "train/global_step", "trainer/global_step", "_step", "iteration", "iter", "steps")

# NaN and ±Inf as they are spelled in files: Python's repr, JSON-safe names, C's printf, Fortran-ish
# upper case (Megatron's `{:.6E}` of a NaN is "NAN").
_NONFINITE = {
    "nan": math.nan,
    "-nan": math.nan,
    "+nan": math.nan,
    "inf": math.inf,
    "+inf": math.inf,
    "-inf": -math.inf,
    "infinity": math.inf,
    "+infinity": math.inf,
    "-infinity": -math.inf,
}


class FormatError(ValueError):
    """The file cannot be read as training metrics; the message says why, in one line."""


class Point(NamedTuple):
    """One logged value: the metric, its training step, the value, and when it was logged
    (seconds since the epoch, None when the source does not say)."""

    metric: str
    step: int
    value: float
    wall_time: float | None = None


def parse_number(text: str) -> float | None:
    """A cell as a float ('nan', 'inf', '-inf', 'NaN', 'Infinity' included); None when empty or
    not a number."""
    text = text.strip()
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        return _NONFINITE.get(text.lower())


def parse_step(raw: object, where: str) -> int:
    """A step as an int; whole floats ('12.0') are accepted, anything else is a format error."""
    if type(raw) is int:
        return raw
    try:
        number = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise FormatError(f"{where}: step {str(raw)[:40]!r} is not a number") from None
    if not math.isfinite(number) or number != int(number) or abs(number) >= 2**63:
        raise FormatError(f"{where}: step {str(raw)[:40]!r} is not a whole number")
    return int(number)


def parse_wall_time(raw: object) -> float | None:
    """A logged time as seconds since the epoch: a number of seconds or milliseconds, or an ISO
    8601 date (UTC when it names no zone); None when it is neither."""
    if isinstance(raw, bool) or raw is None:
        return None
    if isinstance(raw, (int, float)):
        number = float(raw)
    else:
        text = str(raw).strip()
        try:
            number = float(text)
        except ValueError:
            try:
                moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
            except ValueError:
                return None
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            return moment.timestamp()
    if not math.isfinite(number) or number <= 0:
        return None
    return number / 1000.0 if number > _MILLISECONDS_ABOVE else number
