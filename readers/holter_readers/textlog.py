"""Text logs: the lines a training script prints, read as metrics.

Each built-in format is written from its framework's own print statements, and names its metrics
as that framework does where it also logs them elsewhere (its TensorBoard or W&B names):

* `nanogpt`: karpathy/nanoGPT train.py, `iter 100: loss 2.3456, time 123.45ms, mfu 12.34%` and
  `step 100: train loss 2.3456, val loss 2.4567` (its wandb names `train/loss`, `val/loss`);
* `llmc`: karpathy/llm.c, its `main.log` (`s:100 trl:2.34 lr:... norm:...`, `s:100 tel:2.5`)
  and its stdout (`step  101/5000 | loss 2.34 (+0.1z)| norm 0.8 (+0.0z)| lr 6e-04 | 302.61 ms |
  38.2% bf16 MFU | 1687 tok/s`, `val loss 2.5`, `HellaSwag: 2/10 = 0.2`), in main.log's names;
* `megatron`: Megatron-LM training.py's `training_log` (` [date] iteration  100/ 500 | consumed
  samples: ... | elapsed time per iteration (ms): ... | learning rate: ... | lm loss: ... | grad
  norm: ... |`) and `evaluate_and_print_results` (` validation loss at iteration 100 | lm loss
  value: ... | lm loss PPL: ... |`), in the names Megatron gives them in TensorBoard;
* `nemo`: NeMo 2's ProgressPrinter (`Training epoch 0, iteration 9/99 | lr: 1.5e-05 |
  global_step: 9 | reduced_train_loss: 10.76 | train_step_timing in s: 1.19`);
* `torchtitan`: torchtitan's metrics logger (`step:  1  loss: 12.2345  grad_norm: 1.2  memory:
  25.12GiB(31.45%)  tps: 1,234  tflops: 12.34  mfu: 4.56%`, colours and all; `validate step:`),
  in torchtitan's own metric names;
* `hf`: the dicts the Hugging Face Trainer prints (`{'loss': 2.3456, 'grad_norm': 1.2, ...}`,
  numbers or, since transformers 5, strings), at the step of the progress bar beside them (or
  counted, when no bar is printed);
* `keyvalue`: any `step 1200 | loss 2.31 | norm 0.8 | tok/s 51k` or `step=1200 loss=2.31` line;
* a line pattern of one's own (`pattern`): a regular expression whose named group `step` is the
  step and whose other named groups are metrics (`__` in a group name stands for `/`).

`auto` takes the first format that reads a line of the file, and keeps to it. A log that ends in
a Python traceback (after its last metrics line) is a crashed run's (`crashed()`).

A distributed job's log holds every rank's lines, each behind its launcher's prefix
(`rank_prefix`): `[rank3]:` (torchrun's TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE='[rank${rank}]:',
and torch's own `[rank3]: Traceback ...`), `[default3]:` (torchrun's `--tee`: the role, then the
LOCAL rank, which is the global rank on a single node only) or `[3]:`. The prefix is taken off,
the rest read in the log's format, and the entry carries the rank; each rank keeps its own state
(its last step, its progress bar), as its lines come interleaved with its peers'. A line without
a prefix is rank 0's, the run's own.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from holter_readers.entries import Entry, Reader
from holter_readers.paths import NotRegularFile, open_regular
from holter_readers.points import FormatError, parse_number
from holter_readers.tail import FileTail

# Lines that say the job died: Python's traceback header (torchrun prefixes it with `[rank0]:`),
# a fatal signal, or torchrun reporting a failed child.
_CRASH = re.compile(
    r"Traceback \(most recent call last\)|Segmentation fault|core dumped|ChildFailedError|^Killed$|"
    r"Fatal Python error|terminate called after throwing"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
# A launcher's prefix: a bracketed word ending in the rank, then a colon. `[\w.-]` holds no `]`, so
# the match is one pass over at most 66 characters, however the line goes on.
_RANK_PREFIX = re.compile(r"\[([\w.\-]{1,64})\]:", re.ASCII)
_RANK_DIGITS = 6  # ranks up to 999,999: a longer number is something else in brackets
# A number as logs print it. Each string of digits, commas and dots is split between the parts of
# the pattern in one way only (the fraction needs its dot): a pattern that could split "1111" in
# n ways backtracks through all of them before giving up on a line, in O(n^2) or worse.
_NUMBER = (
    r"[-+]?(?:\d[\d,]*(?:\.\d*)?(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?"
    r"|nan|NaN|NAN|inf|Inf|INF|infinity|Infinity)"
)
# A step as printed: 18 digits at most (a step is under 2^63), so a line of digits never makes an
# int Python refuses to parse (over 4,300 digits) or the service refuses to store.
_STEP = r"\d{1,18}"
# The longest text log line read: metrics lines are far shorter (Megatron's, the longest, ~1 KB;
# the HF Trainer's dict of a few hundred metrics ~16 KB); a longer one is passed over unread.
MAX_LINE = 64 << 10
_SUFFIXES = {"k": 1e3, "K": 1e3, "m": 1e6, "M": 1e6, "g": 1e9, "G": 1e9, "b": 1e9, "B": 1e9, "t": 1e12, "T": 1e12}


def quantity(text: str) -> float | None:
    """A number as logs print it: '2.31', '1,234', '51k', '4.56%', '1.5e-04', 'nan', 'NAN'."""
    text = text.strip().rstrip("%").replace(",", "")
    if not text:
        return None
    value = parse_number(text)
    if value is None and text[-1] in _SUFFIXES:
        number = parse_number(text[:-1])
        value = number * _SUFFIXES[text[-1]] if number is not None else None
    return value


def rank_prefix(line: str) -> tuple[int | None, str]:
    """The rank a launcher's prefix gives `line` (None: no prefix) and the line without it.

    `[rank3]:`, `[default3]:` (torchrun's `--tee`, role and local rank) and `[3]:` are read; where
    two come one after the other (`[default1]:[rank1]: Traceback ...`: torchrun's tee of torch's
    own prefix) both are taken off, and the global `rankN` is the one believed.
    """
    rank: int | None = None
    for _ in range(2):
        match = _RANK_PREFIX.match(line)
        if match is None:
            break
        word = match[1]
        name = word.rstrip("0123456789")
        digits = word[len(name) :]
        if not digits or len(digits) > _RANK_DIGITS:
            break
        if rank is None or name == "rank":
            rank = int(digits)
        line = line[match.end() :].lstrip()
    return rank, line


@dataclass
class LineState:
    """What a format remembers between lines: the last step seen (for lines that print none,
    like llm.c's `val loss`), and the HF Trainer's progress bar and log count."""

    step: int | None = None
    bar: int | None = None
    bar_total: int | None = None
    count: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.step, "bar": self.bar, "bar_total": self.bar_total, "count": self.count}


@dataclass(frozen=True)
class LineFormat:
    """A text log format: `parse(line, state)` gives the line's entry, or None when the line
    holds no metrics."""

    name: str
    description: str
    parse: Callable[[str, LineState], Entry | None] = field(repr=False)


def _nanogpt(line: str, state: LineState) -> Entry | None:
    match = _NANOGPT_ITER.search(line)
    if match:
        step = int(match["step"])
        values = {"loss": quantity(match["loss"]), "step_time": _ms(match["time"])}
        mfu = quantity(match["mfu"])
        if mfu is not None and mfu >= 0:  # nanoGPT prints -100.00% until it has measured a few steps
            values["mfu"] = mfu
        return _entry(state, step, values)
    match = _NANOGPT_EVAL.search(line)
    if match:
        return _entry(
            state, int(match["step"]), {"train/loss": quantity(match["train"]), "val/loss": quantity(match["val"])}
        )
    return None


_NANOGPT_ITER = re.compile(
    rf"^iter (?P<step>{_STEP}): loss (?P<loss>{_NUMBER}), time (?P<time>{_NUMBER})ms, mfu (?P<mfu>{_NUMBER})%"
)
_NANOGPT_EVAL = re.compile(rf"^step (?P<step>{_STEP}): train loss (?P<train>{_NUMBER}), val loss (?P<val>{_NUMBER})")


def llmc_main_log_line(line: str) -> tuple[int, list[tuple[str, str]]] | None:
    """(step, [(key, value text), ...]) of an llm.c main.log line (`s:100 trl:2.34 lr:6e-4`), or None."""
    match = _LLMC_MAIN_LOG.match(line)
    if match is None:
        return None
    return int(match["step"]), _LLMC_FIELD.findall(match["fields"])


def _llmc(line: str, state: LineState) -> Entry | None:
    main_log = llmc_main_log_line(line)
    if main_log is not None:
        step, fields = main_log
        return _entry(state, step, {name: quantity(value) for name, value in fields})
    match = _LLMC_STEP.match(line)
    if match:
        # stdout counts steps from 1 (`step + 1`), main.log from 0: main.log's numbering is kept
        step = int(match["step"]) - 1
        values: dict[str, float | None] = {}
        for segment in match["rest"].split("|"):
            part = segment.strip().strip("()").strip()
            for pattern, name, scale in _LLMC_PARTS:
                found = pattern.match(part)
                if found:
                    number = quantity(found[1])
                    values[name] = number * scale if number is not None else None
                    break
        entry = _entry(state, step, values)
        state.step = step + 1  # a `val loss` printed next is measured before step + 1 runs
        return entry
    if state.step is None:
        return None
    match = _LLMC_VAL.match(line)
    if match:
        return _entry(state, state.step, {"tel": quantity(match[1])}, keep_step=True)
    match = _LLMC_HELLASWAG.match(line)
    if match:
        return _entry(state, state.step, {"eval": quantity(match[1])}, keep_step=True)
    return None


_LLMC_MAIN_LOG = re.compile(rf"^s:(?P<step>{_STEP})(?P<fields>(?:\s+[A-Za-z_]\w*:\S+)+)\s*$")
_LLMC_FIELD = re.compile(r"([A-Za-z_]\w*):(\S+)")
_LLMC_STEP = re.compile(rf"^step\s+(?P<step>{_STEP})/\d+\s*\|(?P<rest>.*)$")
_LLMC_PARTS = (
    (re.compile(rf"^(?:train )?loss ({_NUMBER})"), "trl", 1.0),
    (re.compile(rf"^norm ({_NUMBER})"), "norm", 1.0),
    (re.compile(rf"^lr ({_NUMBER})"), "lr", 1.0),
    (re.compile(rf"^({_NUMBER}) ms"), "step_time", 1e-3),
    (re.compile(rf"^({_NUMBER})% \w+ MFU"), "mfu", 1.0),
    (re.compile(rf"^({_NUMBER}) tok/s"), "tokens_per_s", 1.0),
)
_LLMC_VAL = re.compile(rf"^val loss ({_NUMBER})\s*$")
_LLMC_HELLASWAG = re.compile(rf"^HellaSwag: \d+/\d+ = ({_NUMBER})\s*$")


def _megatron(line: str, state: LineState) -> Entry | None:
    match = _MEGATRON_ITERATION.search(line)
    if match:
        values: dict[str, float | None] = {}
        for part in match["rest"].split("|"):
            name, _, text = part.rpartition(":")
            name = name.strip()
            if not name:
                continue
            value = quantity(text)
            renamed = _MEGATRON_NAMES.get(name)
            if renamed is not None:
                name, scale = renamed
                value = value * scale if value is not None else None
            values[name] = value
        return _entry(state, int(match["step"]), values)
    match = _MEGATRON_VALIDATION.search(line)
    if match:
        split = "validation" if match["split"] in (None, "validation") else "test"
        values = {}
        for part in match["rest"].split("|"):
            name, _, text = part.rpartition(":")
            name = name.strip()
            if name.endswith(" value"):
                values[f"{name[: -len(' value')]} {split}"] = quantity(text)
            elif name.endswith(" PPL"):
                values[f"{name[: -len(' PPL')]} {split} ppl"] = quantity(text)
        return _entry(state, int(match["step"]), values)
    return None


_MEGATRON_ITERATION = re.compile(rf"\biteration\s+(?P<step>{_STEP})\s*/\s*\d+\s*\|(?P<rest>.*)$")
_MEGATRON_VALIDATION = re.compile(
    rf"\bvalidation(?:-\d+)? loss at iteration (?P<step>{_STEP})"
    r"(?: on (?P<split>validation|test) set)?\s*\|(?P<rest>.*)$"
)
# Megatron's printed names → the names it gives the same values in TensorBoard and W&B
# (training.py training_log), with the factor to its TensorBoard unit.
_MEGATRON_NAMES: dict[str, tuple[str, float]] = {
    "consumed samples": ("consumed_samples", 1.0),
    "skipped samples": ("skipped-train-samples", 1.0),
    "elapsed time per iteration (ms)": ("iteration-time", 1e-3),
    "throughput per GPU (TFLOP/s/GPU)": ("throughput", 1.0),
    "energy per GPU (J/iter/GPU)": ("iter-energy/gpu", 1.0),
    "power per GPU (W/GPU)": ("power/gpu", 1.0),
    "learning rate": ("learning-rate", 1.0),
    "global batch size": ("batch-size", 1.0),
    "loss scale": ("loss-scale", 1.0),
    "grad norm": ("grad-norm", 1.0),
    "num zeros": ("num-zeros", 1.0),
    "params norm": ("params-norm", 1.0),
    "number of skipped iterations": ("skipped-iterations", 1.0),
    "number of nan iterations": ("nan-iterations", 1.0),
}


def _nemo(line: str, state: LineState) -> Entry | None:
    match = _NEMO.search(line)
    if not match:
        return None
    values: dict[str, float | None] = {}
    for part in match["rest"].split("|"):
        name, _, text = part.rpartition(":")
        name = name.strip()
        if name:
            values[name] = quantity(text)
    global_step = values.pop("global_step", None)
    step = int(global_step) if global_step is not None and math.isfinite(global_step) else int(match["step"])
    return _entry(state, step, values)


_NEMO = re.compile(rf"\bTraining epoch \d+, iteration (?P<step>{_STEP})/\d+\s*(?P<rest>\|.*)$")


class _NamePattern:
    """`name <separator> value` pairs as `_named_values` reads them, from the parts of the pattern
    `({name_start}{name_char}*){gap}[{separators}]{value}` (`value` holds one group, the value);
    `other_name_char`: the name characters that are not a `name_start`."""

    def __init__(
        self, *, name_start: str, name_char: str, other_name_char: str, gap: str, separators: str, value: str
    ) -> None:
        self.separators = separators
        self.separator = re.compile(f"[{separators}]")
        self.name_start = re.compile(name_start)
        self.value = re.compile(value)
        # the text before a separator, read backwards: the gap, then the name's characters
        self.name_backwards = re.compile(f"{gap}({name_char}*)")
        # a whole run of name characters (never one from inside a run) before a separator, its
        # name from its first `name_start`: each run is tried once, and split in one way only
        self.runs = re.compile(
            f"(?<!{name_char})(?:{other_name_char})*({name_start}{name_char}*){gap}{self.separator.pattern}{value}"
        )


def _torchtitan(line: str, state: LineState) -> Entry | None:
    line = _ANSI.sub("", line)
    match = _TORCHTITAN.search(line)
    if not match:
        return None
    validation = match["validate"] is not None
    values: dict[str, float | None] = {}
    for name, text in _named_values(match["rest"], _TORCHTITAN_FIELD):
        if name == "memory":
            memory = _TORCHTITAN_MEMORY.match(text)
            if memory:
                values["memory/max_reserved(GiB)"] = quantity(memory[1])
                values["memory/max_reserved(%)"] = quantity(memory[2])
            continue
        values[_TORCHTITAN_NAMES.get(name, name)] = None if text == "N/A" else quantity(text)
    if validation:
        values = {
            f"validation_metrics/{'loss' if name == 'loss_metrics/global_avg_loss' else name}": v
            for name, v in values.items()
        }
    return _entry(state, int(match["step"]), values)


_TORCHTITAN = re.compile(rf"\b(?P<validate>validate )?step:\s*(?P<step>{_STEP})\s+(?P<rest>loss:.*)$")
# `name: value`, the name `[A-Za-z_]\w*` right before the colon (see `_named_values`)
_TORCHTITAN_FIELD = _NamePattern(
    name_start="[A-Za-z_]", name_char=r"\w", other_name_char=r"[^\W_A-Za-z]", gap="", separators=":", value=r"\s*(\S+)"
)
_TORCHTITAN_MEMORY = re.compile(rf"({_NUMBER})GiB\(({_NUMBER})%\)")
# torchtitan's printed names → the names of the same values in its metrics dict
# (torchtitan/components/metrics.py MetricsProcessor.log).
_TORCHTITAN_NAMES = {
    "loss": "loss_metrics/global_avg_loss",
    "tps": "throughput(tps)",
    "wps": "wps",
    "mfu": "mfu(%)",
}


def _hf(line: str, state: LineState) -> Entry | None:
    for count, total in _HF_BAR.findall(line):
        # the first bar is the training bar (its total is max_steps); evaluation bars count batches
        if state.bar_total is None:
            state.bar_total = int(total)
        if int(total) == state.bar_total:
            state.bar = int(count)
    start = line.find("{'")
    if start < 0 or not line.rstrip().endswith("}"):
        return None
    pairs = _HF_PAIR.findall(line[start:])
    if not pairs:
        return None
    values = {name: quantity(text) for name, _, text in pairs}
    if "train_runtime" in values:
        return None  # the closing summary: averages over the run, not points of it
    evaluation = any(name.startswith(("eval_", "test_")) for name in values)
    if state.bar is not None:
        step = state.bar
    elif evaluation:
        step = state.count
    else:
        state.count += 1
        step = state.count
    return _entry(state, step, values)


_HF_BAR = re.compile(rf"\|\s*({_STEP})/({_STEP})\s*\[")
_HF_PAIR = re.compile(rf"'([^']+)':\s*('?)({_NUMBER})\2")


def _keyvalue(line: str, state: LineState) -> Entry | None:
    match = _KV_STEP.search(line)
    if not match:
        return None
    step = int(match["step"])
    rest = line[: match.start()] + " | " + line[match.end() :]
    values: dict[str, float | None] = {}
    explicit = _named_values(rest, _KV_EXPLICIT)
    if explicit:
        for name, text in explicit:
            values[name] = quantity(text)
    else:
        for part in _KV_SPLIT.split(rest):
            found = _KV_PAIR.match(part.strip())
            if found:
                values[found["name"]] = quantity(found["value"])
    values = {name: value for name, value in values.items() if name.lower() not in _KV_STEP_WORDS}
    if not values:
        return None
    return _entry(state, step, values)


_KV_STEP_WORDS = ("step", "iter", "iteration", "it", "global_step")
# The step's word, then its number; `\s*(?:[:=]\s*)?` (not `\s*[:=]?\s*`, two runs of spaces that
# could share a long gap in n ways) so that a line of `step` and spaces is read in one pass.
_KV_STEP = re.compile(
    rf"(?:^|(?<=[\s|,\[(]))(?:step|iter|iteration|global_step)\s*(?:[:=]\s*)?(?P<step>{_STEP})(?:\s*/\s*\d+)?"
    r"(?=$|[\s|,:\])])",
    re.IGNORECASE,
)
_VALUE = rf"{_NUMBER}[kKmMgGbBtT%]?"
# `name=value` or `name: value`, the name `[A-Za-z][\w/.\-]*` (see `_named_values`)
_KV_EXPLICIT = _NamePattern(
    name_start="[A-Za-z]",
    name_char=r"[\w/.\-]",
    other_name_char=r"[^\WA-Za-z]|[/.\-]",
    gap=r"\s*",
    separators=":=",
    value=rf"\s*({_VALUE})(?![\w.])",
)
_KV_SPLIT = re.compile(r"\s*(?:\||,|\t|\s{2,})\s*")
# `name value [unit]`: a unit right after the value starts with a letter (`12ms`), so that the
# value's digits and the unit's are never split between them in every possible way.
_KV_PAIR = re.compile(
    rf"^(?P<name>[A-Za-z][\w/.\-]*(?: [A-Za-z][\w/.\-]*)?)\s+(?P<value>{_VALUE})(?:\s+\w+|[^\W\d]\w*)?$"
)


def _named_values(text: str, pattern: _NamePattern) -> list[tuple[str, str]]:
    """Each (name, value text) of `text`, found the way `re.findall` finds them with a pattern of
    a name, a separator and a value, but in one pass over the line.

    Such a `findall` pattern starts again at every character of a long word and scans the rest of
    the word each time: O(n^2) on a line of one word (a 32k-character line took 20 s). Here a
    pattern of whole runs of name characters finds the pairs of most lines at once; when it does
    not account for every separator (a pair glued to the value before it, `a=1-b=2`, whose name
    starts inside a run; a separator without a name or a value), each separator is looked at
    once: the name is the run of name characters just before it (read backwards, never past the
    previous separator or pair, which `findall` would not reach back to either), from the run's
    first character that may start a name, and the value is matched after it.
    """
    separators = sum(map(text.count, pattern.separators))
    if not separators:
        return []
    pairs: list[tuple[str, str]] = pattern.runs.findall(text)
    if len(pairs) == separators:
        return pairs
    pairs = []
    floor = position = 0
    while True:
        found = pattern.separator.search(text, position)
        if found is None:
            return pairs
        at = found.start()
        run = pattern.name_backwards.match(text[floor:at][::-1])
        name = run[1][::-1] if run else ""
        start = pattern.name_start.search(name)
        value = pattern.value.match(text, found.end()) if start is not None else None
        if start is None or value is None:
            floor = position = at + 1  # what follows may hold the next name
            continue
        pairs.append((name[start.start() :], value[1]))
        floor = position = value.end()


def _ms(text: str) -> float | None:
    value = quantity(text)
    return value / 1000.0 if value is not None else None


def _entry(state: LineState, step: int, values: dict[str, float | None], *, keep_step: bool = False) -> Entry | None:
    if not -(2**63) <= step < 2**63:
        return None  # not a step (NeMo's `global_step: 1e30`): no point could be stored at it
    kept = {name: value for name, value in values.items() if value is not None}
    if not keep_step:
        state.step = step
    return Entry(step, None, kept) if kept else None


FORMATS: dict[str, LineFormat] = {
    f.name: f
    for f in (
        # NeMo before Megatron: NeMo's lines hold an `iteration N/M |` too
        LineFormat("nemo", "NeMo 2's ProgressPrinter lines", _nemo),
        LineFormat("megatron", "Megatron-LM's training and validation lines", _megatron),
        LineFormat("torchtitan", "torchtitan's step and validation lines", _torchtitan),
        LineFormat("nanogpt", "nanoGPT's iter and eval lines", _nanogpt),
        LineFormat("llmc", "llm.c's main.log and its stdout", _llmc),
        LineFormat("hf", "the dicts the Hugging Face Trainer prints", _hf),
        LineFormat("keyvalue", "'step N | name value | ...' or 'step=N name=value' lines", _keyvalue),
    )
}
AUTO = "auto"


def pattern_format(pattern: str) -> LineFormat:
    """A format from a regular expression: its named group `step` is the step, every other named
    group a metric (`__` in a name stands for `/`). Raises FormatError for a bad pattern."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        raise FormatError(f"--pattern {pattern!r}: not a regular expression ({exc})") from None
    groups = list(compiled.groupindex)
    if "step" not in groups:
        raise FormatError(f"--pattern {pattern!r}: needs a named group 'step', as in (?P<step>\\d+)")
    metrics = [g for g in groups if g != "step"]
    if not metrics:
        raise FormatError(f"--pattern {pattern!r}: needs a named group for at least one metric, as in (?P<loss>\\S+)")

    def parse(line: str, state: LineState) -> Entry | None:
        match = compiled.search(line)
        if not match or match["step"] is None:
            return None
        try:
            step = int(match["step"].replace(",", ""))
        except ValueError:
            return None
        values = {g.replace("__", "/"): quantity(match[g]) for g in metrics if match[g] is not None}
        return _entry(state, step, values)

    return LineFormat("pattern", f"lines matching {pattern}", parse)


def detect_line_format(lines: list[str]) -> LineFormat | None:
    """The first built-in format that reads one of `lines` (a rank's prefix taken off), or None."""
    for line in lines:
        _, text = rank_prefix(line.strip())
        for line_format in FORMATS.values():
            if line_format.parse(text, LineState()) is not None:
                return line_format
    return None


class TextLogReader(Reader):
    """A text log, line by line, in one `FORMATS` format (`auto`: the first that reads a line)
    or a `pattern` of one's own. Lines that are not metrics lines are passed over; a rank's prefix
    (`rank_prefix`) is taken off before the format reads the line, and its entries carry the rank."""

    format = "textlog"

    def __init__(self, path: Path, *, line_format: str = AUTO, pattern: str | None = None, strict: bool = True) -> None:
        super().__init__(strict=strict)
        self.path = Path(path)
        self.tail = FileTail(self.path, say=self.note)
        self._said_long = False
        if pattern is not None:
            self.line_format: LineFormat | None = pattern_format(pattern)
        elif line_format == AUTO:
            self.line_format = None
        elif line_format in FORMATS:
            self.line_format = FORMATS[line_format]
        else:
            raise FormatError(f"unknown log format {line_format!r} (known: {AUTO}, {', '.join(FORMATS)})")
        # each rank's state: its lines come interleaved with the other ranks'
        self.states: dict[int, LineState] = {}
        # `auto`: each format's state of each rank, until one format reads a line
        self._trials: dict[str, dict[int, LineState]] = {}
        self.ended_in_traceback = False
        self.metric_lines = 0

    @property
    def format_name(self) -> str | None:
        """The format being read (None while `auto` has not found one)."""
        return self.line_format.name if self.line_format else None

    def position(self) -> dict[str, Any]:
        return {
            **self.tail.position(),
            "format": self.format_name,
            "state": self.states.get(0, LineState()).as_dict(),
            "rank_states": {str(rank): state.as_dict() for rank, state in self.states.items() if rank},
            "traceback": self.ended_in_traceback,
            "metric_lines": self.metric_lines,
        }

    def restore(self, position: dict[str, Any]) -> None:
        self.tail.restore(position)
        name = position.get("format")
        if self.line_format is None and name in FORMATS:
            self.line_format = FORMATS[name]
        kept = {"0": position.get("state") or {}, **(position.get("rank_states") or {})}
        self.states = {
            int(rank): LineState(
                step=state.get("step"),
                bar=state.get("bar"),
                bar_total=state.get("bar_total"),
                count=int(state.get("count") or 0),
            )
            for rank, state in kept.items()
        }
        self.ended_in_traceback = bool(position.get("traceback"))
        self.metric_lines = int(position.get("metric_lines") or 0)

    def progress(self) -> float | None:
        size = self.tail.size()
        return min(1.0, self.tail.offset / size) if size else None

    def written(self) -> object:
        return self.tail.size()

    def crashed(self) -> bool:
        return self.ended_in_traceback

    def read(self, *, final: bool = False) -> Iterator[Entry]:
        for raw in self.tail.lines(final=final, carriage_returns=True, max_line=MAX_LINE):
            if self.tail.restarted:  # cut or replaced (the tail said so): a new log, read from its start
                self.tail.restarted, self.states, self.ended_in_traceback = False, {}, False
            if raw is None:
                if not self._said_long:
                    self._said_long = True
                    self.note(
                        f"{self.path}: a line longer than {MAX_LINE >> 10} KiB is not a metrics line; passed over"
                    )
                continue
            rank, line = rank_prefix(raw.decode("utf-8", "replace").strip())
            if not line:
                continue
            rank = rank or 0
            entry = self._parse(line, rank)
            if entry is not None:
                self.metric_lines += 1
                self.ended_in_traceback = False
                yield Entry(entry.step, entry.wall_time, self.admit(entry.values, str(self.path)), rank)
            elif _CRASH.search(line):
                self.ended_in_traceback = True

    def _parse(self, line: str, rank: int) -> Entry | None:
        if self.line_format is not None:
            state = self.states.get(rank)
            if state is None:
                state = self.states[rank] = LineState()
            return self.line_format.parse(line, state)
        # each format keeps its own state until one reads a line (the HF bar printed before the
        # first dict gives that dict's step)
        for line_format in FORMATS.values():
            states = self._trials.setdefault(line_format.name, {})
            state = states.get(rank)
            if state is None:
                state = states[rank] = LineState()
            entry = line_format.parse(line, state)
            if entry is not None:
                self.line_format, self.states = line_format, states
                self._trials.clear()
                return entry
        return None


def sniff_text_log(path: Path, *, head_bytes: int = 1 << 16) -> LineFormat | None:
    """The built-in format of the first metrics line in the file's head, or None (also for a
    path that is not a regular file, which is never opened)."""
    try:
        with open_regular(path) as handle:
            head = handle.read(head_bytes).decode("utf-8", "replace")
    except NotRegularFile:
        return None
    return detect_line_format(re.split(r"[\r\n]+", head))
