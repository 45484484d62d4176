#!/usr/bin/env python3
"""The two quick-start commands, with nothing but Python 3.11+ installed:

    python3 dev.py demo    # the service on embedded SQLite, with a demo run streaming in
    python3 dev.py test    # the test suite
    python3 dev.py lint    # ruff (lint and format), mypy and the import contracts

Each creates ./.venv and installs the project into it when needed (again only when
pyproject.toml changed), so both are safe to run any number of times. Extra arguments go to
`holter demo` or to pytest; `lint` takes none.
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
    if command == "demo":
        argv = [str(BIN / "holter"), "demo", *args]
    else:
        argv = [str(BIN / "python"), "-m", "pytest", *args]
    os.chdir(ROOT)
    try:
        return subprocess.run(argv, check=False).returncode
    except KeyboardInterrupt:
        return 130


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
