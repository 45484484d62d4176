#!/usr/bin/env python3
"""The two quick-start commands, with nothing but Python 3.11+ installed:

    python3 dev.py demo           # the service on embedded SQLite, with a demo run streaming in
    python3 dev.py test           # the whole test suite, spread over worker processes
    python3 dev.py test --fast    # the unit tests and the in-process tier only (no process, no browser)
    python3 dev.py lint           # ruff (lint and format), mypy and the import contracts

Each creates ./.venv and installs the project into it when needed (again only when
pyproject.toml changed), so all are safe to run any number of times. Extra arguments go to
`holter demo` or to pytest; `lint` takes none. The tests run in HOLTER_TEST_WORKERS pytest-xdist
workers (default: two per core and one more for the whole suite, which mostly waits on servers;
one per core and one more for `--fast`); `-n 0` runs them in this process, as a debugger wants.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
EXTRAS = {"demo": "all", "test": "test", "lint": "test"}
# What `dev.py lint` runs, in order; each must pass (configured in pyproject.toml).
LINTERS = (
    ("ruff", "check", "."),
    ("ruff", "format", "--check", "."),
    ("mypy",),
    ("lint-imports",),
)
# The fast tier: what runs in the test process itself (tests/conftest.py marks the rest `process`).
FAST = "not process and not slow"
NO_TESTS = 5  # pytest's exit status when the selection is empty


def pytest_runs(args: list[str]) -> list[list[str]]:
    """pytest's arguments, one list per run, for `dev.py test ARGS`. `--fast` selects the fast
    tier. The tests go to pytest-xdist workers, then those marked `serial` (a Postgres restart,
    a load test) run alone, unless ARGS choose the number of workers (`-n N`) or turn xdist off."""
    fast = "--fast" in args
    args = [a for a in args if a != "--fast"]
    if fast and not any((ROOT / a.split("::")[0]).exists() for a in args if not a.startswith("-")):
        args += ["tests/unit", "tests/integration"]  # ui/ is all browser: not even collected
    if any(a == "-n" or a.startswith(("-n", "--numprocesses")) or a == "no:xdist" for a in args):
        return [[*(["-m", FAST] if fast else []), *args]]
    asked, args = _marker_expression(args)
    selection = " and ".join(f"({e})" for e in (asked, FAST if fast else None) if e)
    # Both tiers wait (on detection passes, database round trips, servers, receivers and browsers)
    # more than a worker per core leaves idle: one more than the cores for the fast tier, and one
    # more than two per core for the whole suite (measured on 2 cores: the fast tier 4:05 with 2
    # workers, 2:55 with 3; the suite 13:31 with 4, 11:17 with 5). Every worker imports and
    # collects the whole selection (torch alone takes seconds), so more than that only cost CPU.
    cores = os.cpu_count() or 2
    workers = os.environ.get("HOLTER_TEST_WORKERS") or str(cores + 1 if fast else 2 * cores + 1)
    # whole files to a worker: a module's fixtures (servers, stores) are then made once, not per worker
    # and the longest first (tests/conftest.py orders them), not xdist's files with most tests first
    marker = f"{selection} and not serial" if selection else "not serial"
    parallel = ["-n", workers, "--dist", "loadfile", "--no-loadscope-reorder", "-m", marker]
    runs = [[*parallel, *args]]
    serial = None if fast else _serial_run_paths(args)
    if serial is not None:
        runs.append(["-n", "0", "-m", f"{selection} and serial" if selection else "serial", *serial])
    return runs


def _serial_run_paths(args: list[str]) -> list[str] | None:
    """ARGS for the run of the `serial` tests, None when the paths among them (all the tests when
    none) take in no module marked `serial`. Folders give way to the modules in them that hold
    serial tests, so that the serial run collects those few, not the whole tree again."""
    given = [a for a in args if not a.startswith("-") and (ROOT / a.split("::")[0]).exists()]
    paths = [ROOT / a.split("::")[0] for a in given] or [ROOT / "tests"]
    modules = [
        module
        for module in sorted((ROOT / "tests").rglob("test_*.py"))
        if "mark.serial" in module.read_text() and any(p == module or p in module.parents for p in paths)
    ]
    if not modules:
        return None
    if any(not (ROOT / a).is_dir() for a in given):
        return args  # files or tests named: run them as named
    return [*(a for a in args if a not in given), *(str(m.relative_to(ROOT)) for m in modules)]


def _marker_expression(args: list[str]) -> tuple[str | None, list[str]]:
    """The `-m EXPR` among pytest's arguments (the last one, as pytest reads it), and the rest."""
    expression, rest, index = None, [], 0
    while index < len(args):
        arg = args[index]
        if arg == "-m" and index + 1 < len(args):
            expression, index = args[index + 1], index + 2
            continue
        if arg.startswith("-m") and len(arg) > 2 and not arg.startswith("--"):
            expression = arg[2:]
        else:
            rest.append(arg)
        index += 1
    return expression, rest


def test_environment() -> dict[str, str]:
    """The environment of the test runs: this one, with bytecode caches on and the project's
    modules compiled, and one OpenMP thread per process. The suite starts some hundreds of Python
    processes (servers, their workers, the CLI, trainers), each importing the service; under
    PYTHONDONTWRITEBYTECODE (set on some machines) each would compile it again from source, and
    pytest would rewrite every test module again in each worker instead of reading its cache."""
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    # The trainings the tests run are tiny, and several run at once beside servers and browsers:
    # torch's thread per core would only wait on one another (unless the caller chose a number).
    environment.setdefault("OMP_NUM_THREADS", "1")
    packages = [
        str(ROOT / folder)
        for folder in ("client", "server", "dashboard", "charts", "readers", "migrations")
        if (ROOT / folder).is_dir()
    ]
    subprocess.run([str(BIN / "python"), "-m", "compileall", "-q", "-j", "0", *packages], check=False, env=environment)
    return environment


def ensure_installed(extra: str) -> None:
    """Create the virtual environment and install `.[extra]` unless it is already current."""
    if sys.version_info < (3, 11):
        sys.exit(f"Holter needs Python 3.11 or newer; this is {sys.version.split()[0]}")
    if not (BIN / "python").exists():
        print(f"creating {VENV} ...", flush=True)
        venv.create(VENV, with_pip=True)
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    stamp = VENV / f".installed-{extra}"
    if stamp.exists() and stamp.read_text() == digest:
        return
    print(f"installing holter[{extra}] into {VENV} (first run only) ...", flush=True)
    subprocess.run([str(BIN / "python"), "-m", "pip", "install", "--quiet", "--upgrade", "pip"], check=True)
    subprocess.run([str(BIN / "python"), "-m", "pip", "install", "--quiet", "-e", f".[{extra}]"], check=True, cwd=ROOT)
    stamp.write_text(digest)


def main() -> int:
    if len(sys.argv) < 2 or sys.argv[1] not in EXTRAS:
        print(__doc__)
        return 2
    command, args = sys.argv[1], sys.argv[2:]
    ensure_installed(EXTRAS[command])
    if command == "lint":
        return lint()
    os.chdir(ROOT)
    try:
        if command == "demo":
            return subprocess.run([str(BIN / "holter"), "demo", *args], check=False).returncode
        environment = test_environment()
        statuses = [
            subprocess.run([str(BIN / "python"), "-m", "pytest", *run], check=False, env=environment).returncode
            for run in pytest_runs(args)
        ]
    except KeyboardInterrupt:
        return 130
    # an empty selection in one run is fine when another ran tests
    failed = [status for status in statuses if status not in (0, NO_TESTS)]
    return failed[0] if failed else (NO_TESTS if all(s == NO_TESTS for s in statuses) else 0)


def lint() -> int:
    """Run every linter (even after one fails, so one run shows all that is wrong); 1 if any failed."""
    os.chdir(ROOT)
    failed = []
    for tool, *args in LINTERS:
        print(f"$ {tool} {' '.join(args)}", flush=True)
        if subprocess.run([str(BIN / tool), *args], check=False).returncode != 0:
            failed.append(tool if not args else f"{tool} {args[0]}")
    if failed:
        print(f"lint failed: {', '.join(failed)}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
