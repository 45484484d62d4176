"""The attributes and small methods of wandb's `Run` that a training script reads or calls
besides logging, shared by `holter.Run` and the `DisabledRun` of `mode="disabled"`:

    run.name = "lr-3e-4"               # renames the run at the service
    run.tags = run.tags + ("best",)    # adds tags (group:NAME and job_type:NAME stay)
    run.notes = "why this run"
    run.dir                            # a folder for the script's own files (made when first asked for)
    run.path, run.url, run.entity, run.group, run.job_type, run.sweep_id, run.start_time,
    run.offline, run.disabled, run.starting_step
    run.log_model(path), run.use_model(name), run.link_model(path, target)   # accepted, not stored
    run.mark_preempting()              # the job says it is about to be stopped

What wandb keeps and Holter does not (model files, artifacts, restored files) is accepted and said
once on stderr, so that the script runs on.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import quote

_notes: set[str] = set()

# The characters of one tag the service keeps (its RunCreate.tags).
MAX_TAG_LENGTH = 128


def note_once(key: str, message: str) -> None:
    """Print `message` on stderr the first time `key` is seen in this process."""
    if key not in _notes:
        _notes.add(key)
        print(message, file=sys.stderr)


class WandbRunSurface:
    """What `Run` and `DisabledRun` share (see the module doc). A subclass sets `id`, `project`,
    `_name`, `_tags`, `_notes`, `start_time` and `service_url`, and implements `_send_identity`."""

    id: str
    project: str
    mode: str
    service_url: str
    start_time: float
    _name: str | None
    _tags: list[str]
    _notes: str | None
    # wandb's identity: set by holter.init (holter/current.py) from its arguments and $WANDB_*
    group = ""
    job_type = ""
    entity = ""
    sweep_id: str | None = None
    starting_step = 0
    _files_root: str | None = None
    _files_dir: str | None = None

    def _send_identity(self) -> None:
        """Tell the service the run's name, tags and notes again (a no-op when nothing is sent)."""
        raise NotImplementedError

    @property
    def name(self) -> str | None:
        """The run's display name; setting it renames the run at the service."""
        return self._name

    @name.setter
    def name(self, value: str | None) -> None:
        self._name = None if value is None else str(value)
        self._send_identity()

    @property
    def tags(self) -> tuple[str, ...]:
        """The run's own tags (wandb's: without the `group:` and `job_type:` tags Holter adds).

        Setting them sends the new ones to the service, which adds them to the run's tags; a tag
        left out is kept there (remove it on the run page or with `PATCH /api/v1/runs/{id}`)."""
        return tuple(self._tags)

    @tags.setter
    def tags(self, value: Any) -> None:
        self._tags = [str(tag) for tag in (value or ())]
        self._send_identity()

    @property
    def notes(self) -> str | None:
        """What the run is about, shown on its page; setting it replaces the stored notes."""
        return self._notes

    @notes.setter
    def notes(self, value: str | None) -> None:
        self._notes = None if value is None else str(value)
        self._send_identity()

    def _all_tags(self) -> list[str]:
        """The tags the service keeps: the run's own, then `group:NAME` and `job_type:NAME`, each cut
        to the 128 characters the service keeps of a tag (an empty one left out)."""
        extra = [f"{label}:{value}" for label, value in (("group", self.group), ("job_type", self.job_type)) if value]
        extra += [f"sweep:{self.sweep_id}"] if self.sweep_id else []
        return list(dict.fromkeys(tag[:MAX_TAG_LENGTH] for tag in [*self._tags, *extra] if tag))

    @property
    def path(self) -> str:
        """wandb's run path, `entity/project/id` (`project/id` without an entity)."""
        return "/".join(part for part in (self.entity, self.project, self.id) if part)

    @property
    def url(self) -> str | None:
        """The run's page in the dashboard."""
        return f"{self.service_url.rstrip('/')}/runs/{quote(self.id)}" if self.service_url else None

    page_url = url

    def get_url(self) -> str | None:
        """The run's page (wandb's older `run.get_url()`)."""
        return self.url

    @property
    def project_url(self) -> str | None:
        """The dashboard's runs page filtered to this run's project."""
        return f"{self.service_url.rstrip('/')}/?project={quote(self.project)}" if self.service_url else None

    def get_project_url(self) -> str | None:
        """wandb's older `run.get_project_url()`."""
        return self.project_url

    @property
    def sweep_url(self) -> str | None:
        """The runs of this run's sweep (its `sweep:ID` tag), or None outside a sweep."""
        if not self.sweep_id or not self.service_url:
            return None
        return f"{self.service_url.rstrip('/')}/?tag={quote('sweep:' + self.sweep_id)}"

    @property
    def offline(self) -> bool:
        """True for `mode="offline"`: everything stays in the spool until `holter sync`."""
        return self.mode == "offline"

    @property
    def disabled(self) -> bool:
        """True for `mode="disabled"`: nothing is sent or written."""
        return self.mode == "disabled"

    @property
    def dir(self) -> str:
        """A folder for the run's own files (wandb's `run.dir`), made when first asked for:
        `DIR/holter-files/<run id>` for `init(dir=DIR)` or $WANDB_DIR, else under the working
        directory (a temporary folder for a disabled run). Holter keeps curves, not files: what
        is written there stays on this machine."""
        if self._files_dir is None:
            if self.disabled and self._files_root is None:
                folder = tempfile.mkdtemp(prefix=f"holter-{self.id}-")
            else:
                folder = os.path.join(self._files_root or os.getcwd(), "holter-files", self.id)
                Path(folder).mkdir(parents=True, exist_ok=True)
            self._files_dir = folder
        return self._files_dir

    def log_model(self, path: Any = None, name: str | None = None, aliases: Any = None) -> None:
        """wandb's model artifacts: accepted, not stored (Holter keeps curves, not files)."""
        _artifacts_note()

    def use_model(self, name: Any = None) -> None:
        """wandb's model artifacts: accepted; there is no stored model to return (None)."""
        _artifacts_note()

    def link_model(self, *args: Any, **kwargs: Any) -> None:
        """wandb's model registry: accepted, not stored."""
        _artifacts_note()

    def restore(self, *args: Any, **kwargs: Any) -> None:
        """wandb's file restore: Holter stores no files, so there is nothing to restore (None)."""
        note_once("restore", "holter: restore() finds nothing: Holter keeps curves, not files")

    def pin_config_keys(self, *args: Any, **kwargs: Any) -> None:
        """wandb's pinned config columns: accepted; the run page shows the whole config."""


def _artifacts_note() -> None:
    note_once(
        "artifacts",
        "holter: artifacts and models (log_artifact, use_artifact, log_model, ...) are accepted and not "
        "stored (Holter keeps curves, not files)",
    )
