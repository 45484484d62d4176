"""Holter client: stream a training run's vital signs to a Holter service.

    import holter
    run = holter.init(project="gpt2", name="baseline", config={"lr": 3e-4})
    run.log({"loss": 2.31, "grad_norm": 0.8}, step=120)
    run.finish()

Standard library only. `log()` never waits for the network: points are queued, batched by a
background thread, and spooled to disk while the service is away.

The module-level API is shaped like wandb's, so a wandb script runs with `import holter as
wandb` (holter/current.py): `init`, `log`, `config`, `summary`, `run`, `define_metric`,
`alert`, `watch`, `finish`, `Histogram`, and the media types accepted and not stored.
"""

from holter.config import Config
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
    log,
    log_artifact,
    login,
    save,
    unwatch,
    use_artifact,
    watch,
)
from holter.media import Artifact, Audio, Histogram, Html, Image, Molecule, Object3D, Plotly, Table, Video
from holter.run import Run
from holter.sender import Delivery

# The current run and its config and summary (set by init, reset by finish), as wandb has them.
# These names shadow the submodules holter.run and holter.config, as wandb.run is a run, not a module.
run = None
config = _BeforeInit("config")
summary = _BeforeInit("summary")

__all__ = [
    "AlertLevel",
    "Artifact",
    "Audio",
    "Config",
    "Delivery",
    "DisabledRun",
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
    "alert",
    "config",
    "define_metric",
    "finish",
    "init",
    "log",
    "log_artifact",
    "login",
    "run",
    "save",
    "summary",
    "unwatch",
    "use_artifact",
    "watch",
]
__version__ = "0.1.0"
