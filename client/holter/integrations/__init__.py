"""Integrations with training frameworks, one lazily imported module each.

* `holter.integrations.transformers`: `HolterCallback` for the Hugging Face `Trainer` (and TRL's
  trainers, which are `Trainer`s).
* `holter.integrations.lightning`: `HolterLogger`, a PyTorch Lightning logger.

Importing this package imports no framework; importing one of its modules imports that one.
"""
