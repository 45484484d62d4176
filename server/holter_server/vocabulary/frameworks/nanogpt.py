"""nanoGPT and llm.c.

Read from karpathy/nanoGPT: train.py (`wandb.log`): `iter`, `train/loss`, `val/loss`, `lr`,
`mfu` (`running_mfu*100`, a percentage: read as one in a run that also logs `val/loss`; -100
until the fifth iteration, running_mfu's start value) — the generic rules read the others; its console line
(`print(f"iter {iter_num}: loss {lossf:.4f}, time {dt*1000:.2f}ms, mfu {running_mfu*100:.2f}%")`)
adds `time`, the iteration's milliseconds, read as a step time in a run that also has `mfu`.

Read from karpathy/llm.c: llmc/logger.h (`logger_log_train`, `logger_log_val`, `logger_log_eval`):
the log file holds lines `s:<step> trl:<train loss> lr:<lr> norm:<grad norm>`,
`s:<step> tel:<val loss>` and `s:<step> eval:<HellaSwag accuracy>` (`holter import` reads them).
`trl` and `tel` are llm.c's own; `norm` and `eval` mean something else elsewhere, so they are
read as llm.c's only in a run that also has `trl`.
"""

from __future__ import annotations

from holter_server.vocabulary.names import PERCENT, NameRule

FRAMEWORK = "nanoGPT/llm.c"

LLMC_MARKER = r"^trl$"

NANOGPT_MARKER = r"^mfu$"

RULES: tuple[NameRule, ...] = (
    NameRule(r"^time$", "step_time", "nanoGPT's iteration time in ms", marker=NANOGPT_MARKER),
    # `"mfu": running_mfu*100`: a percentage; -100 until the fifth iteration (running_mfu starts at -1)
    NameRule(
        r"^mfu$", "mfu", "nanoGPT's running model FLOPs utilisation, in percent", marker=r"^val/loss$", unit=PERCENT
    ),
    NameRule(r"^trl$", "loss", "llm.c training loss"),
    NameRule(r"^tel$", "eval_loss", "llm.c validation loss"),
    NameRule(r"^norm$", "grad_norm", "llm.c gradient norm", marker=LLMC_MARKER),
    NameRule(r"^eval$", "reward", "llm.c HellaSwag accuracy", marker=LLMC_MARKER),
)
