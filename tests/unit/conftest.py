"""The vocabulary the dashboard's pure functions are given, as the service serves it."""

from __future__ import annotations

import json

import pytest

from holter_charts.vocabulary import Vocabulary
from holter_server import vocabulary


@pytest.fixture(scope="session")
def vocab() -> Vocabulary:
    return Vocabulary.from_api(json.loads(json.dumps(vocabulary.as_dict())))
