"""slime and its fork miles (Megatron training, SGLang rollouts).

Read from THUDM/slime:
* slime/backends/megatron_utils/loss.py: `loss`, `pg_loss`, `entropy_loss`, `pg_clipfrac`,
  `ppo_kl`, `kl_loss`, `train_rollout_logprob_abs_diff`, `ois`.
* slime/backends/megatron_utils/model.py: logged as `train/<name>`, with `train/grad_norm`,
  `train/lr-pg_{i}`, `train/global_batch_size`, `train/mtp_loss`, `train/step`.
* slime/observability/*: `rollout/raw_reward`, `rollout/rewards`, `rollout/response_lengths`,
  `rollout/log_probs`, `rollout/ref_log_probs`, `rollout/entropy`, `perf/step_time`,
  `perf/{phase}_time`, `perf/*_tflops`, `perf/actor_train_tok_per_s`, `perf/wait_time_ratio`,
  `eval/<dataset>`.
At 624b824a, slime/observability/train_metric_utils.py also logs `perf/actor_train_tok_per_s`
(tokens trained per second), `perf/actor_train_tflops`, `perf/log_probs_tflops`,
`perf/ref_log_probs_tflops`, and slime/backends/megatron_utils/update_weight/ adds
`perf/update_weights_density` and `perf/update_weights_wire_bytes`.
Read from radixark/miles: miles/backends/training_utils/loss_hub/losses.py (`train_rollout_kl`:
KL(SGLang ‖ Megatron), k3 estimate), miles/utils/tracking_utils/ci_history.py.

The policy's health (detect/rl_health.py), read at 624b824a in
slime/backends/megatron_utils/loss.py (`policy_loss_function`): `ppo_kl` (the KL to the old
policy per update), `pg_clipfrac`, `entropy_loss` (the policy's mean entropy, subtracted from the
loss times `entropy_coef`), `kl_loss` (`compute_approx_kl` against the *reference* model's
log-probabilities, with `use_kl_loss`); slime/observability/train_metric_utils.py:
`rollout/entropy` (the rollout's entropy, asserted within (0, 1) in CI).
"""

from __future__ import annotations

from holter_server.vocabulary.names import NameRule
from holter_server.vocabulary.profiles import KL_PER_UPDATE_CEILING

FRAMEWORK = "slime"

# slime logs the policy-gradient part of its loss beside the total
PG_MARKER = r"^train/pg_loss$"

RULES: tuple[NameRule, ...] = (
    NameRule(
        r"(^|/)train_rollout_kl$",
        "logprob_mismatch",
        "KL(rollout engine ‖ trainer), k3 estimate: ≈1e-4 when healthy",
        tolerance=0.01,
    ),
    NameRule(
        r"(^|/)train_rollout_logprob_abs_diff$",
        "logprob_mismatch",
        "mean |logp_train − logp_rollout| per token",
        tolerance=0.05,
    ),
    NameRule(
        r"^train/loss$",
        "policy_loss",
        "slime's total RL loss (policy gradient + KL + entropy), not a language-model loss",
        marker=PG_MARKER,
    ),
    NameRule(
        r"^train/ppo_kl$",
        "kl",
        "KL between the policy before and after an update (PPO's target is 0.01-0.02)",
        tolerance=KL_PER_UPDATE_CEILING,
    ),
    NameRule(r"^train/kl_loss$", "kl", "the policy's KL to the reference model", marker=PG_MARKER),
    NameRule(r"^train/pg_clipfrac$", "clip_fraction", "the share of tokens the PPO clip cut", marker=PG_MARKER),
    NameRule(r"^(train/entropy_loss|rollout/entropy)$", "entropy", "the policy's mean entropy", marker=PG_MARKER),
    NameRule(r"^rollout/(log_probs|ref_log_probs|response_lengths)$", "statistic", "rollout statistics"),
    NameRule(r"^rollout/(raw_reward|rewards)$", "reward", "rollout rewards"),
    NameRule(r"^train/(ois|tis|tis_abs|tis_clipfrac|ess_ratio)$", "statistic", "importance-sampling statistics"),
    NameRule(r"^perf/wait_time_ratio$", "statistic", "share of the step spent waiting"),
    NameRule(r"^perf/.*_tok_per_s$", "throughput", "tokens per second of a phase (actor training)"),
    NameRule(r"^perf/.*_tflops$", "throughput", "TFLOP/s of a phase"),
    NameRule(r"^perf/update_weights_(density|wire_bytes)$", "statistic", "how much of the weights a refit sends"),
    NameRule(r"^perf/.*_time$", "step_time", "a phase time"),
)
