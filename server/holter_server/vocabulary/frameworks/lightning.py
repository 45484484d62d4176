"""PyTorch Lightning.

Read from Lightning-AI/pytorch-lightning:
* src/lightning/pytorch/trainer/connectors/logger_connector/result.py (`_Metadata.forked_name`,
  `_forked_name`): `self.log(name, on_step=True, on_epoch=True)` logs `{name}_step` and
  `{name}_epoch`, and with several dataloaders `{name}/dataloader_idx_{i}`.
* src/lightning/pytorch/callbacks/lr_monitor.py: `lr-{Optimizer}`, `lr-{Optimizer}/pg{i}`,
  `lr-{Optimizer}-momentum`, `lr-{Optimizer}-weight_decay` (schedules, by the generic rule on
  `lr-`).

The names themselves are the user's (`train_loss`, `val_loss`, `val_acc`); what Lightning adds
is the suffix, which is read through: `train_loss_step` is a training loss.
"""

from __future__ import annotations

from holter_server.vocabulary.names import NameRule, NameSuffix

FRAMEWORK = "Lightning"

RULES: tuple[NameRule, ...] = ()

SUFFIXES: tuple[NameSuffix, ...] = (
    NameSuffix(r"(_step|_epoch)$", "Lightning's on_step/on_epoch suffix"),
    NameSuffix(r"/dataloader_idx_\d+$", "Lightning's dataloader index"),
)
