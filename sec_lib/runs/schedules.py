"""The learning-rate schedule shapes the decisive tier's pilot compares, as the TrainConfig fields of a run."""
from __future__ import annotations

#: The shapes: cosine decay over the run, or a step decay at :data:`MILESTONES`.
SHAPES = ("cosine", "step")
#: The step shape's milestones, as fractions of the run's length.
MILESTONES = (0.6, 0.85)


def schedule(shape: str, iterations: int) -> dict:
    """The TrainConfig fields of ``shape`` for a run of ``iterations``."""
    if shape == "cosine":
        return dict(schedule="cosine", iterations=iterations)
    if shape == "step":
        return dict(schedule="step", iterations=iterations, lr_decay=0.1,
                    lr_milestones=tuple(int(round(f * iterations)) for f in MILESTONES))
    raise ValueError(f"shape {shape!r} is not valid; valid values: {', '.join(SHAPES)}")
