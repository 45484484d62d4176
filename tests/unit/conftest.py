"""The vocabulary the charts' and the dashboard's pure functions are given, as the service serves it.

Imported inside the fixture: the client's tests run from this folder too, on Python 3.9 with the
client alone installed (.ci/python39), where neither the service nor the charts are there."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from holter_charts.vocabulary import Vocabulary


@pytest.fixture(scope="session")
def vocab() -> Vocabulary:
    from holter_charts.vocabulary import Vocabulary
    from holter_server import vocabulary

    return Vocabulary.from_api(json.loads(json.dumps(vocabulary.as_dict())))
