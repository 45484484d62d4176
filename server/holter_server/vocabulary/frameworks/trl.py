"""TRL: SFT, DPO and GRPO trainers (they log through `Trainer.log`, so the transformers names
apply too; evaluation metrics get an `eval_` prefix).

Read from huggingface/trl:
* trl/trainer/grpo_trainer.py (`_metrics[mode][...]`, `log`): `reward`, `reward_std`,
  `rewards/{func}/mean|std`, `frac_reward_zero_std`, `completions/mean_length` (and min/max,
  `clipped_ratio`, terminated lengths), `num_tokens`, `kl`, `entropy`, `clip_ratio/low_mean` ...,
  `policy_loss`, `sampling/sampling_logp_difference/mean|max`,
  `sampling/importance_sampling_ratio/min|mean|max`; the trainer's own `loss` is the GRPO
  objective, a policy loss that swings around zero.
* trl/trainer/dpo_trainer.py: `rewards/chosen|rejected|accuracies|margins`, `logps/chosen|rejected`,
  `logits/chosen|rejected`, `num_tokens`, `mean_token_accuracy`, `entropy`, `aux_loss`; its `loss`
  is the preference loss (starts at ln 2 and falls: a loss).
* trl/trainer/sft_trainer.py: `num_tokens`, `mean_token_accuracy`, `entropy`, `aux_loss`.
"""

from __future__ import annotations

from holter_server.vocabulary.names import NameRule

FRAMEWORK = "TRL"

# Metrics only GRPO logs: a run that has one of them is a GRPO run.
GRPO_MARKER = (
    r"(^|/)(eval_)?(reward_std|frac_reward_zero_std|completions/mean_length|sampling/sampling_logp_difference/mean)$"
)

RULES: tuple[NameRule, ...] = (
    NameRule(
        r"^(train/|eval/|eval_)?loss$",
        "policy_loss",
        "GRPO's objective: a policy loss around zero, not a language-model loss",
        marker=GRPO_MARKER,
    ),
    # the vLLM-vs-trainer importance-sampling ratio: its mean is 1 when both agree; min and max
    # are per-token extremes, naturally far from 1
    NameRule(
        r"(^|/)(eval_)?sampling/importance_sampling_ratio/mean$",
        "mismatch_ratio",
        "mean importance-sampling ratio between vLLM and the trainer: 1.0 when they agree",
        tolerance=1.05,
    ),
    NameRule(
        r"(^|/)(eval_)?sampling/importance_sampling_ratio/(min|max)$",
        "statistic",
        "per-token extreme of the vLLM/trainer importance-sampling ratio",
    ),
    NameRule(
        r"(^|/)(eval_)?frac_reward_zero_std$", "statistic", "share of prompts whose completions all scored the same"
    ),
    NameRule(r"(^|/)(eval_)?(logps|logits)/(chosen|rejected)$", "statistic", "DPO log-probabilities and logits"),
    NameRule(r"(^|/)(eval_)?completions/", "statistic", "GRPO completion lengths"),
    NameRule(r"(^|/)(eval_)?tools/", "statistic", "GRPO tool-call frequencies"),
)
