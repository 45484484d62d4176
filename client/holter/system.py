"""System vitals: CPU, memory, disk and network from `/proc`, and per-GPU readings through NVML
(`nvidia-ml-py`, when importable) or `nvidia-smi` (when on the PATH), sampled in a thread of
their own and logged under `holter/system/`.

    holter/system/cpu.percent                  whole machine, 0-100
    holter/system/memory.used_frac             1 - MemAvailable / MemTotal
    holter/system/memory.process_rss_gib       this process
    holter/system/disk.used_frac               the filesystem of the working directory
    holter/system/disk.read_mb_per_s, .write_mb_per_s, holter/system/network.recv_mb_per_s, .sent_mb_per_s
    holter/system/gpu.<i>.utilization          0-100
    holter/system/gpu.<i>.memory_used_gib, holter/system/gpu.<i>.memory_used_frac
    holter/system/gpu.<i>.temperature_c, holter/system/gpu.<i>.power_w, holter/system/gpu.<i>.sm_clock_mhz
    holter/system/gpu.<i>.throttle.thermal     1 while the clocks are cut for heat (software or hardware)
    holter/system/gpu.<i>.throttle.power       1 while the hardware slows down or brakes for power

Samples are logged at the training step the run has reached, once per step at most, so a
stored sample always means "steps continue" (what the service's `gpu_idle` detector reads).

While no step is logged the machine is still sampled, because a job that stops logging (hung
in a collective, stuck in its data loader, compiling) is when its vitals matter most. From the
second sample in a row without a new step, each sample goes to the run's summary as
`holter/system/<name>` (the latest reading), with `holter/system/sampled_at` (UTC),
`holter/system/quiet_for_s` (seconds since the step last moved) and
`holter/system/quiet_since_step`: the run page shows the machine of a hung job, live. They are
not points: the service keeps one value per metric and step, so a second sample at the last
step would be refused as that step "logged again", and a step beyond it would be a step the job
never took. When steps move again (or the run finishes) those summary keys are removed.
Standard library only; every reader degrades to nothing on a machine that lacks what it reads.
"""

from __future__ import annotations

import contextlib
import csv
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from holter.run import Run

PREFIX = "holter/system/"
DEFAULT_INTERVAL_S = 10.0
MIN_INTERVAL_S = 0.05
# samples in a row without a new step before the machine is reported in the summary (a job that
# logs every few samples is not quiet; one that skipped a whole interval twice is)
QUIET_SAMPLES = 2
GIB = float(1 << 30)
MB = 1e6
# NVML clock-event ("throttle") reason bits, nvml.h `nvmlClocksEventReason*`.
THROTTLE_SW_POWER_CAP = 0x4
THROTTLE_HW_SLOWDOWN = 0x8
THROTTLE_SW_THERMAL = 0x20
THROTTLE_HW_THERMAL = 0x40
THROTTLE_HW_POWER_BRAKE = 0x80
THERMAL_BITS = THROTTLE_SW_THERMAL | THROTTLE_HW_THERMAL
# The software power cap is left out: a busy GPU sits at its power cap by design (and some
# report it while idle: tests/data/nvidia_smi/geforce-rtx-2080-super__595.71.05__idle.csv).
POWER_BITS = THROTTLE_HW_SLOWDOWN | THROTTLE_HW_POWER_BRAKE
# The fields asked of nvidia-smi; the throttle field was renamed `clocks_event_reasons` in newer
# drivers, and one unknown field fails the whole query, so it is asked for separately.
SMI_FIELDS = ("index", "utilization.gpu", "memory.used", "memory.total", "temperature.gpu", "power.draw", "clocks.sm")
SMI_THROTTLE_FIELDS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")
SMI_TIMEOUT_S = 5.0

Metrics = dict[str, float]


def sampling_interval() -> float:
    """Seconds between samples: $HOLTER_SYSTEM_INTERVAL, else 10."""
    try:
        return max(MIN_INTERVAL_S, float(os.environ.get("HOLTER_SYSTEM_INTERVAL", DEFAULT_INTERVAL_S)))
    except ValueError:
        return DEFAULT_INTERVAL_S


# --- /proc -------------------------------------------------------------------------------------


class ProcReader:
    """CPU, memory, disk and network of this machine from `/proc` (Linux); rates are per second
    since the previous `read()`, so the first read gives levels only."""

    def __init__(self, proc: str = "/proc", disk_path: str = ".") -> None:
        self.proc = proc
        self.disk_path = disk_path
        self._cpu: list[int] | None = None
        self._io: dict[str, float] | None = None
        self._io_at = 0.0

    def read(self) -> Metrics:
        """One sample; a file that cannot be read contributes nothing."""
        metrics: Metrics = {}
        for part in (self._cpu_percent, self._memory, self._disk_usage, self._rates):
            try:
                metrics.update(part())
            except (OSError, ValueError, IndexError, ZeroDivisionError):
                continue
        return metrics

    def _path(self, *parts: str) -> str:
        return os.path.join(self.proc, *parts)

    def _cpu_percent(self) -> Metrics:
        with open(self._path("stat")) as handle:
            fields = [int(x) for x in handle.readline().split()[1:]]
        previous, self._cpu = self._cpu, fields
        if previous is None:
            return {}
        delta = [a - b for a, b in zip(fields, previous)]
        total = sum(delta[:8])  # user nice system idle iowait irq softirq steal (guest is inside user)
        idle = delta[3] + delta[4]
        return {"cpu.percent": 100.0 * (total - idle) / total} if total > 0 else {}

    def _memory(self) -> Metrics:
        info = {}
        with open(self._path("meminfo")) as handle:
            for line in handle:
                key, _, rest = line.partition(":")
                info[key] = float(rest.split()[0]) * 1024.0
        metrics = {"memory.used_frac": 1.0 - info["MemAvailable"] / info["MemTotal"]}
        with open(self._path("self", "status")) as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    metrics["memory.process_rss_gib"] = float(line.split()[1]) * 1024.0 / GIB
        return metrics

    def _disk_usage(self) -> Metrics:
        usage = shutil.disk_usage(self.disk_path)
        return {"disk.used_frac": usage.used / usage.total}

    def _rates(self) -> Metrics:
        counters = {**self._disk_bytes(), **self._network_bytes()}
        now = time.monotonic()
        previous, previous_at = self._io, self._io_at
        self._io, self._io_at = counters, now
        if previous is None or now <= previous_at:
            return {}
        elapsed = now - previous_at
        return {
            f"{name}_mb_per_s": max(0.0, counters[name] - previous[name]) / MB / elapsed
            for name in counters
            if name in previous
        }

    def _disk_bytes(self) -> dict[str, float]:
        read = written = 0.0
        with open(self._path("diskstats")) as handle:
            for line in handle:
                fields = line.split()
                name = fields[2]
                # whole devices only (sda, nvme0n1, vda), not their partitions, loops or RAM disks
                if name.startswith(("loop", "ram", "dm-", "sr", "zram")) or _is_partition(name):
                    continue
                read += int(fields[5]) * 512.0
                written += int(fields[9]) * 512.0
        return {"disk.read": read, "disk.write": written}

    def _network_bytes(self) -> dict[str, float]:
        received = sent = 0.0
        with open(self._path("net", "dev")) as handle:
            for line in handle.readlines()[2:]:
                name, _, rest = line.partition(":")
                if name.strip() == "lo":
                    continue
                fields = rest.split()
                received += float(fields[0])
                sent += float(fields[8])
        return {"network.recv": received, "network.sent": sent}


def _is_partition(name: str) -> bool:
    """sda1, nvme0n1p2, vdb3 are partitions; sda, nvme0n1, vdb are devices."""
    if name.startswith(("nvme", "mmcblk")):
        return "p" in name.rpartition("n")[2]
    return name[-1:].isdigit()


# --- GPUs --------------------------------------------------------------------------------------


def gpu_metrics(
    index: int,
    *,
    utilization: float | None = None,
    memory_used: float | None = None,
    memory_total: float | None = None,
    temperature: float | None = None,
    power_w: float | None = None,
    sm_clock: float | None = None,
    throttle_reasons: int | None = None,
) -> Metrics:
    """The `gpu.<index>.*` metrics of one GPU reading (memory in bytes); unknown readings are left out."""
    key = f"gpu.{index}."
    metrics: Metrics = {}
    if utilization is not None:
        metrics[key + "utilization"] = utilization
    if memory_used is not None:
        metrics[key + "memory_used_gib"] = memory_used / GIB
        if memory_total:
            metrics[key + "memory_used_frac"] = memory_used / memory_total
    if temperature is not None:
        metrics[key + "temperature_c"] = temperature
    if power_w is not None:
        metrics[key + "power_w"] = power_w
    if sm_clock is not None:
        metrics[key + "sm_clock_mhz"] = sm_clock
    if throttle_reasons is not None:
        metrics[key + "throttle.thermal"] = 1.0 if throttle_reasons & THERMAL_BITS else 0.0
        metrics[key + "throttle.power"] = 1.0 if throttle_reasons & POWER_BITS else 0.0
    return metrics


class NvmlReader:
    """Per-GPU readings through NVML (`import pynvml`, from nvidia-ml-py). `open()` returns None
    when the module or the driver is missing."""

    def __init__(self, nvml: Any) -> None:
        self.nvml = nvml
        self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
        # renamed from ...ThrottleReasons in NVML 12.x; older bindings have only the old name
        self._reasons = getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
            nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
        )

    @classmethod
    def open(cls) -> NvmlReader | None:
        try:
            import pynvml
        except ImportError:
            return None
        try:
            pynvml.nvmlInit()
            reader = cls(pynvml)
        except Exception:  # noqa: BLE001 — NVMLError_LibraryNotFound, DriverNotLoaded, ...: no GPU reachable here
            return None
        return reader if reader.handles else None

    def read(self) -> Metrics:
        metrics: Metrics = {}
        nvml = self.nvml
        for index, handle in enumerate(self.handles):
            memory = self._call(nvml.nvmlDeviceGetMemoryInfo, handle)
            utilization = self._call(nvml.nvmlDeviceGetUtilizationRates, handle)
            power = self._call(nvml.nvmlDeviceGetPowerUsage, handle)
            metrics.update(
                gpu_metrics(
                    index,
                    utilization=float(utilization.gpu) if utilization is not None else None,
                    memory_used=float(memory.used) if memory is not None else None,
                    memory_total=float(memory.total) if memory is not None else None,
                    temperature=_float(self._call(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU)),
                    power_w=power / 1000.0 if power is not None else None,  # NVML answers milliwatts
                    sm_clock=_float(self._call(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM)),
                    throttle_reasons=self._call(self._reasons, handle) if self._reasons else None,
                )
            )
        return metrics

    def close(self) -> None:
        # NVML's errors have no common base class worth naming; a failed shutdown changes nothing
        with contextlib.suppress(Exception):
            self.nvml.nvmlShutdown()

    @staticmethod
    def _call(function: Callable[..., Any], *args: Any) -> Any:
        """One NVML reading; None where the GPU does not support it (utilisation under MIG)."""
        try:
            return function(*args)
        except Exception:  # noqa: BLE001 — NVML raises one class per unsupported reading
            return None


def parse_nvidia_smi_csv(text: str) -> Metrics:
    """`nvidia-smi --query-gpu=... --format=csv[,nounits]` output (with its header) as metrics.

    Columns are found by name, so any field order and extra fields work; units in the values
    (`35 %`, `1234 MiB`, `250.00 W`) are stripped; `[N/A]` and `[Not Supported]` are left out.
    """
    rows = list(csv.reader(text.strip().splitlines(), skipinitialspace=True))
    if len(rows) < 2:
        return {}
    header = [_field_name(name) for name in rows[0]]
    metrics: Metrics = {}
    for position, row in enumerate(rows[1:]):
        cells = dict(zip(header, (cell.strip() for cell in row)))
        index = _smi_number(cells.get("index"))
        reasons = cells.get("clocks_event_reasons.active") or cells.get("clocks_throttle_reasons.active")
        used, total = _smi_number(cells.get("memory.used")), _smi_number(cells.get("memory.total"))
        metrics.update(
            gpu_metrics(
                int(index) if index is not None else position,
                utilization=_smi_number(cells.get("utilization.gpu")),
                memory_used=used * (1 << 20) if used is not None else None,  # MiB
                memory_total=total * (1 << 20) if total is not None else None,
                temperature=_smi_number(cells.get("temperature.gpu")),
                power_w=_smi_number(cells.get("power.draw")),
                sm_clock=_smi_number(cells.get("clocks.sm", cells.get("clocks.current.sm"))),
                throttle_reasons=_smi_bits(reasons),
            )
        )
    return metrics


def _field_name(header_cell: str) -> str:
    """'utilization.gpu [%]' -> 'utilization.gpu'."""
    return header_cell.strip().split(" [", 1)[0]


def _smi_number(cell: str | None) -> float | None:
    if not cell or cell.startswith("["):
        return None
    try:
        return float(cell.split()[0])
    except ValueError:
        return None


def _smi_bits(cell: str | None) -> int | None:
    if not cell or cell.startswith("["):
        return None
    try:
        return int(cell, 16)
    except ValueError:
        return None


def _float(value: Any) -> float | None:
    return float(value) if value is not None else None


class SmiReader:
    """Per-GPU readings by running `nvidia-smi --query-gpu ...` (when NVML's Python binding is absent)."""

    def __init__(self, executable: str) -> None:
        self.executable = executable
        self.fields = list(SMI_FIELDS)
        for throttle in SMI_THROTTLE_FIELDS:
            if self._query([*SMI_FIELDS, throttle]) is not None:
                self.fields.append(throttle)
                break

    @classmethod
    def open(cls) -> SmiReader | None:
        executable = shutil.which("nvidia-smi")
        if executable is None:
            return None
        reader = cls(executable)
        return reader if reader.read() else None

    def read(self) -> Metrics:
        output = self._query(self.fields)
        return parse_nvidia_smi_csv(output) if output else {}

    def close(self) -> None:
        pass

    def _query(self, fields: list[str]) -> str | None:
        try:
            done = subprocess.run(
                [self.executable, f"--query-gpu={','.join(fields)}", "--format=csv,nounits"],
                capture_output=True,
                text=True,
                timeout=SMI_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout if done.returncode == 0 else None


def open_gpu_reader() -> Any:
    """NVML when its binding and a driver are there, else nvidia-smi when it answers, else None."""
    return NvmlReader.open() or SmiReader.open()


# --- the sampler -------------------------------------------------------------------------------


class SystemSampler(threading.Thread):
    """Samples the vitals every `interval` seconds and logs them into `run` at its current step."""

    def __init__(
        self, run: Run, *, interval: float = DEFAULT_INTERVAL_S, proc: ProcReader | None = None, gpus: Any = "auto"
    ) -> None:
        super().__init__(name=f"holter-system-{run.id}", daemon=True)
        self.target = run
        self.interval = interval
        self.proc = proc or ProcReader()
        self._gpus = gpus
        self._halt = threading.Event()
        self._last_step = run.step - 1  # a resumed run's samples wait for its first new step
        self._moved_at = time.time()
        self._quiet = 0  # samples in a row without a new step
        self._reported: set[str] = set()  # the summary keys of the quiet machine, to remove later
        self.samples = 0
        self.quiet_reports = 0

    def run(self) -> None:
        gpus = open_gpu_reader() if self._gpus == "auto" else self._gpus
        try:
            self.proc.read()  # primes the rates and the CPU share
            while not self._halt.wait(self.interval):
                self.sample(gpus)
        except Exception as exc:  # noqa: BLE001 — never take the training job down for a vital sign
            print(f"holter: system vitals stopped: {exc!r}", file=sys.stderr)
        finally:
            if gpus is not None:
                gpus.close()

    def sample(self, gpus: Any) -> bool:
        """Read once and log at the run's step; False when the step has not moved (no point is
        logged then: from the QUIET_SAMPLES-th such sample on, the reading goes to the summary)."""
        step = self.target.step - 1
        metrics = self.proc.read()
        if gpus is not None:
            metrics.update(gpus.read())
        if not metrics:
            return False
        if step <= self._last_step:
            self._quiet += 1
            if self._quiet >= QUIET_SAMPLES:
                self._report_quiet(metrics, step)
            return False
        self._quiet = 0
        self._moved_at = time.time()
        self._forget_quiet()
        self._last_step = step
        self.target.log_at({PREFIX + name: value for name, value in metrics.items()}, step=step)
        self.samples += 1
        return True

    def _report_quiet(self, metrics: Metrics, step: int) -> None:
        now = time.time()
        values: dict[str, Any] = {PREFIX + name: value for name, value in metrics.items()}
        values[PREFIX + "sampled_at"] = datetime.fromtimestamp(now, timezone.utc).isoformat(timespec="seconds")
        values[PREFIX + "quiet_for_s"] = round(now - self._moved_at, 1)
        if step >= 0:
            values[PREFIX + "quiet_since_step"] = step
        self.target._send_summary(values)
        self._reported.update(values)
        self.quiet_reports += 1

    def _forget_quiet(self) -> None:
        if self._reported:
            self.target._send_summary(dict.fromkeys(sorted(self._reported)))  # a key set to None is removed
            self._reported = set()

    def stop(self, timeout: float = 5.0, *, finished: bool = False) -> None:
        """Stop sampling (the sample under way, if any, completes). A run that `finished` has its
        quiet machine taken out of the summary; a crashed one keeps it, for its post-mortem."""
        self._halt.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)
        if finished:
            self._forget_quiet()
