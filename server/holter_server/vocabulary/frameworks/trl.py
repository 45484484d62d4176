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

The policy's health (detect/rl_health.py), read at f2cd5771:
* trl/trainer/grpo_trainer.py `_compute_loss`: `kl` is the per-token KL to the *reference* model
  (logged only when `beta != 0`; it grows slowly by design), `entropy` the policy's per-token
  entropy, `clip_ratio/low_mean|high_mean|region_mean` the share of tokens the two-sided clip cut
  (`clip_ratio` alone with the Liger loss, `cispo_clip_ratio` for CISPO), `clip_ratio/low_min` and
  `high_max` their extremes over sequences; `_generate_and_score_completions`: `reward` (the
  mean), `reward_std`, `rewards/<func>/mean|std`; `entropy_coef` a schedule.
* trl/trainer/rloo_trainer.py: the same `kl`, `entropy`, `clip_ratio/*`, `reward`, `reward_std`.
* trl/experimental/ppo/ppo_trainer.py: `objective/kl` (to the reference, summed per sequence),
  `objective/entropy`, `objective/non_score_reward` (−β·KL: falls as the KL grows, by design),
  `objective/rlhf_reward`, `objective/scores`, `policy/approxkl_avg` (to the old policy per
  update), `policy/clipfrac_avg`, `policy/entropy_avg`, `val/clipfrac_avg` (the value head's
  clip, not the policy's), `loss/policy_avg`, `loss/value_avg`.
* DPO's `rewards/chosen|rejected` are implicit rewards, β·log(π/π_ref) of each completion: both
  fall on a healthy run as the policy leaves the reference (the margin is what grows), so they are
  statistics; `rewards/margins` and `rewards/accuracies` are the rewards.
SFT's and DPO's `entropy` is the model's token entropy on the data, not a policy exploring: it
stays a statistic (the GRPO marker tells the runs apart).
"""

from __future__ import annotations

from holter_server.vocabulary.names import NameRule
from holter_server.vocabulary.profiles import KL_PER_UPDATE_CEILING

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
    NameRule(r"(^|/)(eval_)?kl$", "kl", "GRPO's per-token KL to the reference model", marker=GRPO_MARKER),
    NameRule(r"(^|/)(eval_)?entropy$", "entropy", "the GRPO policy's per-token entropy", marker=GRPO_MARKER),
    NameRule(
        r"(^|/)(eval_)?(clip_ratio(/(low|high|region)_mean)?|cispo_clip_ratio)$",
        "clip_fraction",
        "the share of tokens whose ratio the clip cut",
        marker=GRPO_MARKER,
    ),
    NameRule(r"(^|/)objective/kl$", "kl", "PPO's KL to the reference model, summed over each sequence"),
    NameRule(r"(^|/)(objective/entropy|policy/entropy_avg)$", "entropy", "the PPO policy's entropy"),
    NameRule(
        r"(^|/)policy/approxkl_avg$",
        "kl",
        "KL between the policy before and after an update (PPO's target is 0.01-0.02)",
        tolerance=KL_PER_UPDATE_CEILING,
    ),
    NameRule(r"(^|/)policy/clipfrac_avg$", "clip_fraction", "the share of ratios the PPO clip cut"),
    NameRule(r"(^|/)val/clipfrac_avg$", "statistic", "the share of value predictions the value clip cut"),
    NameRule(
        r"(^|/)objective/non_score_reward$",
        "statistic",
        "the KL penalty part of the reward (−β·KL): falls as the KL grows, by design",
    ),
    NameRule(
        r"(^|/)(eval_)?rewards/(chosen|rejected)$",
        "statistic",
        "DPO's implicit reward of the chosen or rejected completions (β·log-ratio to the reference): falls on a "
        "healthy run",
    ),
    NameRule(r"(^|/)(eval_)?(logps|logits)/(chosen|rejected)$", "statistic", "DPO log-probabilities and logits"),
    NameRule(r"(^|/)(eval_)?completions/", "statistic", "GRPO completion lengths"),
    NameRule(r"(^|/)(eval_)?tools/", "statistic", "GRPO tool-call frequencies"),
)
