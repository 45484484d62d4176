"""llm.c's main.log, in the shape llmc/logger.h (karpathy/llm.c) writes it."""

from pathlib import Path

import pytest
from holter_server.importers import ImportFormatError, detect_format, read_series

# The three line shapes of llmc/logger.h: logger_log_train ("s:%d trl:%.4f lr:%.6f norm:%.2f"),
# logger_log_val ("s:%d tel:%.4f") and logger_log_eval ("s:%d eval:%.4f").
LOG = """s:0 tel:11.0100
s:0 trl:11.0098 lr:0.000000 norm:15.33
s:1 trl:10.9561 lr:0.000006 norm:14.91
s:2 trl:10.8042 lr:0.000012 norm:13.02
s:250 tel:6.2311
s:250 eval:0.2510
"""


def test_an_llmc_log_is_recognised_and_read_key_by_key(tmp_path: Path) -> None:
    path = tmp_path / "main.log"
    path.write_text(LOG)
    assert detect_format(path) == "llmc_log"
    series = read_series(path)
    assert list(series) == ["tel", "trl", "lr", "norm", "eval"]
    assert series["trl"].steps.tolist() == [0, 1, 2] and series["trl"].values.tolist() == [11.0098, 10.9561, 10.8042]
    assert series["tel"].steps.tolist() == [0, 250] and series["eval"].values.tolist() == [0.251]


def test_a_nan_loss_in_the_log_stays_nan(tmp_path: Path) -> None:
    path = tmp_path / "main.log"
    path.write_text("s:0 trl:2.5 lr:0.1 norm:1.0\ns:1 trl:nan lr:0.1 norm:inf\n")
    series = read_series(path)
    assert str(series["trl"].values[1]) == "nan" and series["norm"].values[1] == float("inf")


def test_a_text_file_that_is_not_a_log_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\n")
    with pytest.raises(ImportFormatError, match="unknown format"):
        detect_format(path)


def test_a_broken_line_names_its_line_number(tmp_path: Path) -> None:
    path = tmp_path / "main.log"
    path.write_text("s:0 trl:2.5\ngarbage here\n")
    with pytest.raises(ImportFormatError, match=r"main\.log:2: not an llm\.c log line"):
        read_series(path)
