"""`holter.init()` and the `Run` a training job logs into.

Over 400 lines, kept as one module: it is the surface a wandb-style script calls (`init`, `log`,
`config`, `summary`, `define_metric`, `alert`, `watch`, `finish`), and each method is a few lines
handing work to its own module (config.py, summary.py, sender.py, spool.py, system.py,
throughput.py). Splitting the class would scatter one public API over several files.
"""

from __future__ import annotations

import atexit
import fnmatch
import math
import operator
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from holter import termination
from holter.config import Config
from holter.job import Job, job_from_environment
from holter.provenance import provenance as recorded_provenance
from holter.ranks import CollectiveClock, RankBeat, rank_interval
from holter.sender import Barrier, Control, Delivery, Sender, without_provenance
from holter.spool import RANK_SPOOL, Spool, default_spool_root
from holter.summary import Summary
from holter.surface import WandbRunSurface, _artifacts_note
from holter.system import SystemSampler, sampling_interval
from holter.throughput import StepClock, ThroughputMeter, mfu_peak
from holter.transport import RejectedError, Transport, TransportError
from holter.wire import dumps

DEFAULT_URL = "http://127.0.0.1:8765"

# Runs not yet finished; held strongly so a run the caller forgot about is still flushed at exit.
_active_runs: set[Run] = set()
_hooks_installed = False


class Run(WandbRunSurface):
    """One training run. Create it with `holter.init()`."""

    _vitals: SystemSampler | None = None
    _beat: RankBeat | None = None
    # what reads into the run beside the job and must finish reading first (sync_tensorboard)
    _companions: tuple[Any, ...] = ()

    def __init__(
        self,
        *,
        run_id: str,
        project: str,
        name: str | None,
        config: Any,
        tags: list[str] | None,
        kinds: Mapping[str, str] | None,
        url: str,
        api_key: str | None,
        spool_root: Path,
        flush_interval: float,
        max_queued_calls: int,
        connect_timeout: float,
        max_held_bytes: int,
        notes: str | None = None,
        offline: bool = False,
        group: str | None = None,
        job_type: str | None = None,
        sweep_id: str | None = None,
        provenance: dict[str, Any] | None = None,
        job: Job | None = None,
    ) -> None:
        self.id = run_id
        # this process's place in a distributed job: every rank joins the one run, rank 0's metrics are
        # its curves and every other rank's are kept as that rank's (holter/job.py)
        self.job = job
        self.rank_clock = CollectiveClock(self._log_rank_timing) if job is not None else None
        self.project = project
        self._name = name
        self._tags = list(tags or [])
        self._notes = notes
        self.config = Config(config, self._send_config)
        self.service_url = url
        self.mode = "offline" if offline else "online"
        self.start_time = time.time()
        self._watches: list[Any] = []
        self.group, self.job_type, self.sweep_id = group or "", job_type or "", sweep_id or None
        self.resumed = False
        self.status = "running"
        self._max_queued_calls = max_queued_calls
        self._next_step = 0
        self._summary: dict[str, Any] = {}
        self.summary = Summary(self._summary, self._send_summary)
        # wandb's log(commit=False): values gathered for one step, sent when it is committed
        self._pending: dict[str, Any] = {}
        self._pending_step = 0
        # values measured by a wandb-style watch, waiting for the script's next log() call
        self._carried: dict[str, Any] = {}
        # define_metric(step_metric=...): which metric is whose x axis, and each axis's last value
        self._axes: dict[str, str] = {}
        self._axis_of: dict[str, str | None] = {}
        self._axis_values: dict[str, Any] = {}
        self._alerted: dict[str, float] = {}
        self._throughput = ThroughputMeter()
        self._step_clock = StepClock()
        self._finish_lock = threading.Lock()
        registration: dict[str, Any] = {
            "id": run_id,
            "project": project,
            "name": name,
            "config": self.config.as_dict(),
            "tags": self._all_tags(),
        }
        if kinds:
            registration["kinds"] = dict(kinds)
        if notes is not None:
            registration["notes"] = notes
        if provenance:
            registration["provenance"] = provenance
        if job is not None:
            registration["rank"] = job.payload()
        self.provenance = provenance
        register = Control("/api/v1/runs", registration)
        self._register = register
        # each rank of a job spools apart: a folder is one process's ordered stream
        spool = Spool(spool_root, run_id if job is None or job.rank == 0 else f"{run_id}{RANK_SPOOL}{job.rank}")
        self._registered = False
        # With batches of an earlier process still spooled, registering now would put this
        # process's start before that process's end; the sender replays them first instead.
        if not len(spool) and not offline:
            self._register_now(url, api_key, register, connect_timeout)
        self._sender = Sender(
            offline=offline,
            transport=Transport(url, api_key),
            spool=spool,
            run_id=run_id,
            register=register,
            flush_interval=flush_interval,
            max_held_bytes=max_held_bytes,
            rank=job.rank if job is not None else 0,
        )
        if not self._registered:
            self._sender.queue.append(register)
        self._queue = self._sender.queue
        self._wake = self._sender.wake
        self._sender.start()
        _active_runs.add(self)

    def _register_now(self, url: str, api_key: str | None, register: Control, timeout: float) -> None:
        """Try once to register so a resumed run learns its last step; never fatal."""
        transport = Transport(url, api_key, timeout=timeout)
        try:
            try:
                answer = transport.request("POST", register.path, dumps(register.payload))
            except RejectedError as exc:
                if not without_provenance(register, exc):
                    raise
                answer = transport.request("POST", register.path, dumps(register.payload))
        except TransportError as exc:
            print(f"holter: service at {url} unreachable ({exc}); spooling to disk until it returns", file=sys.stderr)
            return
        except RejectedError as exc:
            raise ValueError(f"holter.init refused by the service: {exc.detail}") from exc
        self._registered = True
        self.resumed = bool(answer.get("resumed"))
        if answer.get("last_step") is not None:
            self._next_step = int(answer["last_step"]) + 1
        self.starting_step = self._next_step

    def log(self, data: Mapping[str, Any], step: int | None = None, commit: bool | None = None) -> None:
        """Record metric values at `step` (default: one past the previous step).

        Returns at once: the values are queued and sent by a background thread. NaN and ±Inf
        are kept as they are; a nested dict is flattened as wandb keeps it, as a path of keys
        (`{"train": {"loss": 1.0}}` is `train/loss`); a `holter.Histogram` becomes its quantiles
        (`name/p5`, ...), and media values (`holter.Image`, `holter.Table`, ...) are dropped.

        `commit=False` (wandb's) gathers the values into the current step without ending it: a
        later call without a step (or with `commit=True`) adds its values to the same step and
        ends it; the last value given for a metric within a step wins. A metric declared with
        `define_metric(name, step_metric=AXIS)` is logged at the value of AXIS (in the same
        call, else the last one logged) rather than at the run's step.
        """
        if commit is None and not self._pending and not self._axes and not self._carried:  # the common case, kept cheap
            if step is None:
                step = self._next_step
            elif type(step) is not int:
                step = operator.index(step)  # accepts numpy ints; refuses 1.5 here rather than at the service
            self._next_step = step + 1
            if self.rank_clock is not None and not self.rank_clock.hooked:
                self.rank_clock.step_started(step + 1)  # no hook sees its steps: a step ends when it is logged
            values = dict(data)
            self._summary.update(values)
            queue = self._queue
            queue.append((step, time.time(), values))
            if len(queue) >= self._max_queued_calls:
                self._wait_for_room()
            return
        if self._carried:  # what a wandb-style watch measured since the last call joins this one
            data = {**self._carried, **data}
            self._carried = {}
        if step is not None:
            step = operator.index(step)
            if self._pending and step != self._pending_step:
                self._commit_pending()
        if not self._pending:
            self._pending_step = self._next_step if step is None else step
        if any(isinstance(value, Mapping) for value in data.values()):
            data = _flat_dicts(data)  # gathered leaf by leaf, as wandb merges a step's nested keys
        self._pending.update(data)
        if commit is not False:
            self._commit_pending()

    def _commit_pending(self) -> None:
        values, step = self._pending, self._pending_step
        self._pending = {}
        self._next_step = step + 1
        if self.rank_clock is not None and not self.rank_clock.hooked:
            self.rank_clock.step_started(step + 1)
        if not values:
            return
        self._summary.update(values)
        now = time.time()
        for at, group in self._by_axis(step, values).items():
            self._queue.append((at, now, group))
        if len(self._queue) >= self._max_queued_calls:
            self._wait_for_room()

    def _by_axis(self, step: int, values: dict[str, Any]) -> dict[int, dict[str, Any]]:
        """The values grouped by the step each is logged at: the run's step, or the value of the
        metric declared as its x axis (`define_metric(..., step_metric=...)`)."""
        if not self._axes:
            return {step: values}
        if any(isinstance(value, Mapping) for value in values.values()):
            values = _flat_dicts(values)  # so that a glob such as "val/*" finds a nested dict's values
        for name in self._axes.values():
            if name in values:
                self._axis_values[name] = values[name]
        groups: dict[int, dict[str, Any]] = {}
        for name, value in values.items():
            axis = self._axis_of.get(name, "")
            if axis == "":
                axis = self._axis_of[name] = _axis_for(name, self._axes)
            at = step
            if axis is not None and axis in self._axis_values:
                at = self._axis_step(name, axis, self._axis_values[axis], step)
            groups.setdefault(at, {})[name] = value
        return groups

    def _axis_step(self, name: str, axis: str, value: Any, step: int) -> int:
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if number.is_integer() and number >= 0:
            return int(number)
        _note_once(
            f"axis {name}",
            f"holter: {name!r} is plotted against {axis!r}, whose value {value!r} is not a whole number "
            f">= 0; {name!r} is logged at the run's step instead",
        )
        return step

    def log_at(self, metrics: Mapping[str, Any], *, step: int, wall_time: float | None = None) -> None:
        """Record values at `step` (and `wall_time`, seconds since the epoch; default now) without
        moving the step `log()` continues from: for points that are not the training loop's own,
        such as system vitals sampled in another thread or a run imported from elsewhere."""
        values = dict(metrics)
        self._summary.update(values)
        self._queue.append((operator.index(step), time.time() if wall_time is None else wall_time, values))
        if len(self._queue) >= self._max_queued_calls:
            self._wait_for_room()

    @property
    def step(self) -> int:
        """The step the next `log()` without a step gets (one past the last step logged)."""
        return self._next_step

    def update_config(self, values: Any) -> None:
        """Merge `values` into the run's config, here and at the service; the same as `run.config.update(values)`."""
        self.config.update(values)

    def _send_config(self, config: dict[str, Any]) -> None:
        # kept in the registration too, so a service that lost the run learns the whole config again
        self._register.payload["config"] = config
        # creating an existing run resumes it and merges the config it is given into the stored one
        self._queue.append(
            Control(
                "/api/v1/runs",
                {"id": self.id, "project": self.project, "name": self.name, "config": config, "tags": []},
            )
        )
        self._wake.set()

    def _send_identity(self) -> None:
        # a run registered again keeps its config and points; its name and notes are replaced and
        # the tags given are added to its own
        identity: dict[str, Any] = {"name": self._name, "tags": self._all_tags()}
        if self._notes is not None:
            identity["notes"] = self._notes
        self._register.payload.update(identity)
        self._queue.append(Control("/api/v1/runs", {"id": self.id, "project": self.project, "config": {}, **identity}))
        self._wake.set()

    def define_metric(
        self,
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
        """Say what a metric is (wandb's `define_metric`): `kind` is one of the service's metric
        kinds (`loss`, `eval_loss`, `grad_norm`, ... ; `holter kinds` lists them) and always wins
        over what the name suggests; `name` may be a glob (`"eval/*"`). `summary` ("min", "max",
        "mean", "last", ...) and `goal` ("minimize", "maximize") are kept with it. `step_metric`
        names its x axis: the metric is logged at that metric's value (an `epoch` or
        `global_step` logged in the same call, else the last one logged), not at the run's step.
        `step_sync`, `hidden` and `overwrite` are accepted for wandb's sake.

        Like `log`, it returns at once; the service has it before any point logged after it.
        """
        fields = {
            key: value
            for key, value in (("kind", kind), ("summary", summary), ("step_metric", step_metric), ("goal", goal))
            if value is not None
        }
        if step_metric is not None and step_metric != name:
            self._axes[name] = step_metric
            self._axis_of.clear()
        if not fields:
            return  # define_metric("epoch"): wandb's way of saying a metric exists; nothing to keep
        # kept in the registration too, so a service that lost the run learns it again
        self._register.payload.setdefault("metrics", {}).setdefault(name, {}).update(fields)
        self._queue.append(
            Control(
                "/api/v1/runs",
                {
                    "id": self.id,
                    "project": self.project,
                    "name": self.name,
                    "config": {},
                    "tags": [],
                    "metrics": {name: fields},
                },
            )
        )
        self._wake.set()

    def join_rank(self, rank: int, world_size: int, *, launcher: str, job: str) -> None:
        """Join rank `rank` of a job of `world_size` ranks to this run for a process that reads the
        job's log rather than runs in it (`holter follow`): the service lists the rank and reads its
        series (`holter/rank/<rank>/...`) beside its peers', and since the rank sends no beat, never
        counts it silent. Queued in order with the points, like `log`."""
        joined = {"rank": rank, "world_size": world_size, "launcher": launcher, "job": job[-256:], "beats": False}
        self._queue.append(
            Control(
                "/api/v1/runs",
                {"id": self.id, "project": self.project, "name": self.name, "config": {}, "tags": [], "rank": joined},
            )
        )
        self._wake.set()

    def _log_rank_timing(self, values: dict[str, float], step: int) -> None:
        self.log_at(values, step=step)

    def _send_summary(self, values: dict[str, Any]) -> None:
        if self.job is not None and self.job.rank != 0:
            return  # the run's summary is rank 0's; another rank's stays in its process (`run.summary`)
        self._queue.append(Control(f"/api/v1/runs/{self.id}/summary", {"values": values}))
        self._wake.set()

    def alert(self, title: str, text: str = "", level: Any = None, wait_duration: Any = None) -> None:
        """Raise an alert (wandb's `run.alert`): an `alert` event on the run, which the alert rules
        send to chat (a new channel's default rules take every level). `level`: "info", "warning"
        or "critical", or wandb's `AlertLevel.INFO`/`WARN`/`ERROR`. An alert with the same title
        within `wait_duration` seconds (default 60; a `timedelta` too) of the last is not sent.
        """
        severity = severity_of(level)
        if wait_duration is None:
            wait = 60.0
        else:
            wait = wait_duration.total_seconds() if hasattr(wait_duration, "total_seconds") else float(wait_duration)
        now = time.monotonic()
        last = self._alerted.get(title)
        if last is not None and now - last < wait:
            return
        self._alerted[title] = now
        step = self._next_step - 1 if self._next_step > 0 else None
        if self.job is not None and self.job.rank != 0:
            text = f"(from rank {self.job.rank} on {self.job.host}) {text}"
        payload = {
            "title": str(title)[:256] or "alert",
            "text": str(text)[:4000],
            "severity": severity,
            "step": step,
            "key": uuid.uuid4().hex,
        }
        self._queue.append(Control(f"/api/v1/runs/{self.id}/alerts", payload))
        self._wake.set()

    def watch(
        self,
        model: Any,
        criterion: Any = None,
        log: str | None = "gradients",
        log_freq: int = 1000,
        idx: Any = None,
        log_graph: bool = False,
    ) -> Any:
        """wandb's `run.watch`: per-layer gradient norms and activation RMS (`holter.torch.watch`)
        every `log_freq` backward passes, as wandb's hooks log: from the `log_freq`-th pass on,
        with the values of the script's next `log()` call, at its step (wandb's hooks log with
        `commit=False`), so the step counter and the script's own metrics stay where they would
        be without it. wandb's gradient and parameter histograms are not logged; `log`,
        `criterion`, `idx` and `log_graph` are accepted for its sake. Returns the
        `holter.torch.Watch`; `unwatch()` removes it."""
        from holter.torch import watch

        every = max(1, int(log_freq or 1))
        handle = watch(model, _IntoCurrentStep(self), every=every)
        handle.step = 1  # the first pass counts as 1: wandb logs on the log_freq-th, not the first
        self._watches.append(handle)
        return handle

    def unwatch(self, models: Any = None) -> None:
        """Take off the hooks `watch` put on `models` (a model or a list of them; default: all)."""
        chosen = (
            None if models is None else {id(m) for m in (models if isinstance(models, (list, tuple)) else [models])}
        )
        for handle in list(self._watches):
            if chosen is None or id(handle.model) in chosen:
                handle.remove()
                self._watches.remove(handle)

    def mark_preempting(self) -> None:
        """The job was told it will be stopped (wandb's `mark_preempting`): what is queued is sent
        at once, and an info-level `alert` event "preempting" marks the step on the run's timeline,
        so that a silence that follows reads as the preemption it is. The run stays running:
        resuming with the same id continues it; if it never comes back, the stall watch says so."""
        self.alert("preempting", "the job said it is about to be preempted", level="info", wait_duration=0)
        self._wake.set()

    def log_artifact(self, *args: Any, **kwargs: Any) -> None:
        """wandb's artifacts are accepted and not stored (Holter keeps curves, not files)."""
        _artifacts_note()

    use_artifact = log_artifact
    link_artifact = log_artifact

    def save(self, *args: Any, **kwargs: Any) -> None:
        """wandb's file upload: accepted, nothing is stored."""
        _note_once(
            "save", "holter: run.save() and log_code() are accepted and store nothing (Holter keeps curves, not files)"
        )

    log_code = save

    def log_throughput(
        self,
        tokens: float | None = None,
        samples: float | None = None,
        *,
        step: int | None = None,
        flops_per_token: float | None = None,
        peak_flops: float | str | None = None,
    ) -> None:
        """Call once per training step, after it: logs `holter/step_time` (the time since the
        previous call), `holter/throughput/tokens_per_s` and `holter/throughput/samples_per_s` for
        the step's `tokens` and `samples`, and `holter/throughput/mfu` given `flops_per_token` and
        `peak_flops` (see `timed_step`). The first call only starts the clock and logs nothing.
        """
        metrics = self._throughput.mark(tokens, samples, flops_per_token=flops_per_token, peak_flops=peak_flops)
        if metrics is not None:
            self.log(metrics, step=step)

    @contextmanager
    def timed_step(
        self,
        tokens: float | None = None,
        samples: float | None = None,
        *,
        step: int | None = None,
        flops_per_token: float | None = None,
        peak_flops: float | str | None = None,
    ) -> Iterator[None]:
        """Time the block as one step's work and log its throughput two ways (holter/throughput.py):

        * over the whole step, from the end of the previous timed step to the end of this one, the
          wait for the batch included: `holter/step_time`, `holter/throughput/tokens_per_s`,
          `holter/throughput/samples_per_s` (a loader stall shows here);
        * over the block alone, the step's own work: `holter/compute_time`,
          `holter/throughput/compute_tokens_per_s`, `holter/throughput/compute_samples_per_s`.

        With `flops_per_token` (`holter.torch.flops_per_token(model, seq_len)`) and `peak_flops`
        (the device's FLOP/s, or its name: "H100", `holter.torch.peak_flops()` looks it up) it also
        logs the model FLOPs utilisation both ways: `holter/throughput/mfu` and
        `holter/throughput/compute_mfu`. Nothing is logged when the block raises. The first step
        has no previous end: its whole step is known only when `holter.torch.watch_loader` wraps
        the loader (its wait for the first batch); call `restart_step_clock()` after a pause that
        should not count as a step (a long evaluation).
        """
        peak = mfu_peak(tokens, flops_per_token, peak_flops)  # a bad peak fails here, before the step's work
        started = self._step_clock.now()
        try:
            yield
        except BaseException:
            self._step_clock.restart()  # a failed step is no step: the next one does not count its time
            raise
        metrics = self._step_clock.step(started, tokens, samples, flops_per_token=flops_per_token, peak_flops=peak)
        self.log(metrics, step=step)

    def note_data_wait(self, seconds: float) -> None:
        """The wait for the next step's batch, from `holter.loader.watch_loader`: it completes the
        first timed step's whole-step time (later steps measure it from the previous step's end)."""
        self._step_clock.note_wait(seconds)

    def restart_step_clock(self) -> None:
        """Start the whole-step clock afresh at the next timed step, after a pause that is no part
        of a training step (an evaluation, a checkpoint): it would read as one very slow step."""
        self._step_clock.restart()

    def report_nonfinite(
        self, step: int, *, forward: Mapping[str, Any] | None = None, gradient: Mapping[str, Any] | None = None
    ) -> None:
        """Tell the service where non-finite values first appeared at `step`: `forward`, the module
        whose output first held one, and `gradient`, the first parameter whose gradient did, each
        `{"name": ..., "value": "NaN" | "Infinity" | "-Infinity"}` (a forward origin may add
        `"inputs_finite": False` when the module received them). `holter.torch.watch(...,
        nan_tripwire=True)` calls it; it travels in order with the points, through the spool when
        the service is away, and the service stores it once however often it is resent.
        """
        payload: dict[str, Any] = {
            "step": operator.index(step),
            "forward": dict(forward) if forward else None,
            "gradient": dict(gradient) if gradient else None,
        }
        if self.job is not None:
            payload["rank"] = self.job.rank
        self._queue.append(Control(f"/api/v1/runs/{self.id}/nonfinite", payload))
        self._wake.set()

    def report_preflight(self, checks: Iterable[Any]) -> None:
        """Store pre-flight check results with the run (`holter.torch.preflight` calls it): each a
        `holter.preflight.Check` or a mapping with `name`, `passed`, `summary` and `details`. Sent
        in order with the points, through the spool when the service is away; a check sent again
        replaces its earlier result."""
        payload = [c.to_json() if hasattr(c, "to_json") else dict(c) for c in checks]
        if payload:
            self._queue.append(Control(f"/api/v1/runs/{self.id}/preflight", {"checks": payload}))
            self._wake.set()

    def _wait_for_room(self) -> None:
        # Memory stays bounded: the sender always drains the queue, to the service or to disk.
        self._wake.set()
        while len(self._queue) >= self._max_queued_calls // 2 and self._sender.is_alive():
            time.sleep(0.001)

    def flush(self, timeout: float | None = 30.0) -> bool:
        """Wait until everything logged so far was sent or spooled; False on timeout."""
        barrier = Barrier()
        self._queue.append(barrier)
        self._wake.set()
        return barrier.done.wait(timeout)

    def finish(
        self,
        status: str | int = "finished",
        timeout: float | None = None,
        *,
        exit_code: int | None = None,
        quiet: bool | None = None,
        reason: str | None = None,
    ) -> Delivery:
        """Mark the run finished (or "crashed"), deliver what is queued, and say what became of it.

        `exit_code` (wandb's): non-zero marks the run crashed. `quiet` is accepted for wandb's sake.
        `reason`: why it crashed, in a line (an uncaught exception gives its own).

        One rank of a distributed job finishes its own part: the run is finished when rank 0 says
        so or every rank has, and crashed when any rank crashed.

        Waits up to `timeout` seconds (default $HOLTER_FLUSH_TIMEOUT or 30); whatever could not
        reach the service by then stays in the spool and is sent by the next process for this
        run. Returns the `Delivery`: points stored, duplicates, points of refused metrics,
        requests still spooled, and points not durable (held in memory because the spool could
        not be written; lost when the process ends). Calling it again returns the same.
        """
        if isinstance(status, int):  # finish(1): wandb's exit code given positionally
            status, exit_code = "finished", status
        if exit_code:
            status = "crashed"
        with self._finish_lock:
            if self.status != "running":
                return self._sender.delivery()
            self.status = status
            if self._carried:
                self._pending.update(self._carried)
                self._carried = {}
            if self._pending:
                self._commit_pending()
            _active_runs.discard(self)
        from holter import current  # imported here: holter.current imports this module

        current.forget(self)  # a finished run is no longer `holter.run`
        for handle in self._watches:
            handle.remove()  # what a step-function watch still holds reaches the run before it ends
        self._watches.clear()
        for companion in self._companions:
            companion.stop()
        if self._vitals is not None:
            self._vitals.stop(finished=status == "finished")
        if self._beat is not None:
            self._beat.stop()
        if timeout is None:
            timeout = float(os.environ.get("HOLTER_FLUSH_TIMEOUT", "30"))
        ending: dict[str, Any] = {"status": status}
        if self.job is not None:
            ending["rank"] = self.job.rank
        if reason:
            ending["reason"] = str(reason)[:500]
        self._queue.append(Control(f"/api/v1/runs/{self.id}/finish", ending))
        self._sender.stop(timeout)
        delivery = self._sender.delivery()
        if self.mode == "offline":
            print(
                f"holter: offline run {self.id} saved in {self._sender.spool_path}; send it with: holter sync "
                f"{self._sender.spool_path}",
                file=sys.stderr,
            )
        elif delivery.not_durable:
            print(
                f"holter: run {self.id} finished with {delivery.not_durable:,} points not sent and not on disk (the "
                "service "
                "is away and the spool cannot be written): they are lost when this process ends",
                file=sys.stderr,
            )
        elif delivery.spooled:
            print(
                f"holter: run {self.id} finished with {delivery.spooled:,} requests still in the spool at "
                f"{self._sender.spool_path}; "
                "the next process for this run sends them",
                file=sys.stderr,
            )
        return delivery

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc_type is None:
            self.finish("finished")
        else:
            self.finish("crashed", reason=f"{exc_type.__name__}: {exc}".strip().rstrip(":"))

    def __repr__(self) -> str:
        return f"Run(id={self.id!r}, project={self.project!r}, name={self.name!r}, status={self.status!r})"


class _IntoCurrentStep:
    """What a wandb-style `watch` logs into: the step of the script's next `log()` call (wandb's
    hooks log with `commit=False`), never a step of its own."""

    def __init__(self, run: Run) -> None:
        self.run = run

    def log(self, metrics: Mapping[str, Any], step: int | None = None) -> None:
        self.run._carried.update(metrics)


def init(
    project: str | None = None,
    name: str | None = None,
    config: Any = None,
    *,
    id: str | None = None,
    tags: list[str] | None = None,
    kinds: Mapping[str, str] | None = None,
    url: str | None = None,
    api_key: str | None = None,
    spool_dir: str | os.PathLike[str] | None = None,
    flush_interval: float | None = None,
    max_queued_calls: int = 200_000,
    connect_timeout: float = 3.0,
    max_held_bytes: int = 256 * 1024 * 1024,
    system_vitals: bool | None = None,
    quiet: bool | None = None,
    notes: str | None = None,
    offline: bool = False,
    group: str | None = None,
    job_type: str | None = None,
    sweep_id: str | None = None,
    provenance: bool | None = None,
) -> Run:
    """Start (or resume, when `id` names an existing run) a run and return it.

    `url` and `api_key` default to $HOLTER_URL and $HOLTER_API_KEY; `id` to $HOLTER_RUN_ID or a
    new random id. Giving the same id after a restart appends to the same run. `config`: a
    mapping, dataclass or argparse Namespace (see `holter.config`). `kinds` declares what
    metrics are, by name or glob (`{"train/ce": "loss", "eval/*": "eval_loss"}`), as
    `Run.define_metric` does one at a time. `max_held_bytes`: memory for requests the service
    has not taken when the spool cannot be written; when it is full, `log()` waits for room.
    `system_vitals` (default on; $HOLTER_SYSTEM_VITALS=0 turns it off) samples CPU, memory,
    disk, network and GPUs every $HOLTER_SYSTEM_INTERVAL seconds (default 10) into
    `holter/system/...`. Prints one line with the run's dashboard page unless `quiet` (or
    $HOLTER_QUIET=1). `notes`: what the run is about, shown on its page. `offline`: send nothing,
    keep everything in the spool for a later `holter sync`. `group`, `job_type` and `sweep_id`
    become the tags `group:NAME`, `job_type:NAME` and `sweep:ID`. `provenance` (default on;
    $HOLTER_PROVENANCE=0 turns it off) records the code version (git commit, dirty-diff hash) and
    the environment (Python, torch, CUDA, package versions, hostname) with the run
    (holter/provenance.py); `run.provenance` holds what was sent.

    In a distributed job (torchrun, SLURM, MPI, DeepSpeed: holter/job.py) every rank joins one
    run whose id all of them derive from the job's identity (an `id` given, or $HOLTER_RUN_ID,
    still names it; a `group` keeps wandb's way, one run per process): rank 0's metrics are the
    run's curves and every other rank's are kept as that rank's series (`holter/rank/<r>/<name>`).
    Each rank beats every $HOLTER_RANK_INTERVAL seconds (default 5) from a thread of its own: its
    step, its waits in collectives, and where its main thread is when its step stops moving. Ranks
    other than 0 send their points every $HOLTER_RANK_INTERVAL seconds too (`flush_interval`:
    default 1 s, for rank 0 and a run of one process), and only a node's first rank samples the
    machine's system vitals.

    `holter.init` (holter/current.py) is the wandb-style front of this: it also takes wandb's
    arguments and `mode`, and makes the run the process's current one (`holter.run`).
    """
    _install_hooks()
    project = project or os.environ.get("HOLTER_PROJECT") or "default"
    job = None if group else job_from_environment()
    run_id = id or os.environ.get("HOLTER_RUN_ID") or (job.run_id(project, name) if job else uuid.uuid4().hex[:16])
    if flush_interval is None:
        flush_interval = rank_interval(job.world_size) if job is not None and job.rank != 0 else 1.0
    run = Run(
        run_id=run_id,
        project=project,
        name=name,
        config=config,
        tags=tags,
        kinds=kinds,
        url=url or os.environ.get("HOLTER_URL") or DEFAULT_URL,
        api_key=api_key or os.environ.get("HOLTER_API_KEY"),
        spool_root=Path(spool_dir) if spool_dir else default_spool_root(),
        flush_interval=flush_interval,
        max_queued_calls=max_queued_calls,
        connect_timeout=connect_timeout,
        max_held_bytes=max_held_bytes,
        notes=notes,
        offline=offline,
        group=group,
        job_type=job_type,
        sweep_id=sweep_id,
        provenance=recorded_provenance() if _enabled(provenance, "HOLTER_PROVENANCE", default=True) else None,
        job=job,
    )
    if job is not None:  # a rank stopped by its launcher says so rather than go silent (holter/termination.py)
        termination.install(_end_all)
        if run.rank_clock is not None and "torch.distributed" in sys.modules:
            # a script that calls the collectives itself gets its waits timed without a watch
            from holter import distributed

            distributed.time_collectives(run.rank_clock)
    if job is not None and run.rank_clock is not None and not offline:
        run._beat = RankBeat(
            transport=Transport(run.service_url, api_key or os.environ.get("HOLTER_API_KEY"), timeout=connect_timeout),
            path=f"/api/v1/runs/{run.id}/ranks/{job.rank}/beat",
            clock=run.rank_clock,
            logged_step=lambda: run.step - 1,
            interval=rank_interval(job.world_size),
        )
        run._beat.start()
    # one sampler per machine: a node's first rank samples its CPUs, memory and every GPU on it
    first_on_node = job is None or not job.local_rank
    if first_on_node and _enabled(system_vitals, "HOLTER_SYSTEM_VITALS", default=True):
        run._vitals = SystemSampler(run, interval=sampling_interval())
        run._vitals.start()
    if not _enabled(quiet, "HOLTER_QUIET", default=False):
        if offline:
            print(
                f"holter: run {run.name or run.id} is offline; everything it logs stays in {run._sender.spool_path} "
                "for `holter sync`",
                file=sys.stderr,
            )
        else:
            print(f"holter: View run {run.name or run.id} at {run.page_url}", file=sys.stderr)
    return run


# wandb's alert levels (AlertLevel.INFO/WARN/ERROR and their names) and Holter's severities
_SEVERITIES = {"info": "info", "warn": "warning", "warning": "warning", "error": "critical", "critical": "critical"}
_notes: set[str] = set()


def severity_of(level: Any) -> str:
    """The Holter severity of an alert level: None → info; "WARN"/AlertLevel.WARN → warning; "ERROR" → critical."""
    if level is None:
        return "info"
    name = str(getattr(level, "value", level)).strip().lower()
    if name not in _SEVERITIES:
        raise ValueError(f"alert level {level!r}: use info, warning or critical (or wandb's INFO, WARN, ERROR)")
    return _SEVERITIES[name]


def _flat_dicts(values: Mapping[str, Any]) -> dict[str, Any]:
    """`values` with each nested dict spread into `name/key` entries (as the sender does)."""
    flat: dict[str, Any] = {}
    for name, value in values.items():
        if isinstance(value, Mapping):
            flat.update(_flat_dicts({f"{name}/{key}": item for key, item in value.items()}))
        else:
            flat[name] = value
    return flat


def _axis_for(name: str, axes: Mapping[str, str]) -> str | None:
    """The x-axis metric declared for `name` (exact name first, then the first glob that matches); a
    step metric is never its own axis."""
    axis = axes.get(name)
    if axis is None:
        axis = next((target for pattern, target in axes.items() if fnmatch.fnmatchcase(name, pattern)), None)
    return None if axis == name or name in axes.values() else axis


def _note_once(key: str, message: str) -> None:
    if key not in _notes:
        _notes.add(key)
        print(message, file=sys.stderr)


def _enabled(given: bool | None, variable: str, *, default: bool) -> bool:
    """An on/off option: the argument when given, else the environment variable, else `default`."""
    if given is not None:
        return given
    value = os.environ.get(variable, "").strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    return default


def _install_hooks() -> None:
    """Mark runs crashed on an uncaught exception and flush them at interpreter exit."""
    global _hooks_installed  # noqa: PLW0603 — the interpreter's hooks are installed once per process
    if _hooks_installed:
        return
    _hooks_installed = True
    previous_hook = sys.excepthook

    def excepthook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        reason = f"{exc_type.__name__}: {exc}".strip().rstrip(":")
        for run in list(_active_runs):
            run.finish("crashed", reason=reason)
        previous_hook(exc_type, exc, tb)

    sys.excepthook = excepthook
    atexit.register(_finish_all)


def _end_all(reason: str, timeout: float) -> None:
    for run in list(_active_runs):
        run.finish("crashed", timeout=timeout, reason=reason)


def _finish_all() -> None:
    for run in list(_active_runs):
        run.finish("finished")
