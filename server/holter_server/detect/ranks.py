"""The ranks of a distributed job read side by side: the slow rank, the stopped job, the lost
rank, and the rank whose loss or gradients leave its peers' band. Pure: where each rank stands
and its recent values in, events out (no clock: the caller says how long each has been quiet).

* **straggler** — in synchronous training every rank leaves each collective together, so every
  rank's step lasts as long as the slowest one's and step time cannot tell them apart. The slow
  rank computes longest before the collectives and waits least in them: it is named when its own
  work (the median over its last steps) exceeds the other ranks' median by a tenth and by four
  times their spread, while it waits less than they do. The other ranks then wait for it about
  that excess every step: its share of the job's time, and the device-hours it costs.
* **rank_hung** — the job has stopped moving (every live rank quiet for longer than `hang_after`)
  while some ranks wait inside a collective: the ranks that never reached it (or, when all wait,
  the laggards) are named with where their main thread stands.
* **rank_lost** — a rank went silent without finishing (no beat for three of its intervals)
  while other ranks were still heard from: its process is gone (killed, out of memory, its node
  down); the ranks that waited for it, or failed after it, are named beside it.
* **rank_outlier** — data-parallel ranks see different batches and share their weights: their
  losses move together, and so do their gradient norms before the all-reduce. A rank non-finite
  where its peers are finite is named at the first such step; a rank whose values sit apart from
  the other ranks' at the same steps, in one direction, by four times the ranks' spread, over at
  least `MIN_COMMON_STEPS` steps, is named with the size of the gap.
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from holter_server.detect.events import Event, format_step, format_value
from holter_server.vocabulary.events import EventKind
from holter_server.vocabulary.ranks import rank_list
from holter_server.vocabulary.severities import Level
from holter_server.vocabulary.statuses import RunStatus

MIN_TIMED_STEPS = 20  # steps of a rank's window before its timings are compared
STRAGGLER_EXCESS = 0.10  # its own work this share above the others' median...
STRAGGLER_NOISE = 4.0  # ...and this many times their spread
SILENT_INTERVALS = 3.0  # beats missed before a rank counts as gone
TEARDOWN_BEATS = 2.0  # a rank quiet this many beats after the first lost one, in a job being torn down: its teardown
MIN_HANG_S = 10.0  # a job quiet for less is never called hung
HANG_STEPS = 20.0  # ...nor for less than this many of its usual steps
MIN_COMMON_STEPS = 20  # steps logged by every rank compared before a finite outlier is named
OUTLIER_NOISE = 4.0
OUTLIER_SAME_SIDE = 0.8  # share of the steps on the outlier's side of its peers


@dataclass(frozen=True)
class RankState:
    """One rank as the service last heard it. `quiet_s`: seconds since its step last moved;
    `silent_s`: seconds since its last beat; `collective_s`: seconds inside `collective`."""

    rank: int
    status: str
    host: str | None = None
    reason: str | None = None
    step: int | None = None
    quiet_s: float | None = None
    silent_s: float | None = None
    interval_s: float = 5.0
    collective: str | None = None
    collective_s: float | None = None
    stack: Sequence[Mapping[str, Any]] | None = None
    timing: Mapping[str, Any] | None = None
    world_size: int | None = None

    @property
    def running(self) -> bool:
        return self.status == RunStatus.RUNNING

    @property
    def silent(self) -> bool:
        """Still running, as far as it said, and not heard from for three of its intervals."""
        return self.running and self.silent_s is not None and self.silent_s > SILENT_INTERVALS * self.interval_s

    def where(self) -> str:
        """Where its main thread stands, in a few words: "`forward` (train.py:41: time.sleep(60))"."""
        if not self.stack:
            return "somewhere its stack did not say"
        frame = self.stack[-1]
        file = str(frame.get("file") or "?").replace("\\", "/").rsplit("/", 1)[-1]
        code = str(frame.get("code") or "").strip()
        place = f"{file}:{frame.get('line')}" + (f": {code}" if code else "")
        return f"`{frame.get('function')}` ({place})"

    def on_host(self) -> str:
        return f" on host {self.host}" if self.host else ""


@dataclass(frozen=True)
class RankFinding:
    """An event about the job's ranks, with the key that keeps it one event while it lasts."""

    key: str
    event: Event
    ranks: list[int] = field(default_factory=list)


def _rank_details(states: Sequence[RankState]) -> list[dict[str, Any]]:
    return [
        {
            "rank": s.rank,
            "host": s.host,
            "status": s.status,
            "step": s.step,
            "collective": s.collective,
            "quiet_s": None if s.quiet_s is None else round(s.quiet_s, 1),
            "stack": list(s.stack or [])[-4:],
        }
        for s in states
    ]


def _key(prefix: str, ranks: Sequence[int]) -> str:
    """An event's key naming a set of ranks, within what the store keeps of a key (400
    characters): the ranks themselves when short, else a digest of them."""
    listed = ",".join(str(r) for r in sorted(ranks))
    if len(prefix) + len(listed) <= 200:
        return prefix + listed
    return f"{prefix}{len(ranks)}-ranks-{hashlib.sha256(listed.encode()).hexdigest()[:16]}"


def _spread(values: Sequence[float]) -> float:
    """A robust standard deviation: 1.4826 × the median absolute deviation."""
    if len(values) < 2:
        return 0.0
    middle = statistics.median(values)
    return 1.4826 * statistics.median(abs(v - middle) for v in values)


def find_straggler(ranks: Sequence[RankState], *, episode_s: float | None = None) -> RankFinding | None:
    """The slow rank (or the slow ranks of one host), if one holds the job back (module doc).
    `episode_s`: how long it has been seen (default: the span of its timed steps), for the cost."""
    timed = [
        r
        for r in ranks
        if r.running and not r.silent and r.timing and int(r.timing.get("steps") or 0) >= MIN_TIMED_STEPS
    ]
    if len(timed) < 2:
        return None
    slow: list[tuple[RankState, float, float]] = []
    computes = [float(r.timing["compute_s"]) for r in timed]  # type: ignore[index]
    waits_all = [float(r.timing["wait_s"]) for r in timed]  # type: ignore[index]
    # a big job is judged against every rank's medians (one rank moves them by nothing): the
    # others' own, rank by rank, cost N² (a 2,048-rank pass took 1.9 s)
    shared = (statistics.median(computes), _spread(computes), statistics.median(waits_all)) if len(timed) > 32 else None
    for index, rank in enumerate(timed):
        if shared is not None:
            typical, spread, waited = shared
        else:
            others = computes[:index] + computes[index + 1 :]
            typical, spread = statistics.median(others), _spread(others)
            waited = statistics.median(waits_all[:index] + waits_all[index + 1 :])
        own = computes[index]
        noise = max(spread, 0.02 * abs(typical), 1e-3)
        excess = own - typical
        if (
            excess > STRAGGLER_EXCESS * max(typical, 1e-3)
            and excess > STRAGGLER_NOISE * noise
            and waits_all[index] < waited
        ):
            slow.append((rank, excess, typical))
    if not slow or len(slow) > len(timed) // 2:
        return None  # half the job "slow" is no straggler: the ranks are simply spread
    slow.sort(key=lambda item: -item[1])
    worst, excess, typical = slow[0]
    step_s = statistics.median(float(r.timing["step_s"]) for r in timed)  # type: ignore[index]
    share = min(1.0, excess / step_s) if step_s > 0 else 0.0
    world = max([r.world_size or 0 for r in ranks] + [len(ranks)])
    window = worst.timing or {}
    span = episode_s if episode_s is not None else float(window.get("steps") or 0) * step_s
    gpu_hours = world * share * span / 3600.0
    slow_ranks = sorted(r.rank for r, _, _ in slow)
    hosts = {r.host for r, _, _ in slow}
    host_ranks = sorted(r.rank for r in timed if r.host in hosts)
    if len(slow) > 1 and len(hosts) == 1 and host_ranks == slow_ranks and worst.host:
        who = f"{rank_list(slow_ranks)} on host {worst.host}"
    else:
        slow_ranks = [worst.rank]
        who = f"rank {worst.rank}{worst.on_host()}"
    steps = int(window.get("steps") or 0)
    summary = (
        f"{who} {'compute' if len(slow_ranks) > 1 else 'computes'} {excess / typical:.0%} longer than the median "
        f"rank over the last {steps} steps ({format_value(typical + excess)} s vs {format_value(typical)} s before the "
        f"collectives); every rank waits for {'them' if len(slow_ranks) > 1 else 'it'} "
        f"(~{share:.0%} of the job's time, ~{gpu_hours:.2g} device-hours of {world} ranks so far)"
    )
    first = int(window.get("first_step") or 0)
    last = int(window.get("last_step") or first)
    event = Event(
        kind=EventKind.STRAGGLER,
        metric=None,
        start_step=first,
        end_step=last,
        severity=Level.WARNING,
        score=round(share, 4),
        summary=summary,
        details={
            "ranks": slow_ranks,
            "hosts": sorted(h for h in hosts if h),
            "compute_s": round(typical + excess, 6),
            "median_compute_s": round(typical, 6),
            "excess": round(excess / typical, 4) if typical else None,
            "share_of_job": round(share, 4),
            "device_hours": round(gpu_hours, 4),
            "world_size": world,
            "steps": steps,
        },
    )
    return RankFinding(key=_key("ranks:straggler:", slow_ranks), event=event, ranks=slow_ranks)


def hang_threshold(ranks: Sequence[RankState]) -> float:
    """Seconds a job must stand still before it is called hung: ten seconds, twenty of its usual
    steps, or two of its beats, whichever is longest."""
    steps = [float(r.timing["step_s"]) for r in ranks if r.timing and r.timing.get("step_s") is not None]
    usual = statistics.median(steps) if steps else 0.0
    beat = max((r.interval_s for r in ranks), default=5.0)
    return max(MIN_HANG_S, HANG_STEPS * usual, 2.0 * beat)


def find_stopped(ranks: Sequence[RankState]) -> RankFinding | None:
    """The lost rank, or the hung job and the ranks that hold it (module doc); None while it moves."""
    running = [r for r in ranks if r.running]
    if not running:
        return None
    lost = [r for r in running if r.silent]
    if lost and len(lost) * 2 > len(running) and len(running) == len(ranks):
        # most of a running job silent at once, none of it ended: the service is behind on its beats
        # (or the way to the job is gone), not most of the job dead
        return None
    if lost and any(r.status == RunStatus.CRASHED for r in ranks):
        # A job torn down after a rank died: the launcher stops the others, and one held in a
        # collective by the dead rank cannot run its handler and is killed without a word, long
        # after (torchrun waits 30 s). The lost rank went quiet first; those that went quiet more
        # than two of their beats later are the teardown, not another loss.
        first = max(r.silent_s or 0.0 for r in lost)
        lost = [r for r in lost if (r.silent_s or 0.0) >= first - TEARDOWN_BEATS * r.interval_s]
    gone = {r.rank for r in lost}
    heard = [r for r in ranks if r.rank not in gone]
    if lost and heard:
        return _lost(lost, heard)
    if lost:
        return None  # every rank silent at once: the job (or the way to it) is gone, a stall, not a rank
    threshold = hang_threshold(ranks)
    if any((r.quiet_s or 0.0) < threshold for r in running):
        return None
    waiting = [r for r in running if r.collective]
    if not waiting:
        return None  # all paused outside any collective (an evaluation, a checkpoint): not a hang
    ended = [r for r in ranks if not r.running]
    elsewhere = [r for r in running if not r.collective]
    collective = statistics.mode(r.collective for r in waiting)
    since = min((r.step for r in waiting if r.step is not None), default=None)
    waited = max((r.collective_s or 0.0) for r in waiting)
    text = f"{rank_list([r.rank for r in waiting])} wait in {collective}"
    text += f" since step {format_step(since)}" if since is not None else ""
    text += f" ({waited:.0f} s)"
    if elsewhere:
        culprits = elsewhere
        parts = [
            f"rank {r.rank}{r.on_host()} is in {r.where()}"
            + (f" at step {format_step(r.step)}" if r.step is not None and r.step != since else "")
            for r in elsewhere[:4]
        ]
        more = f" (and {len(elsewhere) - 4} more)" if len(elsewhere) > 4 else ""
        text += "; " + "; ".join(parts) + more + f" and {'has' if len(elsewhere) == 1 else 'have'} not reached it"
    elif ended:
        culprits = ended
        text += "; " + "; ".join(
            f"rank {r.rank}{r.on_host()} {r.status}" + (f" ({r.reason})" if r.reason else "") for r in ended[:4]
        )
        text += " and will not join it"
    else:
        steps = [r.step for r in waiting if r.step is not None]
        behind = [r for r in waiting if r.step is not None and steps and r.step < max(steps)]
        culprits = behind or waiting
        if behind:
            text += f"; {rank_list([r.rank for r in behind])} wait{'s' if len(behind) == 1 else ''} at an earlier step"
        else:
            text += ": every rank is inside it and none has left (a collective the ranks do not all call alike?)"
    event = Event(
        kind=EventKind.RANK_HUNG,
        metric=None,
        start_step=since,
        end_step=since,
        severity=Level.CRITICAL,
        score=round(waited, 1),
        summary=text,
        details={
            "ranks": sorted(r.rank for r in culprits),
            "waiting": sorted(r.rank for r in waiting),
            "collective": collective,
            "quiet_s": round(min(r.quiet_s or 0.0 for r in running), 1),
            "threshold_s": round(threshold, 1),
            "stacks": _rank_details(sorted(culprits, key=lambda r: r.rank)[:16]),
        },
    )
    return RankFinding(
        key=f"ranks:hung@{since if since is not None else 'unknown'}", event=event, ranks=event.details["ranks"]
    )


def _hosts(states: Sequence[RankState]) -> str:
    hosts = sorted({s.host for s in states if s.host})
    if not hosts:
        return ""
    return f" on host {hosts[0]}" if len(hosts) == 1 else f" on hosts {', '.join(hosts[:4])}"


def _lost(lost: Sequence[RankState], heard: Sequence[RankState]) -> RankFinding:
    last_steps = [r.step for r in lost if r.step is not None]
    at = min(last_steps) if last_steps else None
    one = len(lost) == 1
    silent = max(r.silent_s or 0.0 for r in lost)
    text = (
        f"{rank_list([r.rank for r in lost])}{_hosts(lost)} went silent"
        + (f" at step {format_step(at)}" if at is not None else "")
        + f" without finishing ({silent:.0f} s since {'its' if one else 'their'} last beat): "
        + (
            "its process is gone or its host unreachable"
            if one
            else "their processes are gone or their hosts unreachable"
        )
    )
    crashed = [r for r in heard if r.status == RunStatus.CRASHED]
    waiting = [r for r in heard if r.running and r.collective]
    if crashed:
        reason = next((r.reason for r in crashed if r.reason), None)
        text += f"; {rank_list([r.rank for r in crashed])} crashed after {'it' if one else 'them'}"
        text += f" ({short_reason(reason)})" if reason else ""
    if waiting:
        collective = statistics.mode(r.collective for r in waiting)
        text += f"; {rank_list([r.rank for r in waiting])} wait for {'it' if one else 'them'} in {collective}"
    event = Event(
        kind=EventKind.RANK_LOST,
        metric=None,
        start_step=at,
        end_step=at,
        severity=Level.CRITICAL,
        score=round(silent, 1),
        summary=text,
        details={
            "ranks": sorted(r.rank for r in lost),
            "crashed": sorted(r.rank for r in crashed),
            "waiting": sorted(r.rank for r in waiting),
            "stacks": _rank_details(sorted(lost, key=lambda r: r.rank)[:16]),
        },
    )
    # Keyed by the step where the loss began, not by the ranks: when a job is torn down after a
    # rank died, ranks stopped on purpose can look silent until their own "crashed" arrives, and
    # the next reading (the dead rank alone) then replaces the first in place.
    key = f"ranks:lost@{at if at is not None else 'unknown'}"
    return RankFinding(key=key, event=event, ranks=event.details["ranks"])


def short_reason(reason: str, limit: int = 160) -> str:
    """A crash's reason in a line: the innermost of nested "error when running the callback" wrappers."""
    inner = reason.rsplit("RuntimeError: ", 1)[-1] if reason.count("RuntimeError: ") > 1 else reason
    return inner if len(inner) <= limit else inner[: limit - 1] + "…"


def find_outliers(
    series: Mapping[int, Mapping[int, float]], *, metric: str, label: str, hosts: Mapping[int, str | None] | None = None
) -> list[RankFinding]:
    """The ranks whose `metric` (rank → step → value, rank 0's under its own name) leaves its
    peers' band (module doc); `label` names the metric in the text ("loss", "gradient norm")."""
    hosts = hosts or {}
    if len(series) < 2:
        return []
    steps = sorted(set().union(*(s.keys() for s in series.values())))
    findings: list[RankFinding] = []
    # a rank non-finite where its peers are finite, at the first such step
    for step in steps:
        at = {rank: values[step] for rank, values in series.items() if step in values}
        if len(at) < 2:
            continue
        bad = [rank for rank, value in at.items() if not math.isfinite(value)]
        good = [value for value in at.values() if math.isfinite(value)]
        if bad and len(good) >= len(at) / 2:
            ranks = sorted(bad)
            first_bad = at[ranks[0]]
            where = f" on host {hosts[ranks[0]]}" if len(ranks) == 1 and hosts.get(ranks[0]) else ""
            source = "this rank" if len(ranks) == 1 else "these ranks"
            text = (
                f"{rank_list(ranks)}{where}: {label} {format_value(first_bad)} at step {format_step(step)} while "
                f"{'its' if len(ranks) == 1 else 'their'} peers' are finite ({format_value(min(good))} to "
                f"{format_value(max(good))}): the non-finite value came from {source}"
            )
            event = Event(
                kind=EventKind.RANK_OUTLIER,
                metric=metric,
                start_step=step,
                end_step=step,
                severity=Level.CRITICAL,
                score=float(len(good)),
                summary=text,
                details={"ranks": ranks, "hosts": {str(r): hosts.get(r) for r in ranks}, "cause": "nonfinite"},
            )
            findings.append(
                RankFinding(key=_key(f"ranks:outlier:{metric}:nonfinite:", ranks), event=event, ranks=ranks)
            )
            break
    if len(series) < 3:
        return findings
    common = [s for s in steps if all(s in values and math.isfinite(values[s]) for values in series.values())]
    common = common[-200:]
    if len(common) < MIN_COMMON_STEPS:
        return findings
    deviations: dict[int, list[float]] = {rank: [] for rank in series}
    for step in common:
        middle = statistics.median(values[step] for values in series.values())
        for rank, values in series.items():
            deviations[rank].append(values[step] - middle)
    pooled = [abs(d) for ds in deviations.values() for d in ds]
    level = statistics.median(abs(values[s]) for values in series.values() for s in common)
    noise = max(1.4826 * statistics.median(pooled), 1e-3 * level, 1e-12)
    apart: list[tuple[int, float, float]] = []
    for rank, devs in deviations.items():
        gap = statistics.median(devs)
        same_side = sum(1 for d in devs if d * gap > 0) / len(devs)
        if abs(gap) > OUTLIER_NOISE * noise and same_side >= OUTLIER_SAME_SIDE:
            apart.append((rank, gap, same_side))
    if not apart or len(apart) > len(series) // 4 + (1 if len(series) < 8 else 0):
        return findings
    for rank, gap, same_side in apart:
        peers = statistics.median(statistics.median(v[s] for s in common) for r, v in series.items() if r != rank)
        where = f" on host {hosts[rank]}" if hosts.get(rank) else ""
        text = (
            f"rank {rank}{where}: {label} {'above' if gap > 0 else 'below'} its peers' over the last {len(common)} "
            f"steps (by {format_value(abs(gap))}, {abs(gap) / noise:.0f}× the ranks' spread, on that side at "
            f"{same_side:.0%} of the steps; its peers' median {format_value(peers)}): a bad shard of data, or a "
            "faulty device"
        )
        event = Event(
            kind=EventKind.RANK_OUTLIER,
            metric=metric,
            start_step=common[0],
            end_step=common[-1],
            severity=Level.WARNING,
            score=round(abs(gap) / noise, 2),
            summary=text,
            details={
                "ranks": [rank],
                "gap": gap,
                "spread": noise,
                "same_side": round(same_side, 3),
                "steps": len(common),
            },
        )
        findings.append(RankFinding(key=f"ranks:outlier:{metric}:{rank}", event=event, ranks=[rank]))
    return findings
