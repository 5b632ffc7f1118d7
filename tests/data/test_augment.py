"""Augmented views (sec_lib.data.augment), the views hook of the training loop, and the store-key rule of
TrainConfig.to_dict for fields added later."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import sec_lib.runs.train as train_mod
from sec_lib.data.augment import (AUGMENT_KEYS, ViewAugment, ViewBatches, _gaussian_blur, _inverse_affine,
                                  _smooth_field, make_views)
from sec_lib.params import ParameterError
from sec_lib.runs.store import run_key
from sec_lib.runs.config import OMITTED_AT_DEFAULT
from sec_lib.runs.train import TrainConfig, train

IDENTITY = dict(rotation_deg=0.0, scale=(1.0, 1.0), shear=0.0, shift=0.0, elastic_p=0.0, blur_p=0.0,
                noise_std=(0.0, 0.0))


def blobs(n=6, size=32, seed=0):
    """Images with a few bright rectangles each (ink bright on dark, like the glyphs)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.zeros(n, 1, size, size)
    for i in range(n):
        for _ in range(3):
            r0, c0 = torch.randint(6, size - 14, (2,), generator=g).tolist()
            h, w = torch.randint(3, 9, (2,), generator=g).tolist()
            x[i, 0, r0:r0 + h, c0:c0 + w] = 1.0
    return x


# ------------------------------------------------------------------------------------ ViewAugment
def test_same_generator_state_gives_same_views_and_seeds_differ():
    x = blobs()
    aug = ViewAugment()
    a = aug(x, torch.Generator().manual_seed(3))
    b = aug(x, torch.Generator().manual_seed(3))
    c = aug(x, torch.Generator().manual_seed(4))
    assert torch.equal(a, b)
    assert (a - c).abs().max() > 0.1
    assert a.shape == x.shape and a.min() >= 0 and a.max() <= 1


def test_identity_settings_leave_images_unchanged():
    x = blobs()
    out = ViewAugment(**IDENTITY)(x, torch.Generator().manual_seed(0))
    torch.testing.assert_close(out, x, atol=1e-5, rtol=0)


def test_affine_matrix_rotates_like_rot90():
    """A +90 degree forward rotation resamples the image exactly as torch.rot90 does (square image,
    pixel centres map onto pixel centres with align_corners=False)."""
    x = blobs(n=2, size=32)
    theta = _inverse_affine(torch.tensor([math.pi / 2] * 2, dtype=torch.float64), torch.ones(2, dtype=torch.float64),
                            torch.zeros(2, dtype=torch.float64), torch.zeros(2, 2, dtype=torch.float64))
    grid = F.affine_grid(theta.float(), list(x.shape), align_corners=False)
    out = F.grid_sample(x, grid, mode="bilinear", align_corners=False)
    # forward map (u, v) -> (-v, u) in (x right, y down) coordinates: one of the two rot90 directions
    candidates = [torch.rot90(x, 1, dims=(2, 3)), torch.rot90(x, -1, dims=(2, 3))]
    errs = [(out - c).abs().max().item() for c in candidates]
    assert min(errs) < 1e-5 and max(errs) > 0.5


def test_zoom_scales_ink_area():
    x = torch.zeros(1, 1, 32, 32)
    x[0, 0, 12:20, 12:20] = 1.0  # 8 x 8 square about the centre
    out = ViewAugment(**{**IDENTITY, "scale": (2.0, 2.0)})(x, torch.Generator().manual_seed(0))
    assert out.sum().item() == pytest.approx(4 * 64, rel=0.02)


def test_views_of_one_image_are_closer_than_views_of_different_images():
    x = blobs(n=8, seed=1)
    v, y = make_views(x, 2, ViewAugment(), torch.Generator().manual_seed(0))
    assert y.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7]
    flat = F.normalize(v.flatten(1), dim=1)
    cos = flat @ flat.T
    same = y[:, None] == y[None, :]
    eye = torch.eye(len(y), dtype=torch.bool)
    assert cos[same & ~eye].mean() > cos[~same].mean() + 0.1
    assert (v[0] - v[1]).abs().max() > 0.1  # the two views differ


def test_elastic_field_has_unit_std_and_blur_matches_direct_convolution():
    f = _smooth_field(torch.randn(16, 2, 64, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(0)), 3.0)
    assert f[:, :, 12:-12, 12:-12].std().item() == pytest.approx(1.0, abs=0.1)
    x = blobs(n=3)
    sigma = torch.tensor([0.0, 0.7, 1.3], dtype=torch.float64)
    out = _gaussian_blur(x, sigma)
    torch.testing.assert_close(out[0], x[0])  # sigma 0: identity
    for i in (1, 2):
        r = math.ceil(3 * 1.3)
        t = torch.arange(-r, r + 1, dtype=torch.float64)
        k1 = torch.exp(-0.5 * (t / sigma[i]) ** 2)
        k2 = torch.outer(k1, k1) / k1.sum() ** 2
        direct = F.conv2d(x[i:i + 1].double(), k2[None, None], padding=r)
        torch.testing.assert_close(out[i:i + 1].double(), direct, atol=1e-6, rtol=0)


@pytest.mark.parametrize("kw,word", [({"rotation_deg": -1}, "rotation_deg"), ({"scale": (1.2, 0.9)}, "scale"),
                                     ({"blur_p": 1.5}, "blur_p"), ({"noise_std": 0.1}, "noise_std"),
                                     ({"elastic_sigma": 0}, "elastic_sigma")])
def test_bad_augment_settings_raise(kw, word):
    with pytest.raises(ValueError, match=word) as err:
        ViewAugment(**kw)
    assert "Valid keys" in str(err.value)
    with pytest.raises(ValueError, match="unknown augmentation key"):
        ViewAugment.from_kwargs({"rotate": 3})


# ------------------------------------------------------------------------------------ ViewBatches
class NoLabels(torch.utils.data.Dataset):
    """Images whose labels cannot be read: training on views must never look at them."""

    def __init__(self, x):
        self.x = x

    def __len__(self):
        return len(self.x)

    @property
    def labels(self):
        raise AssertionError("ViewBatches read the class labels")


def test_view_batches_are_deterministic_and_unlabeled():
    ds = NoLabels(blobs(n=20))
    a = iter(ViewBatches(ds, views=2, batch_size=12, seed=5))
    b = iter(ViewBatches(ds, views=2, batch_size=12, seed=5))
    for _ in range(3):
        (xa, ya), (xb, yb) = next(a), next(b)
        assert torch.equal(xa, xb) and torch.equal(ya, yb)
        assert xa.shape == (12, 1, 32, 32) and ya.tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5]
    xc, _ = next(iter(ViewBatches(ds, views=3, batch_size=12, seed=6)))
    assert xc.shape == (12, 1, 32, 32)
    with pytest.raises(ValueError, match="views"):
        ViewBatches(ds, views=1, batch_size=12)
    with pytest.raises(ValueError, match="batch_size"):
        ViewBatches(ds, views=4, batch_size=6)


# ---------------------------------------------------------------------------- TrainConfig and train()
def test_new_fields_leave_existing_store_keys_unchanged():
    """Keys computed before the fields views/augment existed (commit 07a626a) must not move."""
    assert run_key(TrainConfig()) == "8ad1e9f70460114d"
    cfg = TrainConfig(dataset="glyphs", loss="ntxent", eta=0.5, iterations=1000, holdout_classes=100,
                      loss_kwargs={"temperature": 0.5})
    assert run_key(cfg) == "87156b53e22102fb"
    d = cfg.to_dict()
    assert not set(OMITTED_AT_DEFAULT) & set(d)
    assert TrainConfig.from_dict(d) == cfg
    ssl = cfg.replace(views=2, augment={"shear": 0.1})
    assert ssl.to_dict()["views"] == 2 and ssl.to_dict()["augment"] == {"shear": 0.1}
    assert run_key(ssl) != run_key(cfg) and TrainConfig.from_dict(ssl.to_dict()) == ssl
    # every field listed has its dataclass default there (so omission loses nothing)
    defaults = TrainConfig().__dict__
    assert all(defaults[k] == v for k, v in OMITTED_AT_DEFAULT.items())


@pytest.mark.parametrize("changes,word", [
    ({"views": 1}, "views"), ({"views": 2.0}, "views"), ({"views": 2, "dataset": "toy", "model": "mlp"}, "image dataset"),
    ({"views": 2, "loss": "cosface"}, "class weights"), ({"views": 16, "batch_size": 20}, "batch_size"),
    ({"augment": {"shear": 0.1}}, "views >= 2"), ({"views": 2, "augment": {"rotate": 3}}, "rotate"),
    ({"views": 2, "augment": {"blur_p": 2}}, "blur_p"),
])
def test_bad_view_settings_fail_before_training(changes, word):
    with pytest.raises(ParameterError, match=word):
        TrainConfig(**{"loss": "ntxent", **changes}).validate()


def glyph_cfg(tmp_path, **kw):
    base = dict(dataset="glyphs", data_root=str(tmp_path), train_classes=8, test_classes=6,
                data_kwargs={"instances_per_class": 4}, width=8, embed_dim=8, iterations=6, batch_size=16,
                eval_every=0, track_samples=4, track_every=3, dtheta_every=3, num_threads=1, loss="ntxent",
                views=2)
    base.update(kw)
    return TrainConfig(**base)


def test_training_on_views_runs_deterministically_and_evaluates_on_test_classes(tmp_path):
    a = train(glyph_cfg(tmp_path, eta=0.1))
    b = train(glyph_cfg(tmp_path, eta=0.1))
    assert a.status == "done", a.error
    assert a.metrics["R@1"] == b.metrics["R@1"]
    cols = [c for c in a.steps.columns if c != "step_time"]
    assert a.steps[cols].equals(b.steps[cols])
    assert a.test_norms["label"].nunique() == 6  # zero-shot retrieval on the test classes
    assert a.metrics["probe_test_n"] == 12 and 0 <= a.metrics["probe_top1"] <= 100  # 6 classes x 2 held-out images
    # positives are the two views of one image: their cosine is higher than the negatives' throughout. Measured
    # over seeds 0-15: the gap pos_cos - neg_cos averaged over the steps is 0.44 +- 0.084 (min 0.29), while its
    # minimum over the steps dips below 0 for 2 of 16 seeds, so the average is asserted, 4 SDs above the margin.
    assert (a.steps["pos_cos"] - a.steps["neg_cos"]).mean() > 0.1
    c = train(glyph_cfg(tmp_path, eta=0.1, augment={"noise_std": [0.0, 0.2]}))
    assert not a.steps["loss_metric"].equals(c.steps["loss_metric"])


def test_losses_that_read_norms_get_the_raw_embedding(monkeypatch):
    """With the 'normalize' head the embedding has unit norm and the raw (pre-normalization) tensor does not:
    the inner-product N-pair must see the raw one, the normalized N-pair may see either."""
    seen = {}
    real = train_mod.make_loss

    def spy(cfg, ds):
        loss = real(cfg, ds)
        loss.register_forward_pre_hook(lambda mod, args: seen.setdefault(cfg.loss, []).append(args[0].norm(dim=1)))
        return loss

    monkeypatch.setattr(train_mod, "make_loss", spy)
    for loss in ("npair_ip", "npair"):
        cfg = TrainConfig(dataset="toy", model="mlp", width=16, embed_dim=8, iterations=2, batch_size=20,
                          eval_every=0, track_samples=0, instrument=False, head="normalize", loss=loss,
                          num_threads=1)
        assert train(cfg).status == "done"
    ip, nn = torch.cat(seen["npair_ip"]), torch.cat(seen["npair"])
    assert (ip - 1).abs().max() > 0.1
    torch.testing.assert_close(nn, torch.ones_like(nn))
    assert torch.isfinite(ip).all()
    assert set(AUGMENT_KEYS) >= {"rotation_deg", "elastic_p", "blur_p", "noise_std"}


def test_view_batches_on_the_device_path_are_the_host_batches():
    """The device path of ViewBatches (the pool copied once, every batch's indices drawn up front, a generator on
    the device), run with the CPU as its device: the same batches as the host path, labels never read."""
    ds = NoLabels(blobs(n=20))
    host = iter(ViewBatches(ds, views=2, batch_size=12, seed=5))
    on_dev = ViewBatches(ds, views=2, batch_size=12, seed=5, iterations=4)
    batches = list(on_dev._on_device(np.random.default_rng([5, 1])))
    assert len(batches) == 4
    for xd, yd in batches:
        xh, yh = next(host)
        assert torch.equal(xd, xh) and torch.equal(yd, yh)
