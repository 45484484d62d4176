"""Holter client: stream a training run's vital signs to a Holter service.

    import holter
    run = holter.init(project="gpt2", name="baseline", config={"lr": 3e-4})
    run.log({"loss": 2.31, "grad_norm": 0.8}, step=120)
    run.finish()

Standard library only. `log()` never waits for the network: points are queued, batched by a
background thread, and spooled to disk while the service is away.

The module-level API is shaped like wandb's, so a wandb script runs with `import holter as
wandb` (holter/current.py; docs/wandb.md lists what maps to what): `init`, `log`, `config`,
`summary`, `run`, `define_metric`, `alert`, `watch`, `finish`, `Histogram`, `Api`, `sweep` and
`agent`, `errors`, `termlog`, and the media types and `plot` charts, accepted and not stored.
"""

from holter import errors, plot
from holter.api import Api
from holter.config import Config
from holter.console import termerror, termlog, termsetup, termwarn
from holter.current import (
    AlertLevel,
    DisabledRun,
    NoRunError,
    Settings,
    _BeforeInit,
    alert,
    define_metric,
    finish,
    init,
    join,
    link_model,
    log,
    log_artifact,
    log_model,
    login,
    mark_preempting,
    require,
    restore,
    save,
    setup,
    teardown,
    unwatch,
    use_artifact,
    use_model,
    watch,
)
from holter.errors import Error
from holter.integrations import report_to
from holter.media import Artifact, Audio, Histogram, Html, Image, Molecule, Object3D, Plotly, Table, Video
from holter.plot import plot_table, visualize
from holter.run import Run
from holter.sender import Delivery
from holter.sweeps import agent, sweep

report_to.install()  # TrainingArguments(report_to="holter"), once transformers is imported

# The current run and its config and summary (set by init, reset by finish), as wandb has them.
# These names shadow the submodules holter.run and holter.config, as wandb.run is a run, not a module.
run = None
config = _BeforeInit("config")
summary = _BeforeInit("summary")

__all__ = [
    "AlertLevel",
    "Api",
    "Artifact",
    "Audio",
    "Config",
    "Delivery",
    "DisabledRun",
    "Error",
    "Histogram",
    "Html",
    "Image",
    "Molecule",
    "NoRunError",
    "Object3D",
    "Plotly",
    "Run",
    "Settings",
    "Table",
    "Video",
    "__version__",
    "agent",
    "alert",
    "config",
    "define_metric",
    "errors",
    "finish",
    "init",
    "join",
    "link_model",
    "log",
    "log_artifact",
    "log_model",
    "login",
    "mark_preempting",
    "plot",
    "plot_table",
    "require",
    "restore",
    "run",
    "save",
    "setup",
    "summary",
    "sweep",
    "teardown",
    "termerror",
    "termlog",
    "termsetup",
    "termwarn",
    "unwatch",
    "use_artifact",
    "use_model",
    "visualize",
    "watch",
]
__version__ = "0.1.0"
