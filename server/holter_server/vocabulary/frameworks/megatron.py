"""Megatron-LM.

Read from NVIDIA/Megatron-LM:
* megatron/training/training.py (`training_log`): `learning-rate`, `skipped-train-samples`,
  `batch-size`, every loss of the loss dict (`lm loss` from pretrain_gpt.py), `loss-scale`,
  `world-size`, `grad-norm`, `num-zeros`, `params-norm`, `mem-*`, `max_attention_logit`,
  `iteration-time`, `throughput` (TFLOP/s per GPU), `iter-energy/gpu`, `power/gpu`; each also
  as `<name> vs samples` (the same curve against consumed samples); timers as `<name>-time`.
* megatron/training/training.py (`evaluate_and_print_results`): `<loss> validation`,
  `<loss> validation vs samples`, `<loss> validation ppl` (`lm loss validation` is an eval loss,
  its `ppl` the same loss's exponential).
* pretrain_gpt.py (`loss_func`): the loss is reported as `lm loss`.
"""

from __future__ import annotations

from holter_server.vocabulary.names import NameRule, NameSuffix

FRAMEWORK = "Megatron-LM"

RULES: tuple[NameRule, ...] = (
    NameRule(
        r"^(num-zeros|params-norm|max_attention_logit|iter-energy/gpu|power/gpu)$|^mem-",
        "statistic",
        "optimizer, memory and power statistics",
    ),
    NameRule(r"^throughput$", "throughput", "TFLOP/s per GPU"),
    # exp of the validation loss beside it: read as a second eval loss, its scale (100x the
    # loss) made the train loss look far too good against it
    NameRule(r" (validation|test) ppl$", "statistic", "the perplexity of the validation loss beside it"),
)

SUFFIXES: tuple[NameSuffix, ...] = (NameSuffix(r" vs samples$", "Megatron's copy against consumed samples"),)
