"""llm.c's training log (`train_gpt2cu -o DIR` writes `DIR/main.log`).

karpathy/llm.c llmc/logger.h writes one line per event: `s:<step> trl:<train loss> lr:<lr>
norm:<grad norm>`, `s:<step> tel:<val loss>` and `s:<step> eval:<HellaSwag accuracy>`; each
`key:value` after the step becomes a point of metric `key` (the names stay llm.c's: the
vocabulary reads `trl` as a loss, `tel` as an eval loss). Every line must be one of these: a
main.log holds nothing else, so any other line is a damaged file. (llm.c's stdout, with other
lines between its metrics lines, is a text log: `holter_readers.textlog`.)
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from holter_readers import Entry, Reader, parse_number
from holter_readers.tail import FileTail
from holter_readers.textlog import llmc_main_log_line

from holter_server.importers.series import ImportFormatError

SUFFIXES = (".log", ".txt")


def looks_like_llmc_log(head: str) -> bool:
    """Whether the first line of a file is an llm.c log line."""
    first = next((line for line in head.splitlines() if line.strip()), "")
    return llmc_main_log_line(first.strip()) is not None


class LlmcLogReader(Reader):
    """An llm.c main.log, every line a `s:<step> key:value ...` line (llm.c logs no wall time)."""

    format = "llmc_log"

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.tail = FileTail(path)
        self.line = 0

    def position(self) -> dict[str, Any]:
        return {**self.tail.position(), "line": self.line}

    def restore(self, position: dict[str, Any]) -> None:
        self.tail.restore(position)
        self.line = int(position.get("line") or 0)

    def progress(self) -> float | None:
        size = self.tail.size()
        return min(1.0, self.tail.offset / size) if size else None

    def read(self, *, final: bool = False) -> Iterator[Entry]:
        for raw in self.tail.lines(final=final):
            self.line += 1
            line = (raw or b"").decode("utf-8", "replace").strip()
            if raw is not None and not line:
                continue
            parsed = llmc_main_log_line(line)
            if parsed is None:
                raise ImportFormatError(
                    f"{self.path}:{self.line}: not an llm.c log line (expected 's:<step> key:value ...')"
                )
            step, fields = parsed
            values = {}
            for name, text in fields:
                value = parse_number(text)
                if value is None:
                    raise ImportFormatError(f"{self.path}:{self.line}: {name}:{text} is not a number")
                values[name] = value
            yield Entry(step, None, values)
