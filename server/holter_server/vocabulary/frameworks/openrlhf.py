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
"""

from __future__ import annotations

from holter_server.vocabulary.names import NameRule

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
    NameRule(r"(^|/)(chosen_reward|reject_reward|acc_mean)$", "reward", "DPO implicit rewards and accuracy"),
)
