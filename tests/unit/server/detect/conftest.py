"""Fixtures for the detector tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from detect_curves import CURVES


@pytest.fixture
def curves_dir() -> Path:
    """The real labelled curves next to the repository; skip when absent."""
    if not (CURVES / "labels.json").exists():
        pytest.skip("real curves not found at ../shared/curves")
    return CURVES
