"""Text logs in each framework's own line shapes (from the print statements in its source), read
line by line as the job prints them; hostile lines read in one pass, overlong lines passed over,
a log cut and rewritten read again, a FIFO never opened."""

from __future__ import annotations

import json
import math
import os
import threading
import time
from pathlib import Path

import pytest
from holter_readers import Entry, FormatError, points_of
from holter_readers.files import is_text_log
from holter_readers.textlog import FORMATS, LineState, TextLogReader, quantity, rank_prefix, sniff_text_log


def read(path: Path, text: str, **options: str) -> tuple[TextLogReader, list[tuple[int, dict[str, float]]]]:
    path.write_text(text)
    reader = TextLogReader(path, **options)
    return reader, [(e.step, e.values) for e in reader.read(final=True)]


def test_nanogpt_iter_and_eval_lines(tmp_path: Path) -> None:
    # karpathy/nanoGPT train.py: print(f"step {iter_num}: train loss ..., val loss ...") and
    # print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu {running_mfu*100:.2f}%")
    text = (
        "step 0: train loss 10.9876, val loss 10.9912\n"
        "iter 0: loss 10.9800, time 1234.56ms, mfu -100.00%\n"
        "iter 10: loss 9.1234, time 250.00ms, mfu 31.25%\n"
    )
    reader, entries = read(tmp_path / "train.log", text)
    assert reader.format_name == "nanogpt"
    assert entries == [
        (0, {"train/loss": 10.9876, "val/loss": 10.9912}),
        (0, {"loss": 10.98, "step_time": pytest.approx(1.23456)}),
        (10, {"loss": 9.1234, "step_time": 0.25, "mfu": 31.25}),
    ]


def test_llmc_stdout_in_main_logs_names_and_steps(tmp_path: Path) -> None:
    # karpathy/llm.c train_gpt2.cu: printf0("val loss %f\n") and printf0("step %4d/%d | loss %7.6f
    # (%+.2fz)| norm %6.4f (%+.2fz)| lr %.2e | %.2f ms | %.1f%% bf16 MFU | %.0f tok/s\n", step + 1, ...)
    text = (
        "val loss 11.009628\n"
        "step    1/74 | loss 11.009628 (+0.00z)| norm 15.1360 (+0.00z)| lr 8.57e-07 | 302.61 ms | -1.0% bf16 MFU"
        " | 1687 tok/s\n"
        "step    2/74 | loss 10.951234 (-0.21z)| norm 14.0031 (-0.10z)| lr 1.71e-06 | 290.00 ms | 38.2% bf16 MFU"
        " | 1720 tok/s\n"
        "val loss 10.500000\n"
        "HellaSwag: 2/10 = 0.200000\n"
    )
    _reader, entries = read(tmp_path / "train.out", text, line_format="llmc")
    assert entries[0] == (
        0,
        {
            "trl": 11.009628,
            "norm": 15.136,
            "lr": 8.57e-07,
            "step_time": pytest.approx(0.30261),
            "mfu": -1.0,
            "tokens_per_s": 1687.0,
        },
    )
    assert entries[1][0] == 1 and entries[2] == (2, {"tel": 10.5}) and entries[3] == (2, {"eval": 0.2})


def test_llmc_main_log(tmp_path: Path) -> None:
    _, entries = read(tmp_path / "main.log", "s:0 tel:11.0100\ns:0 trl:11.0098 lr:0.000000 norm:15.33\n")
    assert entries == [(0, {"tel": 11.01}), (0, {"trl": 11.0098, "lr": 0.0, "norm": 15.33})]


def test_megatron_training_and_validation_lines_in_its_tensorboard_names(tmp_path: Path) -> None:
    # NVIDIA/Megatron-LM megatron/training/training.py training_log and evaluate_and_print_results
    text = (
        "[2025-01-01 10:00:00] training ...\n"
        " [2025-01-01 10:00:05.123456] iteration       10/   50000 | consumed samples:         1280 | elapsed time per "
        "iteration (ms): 1234.5 | throughput per GPU (TFLOP/s/GPU): 180.3 | learning rate: 1.500000E-04 | global batch "
        "size:   128 | lm loss: 7.123456E+00 | loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations:"
        "   0 | number of nan iterations:   0 |\n"
        " validation loss at iteration 10 on validation set | lm loss value: 6.900000E+00 | lm loss PPL: "
        "9.921471E+02 | \n"
    )
    reader, entries = read(tmp_path / "megatron.log", text)
    assert reader.format_name == "megatron"
    step, values = entries[0]
    assert step == 10 and values["lm loss"] == 7.123456 and values["iteration-time"] == pytest.approx(1.2345)
    assert values["learning-rate"] == 1.5e-4 and values["grad-norm"] == 1.234 and values["throughput"] == 180.3
    assert values["consumed_samples"] == 1280 and values["nan-iterations"] == 0 and values["batch-size"] == 128
    assert entries[1] == (10, {"lm loss validation": 6.9, "lm loss validation ppl": 992.1471})


def test_nemo_progress_printer_lines_at_the_global_step(tmp_path: Path) -> None:
    # NVIDIA/NeMo nemo/lightning/pytorch/callbacks/progress_printer.py format_string
    text = (
        "Training epoch 0, iteration 9/99 | lr: 1.499e-05 | global_step: 9 | reduced_train_loss: 10.76 | "
        "train_step_timing in s: 1.186 | consumed_samples: 352\n"
    )
    reader, entries = read(tmp_path / "nemo.log", text)
    assert reader.format_name == "nemo"
    assert entries == [
        (9, {"lr": 1.499e-05, "reduced_train_loss": 10.76, "train_step_timing in s": 1.186, "consumed_samples": 352})
    ]


def test_torchtitan_lines_with_their_colours_in_its_metric_names(tmp_path: Path) -> None:
    # pytorch/torchtitan torchtitan/components/metrics.py: logger.info(f"{color.red}step: {step:2}  ...")
    text = (
        "[rank0]:[titan] 2025-01-01 10:00:00,000 - root - INFO - \x1b[31mstep:  1  \x1b[32mloss: 12.2345  "
        "\x1b[33mgrad_norm:  1.2345  \x1b[36mmemory: 25.12GiB(31.45%)  \x1b[34mtps: 1,234  \x1b[36mtflops: 12.34  "
        "\x1b[35mmfu: 4.56%\x1b[39m\n"
        "[rank0]:[titan] INFO - \x1b[33mvalidate step:  1  \x1b[32mloss: 11.5000  \x1b[36mmemory: 20.00GiB(25.00%)  "
        "\x1b[34mtps: 2,000\x1b[39m\n"
    )
    reader, entries = read(tmp_path / "titan.log", text)
    assert reader.format_name == "torchtitan"
    assert entries[0] == (
        1,
        {
            "loss_metrics/global_avg_loss": 12.2345,
            "grad_norm": 1.2345,
            "memory/max_reserved(GiB)": 25.12,
            "memory/max_reserved(%)": 31.45,
            "throughput(tps)": 1234.0,
            "tflops": 12.34,
            "mfu(%)": 4.56,
        },
    )
    assert entries[1][1]["validation_metrics/loss"] == 11.5


def test_hf_trainer_dicts_at_the_progress_bars_step(tmp_path: Path) -> None:
    # transformers ProgressCallback.on_log: training_bar.write(str(logs)); numbers as strings since transformers 5
    text = (
        "  1%|          | 5/500 [00:01<01:40,  4.95it/s]\r"
        " 2%|▏         | 10/500 [00:02<01:38,  4.97it/s]\n"
        "{'loss': '2.346', 'grad_norm': '1.234', 'learning_rate': '4.9e-05', 'epoch': '0.02'}\n"
        "100%|██████████| 63/63 [00:02<00:00, 27.38it/s]\n"
        "{'eval_loss': 2.5, 'eval_runtime': 2.3, 'epoch': 0.02}\n"
        " 4%|▍         | 20/500 [00:04<01:38,  4.97it/s]\n"
        "{'loss': nan, 'grad_norm': nan, 'learning_rate': 4.8e-05, 'epoch': 0.04}\n"
        "{'train_runtime': 100.0, 'train_samples_per_second': 5.0, 'train_loss': 2.1, 'epoch': 1.0}\n"
    )
    reader, entries = read(tmp_path / "hf.log", text)
    assert reader.format_name == "hf"
    assert [(step, sorted(values)) for step, values in entries] == [
        (10, ["epoch", "grad_norm", "learning_rate", "loss"]),
        (10, ["epoch", "eval_loss", "eval_runtime"]),
        (20, ["epoch", "grad_norm", "learning_rate", "loss"]),
    ]
    assert math.isnan(entries[2][1]["loss"])


def test_hf_trainer_dicts_without_a_bar_are_counted(tmp_path: Path) -> None:
    _, entries = read(
        tmp_path / "hf.log",
        "{'loss': 2.0, 'epoch': 0.1}\n{'eval_loss': 2.1}\n{'loss': 1.9, 'epoch': 0.2}\n",
        line_format="hf",
    )
    assert [step for step, _ in entries] == [1, 1, 2]


def test_key_value_lines_with_suffixes_and_units(tmp_path: Path) -> None:
    text = "loading data...\nstep 1200 | loss 2.31 | norm 0.8 | tok/s 51k | lr 3e-4\nstep=1300 loss=2.29 mfu=41.5%\n"
    reader, entries = read(tmp_path / "run.log", text)
    assert reader.format_name == "keyvalue"
    assert entries == [
        (1200, {"loss": 2.31, "norm": 0.8, "tok/s": 51000.0, "lr": 3e-4}),
        (1300, {"loss": 2.29, "mfu": 41.5}),
    ]


def test_a_pattern_of_ones_own(tmp_path: Path) -> None:
    text = "ep 0 it 5 loss=2.5 acc=0.1\nnoise\nep 0 it 6 loss=NaN acc=0.2\n"
    _, entries = read(
        tmp_path / "run.log", text, pattern=r"it (?P<step>\d+) loss=(?P<train__loss>\S+) acc=(?P<acc>\S+)"
    )
    assert entries[0] == (5, {"train/loss": 2.5, "acc": 0.1}) and math.isnan(entries[1][1]["train/loss"])


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("(", "not a regular expression"),
        (r"(?P<loss>\S+)", "needs a named group 'step'"),
        (r"(?P<step>\d+)", "at least one metric"),
    ],
)
def test_a_bad_pattern_says_what_is_wrong(tmp_path: Path, pattern: str, problem: str) -> None:
    with pytest.raises(FormatError, match=problem):
        TextLogReader(tmp_path / "x.log", pattern=pattern)


def test_a_log_ending_in_a_traceback_is_a_crash_and_one_going_on_after_it_is_not(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    reader, _ = read(path, 'step 1 | loss 2.0\nTraceback (most recent call last):\n  File "t.py"\nValueError: x\n')
    assert reader.crashed()
    with path.open("a") as handle:
        handle.write("step 2 | loss 1.9\n")
    list(reader.read())
    assert not reader.crashed()
    with path.open("a") as handle:
        handle.write(
            "[rank0]: Traceback (most recent call last):\n[rank0]: torch.OutOfMemoryError: CUDA out of memory\n"
        )
    list(reader.read())
    assert reader.crashed()


def test_the_format_found_and_the_step_state_survive_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "train.out"
    path.write_text("step    1/9 | loss 2.0 (+0.0z)| norm 1.0 (+0.0z)| lr 1e-4 | 10.0 ms | 1.0% bf16 MFU | 100 tok/s\n")
    first = TextLogReader(path)
    list(first.read())
    with path.open("a") as handle:
        handle.write("val loss 1.5\n")
    second = TextLogReader(path)
    second.restore(first.position())
    assert [(e.step, e.values) for e in second.read()] == [(1, {"tel": 1.5})]


def test_quantities_as_logs_print_them() -> None:
    assert [quantity(t) for t in ("2.31", "1,234", "51k", "4.56%", "1.5E-04", "2M")] == [
        2.31,
        1234,
        51000,
        4.56,
        1.5e-4,
        2e6,
    ]
    assert math.isnan(quantity("NAN")) and quantity("-inf") == -math.inf and quantity("n/a") is None


def test_every_built_in_format_is_tried_in_auto_mode() -> None:
    assert list(FORMATS) == ["nemo", "megatron", "torchtitan", "nanogpt", "llmc", "hf", "keyvalue"]


# --- a distributed job's log: every rank's lines behind its launcher's prefix ----------------------


def ranked(reader: TextLogReader, final: bool = True) -> list[tuple[int, int, dict[str, float]]]:
    return [(e.rank, e.step, e.values) for e in reader.read(final=final)]


@pytest.mark.parametrize(
    "prefix",
    [
        "[rank3]:",  # torchrun's --log-line-prefix-template '[rank${rank}]:'
        "[default3]:",  # torchrun's --tee: the role and the local rank
        "[trainer3]:",  # a role of one's own (--role trainer)
        "[3]:",
        "[default3]: ",
    ],
)
def test_a_ranks_prefix_is_taken_off_and_its_rank_carried(tmp_path: Path, prefix: str) -> None:
    path = tmp_path / "torchrun.log"
    path.write_text(f"{prefix}step 7 | loss 2.5 | tok/s 51k\n")
    reader = TextLogReader(path)
    assert ranked(reader) == [(3, 7, {"loss": 2.5, "tok/s": 51000.0})]
    assert reader.format_name == "keyvalue"


def test_lines_without_a_prefix_are_rank_0s_and_brackets_that_are_no_prefix_stay(tmp_path: Path) -> None:
    assert rank_prefix("step 1 | loss 2.0") == (None, "step 1 | loss 2.0")
    assert rank_prefix("[rank0]:[W1205 ProcessGroup.cpp] warning") == (0, "[W1205 ProcessGroup.cpp] warning")
    assert rank_prefix("[default1]:[rank5]: Traceback (most recent") == (5, "Traceback (most recent")  # rankN wins
    for line in ("[2025-01-01 10:00:00] iteration 1/ 9 |", "[titan]: loss 1", "[rank]: x", "[1234567]: x", "[rank1] x"):
        assert rank_prefix(line) == (None, line)
    path = tmp_path / "train.log"
    path.write_text("step 1 | loss 2.0\n[rank1]:step 1 | loss 2.1\n")
    assert ranked(TextLogReader(path)) == [(0, 1, {"loss": 2.0}), (1, 1, {"loss": 2.1})]


def test_interleaved_ranks_each_keep_their_own_step(tmp_path: Path) -> None:
    # llm.c's `val loss` takes the step of the line before it: the line before it of its own rank
    step = "step {:4d}/9 | loss {} (+0.0z)| norm 1.0 (+0.0z)| lr 1e-4 | 10.0 ms | 1.0% bf16 MFU | 100 tok/s"
    text = (
        f"[rank0]:{step.format(5, 2.0)}\n"
        f"[rank1]:{step.format(3, 2.1)}\n"
        "[rank1]:val loss 1.7\n"
        "[rank0]:val loss 1.6\n"
        f"[rank2]:{step.format(1, 2.2)}\n"
        f"[rank1]:{step.format(4, 'nan')}\n"
    )
    path = tmp_path / "train.out"
    path.write_text(text)
    reader = TextLogReader(path)
    entries = [(rank, s, sorted(values)) for rank, s, values in ranked(reader)]
    assert reader.format_name == "llmc"
    assert [(rank, s) for rank, s, _ in entries] == [(0, 4), (1, 2), (1, 3), (0, 5), (2, 0), (1, 3)]
    assert entries[2][2] == ["tel"] and entries[3][2] == ["tel"]


def test_a_prefix_with_no_metrics_after_it_is_passed_over(tmp_path: Path) -> None:
    path = tmp_path / "torchrun.log"
    path.write_text(
        "[default0]:\n[default1]:[rank1]:[W1205 ProcessGroupGloo.cpp:727] Warning: unused\n[0]:\n"
        "[rank2]:step 3 | loss 1.5\n"
    )
    reader = TextLogReader(path)
    assert ranked(reader) == [(2, 3, {"loss": 1.5})] and reader.metric_lines == 1 and not reader.crashed()


@pytest.mark.parametrize(
    ("line", "found"),
    [
        ("[default0]:step 1 | loss 2.5", "keyvalue"),
        ("[rank0]:iter 10: loss 9.1234, time 250.00ms, mfu 31.25%", "nanogpt"),
        ("[default1]:[rank1]:s:10 trl:2.5 lr:1e-4", "llmc"),
        ("[rank3]:{'loss': 2.3, 'grad_norm': 1.2, 'epoch': 0.1}", "hf"),
    ],
)
def test_auto_finds_the_format_behind_the_prefix(tmp_path: Path, line: str, found: str) -> None:
    path = tmp_path / "torchrun.log"
    path.write_text("[default0]:loading the data\n" + line + "\n")
    reader = TextLogReader(path)
    assert len(ranked(reader)) == 1 and reader.format_name == found
    assert sniff_text_log(path) is FORMATS[found] and is_text_log(path)


def test_a_ranks_traceback_behind_its_prefix_is_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "torchrun.log"
    path.write_text(
        "[default0]:step 5 | loss 2.0\n[default1]:step 5 | loss 2.1\n"
        "[default1]:[rank1]: Traceback (most recent call last):\n"
        '[default1]:[rank1]:   File "train.py", line 7, in <module>\n'
        "[default1]:[rank1]: RuntimeError: boom\n"
    )
    reader = TextLogReader(path)
    assert len(ranked(reader)) == 2 and reader.crashed()
    with path.open("a") as handle:
        handle.write("[rank1]:Killed\n")
    list(reader.read(final=True))
    assert reader.crashed()


def test_each_ranks_state_survives_a_restart(tmp_path: Path) -> None:
    path = tmp_path / "train.out"
    step = "step {:4d}/9 | loss 2.0 (+0.0z)| norm 1.0 (+0.0z)| lr 1e-4 | 10.0 ms | 1.0% bf16 MFU | 100 tok/s"
    path.write_text(f"[rank0]:{step.format(5)}\n[rank2]:{step.format(2)}\n")
    first = TextLogReader(path)
    list(first.read())
    with path.open("a") as handle:
        handle.write("[rank2]:val loss 1.5\nval loss 1.4\n")
    second = TextLogReader(path)
    second.restore(json.loads(json.dumps(first.position())))  # as the state file keeps it
    assert ranked(second) == [(2, 2, {"tel": 1.5}), (0, 5, {"tel": 1.4})]


def test_the_prefix_is_read_in_one_pass_however_long_the_line() -> None:
    for line in ("[" + "1" * 200_000, "[" + "a1" * 100_000 + "]", "[rank1]:" * 100_000, "[" * 200_000):
        started = time.perf_counter()
        rank_prefix(line)
        assert time.perf_counter() - started < 0.5  # a backtracking pattern would take minutes


def test_points_of_keeps_another_ranks_values_only_under_the_name_given_them() -> None:
    entries = [Entry(1, None, {"loss": 2.0}), Entry(1, None, {"loss": 2.1}, rank=3)]
    assert [p.metric for p in points_of(entries)] == ["loss"]
    named = points_of(entries, rank_series=lambda name, rank: f"r{rank}/{name}")
    assert [(p.metric, p.value) for p in named] == [("loss", 2.0), ("r3/loss", 2.1)]


# Lines that made a backtracking pattern scan the rest of the line from every character: each
# took from 0.3 s to hours at 32k characters (issue 47: a 32k-character key=value line, > 20 s).
HOSTILE_LINES = {
    "one long word": "step 1 " + "a" * 32_000,
    "a name and a value of two long words": "step 1 | a" + "1" * 16_000 + " " + "1" * 16_000 + "!",
    "a value of digits that is not one": "step 1 a=" + "1" * 32_000 + "x",
    "the step word and spaces": "step" + " " * 32_000 + "x",
    "a torchtitan line of one word": "step: 1  loss: 1 " + "a" * 32_000,
    "a torchtitan line of colons": "step: 1  loss: 1 " + ":" * 32_000,
    "an unclosed HF dict": "{'a': '" + "1" * 32_000,
    "words glued by separators": "step 1 " + "a=" * 16_000,
}


@pytest.mark.parametrize("line", HOSTILE_LINES.values(), ids=HOSTILE_LINES.keys())
def test_every_format_reads_a_32k_character_line_in_one_pass(line: str) -> None:
    for line_format in FORMATS.values():
        started = time.perf_counter()
        line_format.parse(line, LineState())
        # a bound on the complexity, not a speed figure: one pass takes milliseconds, O(n^2) seconds
        assert time.perf_counter() - started < 1.0, line_format.name


def test_key_value_pairs_read_in_one_pass_are_those_the_pattern_found(tmp_path: Path) -> None:
    _, entries = read(
        tmp_path / "log",
        "step=3 loss=2.5 lr=3e-4\n"
        "step 4 a=1-b=2 x/y: 7 _private=1 12ab=5 inf=3 tok/s=51k\n"
        "step: 5 | loss 1.5 | time 12ms\n",
    )
    assert entries == [
        (3, {"loss": 2.5, "lr": 3e-4}),
        (4, {"a": 1.0, "b": 2.0, "x/y": 7.0, "private": 1.0, "ab": 5.0, "inf": 3.0, "tok/s": 51_000.0}),
        (5, {"loss": 1.5, "time": 12e6}),  # `12m` then `s`, as it always was read
    ]


def test_a_step_of_thousands_of_digits_is_no_step(tmp_path: Path) -> None:
    """int() refuses more than 4,300 digits: such a line used to end the follower."""
    _, entries = read(
        tmp_path / "log", f"step {'1' * 5000} | loss 2.0\niter {'9' * 5000}: loss 1.0, time 1ms, mfu 1%\n"
    )
    assert entries == []


def test_a_line_longer_than_64_kib_is_passed_over_with_a_note(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text(
        "step 1 | loss 2.0\n"
        + "step 2 | loss 1.0 "
        + "x" * (70 << 10)
        + "\nstep 3 | loss 0.5\n"
        + "y" * (80 << 10)
        + "\n"
    )
    reader = TextLogReader(path, strict=True)  # an import too: a long line is no error
    assert [e.step for e in reader.read(final=True)] == [1, 3]
    assert reader.warnings == [f"{path}: a line longer than 64 KiB is not a metrics line; passed over"]


def test_a_log_cut_and_written_again_is_read_again_and_said_so(tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    path.write_text("".join(f"step {s} | loss 3.0\n" for s in range(1000, 1060)))
    reader = TextLogReader(path, strict=False)
    assert len(list(reader.read())) == 60
    with path.open("w") as handle:  # `python train.py > train.log` again: same inode, longer by now
        handle.write("".join(f"step {s} | loss 2.0\n" for s in range(300)))
    assert [e.step for e in reader.read()] == list(range(300))
    assert reader.warnings == [f"{path} was truncated or replaced; reading it again from the start"]


def test_a_fifo_named_as_a_log_is_never_opened(tmp_path: Path) -> None:
    fifo = tmp_path / "train.log"
    os.mkfifo(fifo)
    reader = TextLogReader(fifo, strict=False)
    thread = threading.Thread(target=lambda: list(reader.read(final=True)), daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():  # stuck in open(): let it go before failing
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        thread.join(10)
        pytest.fail("reading a FIFO blocked in open()")
    assert reader.warnings == [f"{fifo} is not a regular file (a FIFO, a device or a socket); it is not read"]
    assert sniff_text_log(fifo) is None and not is_text_log(fifo)
