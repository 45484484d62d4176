"""wandb's exception classes (`wandb.errors`), so that `except wandb.errors.CommError:` and
`except wandb.Error:` in a script keep meaning what they meant:

* `Error`: the base of all of them (`holter.Error`, as `wandb.Error`).
* `UsageError`: the API used the wrong way (a module-level call before `init()` raises
  `holter.NoRunError`, a `UsageError`).
* `CommError`: the service could not be reached or refused a request; `AuthenticationError`
  when it refused the API key.
* `UnsupportedError`: asked for something Holter does not do.
"""

from __future__ import annotations

from typing import Any


class Error(Exception):
    """The base of Holter's wandb-style errors (wandb's `wandb.Error`)."""

    def __init__(self, message: str = "", context: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.context = context or {}


class CommError(Error):
    """The service could not be reached, or answered with an error."""

    def __init__(self, msg: str = "", exc: BaseException | None = None) -> None:
        super().__init__(msg)
        self.exc = exc


class AuthenticationError(CommError):
    """The service refused the API key."""


class UsageError(Error):
    """The API was used the wrong way."""


class UnsupportedError(UsageError):
    """A feature Holter does not have."""


__all__ = ["AuthenticationError", "CommError", "Error", "UnsupportedError", "UsageError"]
