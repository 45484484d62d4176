"""CleanRL (single-file RL: PPO, DQN, SAC, TD3, C51, ...), logged through TensorBoard's
`SummaryWriter` (and W&B with `sync_tensorboard=True`).

Read from vwxyzjn/cleanrl at fe8d8a03, cleanrl/*.py `writer.add_scalar(...)`:
* ppo.py (and ppo_*.py): `charts/learning_rate`, `losses/value_loss`, `losses/policy_loss`,
  `losses/entropy`, `losses/old_approx_kl`, `losses/approx_kl`, `losses/clipfrac`,
  `losses/explained_variance` (1 - Var(returns - values) / Var(returns): how much of the
  returns' variance the value function explains, rising toward 1 as the critic learns; NaN when
  the returns do not vary), `charts/SPS` (environment steps per second), `charts/episodic_return`,
  `charts/episodic_length`.
* dqn*.py, c51*.py, qdagger*.py: `losses/td_loss`, `losses/q_values`, `losses/loss`,
  `charts/epsilon`; sac_*.py, td3_*.py, ddpg_*.py: `losses/qf1_loss`, `losses/qf2_loss`,
  `losses/qf_loss`, `losses/actor_loss`, `losses/alpha_loss`, `losses/qf1_values`, `losses/alpha`.

A value or TD loss of RL is not a language-model loss: it follows the returns (it may rise as
the agent earns more), so it is read as a policy/value loss, watched quietly.

The policy's health (detect/rl_health.py), from ppo.py at fe8d8a03: `approx_kl` is
`((ratio - 1) - logratio).mean()` (k3) and `old_approx_kl` `(-logratio).mean()` (k1), both the KL
between the policy that collected the rollout and the one after the minibatch step, the quantity
`target_kl` stops an update on (PPO's band, 0.01-0.02); `entropy` is the categorical policy's
mean entropy (ln 2 ≈ 0.69 at the start on CartPole's two actions); `clipfrac` the share of ratios
outside 1 ± `clip_coef` (0.2).
"""

from __future__ import annotations

from holter_server.vocabulary.names import NameRule
from holter_server.vocabulary.profiles import KL_PER_UPDATE_CEILING

FRAMEWORK = "CleanRL"

# what every CleanRL script logs beside its losses (names are matched lower-cased)
MARKER = r"^charts/(sps|episodic_return|episodic_length)$"

RULES: tuple[NameRule, ...] = (
    NameRule(
        r"^losses/explained_variance$",
        "statistic",
        "how much of the returns' variance the value function explains: rises toward 1 as the critic learns",
    ),
    NameRule(r"^charts/sps$", "throughput", "environment steps per second"),
    NameRule(
        r"^losses/(old_)?approx_kl$",
        "kl",
        "KL between the policy before and after an update (PPO's target is 0.01-0.02)",
        tolerance=KL_PER_UPDATE_CEILING,
    ),
    NameRule(r"^losses/entropy$", "entropy", "the policy's mean entropy", marker=MARKER),
    NameRule(r"^losses/clipfrac$", "clip_fraction", "the share of ratios outside 1 ± clip_coef", marker=MARKER),
    NameRule(
        r"^losses/(td_loss|qf\d?_loss|alpha_loss|loss)$",
        "policy_loss",
        "a TD, Q or temperature loss of RL: follows the returns, not a language-model loss",
        marker=MARKER,
    ),
    NameRule(r"^losses/alpha$", "statistic", "SAC's entropy temperature, tuned as it trains", marker=MARKER),
    NameRule(r"^charts/epsilon$", "schedule", "the exploration schedule", marker=MARKER),
)
