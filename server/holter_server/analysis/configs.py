"""Configs as flat dotted keys, and the differences between two of them."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def flatten(config: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested configs by dotted key (`optim.betas`); lists and other values are kept whole."""
    flat: dict[str, Any] = {}
    for key, value in (config or {}).items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def without(flat: dict[str, Any], drop: Callable[[str], bool]) -> dict[str, Any]:
    """The flat config less the keys `drop` names."""
    return {k: v for k, v in flat.items() if not drop(k)}


def fingerprint(flat: dict[str, Any]) -> str:
    """A canonical text of a flat config: equal configs, equal fingerprints (1 and 1.0 alike)."""
    return json.dumps({k: _canonical(v) for k, v in sorted(flat.items())}, sort_keys=True, default=str)


def _canonical(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


@dataclass(frozen=True)
class KeyChange:
    """One config key that differs between two arms (None: the arm's config lacks it)."""

    key: str
    a: Any
    b: Any

    def describe(self) -> str:
        """'lr 0.0003 → 0.0006' (or 'absent' for a missing side)."""
        return f"{self.key} {_shown(self.a)} → {_shown(self.b)}"


def _shown(value: Any) -> str:
    return "absent" if value is None else json.dumps(value, default=str) if not isinstance(value, str) else value


def diff(a: dict[str, Any], b: dict[str, Any]) -> list[KeyChange]:
    """The keys whose values differ between two flat configs, by key."""
    return [
        KeyChange(k, a.get(k), b.get(k))
        for k in sorted(a.keys() | b.keys())
        if _canonical(a.get(k)) != _canonical(b.get(k))
    ]
