"""Shared by the core tests: a tiny toy-data training config."""
import pytest

from sec_lib.train import TrainConfig


def toy_config(**kw) -> TrainConfig:
    """A config on the in-memory toy data with a small MLP that trains in about a second; ``kw`` overrides."""
    base = dict(dataset="toy", model="mlp", width=16, embed_dim=8, iterations=6, batch_size=24, eval_every=3,
                track_every=3, track_samples=4, dtheta_every=3, lr=3e-3, loss="npair",
                data_kwargs={"noise": 0.1, "num_classes": 60})
    base.update(kw)
    return TrainConfig(**base)


@pytest.fixture(scope="session")
def toy():
    """``toy(**overrides)``: see :func:`toy_config`."""
    return toy_config
