"""Hugging Face's `trainer_state.json`: the `log_history` list of logged dicts, and the model's
`config.json` beside it.

The Trainer rewrites the whole file at every save, in each `checkpoint-N/` folder of its output
folder. A folder holding checkpoints is read through its newest checkpoint's file, so following
an output folder goes on from checkpoint to checkpoint; the history is cumulative, so the entries
already read are skipped by count.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from holter_readers.entries import Entry, Reader
from holter_readers.paths import NotRegularFile, inside, open_regular
from holter_readers.points import FormatError
from holter_readers.tabular import entry_of_record, load_json

STATE_FILE = "trainer_state.json"
MODEL_CONFIG_FILE = "config.json"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")
# Files larger than this are not a trainer state (a 1M-step run logging every step is ~300 MB).
MAX_STATE_BYTES = 1 << 30
MAX_CONFIG_BYTES = 16 << 20


def state_file(path: Path, *, passed_over: dict[Path, str] | None = None) -> Path | None:
    """The trainer_state.json to read for `path`: the file itself, the one in the folder, or the
    newest checkpoint's (`checkpoint-N/`, highest N); None when there is none (yet). In a folder,
    only a regular file that resolves inside the folder is read (a checkpoint linked from
    elsewhere is not: it goes into `passed_over`, with why, when given)."""
    if path.is_file():
        return path
    if not path.is_dir():
        return None
    checkpoints = sorted(
        ((int(m[1]), p) for p in path.iterdir() if (m := _CHECKPOINT.match(p.name)) and (p / STATE_FILE).is_file()),
        reverse=True,
    )
    own = path / STATE_FILE
    for candidate in [folder / STATE_FILE for _, folder in checkpoints] + ([own] if own.is_file() else []):
        if inside(candidate, path):
            return candidate
        if passed_over is not None:
            passed_over[candidate] = f"resolves outside {path}"
    return None


def is_trainer_state_folder(path: Path) -> bool:
    """Whether `path` is a folder holding a trainer_state.json or checkpoints with one."""
    return path.is_dir() and state_file(path) is not None


def model_config(state: Path) -> dict[str, Any]:
    """The model's config (`config.json`, written by `save_pretrained` beside trainer_state.json),
    as W&B's Trainer integration keeps it: its keys at the top of the run's config. {} when there
    is none; a config.json that is not a JSON object is an error."""
    candidate = state.parent / MODEL_CONFIG_FILE
    if not candidate.is_file():
        return {}
    if candidate.stat().st_size > MAX_CONFIG_BYTES:
        raise FormatError(f"{candidate}: larger than {MAX_CONFIG_BYTES >> 20} MiB; not a model config")
    loaded = load_json(_read_regular(candidate), str(candidate))
    if not isinstance(loaded, dict):
        raise FormatError(f"{candidate}: not a JSON object (a model config is one)")
    return loaded


class TrainerStateReader(Reader):
    """Every entry of `log_history` (train and eval alike), at its `step`; the Trainer records no
    wall time per entry, so these entries carry none. `path`: the file, or a folder (an output
    folder with `checkpoint-N/` subfolders)."""

    format = "trainer_state"

    def __init__(self, path: Path, *, step_column: str | None = None, strict: bool = True) -> None:
        super().__init__(strict=strict)
        self.path = Path(path)
        self.step_column = step_column
        self.entries = 0  # how many entries of the history were read
        self._seen: tuple[str, int, int] | None = None  # (file, size, mtime) last read
        self._done = 0.0
        self._passed_over: set[Path] = set()  # said once each

    def position(self) -> dict[str, Any]:
        return {"entries": self.entries}

    def restore(self, position: dict[str, Any]) -> None:
        self.entries = int(position.get("entries") or 0)
        self._seen = None

    def progress(self) -> float | None:
        return self._done

    def written(self) -> object:
        state = state_file(self.path)
        try:
            stat = state.stat() if state is not None else None
        except OSError:
            return None
        return (str(state), stat.st_size, stat.st_mtime_ns) if stat else None

    def read(self, *, final: bool = False) -> Iterator[Entry]:
        passed_over: dict[Path, str] = {}
        state = state_file(self.path, passed_over=passed_over)
        for path, why in passed_over.items():
            if path not in self._passed_over:
                self._passed_over.add(path)
                self.note(f"{path} {why}; it is not read")
        if state is None:
            if final:
                raise FormatError(f"{self.path}: no {STATE_FILE} here")
            return
        try:
            stat = state.stat()
        except OSError:
            return
        seen = (str(state), stat.st_size, stat.st_mtime_ns)
        if seen == self._seen:
            return
        if stat.st_size > MAX_STATE_BYTES:
            raise FormatError(f"{state}: larger than {MAX_STATE_BYTES >> 30} GiB; not a trainer state")
        try:
            loaded = load_json(_read_regular(state), str(state))
        except FormatError:
            if final or self.strict:
                raise
            return  # caught half-written (the Trainer writes in place): read again next time
        self._seen = seen
        history = loaded.get("log_history") if isinstance(loaded, dict) else None
        if not isinstance(history, list):
            raise FormatError(f"{state}: no 'log_history' list (is this a trainer_state.json?)")
        self.config.update(model_config(state))
        if len(history) < self.entries:
            self.entries = len(history)  # resumed from an earlier checkpoint: go on from there
        start = self.entries
        for index in range(start, len(history)):
            record = history[index]
            self.entries = index + 1
            self._done = self.entries / len(history)
            if not isinstance(record, dict):
                continue
            where = f"{state}: log_history[{index}]"
            try:
                entry = entry_of_record(record, index, where, step_key=self.step_column)
            except FormatError as exc:
                self.problem(str(exc))
                continue
            if entry is not None:
                yield Entry(entry.step, entry.wall_time, self.admit(entry.values, str(state)))
        self._done = 1.0


def _read_regular(path: Path) -> bytes:
    """The bytes of a file checked to be regular, read without ever blocking on a FIFO swapped in
    since (`holter_readers.paths`): one is a FormatError."""
    try:
        with open_regular(path) as handle:
            return handle.read()
    except NotRegularFile as exc:
        raise FormatError(str(exc)) from None
