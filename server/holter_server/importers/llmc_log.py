"""llm.c's training log (`train_gpt2cu -o DIR` writes `DIR/main.log`).

karpathy/llm.c llmc/logger.h writes one line per event: `s:<step> trl:<train loss> lr:<lr>
norm:<grad norm>`, `s:<step> tel:<val loss>` and `s:<step> eval:<HellaSwag accuracy>`; each
`key:value` after the step becomes a point of metric `key` (the names stay llm.c's: the
vocabulary reads `trl` as a loss, `tel` as an eval loss).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path

from holter_server.importers.series import FileProgress, ImportFormatError, Point, parse_number

LINE = re.compile(r"^s:(\d+)((?:\s+[A-Za-z_]\w*:\S+)+)\s*$")
FIELD = re.compile(r"([A-Za-z_]\w*):(\S+)")
SUFFIXES = (".log", ".txt")


def looks_like_llmc_log(head: str) -> bool:
    """Whether the first line of a file is an llm.c log line."""
    first = next((line for line in head.splitlines() if line.strip()), "")
    return bool(LINE.match(first.strip()))


def iter_llmc_log(path: Path, *, progress: FileProgress | None = None) -> Iterator[Point]:
    """Yield a point for every `key:value` of every line (llm.c logs no wall time)."""
    with path.open("rb") as raw:
        if progress is not None:
            progress.current = raw.tell
        for index, line in enumerate(io.TextIOWrapper(raw)):
            line = line.strip()
            if not line:
                continue
            match = LINE.match(line)
            if match is None:
                raise ImportFormatError(
                    f"{path}:{index + 1}: not an llm.c log line (expected 's:<step> key:value ...')"
                )
            step = int(match[1])
            for name, raw_value in FIELD.findall(match[2]):
                value = parse_number(raw_value)
                if value is None:
                    raise ImportFormatError(f"{path}:{index + 1}: {name}:{raw_value} is not a number")
                yield Point(name, step, value, None)
