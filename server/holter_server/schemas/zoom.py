"""The step window a chart opens on around a thing with a step range (`vocabulary/zoom.py`),
served with it so that every client zooms the same way."""

from __future__ import annotations

from pydantic import BaseModel, Field, computed_field

from holter_server.vocabulary.zoom import zoom_window


class StepWindow(BaseModel):
    start: int = Field(description="first step shown")
    end: int = Field(description="last step shown")


class Zoomable(BaseModel):
    """A schema with `start_step` and `end_step`, served with the window that shows it."""

    @computed_field(description="the steps a chart opens on to show this, with context either side (null: no step)")  # type: ignore[prop-decorator]
    @property
    def zoom(self) -> StepWindow | None:
        window = zoom_window(getattr(self, "start_step", None), getattr(self, "end_step", None))
        return StepWindow(start=window[0], end=window[1]) if window else None
