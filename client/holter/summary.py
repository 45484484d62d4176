"""A run's summary (wandb's `run.summary`): what sums the run up, kept by the service.

    run.summary["best_acc"] = 0.93
    run.summary.update({"epochs": 10, "final_loss": 0.21})
    holter.summary.best_acc            # reading: what was set, else the last value logged

Reading a key gives what was set, else the last value logged for that metric (as wandb's
summary does). Setting, updating or deleting a key sends the change to the service, in order
with the points (through the spool when the service is away); the run page shows it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from holter.config import _plain


class Summary(Mapping[str, Any]):
    """See the module doc. `last_values` is the run's last logged values (read, never copied)."""

    def __init__(self, last_values: Mapping[str, Any], send: Callable[[dict[str, Any]], None]) -> None:
        object.__setattr__(self, "_last", last_values)
        object.__setattr__(self, "_set", {})
        object.__setattr__(self, "_send", send)

    def __getitem__(self, key: str) -> Any:
        if key in self._set:
            return self._set[key]
        return self._last[key]

    def __iter__(self) -> Iterator[str]:
        return iter({**self._last, **self._set})

    def __len__(self) -> int:
        return len({**self._last, **self._set})

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"the run's summary has no key {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self.update({name: value})

    def __setitem__(self, key: str, value: Any) -> None:
        self.update({key: value})

    def __delitem__(self, key: str) -> None:
        self._set.pop(key, None)
        self._send({key: None})  # the service removes a key set to null

    def update(self, values: Any = None, **more: Any) -> None:
        """Set several keys at once, here and at the service."""
        merged = {**dict(values or {}), **more}
        if not merged:
            return
        plain = {str(key): _plain(value, str(key), 0, []) for key, value in merged.items()}
        self._set.update(plain)
        self._send(plain)

    def as_dict(self) -> dict[str, Any]:
        """Everything it holds: the last values logged, overridden by what was set."""
        return {**self._last, **self._set}

    def __repr__(self) -> str:
        return f"Summary({self.as_dict()!r})"
