"""`TrainingArguments(report_to="holter")`: Holter as a reporting integration of the Hugging Face
`Trainer`, added from outside transformers.

transformers picks a `report_to` name's callback from one dict,
`transformers.integrations.integration_utils.INTEGRATION_TO_CALLBACK`, read each time a `Trainer`
is built (`get_reporting_integration_callbacks`); a name it does not hold is refused ("holter is
not supported, only azure_ml, ... are supported"). So "holter" is added to that dict: at once
when transformers' module is already imported, else by a finder on `sys.meta_path` that adds it
right after the module is first imported, and takes itself off. `import holter` calls
`install()`; nothing here imports transformers.

The entry is `ReportToHolter`, a class standing in for `HolterCallback` until a `Trainer` builds
it: the Trainer makes an instance of each callback class (`CallbackHandler.add_callback`), and
`ReportToHolter()` returns a `HolterCallback()` (whose module imports transformers, by then fully
loaded). Its run takes its project and name as `HolterCallback` does: $HOLTER_PROJECT or
$WANDB_PROJECT, else `TrainingArguments.project`, and `args.run_name`.
"""

from __future__ import annotations

import sys
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

NAME = "holter"
MODULE = "transformers.integrations.integration_utils"


class ReportToHolter:
    """What `report_to="holter"` names: building it builds a `HolterCallback`."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        from holter.integrations.transformers import HolterCallback

        return HolterCallback(*args, **kwargs)


def register(module: ModuleType, callback: Any = ReportToHolter) -> None:
    """Add "holter" to transformers' `report_to` names (`HolterCallback` itself takes the place of
    the stand-in; a callback someone else registered under the name is kept)."""
    table = getattr(module, "INTEGRATION_TO_CALLBACK", None)
    if isinstance(table, dict) and table.get(NAME) in (None, ReportToHolter):
        table[NAME] = callback


class _RegisterAfterImport(MetaPathFinder):
    """Finds nothing itself: for transformers' integration module it asks the other finders and
    has the module's loader register Holter once the module has run."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if fullname != MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                break
        else:
            return None
        loader = spec.loader
        run_module = getattr(loader, "exec_module", None)
        if run_module is None:
            return spec

        def exec_module(module: ModuleType) -> None:
            run_module(module)
            register(module)
            _uninstall()

        loader.exec_module = exec_module  # type: ignore[union-attr]  # this module's own loader object
        return spec


_finder = _RegisterAfterImport()


def install() -> None:
    """Make `report_to="holter"` known to transformers, now or when it is imported."""
    module = sys.modules.get(MODULE)
    if module is not None:
        register(module)
    elif _finder not in sys.meta_path:
        sys.meta_path.insert(0, _finder)


def _uninstall() -> None:
    if _finder in sys.meta_path:
        sys.meta_path.remove(_finder)
