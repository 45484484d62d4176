"""NeMo-RL (GRPO, SFT, DPO).

Read from NVIDIA-NeMo/RL:
* nemo_rl/algorithms/loss/loss_functions.py (`ClippedPGLossFn`): `loss`, `kl_penalty`,
  `probs_ratio`, `probs_ratio_clamped` (and `_min|_max`), `token_mult_prob_error`,
  `gen_kl_error`, `policy_kl_error`, `js_divergence_error`, `sampling_importance_ratio`,
  `approx_entropy`, `num_valid_samples`, `positive_nll_loss`, `is_oob_ratio`; DPO: `loss`,
  `sft_loss`, `preference_loss`, `accuracy`, `rewards_chosen_mean`, `rewards_rejected_mean`.
* nemo_rl/algorithms/grpo.py: logged with the `train/` prefix, plus `reward`, `grad_norm`,
  `lr`, `wd`, `mean_prompt_length`, `total_num_tokens`; `timing/train/total_step_time` and the
  other phases; `validation/accuracy`; sft.py: `validation/val_loss`.
* At 7ea279ab, nemo_rl/algorithms/utils.py (`print_performance_metrics`), logged by grpo.py with
  `prefix="performance"`: `performance/train_flops_per_gpu` (TFLOP/s per GPU),
  `performance/train_fp_utilization` (achieved over theoretical FLOP/s, the model FLOPs
  utilisation, as a fraction: `total_tflops / theoretical_tflops`, printed ×100 as a percentage),
  `performance/{samples,tokens}_per_sec[_per_gpu]`, `..._tokens_per_sec_per_gpu` of each phase,
  `performance/training_worker_idle_time_ratio`, `performance/average_token_imbalance`;
  sft.py and dpo.py log `train_fp_utilization` under `train/`. grpo.py, sft.py, dpo.py and rm.py
  put `valid_tokens_per_sec_per_gpu` among the timings (`timing/train/...`): a throughput that
  falls when the job slows down, not a phase time that rises.
* docs/guides/grpo.md: `token_mult_prob_error` = mean over tokens of exp(|logp_train − logp_gen|),
  so a healthy run sits at ≈1.0, not 0 (the NeMo-RL tests gate on a median < 1.1 and a max < 1.05);
  the KL errors are ≈1e-3 when healthy ("investigate any metric that shows spikes above").
* The policy's health (detect/rl_health.py), loss_functions.py at 7ea279ab: `kl_penalty` is the
  KL to the reference divided back by `reference_policy_kl_penalty` (the KL itself),
  `approx_entropy` the policy's entropy estimated from the sampled tokens; DPO's
  `rewards_chosen_mean` and `rewards_rejected_mean` are implicit rewards (β·log-ratio to the
  reference), which fall on a healthy run: statistics.
"""

from __future__ import annotations

from holter_server.vocabulary.names import FRACTION, NameRule

FRAMEWORK = "NeMo-RL"

# Only the clipped policy-gradient loss logs these: a run that has one is an RL run, and its
# `train/loss` is a policy loss.
RL_MARKER = r"(^|/)(token_mult_prob_error|gen_kl_error|probs_ratio_clamped)$"

RULES: tuple[NameRule, ...] = (
    NameRule(
        r"^timing/.*(tokens|toks|samples|seqs)_per_sec(_per_gpu)?$",
        "throughput",
        "tokens (or samples) per second, logged among the timings: down is bad",
    ),
    NameRule(
        r"(^|/)train_fp_utilization$",
        "mfu",
        "achieved over theoretical FLOP/s during training (model FLOPs utilisation), a fraction",
        unit=FRACTION,
    ),
    NameRule(r"(^|/)train_flops_per_gpu$", "throughput", "TFLOP/s per GPU during training"),
    NameRule(
        r"^performance/(training_worker_idle_time_ratio|average_token_imbalance)$",
        "statistic",
        "how the work is spread over the workers",
    ),
    NameRule(
        r"(^|/)token_mult_prob_error$",
        "mismatch_ratio",
        "mean exp(|logp_train − logp_generation|) per token: 1.0 when trainer and generation agree",
        tolerance=1.05,
    ),
    NameRule(
        r"(^|/)sampling_importance_ratio$",
        "mismatch_ratio",
        "mean importance ratio between training and inference policies: 1.0 when they agree",
        tolerance=1.05,
    ),
    NameRule(
        r"(^|/)(gen_kl_error|policy_kl_error|js_divergence_error)$",
        "logprob_mismatch",
        "KL / JS divergence between generation and training distributions: ≈1e-3 when healthy",
        tolerance=0.01,
    ),
    NameRule(
        r"^(train/|validation/)?loss$",
        "policy_loss",
        "the clipped policy-gradient loss, not a language-model loss",
        marker=RL_MARKER,
    ),
    NameRule(r"(^|/)(probs_ratio|probs_ratio_clamped)(_min|_max)?$", "statistic", "PPO ratio of new to old policy"),
    NameRule(r"(^|/)kl_penalty$", "kl", "the policy's KL to the reference model", marker=RL_MARKER),
    NameRule(r"(^|/)approx_entropy$", "entropy", "the policy's entropy on its sampled tokens", marker=RL_MARKER),
    NameRule(r"(^|/)(kl_penalty|approx_entropy|is_oob_ratio|positive_nll_loss)$", "statistic", "policy statistics"),
    NameRule(
        r"(^|/)(num_valid_samples|num_unmasked_tokens|mean_prompt_length|total_num_tokens|global_valid_toks)$",
        "schedule",
        "batch bookkeeping",
    ),
    NameRule(
        r"(^|/)(rewards_chosen_mean|rewards_rejected_mean)$",
        "statistic",
        "DPO's implicit rewards (β·log-ratio to the reference): fall on a healthy run",
    ),
)
