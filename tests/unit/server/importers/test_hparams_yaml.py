"""Lightning's hparams.yaml beside a metrics file: read as the config, and refused cheaply when its
aliases would expand without bound."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from holter_server.importers import ImportFormatError
from holter_server.importers.hparams_yaml import expanded_size, lightning_hparams

LAUGHS = (
    "a: &a ["
    + ",".join(['"lol"'] * 9)
    + "]\n"
    + "".join(f"{b}: &{b} [" + ",".join([f"*{a}"] * 9) + "]\n" for a, b in zip("abcdefgh", "bcdefghi"))
)


def test_an_alias_bomb_is_refused_at_once(tmp_path: Path) -> None:
    (tmp_path / "hparams.yaml").write_text(LAUGHS)  # 9**9 strings once expanded, from ~600 bytes
    started = time.perf_counter()
    with pytest.raises(ImportFormatError, match="aliases expand to more than 100,000 values"):
        lightning_hparams(tmp_path)
    assert time.perf_counter() - started < 2


def test_a_structure_holding_itself_is_refused(tmp_path: Path) -> None:
    (tmp_path / "hparams.yaml").write_text("a: &a [1, *a]\n")
    with pytest.raises(ImportFormatError, match="aliases expand"):
        lightning_hparams(tmp_path)


def test_ordinary_aliases_are_kept(tmp_path: Path) -> None:
    (tmp_path / "hparams.yaml").write_text("opt: &o {lr: 0.001, betas: [0.9, 0.95]}\nswa: *o\nlayers: 12\n")
    assert lightning_hparams(tmp_path) == {
        "opt": {"lr": 0.001, "betas": [0.9, 0.95]},
        "swa": {"lr": 0.001, "betas": [0.9, 0.95]},
        "layers": 12,
    }


def test_an_oversized_file_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "hparams.yaml").write_text("x: " + "1" * (2 << 20) + "\n")
    with pytest.raises(ImportFormatError, match="larger than 1 MiB"):
        lightning_hparams(tmp_path)


def test_shared_parts_count_each_time_they_appear() -> None:
    shared = [1, 2, 3]
    assert expanded_size({"a": shared, "b": shared}) == 1 + 2 * 4


def test_without_pyyaml_the_file_is_refused_naming_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "hparams.yaml").write_text("lr: 0.1\n")
    monkeypatch.setitem(sys.modules, "yaml", None)  # as in an install without the `yaml` extra
    with pytest.raises(ImportFormatError, match=r"pip install 'holter\[yaml\]'"):
        lightning_hparams(tmp_path)
