#!/usr/bin/env python3
"""The two quick-start commands, with nothing but Python 3.11+ installed:

    python3 dev.py demo           # the service on embedded SQLite, with a demo run streaming in
    python3 dev.py test           # the whole test suite, spread over worker processes
    python3 dev.py test --fast    # the unit tests and the in-process tier only (no process, no browser)

Each creates ./.venv and installs the project into it when needed (again only when
pyproject.toml changed), so both are safe to run any number of times. Extra arguments go to
`holter demo` or to pytest. The tests run in HOLTER_TEST_WORKERS pytest-xdist workers (default:
two per core for the whole suite, which mostly waits on servers; one per core for `--fast`);
`-n 0` runs them in this process, as a debugger wants.
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
EXTRAS = {"demo": "all", "test": "test"}
# The fast tier: what runs in the test process itself (tests/conftest.py marks the rest `process`).
FAST = ["-m", "not process and not slow"]


def pytest_arguments(args: list[str]) -> list[str]:
    """pytest's arguments for `dev.py test ARGS`: `--fast` selects the fast tier, and the tests
    go to pytest-xdist workers unless ARGS choose their number (`-n N`) or turn xdist off."""
    if "--fast" in args:
        args = [*FAST, *(a for a in args if a != "--fast")]
        if not any((ROOT / a.split("::")[0]).exists() for a in args if not a.startswith("-")):
            args += ["tests/unit", "tests/integration"]  # ui/ is all browser: not even collected
    chosen = any(a == "-n" or a.startswith(("-n", "--numprocesses")) or a == "no:xdist" for a in args)
    if chosen:
        return args
    # The fast tier computes more than it waits: a worker per core. The whole suite mostly waits
    # on servers, receivers and detection passes: two per core. Every worker imports and collects
    # the whole selection (torch and lightning alone take seconds), so more only cost CPU.
    cores = os.cpu_count() or 2
    workers = os.environ.get("HOLTER_TEST_WORKERS") or str(cores if args[: len(FAST)] == FAST else 2 * cores)
    # whole files to a worker: a module's fixtures (servers, stores) are then made once, not per worker
    return ["-n", workers, "--dist", "loadfile", *args]


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
    if command == "demo":
        argv = [str(BIN / "holter"), "demo", *args]
    else:
        argv = [str(BIN / "python"), "-m", "pytest", *pytest_arguments(args)]
    os.chdir(ROOT)
    try:
        return subprocess.run(argv).returncode
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
