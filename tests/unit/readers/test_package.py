"""holter_readers is a leaf both the client and the service import: standard library only, no
import of the client, the service or the dashboard, and nothing newer than the client's Python."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import holter_readers
import pytest

ROOT = Path(holter_readers.__file__).parent
HOLTER_PACKAGES = {"holter", "holter_server", "holter_dashboard", "holter_charts"}


def imported_packages(root: Path) -> dict[str, set[str]]:
    """Top-level packages each module under `root` imports (lazily or not), by file name."""
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


@pytest.mark.skipif(sys.version_info < (3, 10), reason="sys.stdlib_module_names is Python 3.10's; the 3.11 run checks")
def test_the_readers_import_only_the_standard_library_and_themselves() -> None:
    allowed = set(sys.stdlib_module_names) | {"holter_readers"}
    foreign = {name: sorted(p - allowed) for name, p in imported_packages(ROOT).items() if p - allowed}
    assert foreign == {}


def test_the_readers_import_no_other_part_of_holter() -> None:
    reaching = {name: sorted(p & HOLTER_PACKAGES) for name, p in imported_packages(ROOT).items() if p & HOLTER_PACKAGES}
    assert reaching == {}


def test_a_module_importing_the_server_would_be_found(tmp_path: Path) -> None:
    (tmp_path / "sneaky.py").write_text("import numpy\nfrom holter_server.importers import open_source\n")
    assert imported_packages(tmp_path) == {"sneaky.py": {"numpy", "holter_server"}}


def test_the_readers_need_nothing_newer_than_python_3_9() -> None:
    pytest.importorskip("vermin")
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, vermin; sys.exit(vermin.main())",
            "--no-tips",
            "--violations",
            "--eval-annotations",
            "--backport",
            "typing",
            "-t=3.9-",
            str(ROOT),
        ],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
