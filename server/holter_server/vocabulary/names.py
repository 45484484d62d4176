"""How Holter understands a metric's name: declared by the user, recognised from a framework's
own name, or unknown.

A declared kind always wins. Otherwise the framework maps (`frameworks/`, each written from the
framework's source) are tried in order, then the generic rules below; the first rule that
matches names the kind. A name nothing matches is `unknown`: stored and drawn, and watched only
for NaN/±Inf and extreme outliers at info level, never read as a loss.

Some names mean different things in different runs: TRL's and NeMo-RL's `loss` is a language-model
loss in SFT and a policy loss in GRPO. A rule may therefore ask for a *marker*, another metric of
the same run (`reward_std` for TRL GRPO); `RunContext` finds the markers once per run.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import Any

from holter_server.vocabulary.profiles import KL_PER_UPDATE_CEILING, is_percent

PERCENT, FRACTION = "percent", "fraction"  # how a share (MFU, the wait for data) is logged: 0-100 or 0-1
UNITS: tuple[str, ...] = (PERCENT, FRACTION)
DECLARED = "declared"
RECOGNISED = "recognised"
UNKNOWN = "unknown"
# How a metric was understood, for the run page and the API.
SOURCES: dict[str, str] = {
    DECLARED: "the user said what it is (define_metric, a run's or a batch's `kinds`, --kind, the run page)",
    RECOGNISED: "its name is one a framework logs, or follows a common convention",
    UNKNOWN: "nothing says what it is: stored, drawn, watched only for NaN/±Inf and extreme outliers (info)",
}


@dataclass(frozen=True)
class NameRule:
    """Metrics whose lower-cased name matches `pattern` (re.search) are of `kind`.

    `note` says what the name is; `tolerance` is the healthy ceiling of a mismatch statistic;
    `marker`, when set, is a pattern another metric of the same run must match for the rule to
    apply. `framework` is filled in from the module the rule comes from. `unit` says how a share
    is logged where the framework's source settles it (`PERCENT`: 0-100, `FRACTION`: 0-1);
    `compute_only`, that the metric times the step's own work without its wait for data (drawn
    beside the whole step's, so the gap between them shows the wait).
    """

    pattern: str
    kind: str
    note: str = ""
    tolerance: float | None = None
    marker: str | None = None
    framework: str = "generic"
    unit: str | None = None
    compute_only: bool = False
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)
    marker_regex: re.Pattern[str] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.pattern))
        object.__setattr__(self, "marker_regex", re.compile(self.marker) if self.marker else None)


@dataclass(frozen=True)
class Understanding:
    """What a metric is and how Holter knows: `source` is declared, recognised or unknown;
    `framework` and `rule` say which map and pattern recognised it (or which declaration).
    `unit`: how a share is logged, when the name or the framework says (`PERCENT` or `FRACTION`;
    None: not known from the name, as for a bare `mfu`, which one framework logs in percent and
    another as a fraction). `compute_only`: the step's own work, without its wait for data."""

    kind: str
    source: str
    framework: str | None = None
    rule: str | None = None
    note: str | None = None
    tolerance: float | None = None
    unit: str | None = None
    compute_only: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape the API serves."""
        return {
            "source": self.source,
            "framework": self.framework,
            "rule": self.rule,
            "note": self.note,
            "unit": self.unit,
            "compute_only": self.compute_only,
        }


# Holter's own derived metrics (`holter.torch.watch`, `Run.timed_step`, the Trainer callback's
# step time, the loader watch, the system sampler) are logged under this prefix, so that they never
# collide with a framework's own `grad_norm`, `step_time` or `system/*`; `frameworks/holter.py`
# reads them.
HOLTER_NAMESPACE = "holter/"


def own_name(metric: str) -> str:
    """`metric` without Holter's namespace: "grad_norm/layer.3" for "holter/grad_norm/layer.3"."""
    return metric[len(HOLTER_NAMESPACE) :] if metric.startswith(HOLTER_NAMESPACE) else metric


# "Per layer" is decided here only (issue 34): a series of one layer names its family, then a
# slash, then the layer ("act_norm/layer.5", "holter/act_norm/h.0"). The run page's heatmaps ask a
# narrower question, which numbered layer of a stack a series is (`layer_index`); the service
# serves that answer with each metric (`MetricPublic.layer`), so the charts never guess it.


def layer_of(metric: str) -> tuple[str, str] | None:
    """(family, layer) of one layer's series: ("act_norm", "layer.5") for "act_norm/layer.5",
    ("holter/act_norm", "h.0") for "holter/act_norm/h.0"; None for a whole-model series
    ("grad_norm", "holter/grad_norm": Holter's namespace is no family)."""
    own = own_name(metric)
    _, sep, layer = own.rpartition("/")
    if not sep:
        return None
    return metric[: len(metric) - len(layer) - 1], layer


def is_per_layer(metric: str) -> bool:
    """True for one layer's series ("grad_norm/layer.3", "holter/act_norm/h.0"), False for a
    whole-model one ("grad_norm", "holter/grad_norm")."""
    return layer_of(metric) is not None


_LAYER_INDEX = re.compile(
    r"^(?P<prefix>.*?)(?P<sep>[/._-]?)(?P<word>layers?|blocks?|h)[._/-]?(?P<layer>\d+)(?P<rest>.*)$", re.IGNORECASE
)


def layer_index(metric: str) -> tuple[str, int] | None:
    """(family, index) of a numbered layer of a stack, the run page's heatmap rows:
    ("act_norm/layer*", 11) for "act_norm/layer.11", ("model.layers*.mlp/grad_norm", 3) for
    "model.layers.3.mlp/grad_norm"; None for a name with no layer number ("loss")."""
    match = _LAYER_INDEX.match(metric)
    if not match:
        return None
    return f"{match['prefix']}{match['sep']}{match['word']}*{match['rest']}", int(match["layer"])


# Schedules and bookkeeping: logged next to the metrics, never vital signs. A path component
# (`lr/AdamW/0`, torchtitan; `lr-AdamW/pg1`, Lightning; `train/lr-pg_0`, slime) or the end of the
# name (`actor_lr`, `train/global_step`, Megatron `learning-rate`) names them.
_SCHEDULE_WORDS = (
    r"learning[_ -]?rate|lr|epoch|epochs|total_flos|train_runtime|runtime|num_tokens|num_input_tokens_seen|"
    r"n_tokens_seen|total_num_tokens|samples_seen|consumed_samples|global_step|step|steps|iter|iteration|timestamp|wall_time|"
    r"batch[_ -]?size|global_batch_size|world[_ -]?size|loss[_ -]?scale|loss_scaler|kl_coeff?|kl_penalty_coeff?|"
    r"entropy_coeff?|wd|weight_decay|momentum|"
    r"skipped[_ -]train[_ -]samples|samples vs steps|num_samples"
)
_SCHEDULE = re.compile(rf"(^|[_/ -])({_SCHEDULE_WORDS})$|(^|/)(lr|learning[_ -]?rate)(/|$)|(^|/)lr-")
# Timings named after the step (`timing_s/step`, `perf/time_per_step`) are step times, not counters.
_TIMING = re.compile(r"(^|[_/])timing(_s|_ms|_per_token_ms)?/|time[_/ ]?per[_/ ]?step")

# Another metric of the run that only a reinforcement-learning run logs: a PPO update's KL or clip
# fraction, a policy-gradient or critic loss, a GRPO group's reward spread, an episode's return.
# Beside one of them a bare `kl`, `entropy` or `clip_ratio` is the policy's; without, it may be a
# VAE's KL term or an SFT model's token entropy (TRL's SFTTrainer logs `entropy`), which fall or
# rise on healthy runs, and they stay statistics.
RL_MARKER = (
    r"(^|[^a-z])(approx_?kl|ppo_kl|approxkl_avg|pg_clipfrac|clipfrac|clip_fraction|ppo_clip_ratio|reward_std|"
    r"frac_reward_zero_std|pg_loss|policy_loss|policy_gradient_loss|value_loss|vf_loss|critic_loss|ep_rew_mean|"
    r"episodic_return|advantages)([^a-z]|$)|(^|/)clip_ratio/"
)

# The generic rules, tried after every framework map: conventions shared by many frameworks and
# by Holter's own helpers (holter.torch, holter.rl, run.timed_step).
GENERIC_RULES: tuple[NameRule, ...] = (
    # explained variance (PPO's value-function fit, CleanRL's `losses/explained_variance`, verl's
    # `critic/vf_explained_var`, SB3's `train/explained_variance`) and R²: higher is better, ≤ 1
    NameRule(
        r"explained[_ ]?var(iance)?|(^|[_/])r2(_score)?$|r_squared",
        "statistic",
        "how much of a target's variance a model explains: rises toward 1 as it learns, not a loss",
    ),
    # model FLOPs utilisation: a share of the device's peak, a kind and chart of its own (beside
    # tokens/s it reads as flat at 0). nanoGPT's `mfu` and torchtitan's `mfu(%)` (percent),
    # Lightning's `device/mfu` and Composer's `throughput/device/mfu` (fractions), OLMo-core's
    # `throughput/device/MFU` and levanter's `throughput/mfu` (percent), verl's `perf/mfu/actor`,
    # NeMo-RL's `train_fp_utilization`; the step's own work when named so (`compute_mfu`). A bare
    # name does not say whether it is logged in percent: the frameworks' maps say where they know.
    NameRule(
        r"(^|[^a-z])compute[_/ ]?mfu([^a-z]|$)",
        "mfu",
        "model FLOPs utilisation over the step's own work, without its wait for data",
        compute_only=True,
    ),
    NameRule(
        r"(^|[^a-z])mfu([^a-z]|$)|(fp|flops?)_utili[sz]ation",
        "mfu",
        "model FLOPs utilisation: the share of the device's peak the model's arithmetic achieves",
    ),
    # a rate over the step's own work, beside the whole step's (`compute_tokens_per_s`)
    NameRule(
        r"(^|[^a-z])compute[_/ ]?(tokens?|toks?|samples?|seqs|sequences)[_/ ]?per[_/ ]?s(ec(ond)?)?([_/(]|$)",
        "throughput",
        "tokens or samples per second over the step's own work, without its wait for data",
        compute_only=True,
    ),
    # a rate is a throughput wherever it is logged, even among timings (`timing/.../tokens_per_sec`)
    NameRule(
        r"(tokens?|toks?|samples?|seqs|sequences)[_/ ]?per[_/ ]?s(ec(ond)?)?([_/(]|$)|tok/s",
        "throughput",
        "tokens or samples per second",
    ),
    # waiting for data: the share of the step is read (≈0 when the loader keeps up); the seconds,
    # ≈0 and noisy when healthy, are only watched; the step's own work beside it is compute time
    NameRule(
        r"(data|loader|input)[_/ ]?(wait|loading)[_/ ]?(frac(tion)?|share|ratio)",
        "data_wait",
        "the share of the step spent waiting for data",
        unit=FRACTION,
    ),
    NameRule(
        r"(data|loader|input)[_/ ]?(wait|loading)[_/ ]?(pct|percent|\(%\))",
        "data_wait",
        "the share of the step spent waiting for data, in percent",
        unit=PERCENT,
    ),
    NameRule(
        r"(data|loader|input)[_/ ]?(wait|loading)([_/ ]?(s|ms|time|seconds|\(s\)))?$",
        "statistic",
        "time spent waiting for data (the share is what is read)",
    ),
    NameRule(
        r"(^|[_/])compute[_/ ]?(s|ms|time|seconds)$",
        "compute_time",
        "the step's own work, without its wait for data",
        compute_only=True,
    ),
    # the largest per-token gap of a step is heavy-tailed: a healthy 200-step GRPO run of Qwen3-8B
    # (RL-Align/RL-Kernel rounds.csv, tests/data/real_curves) logs 1.2-18 at every step, so it is
    # watched, not judged against a mismatch tolerance
    NameRule(
        r"logprob_max_abs_diff",
        "statistic",
        "the largest per-token logprob gap of a step: heavy-tailed (single tokens reach 10+ in healthy runs)",
    ),
    # logprob mismatch between the rollout engine and the trainer
    NameRule(
        r"logp_diff|logp_difference|logprob.*(diff|mismatch)|rollout_probs_diff|vllm_kl|rollout_logprob",
        "logprob_mismatch",
        "the rollout engine's and the trainer's log-probabilities of the same tokens differ",
    ),
    NameRule(r"grad(ient)?[_/ -]?norm|gnorm", "grad_norm", "a gradient norm"),
    NameRule(r"act(ivation)?s?[_/ ]?(norm|rms)|resid(ual)?[_/]?(norm|rms)", "activation_norm", "an activation norm"),
    NameRule(
        r"(^|[_/])timing(_s|_ms|_per_token_ms)?/|step[_/ ]?time|iter(ation)?[_/ -]?time|time[_/ ]?per[_/ ]?step|"
        r"batch[_/ ]?time|epoch[_/ ]?time|elapsed[_/ ]?time|_ms$|ms[_/]per[_/]step|[a-z]-time$",
        "step_time",
        "a step or phase time",
    ),
    NameRule(
        r"tokens?[_/ ]?per[_/ ]?s|tok/s|tokens_per_sec|samples?[_/ ]?per[_/ ]?s|throughput|tflops|it/s|"
        r"steps_per_second|(^|[_/])[twsf]ps($|[_/(])",
        "throughput",
        "a throughput (tokens, samples or steps per second, TFLOP/s)",
    ),
    # the lowest and highest of a logged distribution, in a run that logs its quantiles
    # (holter.Histogram, frameworks/holter.py): statistics, not the metric itself (after the
    # rules for a mismatch's or a gradient norm's own max, before the losses')
    NameRule(
        r"/(min|max)$",
        "statistic",
        "the lowest or highest of a logged distribution (holter.Histogram)",
        marker=r"/(p\d{1,2}|median)$",
    ),
    # An RL policy's health (detect/rl_health.py). The spread or extremes of a reward, a KL, an
    # entropy or a clip fraction (TRL's `reward_std`, `rewards/<func>/std`, `clip_ratio/high_max`;
    # verl's `critic/score/max`) are what they are, never read as the metric itself
    NameRule(
        r"(reward|(^|[^a-z])(rew|returns?|scores?|kl|entropy|clip[a-z]*))[a-z0-9_/]*?[/_](std|stdev|var|variance|min|max)$",
        "statistic",
        "the spread or an extreme of a reward, KL, entropy or clip fraction: a statistic of the metric, not the metric",
    ),
    # the KL between the policy before and after an update (PPO's `approx_kl`, k1 or k3): its band
    # is fixed by the algorithm, so it needs no other metric to say the run is RL
    NameRule(
        r"(^|[^a-z])((old_)?approx_?kl(_avg)?|approxkl(_avg)?|ppo_kl)([^a-z]|$)",
        "kl",
        "KL between the policy before and after an update (PPO's target is 0.01-0.02)",
        tolerance=KL_PER_UPDATE_CEILING,
    ),
    NameRule(
        r"(^|[^a-z])(kl|kl_div|kl_divergence|kl_loss|kl_penalty|ref_kl|reward_kl_penalty)([^a-z]|$)",
        "kl",
        "the policy's KL to the reference model: grows slowly by design",
        marker=RL_MARKER,
    ),
    # stable-baselines3's PPO logs minus the entropy (`train/entropy_loss = -mean(entropy)`), beside
    # `train/policy_gradient_loss`
    NameRule(
        r"(^|/)entropy_loss$",
        "statistic",
        "stable-baselines3's entropy loss: minus the policy's entropy",
        marker=r"(^|/)policy_gradient_loss$",
    ),
    NameRule(
        r"(?<!cross)(^|[^a-z])(entropy|entropy_loss|entropy_avg|ent_loss|policy_entropy|approx_entropy)([^a-z]|$)",
        "entropy",
        "the policy's entropy: falls as it learns, a collapse toward 0 ends its exploration",
        marker=RL_MARKER,
    ),
    NameRule(
        r"(^|[^a-z])(pg_clipfrac(_lower)?|clipfrac(_avg)?|clip_frac(tion)?|ppo_clip_ratio)([^a-z]|$)|(^|/)clip_ratio(/|$)",
        "clip_fraction",
        "the share of probability ratios the PPO clip cut",
        marker=RL_MARKER,
    ),
    # reinforcement-learning losses: a policy-gradient loss swings around 0 and may go negative
    NameRule(
        r"(^|[^a-z])(pg_loss|policy_loss|policy_gradient_loss|actor_loss|act_loss|kl_loss|vf_loss|value_loss|critic_loss)([^a-z]|$)",
        "policy_loss",
        "a policy, value or KL loss of RL training, not a language-model loss",
    ),
    NameRule(
        r"reward|(^|[^a-z])ep_rew_|(^|[^a-z])(score|scores|return|returns|acc|accuracy|accuracies|win_rate|pass@\d*|mean_token_accuracy)([^a-z]|$)",
        "reward",
        "a reward, score or accuracy: higher is better",
    ),
    NameRule(
        r"(^|[^a-z])(?<!cross_)(advantages?|entropy|entropy_loss|kl|ppo_kl|approx_kl|pg_clipfrac|clipfrac|clip_frac(tion)?|aux_loss|"
        r"(mean_)?length|(mean_)?len|lengths|values|vpred)([^a-z]|$)|clip_ratio|clipped_ratio|pearson|corr(elation)?([^a-z]|$)|"
        r"memory|mem[_-]|_mem_",
        "statistic",
        "a statistic logged beside the vital signs (lengths, memory; a KL, entropy or clip fraction outside an RL run)",
    ),
    NameRule(
        r"(^|[^a-z])(eval|val|valid|validation|test)([^a-z]|$).*(loss|nll|perplexity|ppl)|"
        r"(loss|nll|perplexity|ppl).*(^|[^a-z])(eval|val|valid|validation|test)([^a-z]|$)",
        "eval_loss",
        "a held-out loss",
    ),
    NameRule(r"loss|nll|perplexity|ppl|cross_?entropy", "loss", "a training loss"),
)


@dataclass(frozen=True)
class NameSuffix:
    """A suffix a framework appends to a name it already logs (Lightning's `train_loss_step`):
    the name without it is read instead when that says more."""

    pattern: str
    note: str
    framework: str = "generic"
    regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regex", re.compile(self.pattern))


class RunContext:
    """The markers present among a run's metric names, found once for all its metrics."""

    def __init__(self, names: Iterable[str] = ()) -> None:
        lowered = [n.lower() for n in names]
        self.markers = frozenset(
            rule.marker
            for rule in _marker_rules()
            if rule.marker is not None
            and rule.marker_regex is not None
            and any(rule.marker_regex.search(n) for n in lowered)
        )


@cache
def all_rules() -> tuple[NameRule, ...]:
    """Every rule in the order they are tried: the framework maps, then the generic rules."""
    from holter_server.vocabulary.frameworks import FRAMEWORK_RULES

    return (*FRAMEWORK_RULES, *GENERIC_RULES)


@cache
def all_suffixes() -> tuple[NameSuffix, ...]:
    """The name suffixes frameworks add, from their maps."""
    from holter_server.vocabulary.frameworks import FRAMEWORK_SUFFIXES

    return FRAMEWORK_SUFFIXES


@cache
def _marker_rules() -> tuple[NameRule, ...]:
    return tuple(rule for rule in all_rules() if rule.marker is not None)


_SCHEDULE_RULE = NameRule(
    _SCHEDULE.pattern, "schedule", "a schedule or counter (learning rate, epoch, step, batch size)"
)


def _match(lowered: str, markers: frozenset[str]) -> NameRule | None:
    if _SCHEDULE.search(lowered) and not _TIMING.search(lowered):
        return _SCHEDULE_RULE
    for rule in all_rules():
        if rule.regex.search(lowered) and (rule.marker is None or rule.marker in markers):
            return rule
    return None


@lru_cache(maxsize=65_536)
def _recognise(name: str, markers: frozenset[str]) -> Understanding:
    lowered = name.lower()
    rule = _match(lowered, markers)
    if rule is None or rule.kind == "schedule":
        # `train_loss_step` is `train_loss`; but `global_step` stays a counter
        for suffix in all_suffixes():
            base = suffix.regex.sub("", lowered)
            stripped = _match(base, markers) if base and base != lowered else None
            if (stripped is not None and stripped.kind != "schedule") or (rule is None and stripped is not None):
                note = f"{stripped.note} ({suffix.note})" if stripped.note else suffix.note
                return Understanding(
                    stripped.kind,
                    RECOGNISED,
                    suffix.framework,
                    stripped.pattern,
                    note,
                    stripped.tolerance,
                    stripped.unit or named_unit(name),
                    stripped.compute_only,
                )
    if rule is None:
        return Understanding("unknown", UNKNOWN, unit=named_unit(name))
    return Understanding(
        rule.kind,
        RECOGNISED,
        rule.framework,
        rule.pattern,
        rule.note or None,
        rule.tolerance,
        rule.unit or named_unit(name),
        rule.compute_only,
    )


def named_unit(name: str) -> str | None:
    """`PERCENT` when the name says it is logged in percent (`mfu(%)`, `data_loading_pct`), else None."""
    return PERCENT if is_percent(name) else None


def recognise(name: str, context: RunContext | None = None) -> Understanding:
    """What the name alone (and the run's other names, through `context`) says the metric is."""
    return _recognise(name, context.markers if context is not None else frozenset())


def declared_kind(name: str, declarations: Mapping[str, Any] | None) -> tuple[str, str] | None:
    """(kind, pattern) of the declaration that names this metric, or None.

    Declarations map a metric name or a glob (`eval/*`) to a kind, or to a definition holding
    one (`{"kind": "loss", "summary": "min"}`). An exact name wins over any glob; among globs
    the longest pattern (the most specific) wins.
    """
    if not declarations:
        return None
    exact = _kind_of(declarations.get(name))
    if exact:
        return exact, name
    matching = [
        (pattern, kind)
        for pattern, value in declarations.items()
        if (kind := _kind_of(value)) and pattern != name and fnmatch.fnmatchcase(name, pattern)
    ]
    if not matching:
        return None
    pattern, kind = max(matching, key=lambda item: (len(item[0]), item[0]))
    return kind, pattern


def _kind_of(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        kind = value.get("kind")
        return kind if isinstance(kind, str) else None
    return None


def understand(
    name: str, *, declarations: Mapping[str, Any] | None = None, context: RunContext | None = None
) -> Understanding:
    """How Holter reads `name`: a declaration first, then recognition, else unknown."""
    declared = declared_kind(name, declarations)
    if declared is not None:
        recognised = recognise(name, context)
        same = recognised.kind == declared[0]
        return Understanding(
            declared[0],
            DECLARED,
            None,
            declared[1],
            None,
            recognised.tolerance if same else None,
            recognised.unit if same else named_unit(name),
            recognised.compute_only if same else False,
        )
    return recognise(name, context)


def understand_all(
    names: Collection[str], *, declarations: Mapping[str, Any] | None = None
) -> dict[str, Understanding]:
    """Every metric of a run understood together (markers are looked for once)."""
    context = RunContext(names)
    return {name: understand(name, declarations=declarations, context=context) for name in names}
