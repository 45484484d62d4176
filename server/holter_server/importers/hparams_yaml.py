"""Lightning's `hparams.yaml`: the hyperparameters its TensorBoard and CSV loggers write beside
the metrics (`lightning_logs/version_0/hparams.yaml`)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

from holter_server.importers.series import ImportFormatError

HPARAMS_FILE = "hparams.yaml"
# Lightning's hparams.yaml is a few KiB; anything larger is not one.
MAX_BYTES = 1 << 20
# The most values the hyperparameters may hold once YAML's aliases are expanded (as the run's
# config is sent and stored: JSON has no aliases). Nine nested lists of nine aliases (the
# "billion laughs") are a few hundred bytes of YAML and 387 million values expanded.
MAX_VALUES = 100_000


YAML_EXTRA_HINT = "reading it needs PyYAML: pip install 'holter[yaml]'"


@functools.cache
def _hparams_loader() -> type[Any]:
    """SafeLoader that reads the Python objects Lightning may dump (`!!python/object:...`, an
    argparse Namespace, a tuple) as plain data instead of refusing the whole file; nothing is
    ever constructed from them. (Built on first use: PyYAML is the `yaml` extra.)"""
    import yaml

    class HparamsLoader(yaml.SafeLoader):
        pass

    def plain(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
        if isinstance(node, yaml.MappingNode):
            return loader.construct_mapping(node, deep=True)
        if isinstance(node, yaml.SequenceNode):
            return loader.construct_sequence(node, deep=True)
        return loader.construct_scalar(node)  # type: ignore[arg-type]

    HparamsLoader.add_multi_constructor("tag:yaml.org,2002:python/", plain)
    return HparamsLoader


def lightning_hparams(path: Path) -> dict[str, Any]:
    """The hyperparameters in the `hparams.yaml` beside `path` (in the folder, or beside the
    file); an empty dict when there is none."""
    candidate = (path if path.is_dir() else path.parent) / HPARAMS_FILE
    if not candidate.is_file():
        return {}
    if candidate.stat().st_size > MAX_BYTES:
        raise ImportFormatError(f"{candidate}: larger than {MAX_BYTES >> 20} MiB; not a Lightning hparams.yaml")
    try:
        import yaml
    except ImportError:
        raise ImportFormatError(f"{candidate}: Lightning's hyperparameters; {YAML_EXTRA_HINT}") from None
    try:
        # the aliases stay shared objects while loading (cheap); they would be copied out only
        # when the config is written as JSON, so their expanded size is counted first
        loaded = yaml.load(candidate.read_text(encoding="utf-8"), Loader=_hparams_loader())
    except (yaml.YAMLError, UnicodeDecodeError, RecursionError) as exc:
        raise ImportFormatError(f"{candidate}: not YAML ({type(exc).__name__}: {str(exc)[:200]})") from None
    if not isinstance(loaded, dict):
        return {}
    size = expanded_size(loaded)
    if size > MAX_VALUES:
        raise ImportFormatError(
            f"{candidate}: its aliases expand to more than {MAX_VALUES:,} values; not read as hyperparameters"
        )
    return dict(loaded)


def expanded_size(value: Any, *, limit: int = MAX_VALUES) -> int:
    """How many values `value` holds with every shared (aliased) part counted each time it
    appears, in time linear in the distinct objects; above `limit` (or a structure that holds
    itself) it stops and returns limit + 1."""
    sizes: dict[int, int] = {}
    pending: set[int] = set()

    def size(item: Any, depth: int) -> int:
        if not isinstance(item, (dict, list, tuple)):
            return 1
        key = id(item)
        if key in sizes:
            return sizes[key]
        if key in pending or depth > 100:
            return limit + 1  # an alias of its own ancestor: endless once expanded
        pending.add(key)
        children = item.values() if isinstance(item, dict) else item
        total = 1
        for child in children:
            total += size(child, depth + 1)
            if total > limit:
                break
        pending.discard(key)
        sizes[key] = total
        return total

    return min(size(value, 0), limit + 1)
