"""holter_charts is a leaf: the dashboard's pages and the service's report both draw with it, so
it may import neither of them (a chart builder reaching into the server would tie the dashboard
to the server's code again, and one reaching into the dashboard would make the server need Dash)."""

from __future__ import annotations

import ast
from pathlib import Path

import holter_charts


def imported_packages(root: Path) -> dict[str, set[str]]:
    """Top-level packages each module under `root` imports, by file name."""
    found: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module.split(".")[0])
        found[path.name] = names
    return found


def test_the_chart_builder_imports_neither_the_server_nor_the_dashboard() -> None:
    reaching = {
        name: sorted(packages & {"holter_server", "holter_dashboard", "holter"})
        for name, packages in imported_packages(Path(holter_charts.__file__).parent).items()
    }
    assert {name: found for name, found in reaching.items() if found} == {}


def test_a_chart_module_importing_the_server_would_be_found(tmp_path: Path) -> None:
    (tmp_path / "sneaky.py").write_text(
        "from holter_server.vocabulary import severities\nimport holter_dashboard.api\n"
    )
    assert imported_packages(tmp_path) == {"sneaky.py": {"holter_server", "holter_dashboard"}}
