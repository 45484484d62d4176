"""Lightning's `hparams.yaml`: the hyperparameters its TensorBoard and CSV loggers write beside
the metrics (`lightning_logs/version_0/hparams.yaml`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from holter_server.importers.series import ImportFormatError

HPARAMS_FILE = "hparams.yaml"


class _HparamsLoader(yaml.SafeLoader):
    """SafeLoader that reads the Python objects Lightning may dump (`!!python/object:...`, an
    argparse Namespace, a tuple) as plain data instead of refusing the whole file; nothing is
    ever constructed from them."""


def _plain(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> Any:
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)  # type: ignore[arg-type]


_HparamsLoader.add_multi_constructor("tag:yaml.org,2002:python/", _plain)


def lightning_hparams(path: Path) -> dict[str, Any]:
    """The hyperparameters in the `hparams.yaml` beside `path` (in the folder, or beside the
    file); an empty dict when there is none."""
    candidate = (path if path.is_dir() else path.parent) / HPARAMS_FILE
    if not candidate.is_file():
        return {}
    try:
        loaded = yaml.load(candidate.read_text(encoding="utf-8"), Loader=_HparamsLoader)
    except yaml.YAMLError as exc:
        raise ImportFormatError(f"{candidate}: not YAML ({exc})") from None
    return dict(loaded) if isinstance(loaded, dict) else {}
