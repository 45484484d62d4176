"""A run's config: a live mapping whose every change reaches the service.

    run = holter.init(project="gpt", config={"lr": 3e-4})
    run.config["batch_size"] = 32          # item assignment
    run.config.warmup = 500                # attribute assignment (wandb's habit)
    run.config.update(vars(args))          # argparse, dataclasses, nested dicts

Values are stored as JSON: dataclasses, argparse `Namespace`s and mappings become nested
objects (Lightning's nested hyperparameters stay nested, and the service reads them by dotted
key, `optimizer.betas`); tuples and sets become lists; numpy and torch scalars and arrays their
numbers; NaN and infinities their names; other objects their text. A `None` is not stored (a
config key says what a run was given, and "None" reads as a value): it is left out with a note.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import sys
from argparse import Namespace
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from holter.wire import encode_value

_MAX_DEPTH = 32  # deeper than any real config; stops a cycle


class Config(Mapping[str, Any]):
    """The config of a run (see the module doc). Reading it is a plain mapping; setting a key,
    an attribute or `update()` sends the whole config to the service, which merges it."""

    def __init__(self, values: Any, send: Callable[[dict[str, Any]], None]) -> None:
        object.__setattr__(self, "_values", plain_config(values))
        object.__setattr__(self, "_send", send)

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # copy and pickle probe for these before __init__ ran
            raise AttributeError(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"the run's config has no key {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self.update({name: value})

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def update(self, values: Any = None, /, allow_val_change: bool | None = None, **more: Any) -> None:
        """Merge `values` (a mapping, dataclass or Namespace) and `more` into the config, here
        and at the service. `allow_val_change` (wandb's) is accepted: a value may always change
        here (wandb refuses a change without it; a script that runs under wandb never needs that)."""
        merged = {**plain_config(values), **plain_config(more)}
        if not merged:
            return
        self._values.update(merged)
        self._send(dict(self._values))

    def setdefaults(self, values: Any) -> None:
        """Set the keys of `values` the config does not have yet (wandb's `setdefaults`): a value
        already there, from `init(config=...)` or a sweep, wins."""
        missing = {key: value for key, value in plain_config(values).items() if key not in self._values}
        if missing:
            self.update(missing)

    def persist(self) -> None:
        """wandb's `persist`: send the whole config again (every change is sent already)."""
        self._send(dict(self._values))

    def as_dict(self) -> dict[str, Any]:
        """A copy of the config as plain JSON-ready values."""
        return dict(self._values)

    def __repr__(self) -> str:
        return f"Config({self._values!r})"


def plain_config(values: Any) -> dict[str, Any]:
    """`values` (a mapping, dataclass, Namespace or None) as a JSON-ready dict; keys whose value
    is `None` are left out, and named in one note on stderr."""
    if values is None:
        return {}
    left_out: list[str] = []
    plain = _plain(values, "", 0, left_out)
    if not isinstance(plain, dict):
        raise TypeError(f"a run config is a mapping, a dataclass or an argparse Namespace, not {type(values).__name__}")
    if left_out:
        shown = ", ".join(left_out[:20]) + (f" and {len(left_out) - 20} more" if len(left_out) > 20 else "")
        print(f"holter: config keys left out because they are None: {shown}", file=sys.stderr)
    return plain


def _plain(value: Any, where: str, depth: int, left_out: list[str]) -> Any:
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return encode_value(value)
    if depth >= _MAX_DEPTH:
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    elif isinstance(value, Namespace):
        value = vars(value)
    if isinstance(value, Mapping):
        plain = {}
        for key, item in value.items():
            name = f"{where}.{key}" if where else str(key)
            if item is None:
                left_out.append(name)
            else:
                plain[str(key)] = _plain(item, name, depth + 1, left_out)
        return plain
    if isinstance(value, enum.Enum):
        return _plain(value.value, where, depth + 1, left_out)
    if isinstance(value, (list, tuple)):
        return [_plain(item, where, depth + 1, left_out) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(item, where, depth + 1, left_out) for item in value), key=repr)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    tolist = getattr(value, "tolist", None)  # numpy and torch scalars and arrays
    if callable(tolist):
        try:
            return _plain(tolist(), where, depth + 1, left_out)
        except (TypeError, ValueError, RuntimeError):
            pass
    return str(value)
