"""The access table names every route of the app, so no route can slip past the gate."""

from __future__ import annotations

from pathlib import Path

from holter_server.api.access import API_PREFIX, ROUTES, match
from holter_server.app import create_app
from holter_server.settings import Settings


def app_routes(tmp_path: Path) -> set[tuple[str, str]]:
    schema = create_app(Settings(database_url=f"sqlite:///{tmp_path / 'h.db'}")).openapi()
    return {
        (method.upper(), path.removeprefix(API_PREFIX))
        for path, ops in schema["paths"].items()
        if path.startswith(API_PREFIX)
        for method in ops
    }


def test_every_api_route_is_in_the_access_table_and_nothing_else(tmp_path: Path) -> None:
    table = {(route.method, route.path.replace(":path", "")) for route in ROUTES}
    assert app_routes(tmp_path) == table


def test_a_request_path_finds_its_own_route_not_a_shorter_one() -> None:
    found = match("GET", "/api/v1/runs/r1/metrics/act/layer.0/points")
    assert found is not None and found[0].path == "/runs/{run_id}/metrics/{metric:path}/points"
    assert found[1] == {"run_id": "r1", "metric": "act/layer.0"}
    assert match("GET", "/api/v1/runs/r1/nothing") is None


def test_every_route_that_names_a_reference_run_binds_it() -> None:
    found = match("GET", "/api/v1/runs/r1/compare")
    assert found is not None and found[0].query_ids["reference"] == "run"
