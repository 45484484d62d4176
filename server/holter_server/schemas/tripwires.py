"""API schemas for tripwire reports from the training job (`holter.torch.watch(..., nan_tripwire=True)`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from holter_server.schemas.points import Step


class NonFiniteOrigin(BaseModel):
    """Where non-finite values first appeared: a module's forward output, or a parameter's gradient."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=512, description="module path (`layers.7.attn`) or parameter name")
    value: Literal["NaN", "Infinity", "-Infinity"] = Field(description="what the check saw")
    inputs_finite: bool = Field(default=True, description="forward: false when the module received non-finite input")


class NonFiniteReport(BaseModel):
    """The first step of a non-finite episode: the first module output and the first gradient to hold NaN or ±Inf."""

    model_config = ConfigDict(extra="forbid")

    step: Step
    forward: NonFiniteOrigin | None = Field(default=None, description="the module to blame, in forward order")
    gradient: NonFiniteOrigin | None = Field(default=None, description="the first gradient completed non-finite")
    rank: int | None = Field(
        default=None,
        ge=0,
        le=1_048_575,
        description="the rank of a distributed job that saw it (its episode is one event)",
    )

    @model_validator(mode="after")
    def _names_something(self) -> NonFiniteReport:
        if self.forward is None and self.gradient is None:
            raise ValueError("a non-finite report names a forward origin, a gradient, or both")
        return self
