"""The process's current run and the module-level API around it, shaped like wandb's, so a
wandb script runs with its import changed to `import holter as wandb`:

    import holter as wandb
    wandb.init(project="mnist", config={"lr": 1e-3}, mode="offline")
    wandb.config.update({"batch_size": 64})
    wandb.define_metric("val/acc", step_metric="epoch", summary="max")
    wandb.log({"loss": 0.3})
    wandb.summary["best_acc"] = 0.97
    wandb.alert(title="accuracy low", text="below 0.5", level=wandb.AlertLevel.WARN)
    wandb.finish()

`init` makes a run the current one: `holter.run`, `holter.config` and `holter.summary` are
then its own objects (as wandb sets `wandb.run` and friends), and `log`, `define_metric`,
`alert`, `watch`, `mark_preempting` and `finish` act on it. `mode` (or $HOLTER_MODE, else
$WANDB_MODE): "online" (the default), "offline" (everything goes to the spool on disk and
`holter sync` sends it later) or "disabled" (every call does nothing: nothing is sent and no
file is written). Arguments not given come from Holter's environment variables, else wandb's
(`ENVIRONMENT`).

What has no meaning in Holter (`settings`, `resume="must"`, wandb's code saving...) is accepted
and named once on stderr; docs/wandb.md lists what maps to what. The rest of wandb's surface
lives beside this module: the run's attributes (holter/surface.py), `Api` (api.py), `sweep`
and `agent` (sweeps.py), `errors`, `plot`, and `termlog` (console.py).
"""

from __future__ import annotations

import enum
import os
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Any

from holter import run as run_module
from holter import sweeps
from holter.config import Config, plain_config
from holter.errors import UsageError
from holter.sender import Delivery
from holter.summary import Summary
from holter.surface import WandbRunSurface, note_once

MODES = {
    "online": "online",
    "run": "online",
    "shared": "online",
    "offline": "offline",
    "dryrun": "offline",
    "disabled": "disabled",
}
# Holter's own options of holter.init, passed on as they are.
HOLTER_OPTIONS = frozenset(
    {
        "kinds",
        "url",
        "api_key",
        "spool_dir",
        "flush_interval",
        "max_queued_calls",
        "connect_timeout",
        "max_held_bytes",
        "system_vitals",
        "quiet",
        "provenance",
        "sync_tensorboard",
        "tensorboard",
    }
)
# wandb options that have no meaning here: accepted, and named once.
IGNORED_OPTIONS = frozenset(
    {
        "settings",
        "anonymous",
        "allow_val_change",
        "force",
        "magic",
        "monitor_gym",
        "save_code",
        "fork_from",
        "resume_from",
        "job_type_hint",
    }
)
# Where an init argument comes from when it is not given: Holter's variable, else wandb's (as
# wandb reads them: wandb/env.py, wandb_settings.py `update_from_env_vars`). $WANDB_API_KEY and
# $WANDB_BASE_URL are never read: they name wandb's service, and a key for it is not sent here.
ENVIRONMENT: dict[str, tuple[str, ...]] = {
    "project": ("HOLTER_PROJECT", "WANDB_PROJECT"),
    "name": ("HOLTER_NAME", "WANDB_NAME"),
    "id": ("HOLTER_RUN_ID", "WANDB_RUN_ID"),
    "notes": ("HOLTER_NOTES", "WANDB_NOTES"),
    "tags": ("HOLTER_TAGS", "WANDB_TAGS"),
    "group": ("HOLTER_GROUP", "WANDB_RUN_GROUP"),
    "job_type": ("HOLTER_JOB_TYPE", "WANDB_JOB_TYPE"),
    "mode": ("HOLTER_MODE", "WANDB_MODE"),
    "dir": ("HOLTER_DIR", "WANDB_DIR"),
    "entity": ("WANDB_ENTITY",),
    "sweep_id": ("WANDB_SWEEP_ID",),
    "resume": ("WANDB_RESUME",),
}
_TRUE = ("1", "true", "yes", "on")

_current: run_module.Run | DisabledRun | None = None
_notes: set[str] = set()


class AlertLevel(str, enum.Enum):
    """wandb's alert levels; `alert(level=...)` maps them to Holter's info, warning and critical."""

    INFO = "INFO"
    WARN = "WARN"
    ERROR = "ERROR"


class Settings(dict):  # type: ignore[type-arg]
    """wandb's `Settings`: accepted so `init(settings=wandb.Settings(...))` runs; nothing in it is used."""

    def __init__(self, **values: Any) -> None:
        super().__init__(values)


class NoRunError(UsageError, RuntimeError):
    """A module-level call that needs a run came before `holter.init()` (a `holter.errors.UsageError`,
    as wandb raises `wandb.Error` there)."""


class _BeforeInit:
    """What `holter.config` and `holter.summary` are before `init`: any use says to call it first."""

    def __init__(self, what: str) -> None:
        object.__setattr__(self, "_what", what)

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise NoRunError(f"call holter.init() before using holter.{self._what}")

    __getattr__ = __setattr__ = __getitem__ = __setitem__ = __iter__ = __len__ = __contains__ = _refuse  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"<holter.{self._what}: no run yet; call holter.init()>"


def _note_once(key: str, message: str) -> None:
    if key not in _notes:
        _notes.add(key)
        print(message, file=sys.stderr)


def from_environment(argument: str) -> str | None:
    """The value of an init argument from the environment (`ENVIRONMENT`): Holter's variable,
    else wandb's; None when neither is set (or set empty)."""
    for variable in ENVIRONMENT.get(argument, ()):
        value = os.environ.get(variable, "").strip()
        if value:
            return value
    return None


def resolve_mode(mode: str | None) -> str:
    """online, offline or disabled: `mode`, else $HOLTER_MODE, else $WANDB_MODE, else online
    (wandb's names too: dryrun is offline)."""
    given = mode if mode is not None else (from_environment("mode") or "")
    chosen = MODES.get(str(given).strip().lower() or "online")
    if chosen is None:
        raise ValueError(f"holter.init mode {given!r}: use online, offline or disabled")
    return chosen


def _quiet_from_wandb() -> bool | None:
    """$WANDB_SILENT / $WANDB_QUIET as `quiet`, unless $HOLTER_QUIET says otherwise."""
    if os.environ.get("HOLTER_QUIET", "").strip():
        return None
    if any(os.environ.get(name, "").strip().lower() in _TRUE for name in ("WANDB_SILENT", "WANDB_QUIET")):
        return True
    return None


def _select_config(config: Any, include: Any, exclude: Any) -> Any:
    """wandb's `config_include_keys` / `config_exclude_keys` applied to the init config."""
    if include is None and exclude is None:
        return config
    plain = plain_config(config)
    if include is not None:
        plain = {key: value for key, value in plain.items() if key in set(include)}
    if exclude is not None:
        plain = {key: value for key, value in plain.items() if key not in set(exclude)}
    return plain


def init(
    project: str | None = None,
    name: str | None = None,
    config: Any = None,
    *,
    id: str | None = None,
    tags: Any = None,
    notes: str | None = None,
    group: str | None = None,
    job_type: str | None = None,
    mode: str | None = None,
    dir: str | os.PathLike[str] | None = None,
    resume: Any = None,
    reinit: Any = None,
    entity: str | None = None,
    config_exclude_keys: Any = None,
    config_include_keys: Any = None,
    **options: Any,
) -> run_module.Run | DisabledRun:
    """Start (or resume, when `id` names an existing run) a run, make it the current one, and return it.

    Holter's own options (`kinds`, `url`, `api_key`, `spool_dir`, `system_vitals`, `quiet`, ...)
    are those of `holter.run.init`. wandb's: `group` and `job_type` become the tags
    `group:NAME` and `job_type:NAME` (and `run.group`, `run.job_type`); `notes` the run's notes;
    `entity` is kept as `run.entity` (and in `run.path`); `dir` holds the spool
    (`DIR/holter-spool`) unless `spool_dir` is given, and `run.dir`'s files; `mode` and
    $HOLTER_MODE as the module doc says; `config_include_keys` / `config_exclude_keys` filter the
    config; `reinit`: by default (or "finish_previous", True) a current run is finished first,
    False or "return_previous" returns it instead, "create_new" keeps it running. `resume`:
    Holter always appends to a run whose id exists. `settings` and wandb's other options are
    accepted and ignored, with one note.

    An argument not given comes from the environment: $HOLTER_PROJECT, $HOLTER_NAME,
    $HOLTER_RUN_ID, $HOLTER_NOTES, $HOLTER_TAGS (comma-separated), $HOLTER_GROUP,
    $HOLTER_JOB_TYPE, $HOLTER_MODE, $HOLTER_DIR, else wandb's $WANDB_PROJECT, $WANDB_NAME,
    $WANDB_RUN_ID, $WANDB_NOTES, $WANDB_TAGS, $WANDB_RUN_GROUP, $WANDB_JOB_TYPE, $WANDB_MODE,
    $WANDB_DIR, $WANDB_ENTITY, $WANDB_SWEEP_ID; $WANDB_SILENT or $WANDB_QUIET mean `quiet`.
    Inside `holter.agent(...)` the sweep's drawn parameters go over `config` (see holter/sweeps.py).
    """
    unknown = set(options) - HOLTER_OPTIONS - IGNORED_OPTIONS
    if unknown:
        raise TypeError(f"holter.init got unexpected keyword arguments: {', '.join(sorted(unknown))}")
    ignored = sorted(key for key in set(options) & IGNORED_OPTIONS if options[key] is not None)
    if ignored:
        _note_once(
            "ignored " + ",".join(ignored),
            f"holter: init options with no meaning in Holter are ignored: {', '.join(ignored)}",
        )
    if resume is None:
        resume = from_environment("resume")
    if resume in ("must", "never"):
        _note_once(
            "resume",
            f"holter: resume={resume!r} is ignored: Holter appends to a run whose id exists and starts one otherwise",
        )
    own = {key: value for key, value in options.items() if key in HOLTER_OPTIONS}
    if own.get("quiet") is None and _quiet_from_wandb():
        own["quiet"] = True
    chosen = resolve_mode(mode)
    if _current is not None and _current.status == "running":
        if reinit in (False, "return_previous"):
            return _current
        if reinit != "create_new":
            finish()
    project = project or from_environment("project")
    name = name or from_environment("name")
    id = id or from_environment("id")
    notes = notes if notes is not None else from_environment("notes")
    group = group or from_environment("group")
    job_type = job_type or from_environment("job_type")
    entity = entity or from_environment("entity")
    sweep_id = from_environment("sweep_id")
    if tags is None and from_environment("tags"):
        tags = [tag.strip() for tag in (from_environment("tags") or "").split(",") if tag.strip()]
    if isinstance(tags, str):
        tags = [tags]
    config = _select_config(config, config_include_keys, config_exclude_keys)
    trial = sweeps.active()
    if trial is not None:
        # the sweep's parameters win over the script's defaults, as under wandb's agent
        config = {**plain_config(config), **trial.parameters}
        project = project or trial.project
        sweep_id = trial.sweep_id
    root = dir if dir is not None else from_environment("dir")
    user_tags = [str(tag) for tag in (tags or ())]
    made: run_module.Run | DisabledRun
    if chosen == "disabled":
        made = DisabledRun(id=id, project=project, name=name, config=config, tags=user_tags, notes=notes)
        made.group, made.job_type, made.sweep_id = group or "", job_type or "", sweep_id
    else:
        if root is not None and own.get("spool_dir") is None:
            own["spool_dir"] = os.path.join(os.fspath(root), "holter-spool")
        sync = own.pop("sync_tensorboard", None) or own.pop("tensorboard", None)  # wandb's older name
        made = run_module.init(
            project,
            name,
            config,
            id=id,
            tags=user_tags or None,
            notes=notes,
            offline=chosen == "offline",
            group=group,
            job_type=job_type,
            sweep_id=sweep_id,
            **own,
        )
        if sync:  # the job's own TensorBoard writers, followed into the run (holter/tensorboard_sync.py)
            from holter.tensorboard_sync import sync_tensorboard

            sync_tensorboard(made)
    made.entity = entity or ""
    made._files_root = os.fspath(root) if root is not None else None
    _make_current(made)
    return made


def _make_current(made: run_module.Run | DisabledRun | None) -> None:
    global _current  # noqa: PLW0603 — the process's one current run, as `holter.run` shows it
    _current = made
    holter = sys.modules["holter"]
    holter.run = made  # type: ignore[attr-defined]
    holter.config = made.config if made is not None else _BeforeInit("config")  # type: ignore[attr-defined]
    holter.summary = made.summary if made is not None else _BeforeInit("summary")  # type: ignore[attr-defined]


def forget(ended: Any) -> None:
    """A run ended outside `holter.finish()` (its own `finish`, a `with` block): it is no longer current."""
    if _current is ended:
        _make_current(None)


def _run(what: str) -> run_module.Run | DisabledRun:
    if _current is None:
        raise NoRunError(f"call holter.init() before holter.{what}()")
    return _current


def log(data: Mapping[str, Any], step: int | None = None, commit: bool | None = None) -> None:
    """`holter.run.log(...)` of the current run (see `Run.log`: wandb's `step` and `commit`)."""
    _run("log").log(data, step=step, commit=commit)


def define_metric(
    name: str,
    step_metric: str | None = None,
    step_sync: bool | None = None,
    hidden: bool | None = None,
    summary: str | None = None,
    overwrite: bool | None = None,
    *,
    goal: str | None = None,
    kind: str | None = None,
) -> None:
    """`Run.define_metric` of the current run."""
    _run("define_metric").define_metric(name, step_metric, step_sync, hidden, summary, overwrite, goal=goal, kind=kind)


def alert(title: str, text: str = "", level: Any = None, wait_duration: Any = None) -> None:
    """`Run.alert` of the current run: an `alert` event that the alert rules send to chat."""
    _run("alert").alert(title, text, level, wait_duration)


def watch(
    model: Any,
    criterion: Any = None,
    log: str | None = "gradients",
    log_freq: int = 1000,
    idx: Any = None,
    log_graph: bool = False,
) -> Any:
    """`holter.torch.watch(model, holter.run, every=log_freq)`: gradient norms and activation RMS per layer."""
    return _run("watch").watch(model, criterion, log, log_freq, idx, log_graph)


def unwatch(model: Any = None) -> None:
    """Take off the hooks `watch()` put on `model` (default: every watched model of the current run)."""
    if _current is not None:
        _current.unwatch(model)


def finish(exit_code: int | None = None, quiet: bool | None = None) -> Delivery | None:
    """Finish the current run (a non-zero `exit_code` marks it crashed); nothing when there is none."""
    ended = _current
    if ended is None:
        return None
    try:
        return ended.finish(exit_code=exit_code, quiet=quiet)
    finally:
        forget(ended)


join = finish  # wandb's older name


def teardown(exit_code: int | None = None) -> None:
    """wandb's `teardown`: finish the current run, if any."""
    finish(exit_code=exit_code)


def mark_preempting() -> None:
    """`Run.mark_preempting` of the current run (see there)."""
    _run("mark_preempting").mark_preempting()


def save(*args: Any, **kwargs: Any) -> None:
    """wandb's file upload: accepted, nothing is stored."""
    if _current is not None:
        _current.save()


def log_artifact(*args: Any, **kwargs: Any) -> None:
    """wandb's artifacts: accepted, not stored."""
    if _current is not None:
        _current.log_artifact()


use_artifact = log_artifact


def log_model(*args: Any, **kwargs: Any) -> None:
    """wandb's model artifacts: accepted, not stored."""
    if _current is not None:
        _current.log_model()


use_model = link_model = log_model


def restore(*args: Any, **kwargs: Any) -> None:
    """wandb's file restore: Holter keeps no files, so it finds nothing (None)."""
    note_once("restore", "holter: restore() finds nothing: Holter keeps curves, not files")


def login(*args: Any, **kwargs: Any) -> bool:
    """wandb's login: Holter reads its key from `api_key=` or $HOLTER_API_KEY, so there is nothing to do."""
    return True


def require(requirement: Any = None) -> None:
    """wandb's feature switches (`wandb.require("core")`): accepted; Holter has none to turn on."""


def setup(settings: Any = None) -> None:
    """wandb's `setup()` (start its service before forking): accepted; Holter's client needs none.
    Each process that logs calls `holter.init()` itself."""


class DisabledRun(WandbRunSurface):
    """What `init(mode="disabled")` returns: the surface of a `Run`, where every call does nothing
    (nothing is sent, no file is written); the config and summary are kept in memory."""

    mode = "disabled"
    service_url = ""
    resumed = False

    def __init__(
        self,
        *,
        id: str | None,
        project: str | None,
        name: str | None,
        config: Any,
        tags: list[str] | None = None,
        notes: str | None = None,
    ) -> None:
        self.id = id or "disabled"
        self.project = project or "default"
        self._name = name
        self._tags = list(tags or [])
        self._notes = notes
        self.status = "running"
        self.start_time = time.time()
        self.config = Config(config, _ignore)
        self._last: dict[str, Any] = {}
        self.summary = Summary(self._last, _ignore)
        self._next_step = 0

    def _send_identity(self) -> None:
        pass

    @property
    def step(self) -> int:
        return self._next_step

    def log(self, data: Mapping[str, Any], step: int | None = None, commit: bool | None = None) -> None:
        if step is not None:
            self._next_step = int(step) + (commit is not False)
        elif commit is not False:
            self._next_step += 1

    def log_at(self, metrics: Mapping[str, Any], *, step: int, wall_time: float | None = None) -> None:
        pass

    def update_config(self, values: Any) -> None:
        self.config.update(values)

    def define_metric(self, name: str, *args: Any, **kwargs: Any) -> None:
        pass

    def alert(self, title: str, text: str = "", level: Any = None, wait_duration: Any = None) -> None:
        pass

    def watch(self, *args: Any, **kwargs: Any) -> None:
        pass

    def unwatch(self, *args: Any, **kwargs: Any) -> None:
        pass

    def mark_preempting(self) -> None:
        pass

    def log_throughput(self, *args: Any, **kwargs: Any) -> None:
        pass

    @contextmanager
    def timed_step(self, *args: Any, **kwargs: Any) -> Iterator[None]:
        yield

    def note_data_wait(self, *args: Any, **kwargs: Any) -> None:
        pass

    def restart_step_clock(self) -> None:
        pass

    def report_preflight(self, *args: Any, **kwargs: Any) -> None:
        pass

    def report_nonfinite(self, *args: Any, **kwargs: Any) -> None:
        pass

    def log_artifact(self, *args: Any, **kwargs: Any) -> None:
        pass

    use_artifact = link_artifact = save = log_code = log_model = use_model = link_model = log_artifact

    def flush(self, timeout: float | None = 30.0) -> bool:
        return True

    def finish(
        self,
        status: str | int = "finished",
        timeout: float | None = None,
        *,
        exit_code: int | None = None,
        quiet: bool | None = None,
    ) -> Delivery:
        self.status = (
            "crashed"
            if exit_code or (isinstance(status, int) and status)
            else ("finished" if isinstance(status, int) else status)
        )
        return Delivery()

    def __enter__(self) -> DisabledRun:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.finish("crashed" if exc_type is not None else "finished")
        forget(self)

    def __repr__(self) -> str:
        return f"DisabledRun(id={self.id!r}, project={self.project!r}, name={self.name!r})"


def _ignore(values: Any) -> None:
    return None
