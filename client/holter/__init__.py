"""Holter client: stream a training run's vital signs to a Holter service.

    import holter
    run = holter.init(project="gpt2", name="baseline", config={"lr": 3e-4})
    run.log({"loss": 2.31, "grad_norm": 0.8}, step=120)
    run.finish()

Standard library only. `log()` never waits for the network: points are queued, batched by a
background thread, and spooled to disk while the service is away.
"""

from holter.run import Run, init

__all__ = ["Run", "init", "__version__"]
__version__ = "0.1.0"
