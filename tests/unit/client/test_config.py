"""`run.config`: a live mapping of plain JSON values (see holter/config.py)."""

from __future__ import annotations

import copy
import enum
import math
from pathlib import Path

import pytest
from holter.config import Config, plain_config


def test_setting_a_key_an_attribute_or_update_sends_the_whole_config() -> None:
    sent: list[dict] = []
    config = Config({"lr": 0.1}, sent.append)
    config["layers"] = 2
    config.warmup = 10
    config.update({"seed": 1}, batch_size=32)
    assert sent[-1] == {"lr": 0.1, "layers": 2, "warmup": 10, "seed": 1, "batch_size": 32} == config
    assert len(sent) == 3 and config.warmup == 10 and config["seed"] == 1


def test_an_absent_key_read_as_an_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no key 'nope'"):
        _ = Config({}, print).nope


def test_a_config_copies_as_a_mapping() -> None:
    # copy probes attributes before __init__ has run: they must not recurse into the values
    assert dict(copy.copy(Config({"lr": 0.1}, print))) == {"lr": 0.1}


class Mode(enum.Enum):
    FAST = "fast"


def test_values_become_plain_json() -> None:
    np = pytest.importorskip("numpy")
    plain = plain_config(
        {
            "a": np.float32(0.5),
            "b": np.arange(3),
            "c": Mode.FAST,
            "d": Path("/x"),
            "e": {3, 1},
            "f": (1, 2),
            "g": math.nan,
            "h": -math.inf,
            "i": object,
            7: "int key",
        }
    )
    assert plain == {
        "a": 0.5,
        "b": [0, 1, 2],
        "c": "fast",
        "d": "/x",
        "e": [1, 3],
        "f": [1, 2],
        "g": "NaN",
        "h": "-Infinity",
        "i": "<class 'object'>",
        "7": "int key",
    }


def test_a_config_that_holds_itself_ends_in_text() -> None:
    looped: dict = {}
    looped["self"] = looped
    plain = plain_config(looped)
    depth = 0
    while isinstance(plain, dict):
        plain, depth = plain["self"], depth + 1
    assert isinstance(plain, str) and depth <= 33


def test_nones_are_left_out_and_named_in_one_note(capsys: pytest.CaptureFixture[str]) -> None:
    assert plain_config({"a": None, "b": {"c": None, "d": 1}, "e": [None, 2]}) == {"b": {"d": 1}, "e": [None, 2]}
    assert capsys.readouterr().err == "holter: config keys left out because they are None: a, b.c\n"


def test_a_config_must_be_a_mapping() -> None:
    with pytest.raises(TypeError, match="not list"):
        plain_config([1, 2])
