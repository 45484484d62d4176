"""What a run's config keys mean to Holter: which are seeds, which steer the optimiser rather than
the data order, which hold the learning rate, which metrics count tokens, and the rules that turn
a config into the periods it implies (steps per epoch, intervals, rollout counts, shards).

Keys are matched on their last dotted segment (`optim.lr` is an `lr`), lower-cased; nested
configs are flattened to dotted keys first (`holter_server.analysis.configs.flatten`). A project
can declare more seed keys and data-seed keys (`PUT /api/v1/projects/{project}/settings`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A seed: `seed`, `data_seed`, anything ending in `_seed` (`init_seed`, `shuffle_seed`).
SEED_KEY = re.compile(r"^(seed|\w*_seed|seed_\w+)$")
# Seeds that set the data order (shuffling, sampling): twins must share them.
DATA_SEED_KEY = re.compile(r"^(data_seed|\w*data\w*_seed|shuffle_seed|sampler_seed|loader_seed)$")
# Keys that change what the optimiser does with a batch, not which batch comes: twin runs (same
# data order) may differ in these. A key under a section with one of these names counts too.
OPTIMIZER_KEY = re.compile(
    r"^(lr|learning_rate|max_lr|min_lr|peak_lr|base_lr|end_lr|lr_\w+|\w+_lr|betas?|beta[12]|adam_beta[12]|eps|epsilon|"
    r"adam_epsilon|adam_eps|weight_decay|wd|momentum|warmup|warmup_\w+|\w+_warmup|grad_clip|max_grad_norm|clip_grad\w*|"
    r"gradient_clipping|clip_norm|optimizer|optim|lr_scheduler\w*|scheduler|decay_lr|lr_decay\w*)$"
)
OPTIMIZER_SECTION = re.compile(r"^(optim|optimizer|optimiser|scheduler|lr_scheduler)$")
# Keys that decide which batch comes at which step. Runs that agree on them saw the same batches in
# the same order whatever else differs (width, depth, optimiser, init seed): the data itself (a key
# of a data section, or one naming a dataset, path, file, shard or mixture), how it is cut into
# batches (the batch-size, sequence-length, accumulation and world-size roles below) and shuffled.
DATA_SECTION = re.compile(
    r"^(data|dataset|datasets|datamodule|data_module|dataloader|data_loader|loader|data_args|data_config|"
    r"data_cfg|train_data|train_dataset|corpus)$"
)
DATA_IDENTITY_KEY = re.compile(
    r"^(dataset|datasets|dataset_\w+|\w+_dataset|data|data_path|data_paths|data_dir|data_root|data_name|data_files?|"
    r"train_files?|train_data\w*|train_path|train_split|train_dataset\w*|corpus|shards?|data_mix\w*|mixture\w*|"
    r"data_weights)$"
)
DATA_ORDER_KEY = re.compile(r"^(shuffle|shuffle_\w+|drop_last|packing|pack_sequences|sampler|curriculum\w*)$")
# Keys of a data section that do not change the order (a worker count, memory pinning).
NOT_DATA_ORDER = re.compile(r"^(num_workers|pin_memory|prefetch_factor|persistent_workers|cache_dir|num_proc)$")
# The learning rate itself: the third of the chapter's classic confounders.
LEARNING_RATE_KEY = re.compile(r"^(lr|learning_rate|max_lr|peak_lr|base_lr)$")
# A counter of tokens seen, logged as a metric: compare at matched tokens when both arms log one.
TOKEN_COUNTER = re.compile(
    r"(^|[/._])(num_|n_|total_num_|total_|consumed_|train_)?(input_)?tokens(_seen|_processed|_consumed|_trained)?$"
)


def leaf(key: str) -> str:
    """The last segment of a dotted key, lower-cased: what the patterns above are matched on."""
    return key.rsplit(".", 1)[-1].lower()


def is_seed_key(key: str, declared: tuple[str, ...] = ()) -> bool:
    """A seed key by name, or one the project declared (by full dotted key or by last segment)."""
    return bool(SEED_KEY.match(leaf(key))) or key in declared or leaf(key) in declared


def is_data_seed_key(key: str, declared: tuple[str, ...] = ()) -> bool:
    """A seed that sets the data order (by name, or declared by the project)."""
    return bool(DATA_SEED_KEY.match(leaf(key))) or key in declared or leaf(key) in declared


def is_optimizer_key(key: str) -> bool:
    """A key that steers the optimiser, by its name or a section it sits in (`optim.betas`)."""
    parts = key.lower().split(".")
    return bool(OPTIMIZER_KEY.match(parts[-1])) or any(OPTIMIZER_SECTION.match(p) for p in parts[:-1])


def names_data(key: str, data_seed_keys: tuple[str, ...] = ()) -> bool:
    """A key that says which data a run read: a data seed, a key of a data section, or one naming a
    dataset, path, file, shard or mixture (a batch size alone names no data)."""
    parts = key.lower().split(".")
    if NOT_DATA_ORDER.match(parts[-1]):
        return False
    return (
        is_data_seed_key(key, data_seed_keys)
        or bool(DATA_IDENTITY_KEY.match(parts[-1]))
        or any(DATA_SECTION.match(p) for p in parts[:-1])
    )


def is_data_order_key(key: str, data_seed_keys: tuple[str, ...] = ()) -> bool:
    """A key that decides which batch comes at which step (see DATA_SECTION): the data, its
    shuffling, and how it is cut into batches."""
    name = leaf(key)
    batching = ("batch_size", "global_batch_size", "grad_accum", "world_size", "seq_len")
    return (
        names_data(key, data_seed_keys)
        or bool(DATA_ORDER_KEY.match(name))
        or any(name in ROLES[role] for role in batching)
    )


def is_learning_rate_key(key: str) -> bool:
    """The learning rate (`lr`, `learning_rate`, `optim.lr`, `max_lr`...)."""
    return bool(LEARNING_RATE_KEY.match(leaf(key)))


def is_token_counter(metric: str) -> bool:
    """A metric that counts tokens seen (`num_tokens`, `train/num_input_tokens_seen`), not a rate."""
    return bool(TOKEN_COUNTER.search(metric.lower()))


# ---------------------------------------------------------------- what a config implies about periods

# Each role is a quantity a config may hold, under one of these names (last dotted segment).
ROLES: dict[str, tuple[str, ...]] = {
    "dataset_size": (
        "dataset_size",
        "num_train_samples",
        "train_samples",
        "num_examples",
        "num_train_examples",
        "train_size",
        "n_train",
        "num_samples",
        "dataset_len",
    ),
    "batch_size": (
        "batch_size",
        "per_device_train_batch_size",
        "micro_batch_size",
        "train_micro_batch_size_per_gpu",
        "micro_batch",
        "device_batch_size",
    ),
    "global_batch_size": ("global_batch_size", "total_batch_size", "effective_batch_size"),
    "grad_accum": (
        "gradient_accumulation_steps",
        "grad_accum",
        "grad_accum_steps",
        "accumulate_grad_batches",
        "gradient_accumulation",
        "accumulation_steps",
    ),
    "world_size": ("world_size", "num_gpus", "n_gpus", "num_devices", "data_parallel_size", "dp_size"),
    "eval_interval": (
        "eval_interval",
        "eval_steps",
        "eval_every",
        "eval_freq",
        "eval_iters_interval",
        "evaluation_interval",
        "val_check_interval",
        "eval_every_n_steps",
        "eval_every_steps",
        "evaluation_steps",
        "val_interval",
        "val_every",
        "validate_every",
        "validation_interval",
    ),
    "save_interval": (
        "save_interval",
        "save_steps",
        "checkpoint_interval",
        "ckpt_interval",
        "save_every",
        "checkpoint_every",
        "save_freq",
        "ckpt_every",
        "checkpoint_steps",
        "save_every_n_steps",
    ),
    "log_interval": ("log_interval", "logging_steps", "log_every", "log_freq", "log_every_n_steps"),
    "rollouts": (
        "rollouts_num",
        "n_samples_per_prompt",
        "num_generations",
        "rollout_n",
        "num_rollouts",
        "n_rollouts",
        "rollouts_per_prompt",
        "num_samples_per_prompt",
    ),
    "seq_len": (
        "seq_len",
        "seq_length",
        "max_seq_length",
        "max_seq_len",
        "block_size",
        "sequence_length",
        "context_length",
    ),
    "shard_tokens": ("shard_tokens", "tokens_per_shard", "shard_size_tokens"),
    "shard_steps": ("steps_per_shard", "shard_steps", "iters_per_shard"),
    # an epoch's length in steps, when the config says it outright (Keras, many hand-written loops)
    "steps_per_epoch": (
        "steps_per_epoch",
        "iters_per_epoch",
        "iterations_per_epoch",
        "batches_per_epoch",
        "num_batches_per_epoch",
        "num_update_steps_per_epoch",
        "updates_per_epoch",
        "epoch_steps",
        "steps_in_epoch",
        "epoch_length",
        "epoch_len",
    ),
    "tokens_per_step": ("tokens_per_step", "tokens_per_batch", "tokens_per_iter"),
}


@dataclass(frozen=True)
class PeriodRule:
    """A period a config implies: the product of `numerator` roles over the product of
    `denominator` roles. `optional` roles join the denominator when the config has them (a
    config without gradient accumulation accumulates over 1 step)."""

    name: str
    description: str
    numerator: tuple[str, ...]
    denominator: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()


PERIOD_RULES: tuple[PeriodRule, ...] = (
    PeriodRule(
        "steps_per_epoch",
        "an epoch: the loader starts over (dataset size / global batch)",
        ("dataset_size",),
        ("batch_size",),
        ("grad_accum", "world_size"),
    ),
    PeriodRule(
        "steps_per_epoch_global",
        "an epoch: the loader starts over (dataset size / global batch size)",
        ("dataset_size",),
        ("global_batch_size",),
    ),
    PeriodRule(
        "steps_per_epoch_given", "an epoch, as the config counts it: the loader starts over", ("steps_per_epoch",)
    ),
    PeriodRule("gradient_accumulation", "one optimiser step every so many micro-steps", ("grad_accum",)),
    PeriodRule("eval_interval", "an evaluation every so many steps", ("eval_interval",)),
    PeriodRule("save_interval", "a checkpoint every so many steps", ("save_interval",)),
    PeriodRule("log_interval", "logging every so many steps", ("log_interval",)),
    PeriodRule("rollouts", "a rollout count: samples per prompt, generations per group", ("rollouts",)),
    PeriodRule(
        "tokens_per_shard",
        "a data shard: the loader moves to the next file",
        ("shard_tokens",),
        ("batch_size", "seq_len"),
        ("grad_accum", "world_size"),
    ),
    PeriodRule(
        "tokens_per_shard_step", "a data shard, from the tokens one step takes", ("shard_tokens",), ("tokens_per_step",)
    ),
    PeriodRule(
        "steps_per_shard", "a data shard, as the config counts it: the loader moves to the next file", ("shard_steps",)
    ),
)

# A period within this share of what the config implies (or half a step) matches it.
PERIOD_MATCH_TOLERANCE = 0.03
