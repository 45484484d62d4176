"""verl (PPO/GRPO).

Read from volcengine/verl:
* verl/trainer/ppo/rollout_corr_helper.py (`compute_offpolicy_metrics`, `compute_rollout_correction_*`,
  logged with the `rollout_corr/` prefix): `kl` (direct KL(rollout‖training) estimate, ≈0),
  `k3_kl`, `log_ppl_diff`, `log_ppl_abs_diff`, `log_ppl_diff_max|min`, `ppl_ratio` (≈1),
  `chi2_token`, `chi2_seq`, `training_ppl`, `training_log_ppl`, `rollout_ppl`, `rollout_log_ppl`,
  `rollout_is_mean` (≈1) and `rollout_is_max|min|std|eff_sample_size|ratio_fraction_high|low|seq_*`,
  `rollout_rs_*`.
* verl/utils/debug/metrics.py (`calculate_debug_metrics`): `training/rollout_probs_diff_valid`
  (a 0/1 flag), `training/rollout_probs_diff_max|mean|std` (probabilities, not log-probabilities),
  `training/rollout_actor_probs_pearson_corr` (≈1, flat).
* verl/trainer/ppo/metric_utils.py: `critic/score|rewards|advantages|returns|values/mean|max|min`,
  `critic/vf_explained_var`, `response_length/*`, `prompt_length/*`, `timing_s/{phase}`,
  `timing_per_token_ms/{phase}`, `perf/total_num_tokens`, `perf/time_per_step`, `perf/throughput`.
* verl/workers/actor/dp_actor.py and megatron_actor.py: `actor/pg_loss`, `actor/kl_loss`,
  `actor/entropy`, `actor/pg_clipfrac`, `actor/pg_clipfrac_lower`, `actor/ppo_kl`,
  `actor/grad_norm`, `actor/lr`, `actor/kl_coef`; critic workers: `critic/vf_loss`,
  `critic/vf_clipfrac`, `critic/vpred_mean`, `critic/grad_norm`, `critic/lr`; `perf/mfu/actor`
  (`estimated_flops * ppo_epochs / promised_flops / world_size`: a fraction, 0.31 in the docs'
  example log line), `perf/max_memory_allocated_gb`.

The policy's health (detect/rl_health.py), read at b178a3cd:
* verl/trainer/ppo/core_algos.py (`compute_policy_loss_*`): `actor/ppo_kl` is the masked mean of
  `old_log_prob - log_prob` (k1, the KL to the old policy per update: PPO's band), `actor/pg_clipfrac`
  the share of tokens the clip cut, `actor/pg_clipfrac_lower` the share dual-clip's lower bound cut.
* verl/workers/actor/dp_actor.py (`update_policy`): `actor/entropy` (the policy's entropy),
  `actor/kl_loss` (the KL to the reference model, before `kl_loss_coef`), `actor/kl_coef`.
* verl/trainer/ppo/ray_trainer.py (`apply_kl_penalty`): `actor/reward_kl_penalty` (the KL to the
  reference taken out of the reward) and its `_coeff`.
* verl/trainer/ppo/metric_utils.py: `critic/score|rewards|returns/mean` are the rewards, their
  `/max` and `/min` statistics of them.
"""

from __future__ import annotations

from holter_server.vocabulary.names import FRACTION, NameRule
from holter_server.vocabulary.profiles import KL_PER_UPDATE_CEILING

FRAMEWORK = "verl"

RULES: tuple[NameRule, ...] = (
    # rollout correction: how far the rollout engine's policy is from the trainer's
    NameRule(
        r"(^|/)rollout_corr/log_ppl_abs_diff$",
        "logprob_mismatch",
        "mean |log-perplexity difference| between rollout and trainer per sequence",
        tolerance=0.05,
    ),
    NameRule(
        r"(^|/)rollout_corr/log_ppl_diff_max$",
        "logprob_mismatch",
        "largest log-perplexity difference between rollout and trainer",
        tolerance=0.5,
    ),
    NameRule(
        r"(^|/)rollout_corr/(k3_kl|kl)$",
        "logprob_mismatch",
        "KL(rollout ‖ trainer) estimate: ≈0 when they agree",
        tolerance=0.01,
    ),
    NameRule(
        r"(^|/)rollout_corr/chi2_token$",
        "logprob_mismatch",
        "token-level χ² divergence of the trainer from the rollout: ≈0 when they agree",
        tolerance=0.05,
    ),
    # sequence-level χ² is a product over the sequence's tokens: it grows with response length on
    # a healthy run, so it has no fixed healthy ceiling to hold it to
    NameRule(
        r"(^|/)rollout_corr/chi2_seq$",
        "statistic",
        "sequence-level χ² (grows with length: watched for NaN and outliers)",
    ),
    NameRule(
        r"(^|/)rollout_corr/(rollout_is_mean|ppl_ratio)$",
        "mismatch_ratio",
        "rollout/trainer importance weight or perplexity ratio: 1.0 when they agree",
        tolerance=1.05,
    ),
    NameRule(r"(^|/)rollout_corr/(log_ppl_diff|log_ppl_diff_min)$", "statistic", "signed log-perplexity difference"),
    NameRule(
        r"(^|/)rollout_corr/(training|rollout)_(log_)?ppl$",
        "statistic",
        "the policy's perplexity on its own samples, not a training loss",
    ),
    NameRule(r"(^|/)rollout_corr/", "statistic", "rollout-correction weights and rejection statistics"),
    NameRule(r"(^|/)training/rollout_probs_diff_valid$", "schedule", "a 0/1 flag: the debug metrics could be computed"),
    NameRule(
        r"(^|/)training/rollout_actor_probs_pearson_corr$",
        "statistic",
        "rollout/actor probability correlation (≈1, flat)",
    ),
    NameRule(r"(^|/)critic/(score|rewards|returns)/mean$", "reward", "sequence scores, rewards and returns"),
    NameRule(r"(^|/)critic/(score|rewards|returns)/", "statistic", "the extremes of the scores, rewards and returns"),
    NameRule(
        r"(^|/)actor/ppo_kl$",
        "kl",
        "KL between the policy before and after an update (k1; PPO's target is 0.01-0.02)",
        tolerance=KL_PER_UPDATE_CEILING,
    ),
    NameRule(r"(^|/)actor/(kl_loss|reward_kl_penalty)$", "kl", "the policy's KL to the reference model"),
    NameRule(r"(^|/)actor/entropy$", "entropy", "the policy's entropy"),
    NameRule(r"(^|/)actor/pg_clipfrac(_lower)?$", "clip_fraction", "the share of tokens the PPO clip cut"),
    NameRule(
        r"(^|/)critic/(advantages|values)/|(^|/)critic/(vf_explained_var|vpred_mean|vf_clipfrac)$",
        "statistic",
        "critic statistics",
    ),
    NameRule(
        r"(^|/)(response_length|prompt_length|response_length_non_aborted|num_turns|tool_call_counts)/|(^|/)response/",
        "statistic",
        "prompt and response lengths",
    ),
    NameRule(r"(^|/)perf/mfu/", "mfu", "model-FLOPs utilisation of a worker, a fraction", unit=FRACTION),
    NameRule(r"(^|/)perf/(max_memory_(allocated|reserved)_gb|cpu_memory_used_gb)$", "statistic", "peak memory"),
    NameRule(r"(^|/)perf/total_num_tokens$", "schedule", "tokens in the step's batch"),
    NameRule(r"^val-(core|aux)/", "reward", "validation reward or accuracy"),
)
