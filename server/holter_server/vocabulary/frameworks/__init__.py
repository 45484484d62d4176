"""Framework name maps, each written from the framework's own source (cited in its module).

Order matters where two frameworks log the same name: the first map whose rule matches wins,
and every map comes before the generic rules in `names.py`.
"""

from __future__ import annotations

from dataclasses import replace
from types import ModuleType

from holter_server.vocabulary.frameworks import (
    cleanrl,
    deepspeed,
    holter,
    lightning,
    megatron,
    mlflow,
    modded_nanogpt,
    nanogpt,
    nemo_rl,
    openrlhf,
    slime,
    torchtitan,
    transformers,
    trl,
    verl,
)
from holter_server.vocabulary.names import NameRule, NameSuffix

# Holter's own names (`holter/...`: its helpers, system vitals, the loader watch) first.
MODULES: tuple[ModuleType, ...] = (
    holter,
    trl,
    nemo_rl,
    slime,
    cleanrl,
    mlflow,
    verl,
    openrlhf,
    transformers,
    lightning,
    megatron,
    torchtitan,
    deepspeed,
    modded_nanogpt,
    nanogpt,
)


def _rules(module: ModuleType) -> tuple[NameRule, ...]:
    return tuple(replace(r, framework=module.FRAMEWORK) for r in module.RULES)


def _suffixes(module: ModuleType) -> tuple[NameSuffix, ...]:
    return tuple(replace(s, framework=module.FRAMEWORK) for s in getattr(module, "SUFFIXES", ()))


FRAMEWORKS: tuple[str, ...] = tuple(m.FRAMEWORK for m in MODULES)
FRAMEWORK_RULES: tuple[NameRule, ...] = tuple(rule for module in MODULES for rule in _rules(module))
FRAMEWORK_SUFFIXES: tuple[NameSuffix, ...] = tuple(suffix for module in MODULES for suffix in _suffixes(module))
