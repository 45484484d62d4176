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
"""

from __future__ import annotations

from holter_server.vocabulary.names import FRACTION, NameRule

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
    NameRule(r"(^|/)critic/(score|rewards|returns)/", "reward", "sequence scores, rewards and returns"),
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
