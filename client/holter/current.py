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
`alert`, `watch` and `finish` act on it. `mode` (or $HOLTER_MODE): "online" (the default),
"offline" (everything goes to the spool on disk and `holter sync` sends it later) or
"disabled" (every call does nothing: nothing is sent and no file is written).

What has no meaning in Holter (`entity`, `settings`, `resume="must"`, wandb's code saving...)
is accepted and named once on stderr; docs/wandb.md lists what maps to what.
"""

from __future__ import annotations

import enum
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import TracebackType
from typing import Any, Optional, Union

from holter import run as run_module
from holter.config import Config
from holter.sender import Delivery
from holter.summary import Summary

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
        "sync_tensorboard",
        "tensorboard",
    }
)
# wandb options that have no meaning here: accepted, and named once.
IGNORED_OPTIONS = frozenset(
    {
        "entity",
        "settings",
        "anonymous",
        "allow_val_change",
        "config_exclude_keys",
        "config_include_keys",
        "force",
        "magic",
        "monitor_gym",
        "save_code",
        "fork_from",
        "resume_from",
        "job_type_hint",
    }
)

_current: Optional[Union[run_module.Run, DisabledRun]] = None
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


class NoRunError(RuntimeError):
    """A module-level call that needs a run came before `holter.init()`."""


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


def resolve_mode(mode: str | None) -> str:
    """online, offline or disabled: `mode`, else $HOLTER_MODE, else online (wandb's names too: dryrun is offline)."""
    given = mode if mode is not None else os.environ.get("HOLTER_MODE", "")
    chosen = MODES.get(str(given).strip().lower() or "online")
    if chosen is None:
        raise ValueError(f"holter.init mode {given!r}: use online, offline or disabled")
    return chosen


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
    **options: Any,
) -> run_module.Run | DisabledRun:
    """Start (or resume, when `id` names an existing run) a run, make it the current one, and return it.

    Holter's own options (`kinds`, `url`, `api_key`, `spool_dir`, `system_vitals`, `quiet`, ...)
    are those of `holter.run.init`. wandb's: `group` and `job_type` become the tags
    `group:NAME` and `job_type:NAME`; `notes` the run's notes; `dir` holds the spool
    (`DIR/holter-spool`) unless `spool_dir` is given; `mode` and $HOLTER_MODE as the module doc
    says; `reinit`: by default (or "finish_previous", True) a current run is finished first,
    False or "return_previous" returns it instead, "create_new" keeps it running. `resume`:
    Holter always appends to a run whose id exists. `entity`, `settings` and wandb's other
    options are accepted and ignored, with one note.
    """
    global _current
    unknown = set(options) - HOLTER_OPTIONS - IGNORED_OPTIONS
    if unknown:
        raise TypeError(f"holter.init got unexpected keyword arguments: {', '.join(sorted(unknown))}")
    ignored = sorted(key for key in set(options) & IGNORED_OPTIONS if options[key] is not None)
    if ignored:
        _note_once(
            "ignored " + ",".join(ignored),
            f"holter: init options with no meaning in Holter are ignored: {', '.join(ignored)}",
        )
    if resume in ("must", "never"):
        _note_once(
            "resume",
            f"holter: resume={resume!r} is ignored: Holter appends to a run whose id exists and starts one otherwise",
        )
    own = {key: value for key, value in options.items() if key in HOLTER_OPTIONS}
    chosen = resolve_mode(mode)
    if _current is not None and _current.status == "running":
        if reinit in (False, "return_previous"):
            return _current
        if reinit != "create_new":
            finish()
    all_tags = [str(tag) for tag in (tags or ())]
    all_tags += [f"{label}:{value}" for label, value in (("group", group), ("job_type", job_type)) if value]
    if chosen == "disabled":
        made: run_module.Run | DisabledRun = DisabledRun(id=id, project=project, name=name, config=config)
    else:
        if dir is not None and own.get("spool_dir") is None:
            own["spool_dir"] = os.path.join(os.fspath(dir), "holter-spool")
        sync = own.pop("sync_tensorboard", None) or own.pop("tensorboard", None)  # wandb's older name
        made = run_module.init(
            project, name, config, id=id, tags=all_tags or None, notes=notes, offline=chosen == "offline", **own
        )
        if sync:  # the job's own TensorBoard writers, followed into the run (holter/tensorboard_sync.py)
            from holter.tensorboard_sync import sync_tensorboard

            sync_tensorboard(made)
    _make_current(made)
    return made


def _make_current(made: run_module.Run | DisabledRun | None) -> None:
    global _current
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
    """Accepted for wandb's sake; `holter.torch.watch(...)` returns a handle whose `remove()` stops it."""


def finish(exit_code: int | None = None, quiet: bool | None = None) -> Delivery | None:
    """Finish the current run (a non-zero `exit_code` marks it crashed); nothing when there is none."""
    ended = _current
    if ended is None:
        return None
    try:
        return ended.finish(exit_code=exit_code, quiet=quiet)
    finally:
        forget(ended)


def save(*args: Any, **kwargs: Any) -> None:
    """wandb's file upload: accepted, nothing is stored."""
    if _current is not None:
        _current.save()


def log_artifact(*args: Any, **kwargs: Any) -> None:
    """wandb's artifacts: accepted, not stored."""
    if _current is not None:
        _current.log_artifact()


use_artifact = log_artifact


def login(*args: Any, **kwargs: Any) -> bool:
    """wandb's login: Holter reads its key from `api_key=` or $HOLTER_API_KEY, so there is nothing to do."""
    return True


class DisabledRun:
    """What `init(mode="disabled")` returns: the surface of a `Run`, where every call does nothing
    (nothing is sent, no file is written); the config and summary are kept in memory."""

    mode = "disabled"
    url = ""
    page_url = ""
    resumed = False

    def __init__(self, *, id: str | None, project: str | None, name: str | None, config: Any) -> None:
        self.id = id or "disabled"
        self.project = project or "default"
        self.name = name
        self.status = "running"
        self.config = Config(config, _ignore)
        self._last: dict[str, Any] = {}
        self.summary = Summary(self._last, _ignore)
        self._next_step = 0

    @property
    def step(self) -> int:
        return self._next_step

    def log(self, metrics: Mapping[str, Any], step: int | None = None, commit: bool | None = None) -> None:
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

    def log_throughput(self, *args: Any, **kwargs: Any) -> None:
        pass

    @contextmanager
    def timed_step(self, *args: Any, **kwargs: Any) -> Iterator[None]:
        yield

    def report_nonfinite(self, *args: Any, **kwargs: Any) -> None:
        pass

    def log_artifact(self, *args: Any, **kwargs: Any) -> None:
        pass

    use_artifact = link_artifact = save = log_code = log_artifact

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
