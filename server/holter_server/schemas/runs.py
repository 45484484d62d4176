"""API schemas for runs, named by role: what clients send (`RunCreate`), what they get (`RunPublic`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from holter_server.nonfinite import json_safe, nonfinite_named
from holter_server.schemas.documents import shown, within_depth
from holter_server.schemas.ranks import RankJoin
from holter_server.schemas.vocabulary import (
    EndingStatusName,
    KindName,
    MetricName,
    MetricPattern,
    UnderstoodBy,
    UnitName,
)
from holter_server.store.models import MetricRow, RunRow
from holter_server.vocabulary.names import Understanding, layer_index
from holter_server.vocabulary.signals import panel_of
from holter_server.vocabulary.statuses import RunStatus

RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$"
PROJECT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.\- ]*$"
MAX_DEFINITIONS = 1000
MAX_TAGS = 64  # a run's tags, as sent and as stored (a resume merges its tags into the stored ones)
MAX_TAG_LENGTH = 128  # characters of one tag (issue 47: 64 tags of 16 KB made 1 MiB a run, 61.5 MB a list)
Tag = Annotated[str, Field(min_length=1, max_length=MAX_TAG_LENGTH)]
# wandb's define_metric summaries, comma-separated ("min,max")
SUMMARY_PATTERN = r"^(min|max|mean|best|last|first|copy|none)(,(min|max|mean|best|last|first|copy|none))*$"


class MetricDefinition(BaseModel):
    """What a client declares about a metric (wandb's `define_metric`): its kind, which summary
    to keep, and which metric is its x axis. Fields left out stay as they were."""

    model_config = ConfigDict(extra="forbid")

    kind: KindName | None = Field(default=None, description="the metric's kind; null: as its name says")  # type: ignore[valid-type]
    summary: str | None = Field(default=None, max_length=64, pattern=SUMMARY_PATTERN)
    step_metric: MetricName | None = Field(default=None, description="the metric this one is plotted against")
    goal: Literal["minimize", "maximize"] | None = Field(
        default=None, description="which way is better (wandb's `goal`)"
    )

    def declared(self) -> dict[str, Any]:
        """The fields the client set (a null kind undoes a declaration)."""
        return {name: getattr(self, name) for name in self.model_fields_set}


class CodeVersion(BaseModel):
    """The code a run ran (holter/provenance.py records it): its git commit and whether the working
    tree differed from it, as a hash of the diff, so that two runs of the same commit with other
    local changes are told apart; or, outside a repository, the script's own hash."""

    model_config = ConfigDict(extra="forbid")

    commit: str | None = Field(default=None, pattern=r"^[0-9a-f]{7,64}$", description="the checked-out commit")
    branch: str | None = Field(default=None, max_length=256)
    dirty: bool | None = Field(default=None, description="the working tree differs from the commit")
    diff_hash: str | None = Field(
        default=None,
        pattern=r"^[0-9a-f]{16,128}$",
        description="sha256 of `git diff HEAD` and the untracked files' names: equal hashes, equal local changes",
    )
    changed_files: int | None = Field(default=None, ge=0, description="files the diff touches, untracked included")
    diff_truncated: bool | None = Field(default=None, description="the diff was hashed up to the client's limit only")
    script: str | None = Field(default=None, max_length=1024, description="the script that started the run")
    script_hash: str | None = Field(default=None, pattern=r"^[0-9a-f]{16,128}$", description="sha256 of the script")


class Environment(BaseModel):
    """The machine and software a run ran on."""

    model_config = ConfigDict(extra="forbid")

    python: str | None = Field(default=None, max_length=64)
    implementation: str | None = Field(default=None, max_length=64)
    platform: str | None = Field(default=None, max_length=256)
    hostname: str | None = Field(default=None, max_length=256)
    torch: str | None = Field(default=None, max_length=64)
    cuda: str | None = Field(default=None, max_length=64)
    cudnn: str | None = Field(default=None, max_length=64)
    gpus: list[str] = Field(default_factory=list, max_length=64)
    packages: dict[str, str] = Field(
        default_factory=dict, max_length=200, description="versions of the packages that shape training"
    )


class Provenance(BaseModel):
    """Where a run came from: its code version and its environment."""

    model_config = ConfigDict(extra="forbid")

    code: CodeVersion | None = None
    environment: Environment | None = None


class PreflightCheck(BaseModel):
    """One pre-flight check's result (`holter.torch.preflight`)."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(
        min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_]*$", description="overfit_one_batch, causal_mask..."
    )
    passed: bool
    summary: str = Field(max_length=2000, description="what was checked and found, with its numbers")
    details: dict[str, Any] = Field(default_factory=dict, description="the numbers (JSON)")

    _details_bounded = field_validator("details")(within_depth("a pre-flight check's details"))


class PreflightReport(BaseModel):
    """Pre-flight checks the job ran before training; stored by name (a resend replaces a check's
    result with the same one)."""

    model_config = ConfigDict(extra="forbid")

    checks: list[PreflightCheck] = Field(min_length=1, max_length=32)


class PreflightPublic(BaseModel):
    """The run's pre-flight checks as stored, by name, each with when it arrived (`at`)."""

    checks: dict[str, dict[str, Any]]


class RunCreate(BaseModel):
    """Create a run, or resume it when `id` names an existing one (the client picks the id)."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        pattern=RUN_ID_PATTERN,
        description="client-chosen id; omitted: the service picks one",
    )
    project: str = Field(default="default", min_length=1, max_length=128, pattern=PROJECT_PATTERN)
    name: str | None = Field(default=None, max_length=256)
    config: dict[str, Any] = Field(default_factory=dict)
    tags: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    notes: str | None = Field(
        default=None, max_length=20_000, description="what the run is about (wandb's `notes`); omitted: kept as it is"
    )
    kinds: dict[MetricPattern, KindName] = Field(
        default_factory=dict,
        max_length=MAX_DEFINITIONS,
        description='declared kinds by metric name or glob: {"train/ce": "loss", "eval/*": "eval_loss"}; '
        "a declared kind always wins",
    )
    metrics: dict[MetricPattern, MetricDefinition] = Field(
        default_factory=dict,
        max_length=MAX_DEFINITIONS,
        description="fuller definitions (kind, summary, step_metric), as define_metric sends them",
    )
    provenance: Provenance | None = Field(
        default=None, description="the code version and environment (kept from the run's first create)"
    )
    rank: RankJoin | None = Field(
        default=None,
        description="the creating process is one rank of a distributed job: every rank joins this one run",
    )

    # bare NaN, Infinity or 1e400 (which Python's JSON reads) kept by name: no Postgres JSON column stores them
    _config_named = field_validator("config")(nonfinite_named)
    _config_bounded = field_validator("config")(within_depth("the config"))

    def definitions(self) -> dict[str, dict[str, Any]]:
        """`kinds` and `metrics` as one set of definitions by pattern."""
        merged: dict[str, dict[str, Any]] = {pattern: {"kind": kind} for pattern, kind in self.kinds.items()}
        for pattern, definition in self.metrics.items():
            merged.setdefault(pattern, {}).update(definition.declared())
        return merged


class SummaryUpdate(BaseModel):
    """Values that sum a run up (wandb's `run.summary`), merged key by key into what is stored;
    a key set to null is removed."""

    model_config = ConfigDict(extra="forbid")

    values: dict[str, Any] = Field(
        max_length=10_000, description='{"best_acc": 0.93, "epochs": 10}; non-finite numbers as "NaN", "Infinity"'
    )

    # bare NaN, Infinity or 1e400 (which Python's JSON reads) kept by name: no Postgres JSON column stores them
    _values_named = field_validator("values")(nonfinite_named)
    _values_bounded = field_validator("values")(within_depth("the summary"))


class SummaryPublic(BaseModel):
    """A run's summary as stored after an update."""

    summary: dict[str, Any]


class RunUpdate(BaseModel):
    """Change a run's tags or notes (fields left out stay as they are)."""

    model_config = ConfigDict(extra="forbid")

    tags: list[Tag] | None = Field(default=None, max_length=MAX_TAGS)
    notes: str | None = Field(default=None, max_length=20_000)


class RunFinish(BaseModel):
    """End a run: it finished, or the client saw it crash."""

    model_config = ConfigDict(extra="forbid")

    status: EndingStatusName = RunStatus.FINISHED.value  # type: ignore[valid-type]
    rank: int | None = Field(
        default=None,
        ge=0,
        le=1_048_575,
        description="one rank of a distributed job ends its part: the run finishes when rank 0 or every rank "
        "has, and has crashed when any rank crashed",
    )
    reason: str | None = Field(default=None, max_length=500, description="why it crashed, in a line")


class MetricUpdate(MetricDefinition):
    """Change what a metric is (the run page's control): `{"kind": "loss"}`, or `{"kind": null}`
    to go back to what its name says. The metric is analysed again from its first point."""


class Understood(BaseModel):
    """How Holter knows what a metric is."""

    source: UnderstoodBy  # type: ignore[valid-type]
    framework: str | None = Field(
        default=None, description="whose names recognised it (verl, TRL, ...; generic for common conventions)"
    )
    rule: str | None = Field(
        default=None, description="the declaration (name or glob) or the name pattern that decided"
    )
    note: str | None = Field(default=None, description="what the name is, in a few words")
    unit: UnitName | None = Field(  # type: ignore[valid-type]
        default=None,
        description="how a share is logged when the name or its framework says: percent (0-100) or fraction (0-1)",
    )
    compute_only: bool = Field(
        default=False, description="it times the step's own work, without the step's wait for data"
    )


class MetricLayer(BaseModel):
    """Which numbered layer of a stack a metric is (`vocabulary.names.layer_index`): the run
    page draws a family of two layers or more as one heatmap."""

    family: str = Field(description='the stack the layer belongs to, its number as "*": "act_norm/layer*"')
    index: int = Field(description="the layer's number in its stack")


class MetricPublic(BaseModel):
    """A metric series of a run, with its latest value, what it is and how Holter knows."""

    name: str
    count: int
    first_step: int | None
    last_step: int | None
    last_value: float | str | None = Field(
        description='latest value; non-finite values as "NaN", "Infinity", "-Infinity"'
    )
    kind: KindName | None = Field(
        default=None, description="loss, eval_loss, grad_norm, ... (GET /vocabulary lists them)"
    )  # type: ignore[valid-type]
    panel: str | None = Field(default=None, description="the chart it shares on the run page; null: a chart of its own")
    understood: Understood | None = None
    summary: str | None = None
    step_metric: str | None = None
    layer: MetricLayer | None = Field(default=None, description="its layer of a stack; null: not a numbered layer")

    @classmethod
    def from_row(
        cls, row: MetricRow, understanding: Understanding | None = None, definition: dict[str, Any] | None = None
    ) -> MetricPublic:
        definition = definition or {}
        return cls(
            name=row.name,
            count=row.count,
            first_step=row.first_step,
            last_step=row.last_step,
            last_value=json_safe(row.last_value),
            kind=understanding.kind if understanding else None,
            panel=panel_of(understanding.kind) if understanding else None,
            understood=Understood(**understanding.to_dict()) if understanding else None,
            summary=definition.get("summary"),
            step_metric=definition.get("step_metric"),
            layer=MetricLayer(family=layered[0], index=layered[1]) if (layered := layer_index(row.name)) else None,
        )


class MetricColumnPublic(BaseModel):
    """A metric of a run in the runs table: its kind, last value and best value (lowest where up
    is bad, as for a loss; highest where down is bad, as for a reward), NaN and ±Inf left out."""

    kind: str
    last: float | None
    best: float | None
    best_step: int | None


class SparklinePublic(BaseModel):
    """A run's curve in a few dozen points (min and max per bucket), null where not finite."""

    metric: str
    values: list[float | None]


class RunPublic(BaseModel):
    """A run as the API shows it."""

    id: str
    project: str
    name: str | None
    config: dict[str, Any] = Field(
        description="the run's config as it was logged; in a runs list asked for `config_keys`, only the values "
        'at those dotted keys, flat (`{"optimizer.lr": 0.0003}`)'
    )
    tags: list[str]
    notes: str | None
    status: RunStatus = Field(description="running, finished, crashed or stalled")
    created_at: datetime
    updated_at: datetime
    heartbeat_at: datetime
    finished_at: datetime | None
    last_step: int | None
    archived_at: datetime | None = Field(default=None, description="when it was archived (None: it is not)")
    health: str | None = Field(default=None, description="worst open event: healthy, info, warning or critical")
    open_events: int | None = None
    problems: dict[str, int] | None = Field(
        default=None,
        description="open problems by severity: the incidents the run's open warning and critical events make "
        '({"critical": 1}); what a badge counts, one per problem however many events it made',
    )
    metrics: list[MetricPublic] | None = Field(default=None, description="present when one run is read")

    metric_definitions: dict[str, dict[str, Any]] | None = Field(
        default=None, description="what was declared about its metrics, by name or glob (present when one run is read)"
    )
    summary: dict[str, Any] = Field(
        default_factory=dict, description="what the client said sums the run up (run.summary)"
    )
    provenance: dict[str, Any] | None = Field(
        default=None, description="the code version (git commit, dirty-diff hash) and environment the client recorded"
    )
    preflight: dict[str, Any] | None = Field(
        default=None, description="pre-flight checks the job ran, by name: passed, summary, details, at"
    )
    columns: dict[str, MetricColumnPublic] | None = Field(
        default=None, description="the metrics asked for with `metric=` (those the run has): last and best value"
    )
    sparkline: SparklinePublic | None = Field(
        default=None, description="the run's first metric of the kind asked for with `sparkline_kind=`, downsampled"
    )
    job: dict[str, Any] | None = Field(
        default=None,
        description="a distributed job's run (present when one run is read): its world size, launcher, and how "
        "many ranks joined, run, finished and crashed (GET /runs/{id}/ranks has each)",
    )

    @classmethod
    def from_row(
        cls,
        row: RunRow,
        metrics: list[MetricRow] | None = None,
        health: tuple[str, int] | None = None,
        understood: dict[str, Understanding] | None = None,
        job: dict[str, Any] | None = None,
        problems: dict[str, int] | None = None,
        config: dict[str, Any] | None = None,
    ) -> RunPublic:
        """`config`: what to show as the run's config instead of its whole (the values at the
        dotted keys a runs list asked for, whose rows were read without their configs)."""
        definitions = row.metric_definitions or {}
        return cls(
            id=row.id,
            project=row.project,
            name=row.name,
            config=shown(row.config or {} if config is None else config, "config"),
            tags=row.tags or [],
            notes=row.notes,
            status=row.status,
            health=health[0] if health else None,
            open_events=health[1] if health else None,
            problems=problems,
            created_at=row.created_at,
            updated_at=row.updated_at,
            heartbeat_at=row.heartbeat_at,
            finished_at=row.finished_at,
            last_step=row.last_step,
            archived_at=row.archived_at,
            metrics=None
            if metrics is None
            else [MetricPublic.from_row(m, (understood or {}).get(m.name), definitions.get(m.name)) for m in metrics],
            metric_definitions=None if metrics is None else definitions,
            summary=shown(row.summary or {}, "summary"),
            provenance=shown(row.provenance, "provenance"),
            preflight=shown(row.preflight, "pre-flight record"),
            job=job,
        )


class RunDeleted(BaseModel):
    """What deleting a run removed: the rows of each table that belonged to it."""

    id: str
    deleted: dict[str, int] = Field(description="rows removed per table (points, rollups, events, ...)")


class RunCreated(RunPublic):
    """Answer to create-or-resume."""

    resumed: bool


class ProjectPublic(BaseModel):
    """A project that has runs: its name and how many (archived ones counted in `runs`)."""

    name: str
    runs: int
    archived: int


class ConfigKeysPublic(BaseModel):
    """A bounded page of the dotted config keys a project's runs were created with."""

    keys: list[str] = Field(description="in order, at most `limit` of them")
    count: int = Field(description="how many keys match in all")


class RunsPublic(BaseModel):
    """A page of runs and the total matching the filters."""

    data: list[RunPublic]
    count: int
    metric_names: list[str] | None = Field(
        default=None, description="with `names=true`: every metric name of the runs on this page, for choosing columns"
    )
