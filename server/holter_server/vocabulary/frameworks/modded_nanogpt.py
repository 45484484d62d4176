"""modded-nanogpt (the NanoGPT speedrun).

Read from KellerJordan/modded-nanogpt train_gpt.py (`print0`): each line is
`step:{step}/{train_steps} train_loss:... train_time:{training_time_ms:.0f}ms step_avg:{training_time_ms/step:.2f}ms`
(`val_loss:` on eval steps); the generic rules read `train_loss` and `val_loss`. `train_time` is the
training time so far, a clock that only grows (a step time read from it would be a "rise" at every
step), and `step_avg` its running mean per step since the start, which lags: one slow step barely
moves it. Both names are common words, so they are read as modded-nanogpt's only beside each other.
"""

from __future__ import annotations

from holter_server.vocabulary.names import NameRule

FRAMEWORK = "modded-nanogpt"

RULES: tuple[NameRule, ...] = (
    NameRule(
        r"^train_time$",
        "schedule",
        "modded-nanogpt's training time so far in ms: a clock, not a step time",
        marker=r"^step_avg$",
    ),
    NameRule(
        r"^step_avg$",
        "statistic",
        "modded-nanogpt's mean step time since the start (train_time / step): it lags",
        marker=r"^train_time$",
    ),
)
