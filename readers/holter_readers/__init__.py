"""Readers of the files training jobs write: TensorBoard event files, CSV, JSONL, Hugging Face's
trainer_state.json and text logs (nanoGPT, llm.c, Megatron-LM, NeMo, torchtitan, the HF
Trainer's printed dicts, or a line pattern of one's own).

Standard library only, and importing nothing else of Holter's: the client's `holter follow` and
`sync_tensorboard=True` read live files with them beside the job, and the service's importers
(`holter import`, `holter analyze`) read finished files with the same code. Every reader goes on
from where it stopped (`Reader.position()`), so a file that is still being written is read as it
grows.
"""

from holter_readers.entries import Entry, Reader, points_of
from holter_readers.points import STEP_NAMES, FormatError, Point, parse_number, parse_step, parse_wall_time

__all__ = [
    "STEP_NAMES",
    "Entry",
    "FormatError",
    "Point",
    "Reader",
    "parse_number",
    "parse_step",
    "parse_wall_time",
    "points_of",
]
