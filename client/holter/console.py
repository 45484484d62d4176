"""wandb's terminal helpers (`wandb.termlog`, `termwarn`, `termerror`), printing on stderr with a
`holter: ` prefix, as wandb prints with `wandb: `.

    holter.termlog("epoch 3 done")            # holter: epoch 3 done
    holter.termwarn("lr is high")             # holter: WARNING lr is high
    holter.termerror("no data", repeat=False) # holter: ERROR no data   (once per process)

`termlog` is silent under $WANDB_SILENT or $WANDB_QUIET (as wandb's is); warnings and errors
always print.
"""

from __future__ import annotations

import os
import sys

PREFIX = "holter: "
_printed: set[str] = set()


def _silent() -> bool:
    return any(
        os.environ.get(name, "").strip().lower() in ("1", "true", "yes") for name in ("WANDB_SILENT", "WANDB_QUIET")
    )


def _print(text: str, label: str, newline: bool, repeat: bool, prefix: bool) -> None:
    if not repeat:
        if text in _printed:
            return
        _printed.add(text)
    lines = str(text).split("\n")
    head = PREFIX if prefix else ""
    out = "\n".join(f"{head}{label}{line}" for line in lines)
    sys.stderr.write(out + ("\n" if newline else ""))
    sys.stderr.flush()


def termlog(string: str = "", newline: bool = True, repeat: bool = True, prefix: bool = True) -> None:
    """Print an informational line on stderr (wandb's `termlog`); `repeat=False` prints a text once."""
    if not _silent():
        _print(string, "", newline, repeat, prefix)


def termwarn(string: str, newline: bool = True, repeat: bool = True, prefix: bool = True) -> None:
    """Print a warning on stderr (wandb's `termwarn`)."""
    _print(string, "WARNING ", newline, repeat, prefix)


def termerror(string: str, newline: bool = True, repeat: bool = True, prefix: bool = True) -> None:
    """Print an error on stderr (wandb's `termerror`)."""
    _print(string, "ERROR ", newline, repeat, prefix)


def termsetup(*args: object, **kwargs: object) -> None:
    """Accepted for wandb's sake: Holter's terminal helpers need no set-up."""
