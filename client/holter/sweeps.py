"""wandb's sweeps (`wandb.sweep`, `wandb.agent`) run locally, in the script's own process.

    sweep_id = holter.sweep({"method": "random", "parameters": {"lr": {"min": 1e-4, "max": 1e-2,
                             "distribution": "log_uniform_values"}, "batch": {"values": [32, 64]}}},
                            project="mnist")
    holter.agent(sweep_id, function=train, count=8)

Holter has no sweep controller (no service-side search, no early termination, no agents on other
machines): `sweep()` keeps the configuration in this process and returns its id, and `agent()`
calls `function` `count` times, each with parameters drawn from it: every combination in order
for `method: grid`, random draws for `random` (and for `bayes`, which needs a controller's model
of past runs: drawn at random, said once). Each trial's `holter.init()` gets the drawn parameters
over its own config (as wandb's agent sets them), the sweep's project when it names none, and the
tag `sweep:<id>` (`run.sweep_id`); a run still open when the function returns is finished, one
that raised is marked crashed and the next trial runs. Without `count` a grid runs every
combination and a random search one trial (said once).

With no `function`, the sweep's `program` is run as wandb's agent runs it, `python PROGRAM
--name=value ...`, with the drawn parameters also in $HOLTER_SWEEP_PARAMETERS (JSON), which
`holter.init()` in that process reads. A sweep id this process did not create (made by `wandb
sweep` elsewhere) has no configuration here: the function runs once, without parameters.

Parameters: `value`; `values` (with `probabilities`); `min`/`max` with `distribution` one of
`int_uniform` (the default for two whole numbers), `uniform` (for others), `q_uniform`,
`log_uniform` (exponents), `log_uniform_values`, `q_log_uniform_values`, `inv_log_uniform_values`,
`normal`/`q_normal` (`mu`, `sigma`), `log_normal`, `beta` (`a`, `b`); nested `parameters`.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import random
import string
import subprocess
import sys
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Callable

from holter.surface import note_once

PARAMETERS_VARIABLE = "HOLTER_SWEEP_PARAMETERS"
SWEEP_ID_VARIABLE = "WANDB_SWEEP_ID"


@dataclass
class Sweep:
    """A sweep's configuration as `sweep()` was given it, and where its runs go."""

    id: str
    config: dict[str, Any]
    project: str | None = None
    drawn: int = 0
    seed: int | None = None
    _grid: Iterator[dict[str, Any]] | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Trial:
    """One call of the agent's function: the sweep it belongs to and the parameters drawn for it."""

    sweep_id: str
    parameters: dict[str, Any]
    project: str | None = None


_sweeps: dict[str, Sweep] = {}
# the trial the agent is running in this process (one at a time, as wandb's agent runs them)
_running: list[Trial] = []


def active() -> Trial | None:
    """The trial running now: the agent's, or the one given to this process by its agent
    ($HOLTER_SWEEP_PARAMETERS and $WANDB_SWEEP_ID); None outside a sweep."""
    if _running:
        return _running[-1]
    given = os.environ.get(PARAMETERS_VARIABLE)
    if given:
        try:
            parameters = json.loads(given)
        except ValueError:
            note_once("sweep parameters", f"holter: ${PARAMETERS_VARIABLE} is not JSON; it is ignored")
            return None
        if isinstance(parameters, dict):
            return Trial(os.environ.get(SWEEP_ID_VARIABLE) or "local", parameters)
    return None


def sweep(
    sweep: Any,
    entity: str | None = None,
    project: str | None = None,
    prior_runs: Any = None,
) -> str:
    """Keep a sweep configuration (a dict, or a function returning one) and return its id."""
    config = sweep() if callable(sweep) else sweep
    if not isinstance(config, Mapping):
        raise TypeError(f"a sweep configuration is a dict, not {type(config).__name__}")
    config = dict(config)
    if not isinstance(config.get("parameters", {}), Mapping):
        raise ValueError("a sweep configuration's `parameters` is a dict of parameter specs")
    sweep_id = "".join(random.choices(string.ascii_lowercase + string.digits, k=8))
    _sweeps[sweep_id] = Sweep(sweep_id, config, project or config.get("project"))
    note_once(
        "sweeps",
        "holter: sweeps run locally: agent() calls the function with parameters drawn from the "
        "configuration (no sweep controller, no early termination)",
    )
    if str(config.get("method", "random")).lower() == "bayes":
        note_once("bayes", "holter: method 'bayes' needs a sweep controller; its parameters are drawn at random")
    return sweep_id


def agent(
    sweep_id: str,
    function: Callable[[], Any] | None = None,
    entity: str | None = None,
    project: str | None = None,
    count: int | None = None,
) -> None:
    """Run `function` (or the sweep's `program`) once per trial; see the module doc."""
    found = _sweeps.get(sweep_id)
    if found is None:
        note_once(
            f"unknown sweep {sweep_id}",
            f"holter: sweep {sweep_id!r} was not created by this process (Holter has no sweep controller); "
            "the function runs once, without sweep parameters",
        )
        trials: Iterator[dict[str, Any]] = iter([{}])
        found = Sweep(sweep_id, {}, project)
    else:
        trials = _draws(found, count)
    program = found.config.get("program")
    if function is None and not program:
        note_once("agent", "holter: agent() needs a function (or a sweep configuration with a program); nothing ran")
        return
    for parameters in trials:
        trial = Trial(sweep_id, parameters, project or found.project)
        if function is None:
            _run_program(str(program), trial, found.config)
            continue
        _running.append(trial)
        try:
            function()
        except Exception:  # noqa: BLE001 - a failed trial is reported and the agent goes on, as wandb's does
            traceback.print_exc()
            _end_trial(crashed=True)
        else:
            _end_trial(crashed=False)
        finally:
            _running.pop()


def _end_trial(*, crashed: bool) -> None:
    from holter import current  # imported here: holter.current imports this module

    if current._current is not None and current._current.status == "running":
        current.finish(exit_code=1 if crashed else None)


def _run_program(program: str, trial: Trial, config: Mapping[str, Any]) -> None:
    arguments = [f"--{name}={value}" for name, value in _flat(trial.parameters)]
    env = {**os.environ, PARAMETERS_VARIABLE: json.dumps(trial.parameters), SWEEP_ID_VARIABLE: trial.sweep_id}
    if trial.project and not env.get("HOLTER_PROJECT"):
        env["HOLTER_PROJECT"] = trial.project
    done = subprocess.run([sys.executable, program, *arguments], env=env, check=False)
    if done.returncode:
        print(f"holter: sweep {trial.sweep_id}: {program} exited with {done.returncode}", file=sys.stderr)


def _flat(parameters: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for name, value in parameters.items():
        if isinstance(value, Mapping):
            yield from _flat(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", value


def _draws(found: Sweep, count: int | None) -> Iterator[dict[str, Any]]:
    """The parameters of each trial: at most `count` of them."""
    method = str(found.config.get("method", "random")).lower()
    specs = found.config.get("parameters", {})
    rng = random.Random()
    if method == "grid":
        combos: Iterator[dict[str, Any]] = _grid(specs, rng)
        return itertools.islice(combos, count) if count is not None else combos
    if count is None:
        note_once("count", "holter: agent() without count runs one trial of a random search; pass count= for more")
        count = 1
    return (_draw(specs, rng) for _ in range(count))


def _grid(specs: Mapping[str, Any], rng: random.Random) -> Iterator[dict[str, Any]]:
    """Every combination of the listed values, in order; other parameters drawn for each."""
    listed = {name: _choices(spec) for name, spec in specs.items()}
    fixed = [name for name, choices in listed.items() if choices is not None]
    if any(choices is None for choices in listed.values()):
        note_once("grid", "holter: a grid sweep draws its parameters that have no `values` at random")
    for combination in itertools.product(*(listed[name] for name in fixed)):
        drawn = dict(zip(fixed, combination))
        for name, spec in specs.items():
            if name not in drawn:
                drawn[name] = _value(name, spec, rng)
        yield {name: drawn[name] for name in specs}


def _choices(spec: Any) -> list[Any] | None:
    if not isinstance(spec, Mapping):
        return [spec]
    if "value" in spec:
        return [spec["value"]]
    if "values" in spec:
        return list(spec["values"])
    if "parameters" in spec:
        combos = list(_grid(spec["parameters"], random.Random()))
        return combos if all(_choices(s) is not None for s in spec["parameters"].values()) else None
    return None


def _draw(specs: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    return {name: _value(name, spec, rng) for name, spec in specs.items()}


def _value(name: str, spec: Any, rng: random.Random) -> Any:
    """One draw of a parameter spec (see the module doc)."""
    if not isinstance(spec, Mapping):
        return spec
    if "parameters" in spec:
        return _draw(spec["parameters"], rng)
    if "value" in spec:
        return spec["value"]
    if "values" in spec:
        values = list(spec["values"])
        weights = spec.get("probabilities")
        return rng.choices(values, weights=weights)[0] if weights else rng.choice(values)
    low, high = spec.get("min"), spec.get("max")
    both_whole = isinstance(low, int) and isinstance(high, int)
    distribution = str(spec.get("distribution") or ("int_uniform" if both_whole else "uniform"))
    q = float(spec.get("q", 1.0))
    if distribution == "constant":
        return spec.get("value")
    if distribution == "int_uniform":
        return rng.randint(int(low), int(high))
    if distribution == "uniform":
        return rng.uniform(float(low), float(high))
    if distribution == "q_uniform":
        return _quantised(rng.uniform(float(low), float(high)), q)
    if distribution == "log_uniform":
        return math.exp(rng.uniform(float(low), float(high)))
    if distribution in ("log_uniform_values", "q_log_uniform_values"):
        drawn = math.exp(rng.uniform(math.log(float(low)), math.log(float(high))))
        return _quantised(drawn, q) if distribution.startswith("q_") else drawn
    if distribution == "inv_log_uniform_values":
        return 1.0 / math.exp(rng.uniform(math.log(1.0 / float(high)), math.log(1.0 / float(low))))
    if distribution in ("normal", "q_normal"):
        drawn = rng.gauss(float(spec.get("mu", 0.0)), float(spec.get("sigma", 1.0)))
        return _quantised(drawn, q) if distribution == "q_normal" else drawn
    if distribution == "log_normal":
        return math.exp(rng.gauss(float(spec.get("mu", 0.0)), float(spec.get("sigma", 1.0))))
    if distribution == "beta":
        return rng.betavariate(float(spec.get("a", 1.0)), float(spec.get("b", 1.0)))
    if low is not None and high is not None:
        note_once(f"distribution {distribution}", f"holter: sweep distribution {distribution!r} is drawn uniformly")
        return rng.uniform(float(low), float(high))
    note_once(f"parameter {name}", f"holter: sweep parameter {name!r} has no value, values or min/max; left out")
    return None


def _quantised(value: float, q: float) -> Any:
    drawn = round(value / q) * q
    return int(drawn) if float(q).is_integer() else drawn
