"""OpenRLHF (PPO, REINFORCE++, GRPO; SFT; DPO).

Read from OpenRLHF/OpenRLHF:
* openrlhf/trainer/ray/ppo_actor.py: `policy_loss`, `entropy_loss`, `actor_lr`, `actor_grad_norm`,
  experience info `ppo_clip_ratio`, `ppo_kl`, `vllm_kl` (vLLM vs trainer), `kl` and
  `logprobs_diff` (actor vs the *reference* model: a drift, not a rollout mismatch), `reward`,
  `return`, `response_length`, `total_length`.
* openrlhf/trainer/ray/ppo_critic.py: `critic_loss`, `values`, `critic_lr`, `critic_grad_norm`.
* openrlhf/trainer/ppo_trainer.py: `rollout/reward_mean|reward_std|response_length_mean|
  truncated_rate|num_samples`.
* openrlhf/trainer/sft_trainer.py: `gpt_loss`, `aux_loss`, `loss_mean`, `lr`, `grad_norm`;
  evaluation `eval_loss`.
* openrlhf/trainer/dpo_trainer.py: `loss`, `acc`, `chosen_reward`, `reject_reward`; eval `acc_mean`.
* openrlhf/utils/logging_utils.py: everything is written as `train/<name>` and `eval/<name>`
  (wandb and TensorBoard), with `train/global_step`.

The policy's health (detect/rl_health.py), read at 3c3be623 in openrlhf/trainer/ray/ppo_actor.py
(`training_step`): `ppo_kl` and `ppo_clip_ratio` from the actor loss (the KL to the old policy per
update, the share of ratios clipped), `kl` the `compute_approx_kl` of the policy against the
*reference* model's log-probabilities, `entropy_loss` the policy's mean entropy (subtracted from
the loss times `entropy_coef`; `ent_loss` in the progress bar). DPO's `chosen_reward` and
`reject_reward` (openrlhf/trainer/dpo_trainer.py) are implicit rewards, β·log-ratio to the
reference, which fall on a healthy run: statistics.
"""

from __future__ import annotations

from holter_server.vocabulary.names import NameRule
from holter_server.vocabulary.profiles import KL_PER_UPDATE_CEILING

FRAMEWORK = "OpenRLHF"

RULES: tuple[NameRule, ...] = (
    NameRule(
        r"(^|/)logprobs_diff$",
        "statistic",
        "actor vs reference-model log-probability difference: a drift that grows as the policy learns, not a rollout "
        "mismatch",
    ),
    NameRule(r"(^|/)gpt_loss$|(^|/)loss_mean$", "loss", "SFT language-model loss"),
    NameRule(
        r"(^|/)(total_length|response_length|truncated_rate|response_length_mean)$", "statistic", "rollout lengths"
    ),
    NameRule(r"(^|/)acc_mean$", "reward", "DPO's preference accuracy"),
    NameRule(
        r"(^|/)(chosen_reward|reject_reward)$",
        "statistic",
        "DPO's implicit rewards (β·log-ratio to the reference): fall on a healthy run",
    ),
    NameRule(
        r"^(train/|eval/)?ppo_kl$",
        "kl",
        "KL between the policy before and after an update (PPO's target is 0.01-0.02)",
        tolerance=KL_PER_UPDATE_CEILING,
    ),
    NameRule(r"^(train/|eval/)?ppo_clip_ratio$", "clip_fraction", "the share of ratios the PPO clip cut"),
    NameRule(r"^(train/|eval/)?(entropy_loss|ent_loss)$", "entropy", "the policy's mean entropy", marker=r"ppo_kl$"),
)
