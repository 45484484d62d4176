"""Configs as flat dotted keys, and the differences between two of them."""

from __future__ import annotations

import json
import math
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


@dataclass(frozen=True)
class RunSearch:
    """What a runs search asks for: `words` each somewhere in a run (its id, name, project, tags
    or config), `keys` each present in its config, `values` each (dotted key, wanted) a config
    value equal to what is wanted (`value_matches`)."""

    words: tuple[str, ...] = ()
    keys: tuple[str, ...] = ()
    values: tuple[tuple[str, str], ...] = ()


def parse_search(text: str | None, config: str | None = None) -> RunSearch:
    """The search box's words (`lr=3e-4` a value to match, anything else a word to find) and the
    config filter (`optimizer.lr=3e-4`, or a bare key the config must have) as one search."""
    words: list[str] = []
    keys: list[str] = []
    values: list[tuple[str, str]] = []
    for word in (text or "").split():
        key, sep, wanted = word.partition("=")
        if sep and key:
            values.append((key, wanted))
        else:
            words.append(word)
    expression = (config or "").strip()
    if expression:
        key, sep, wanted = expression.partition("=")
        if sep:
            values.append((key.strip(), wanted.strip()))
        else:
            keys.append(expression)
    return RunSearch(tuple(words), tuple(keys), tuple(values))


def value_matches(value: Any, wanted: str) -> bool:
    """Whether a config value is the one a `key=value` search names: numbers as numbers (`3e-4`
    finds 0.0003), true and false as booleans, anything else by its text in any case."""
    wanted = wanted.strip()
    if isinstance(value, bool):
        return wanted.lower() == str(value).lower()
    if isinstance(value, (int, float)):
        try:
            return math.isclose(float(wanted), float(value), rel_tol=1e-9, abs_tol=0.0)
        except ValueError:
            return False
    shown = value if isinstance(value, str) else json.dumps(value, default=str)
    return shown.strip().lower() == wanted.lower()
