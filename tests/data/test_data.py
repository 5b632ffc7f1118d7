"""Tests for sec_lib.data: glyphs benchmark + cache, toy data, real-benchmark loaders, PKSampler."""
from __future__ import annotations

import hashlib
import json
import logging
import pickle
import unicodedata
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from sec_lib.data import PKSampler, get_dataset, glyph_pool, glyphs as G
from sec_lib.data import benchmarks as B
from sec_lib.data.toy import make_toy

SMALL = dict(image_size=32, instances_per_class=4, seed=0, max_classes=3)


# =============================================================================================
# Glyphs: committed class list
# =============================================================================================

def test_committed_class_list_consistent():
    classes = G.glyph_classes()
    txt = G.CLASS_TXT.read_text(encoding="utf-8").splitlines()
    meta = json.loads(G.CLASS_JSON.read_text(encoding="utf-8"))
    assert len(classes) == len(txt) == len(meta["classes"]) == meta["stats"]["classes"]
    assert len(classes) > 1500
    cps = [c.codepoint for c in classes]
    assert len(set(cps)) == len(cps)
    members = [m for c in classes for m in c.members]
    assert not set(members) & set(cps), "a merged homoglyph is also a class"
    for c, line in zip(classes, txt):
        assert line == f"U+{c.codepoint:04X} {unicodedata.name(chr(c.codepoint))}" == c.label
        assert unicodedata.category(c.char) not in G.EXCLUDED_CATEGORIES
        assert len(c.fonts) >= G.MIN_FONTS and len(set(c.fonts)) == len(c.fonts)
        assert set(c.fonts) <= set(G.FONT_FILES)
    # the order is a shuffle, not code point order, and both halves mix scripts
    assert cps != sorted(cps)
    train, test = G.split_classes("train"), G.split_classes("test")
    assert len(train) == len(test) == len(classes) // 2
    assert not {c.codepoint for c in train} & {c.codepoint for c in test}
    for half in (train, test):
        scripts = Counter(unicodedata.name(c.char).split()[0] for c in half)
        assert scripts["LATIN"] > 100 and scripts["GREEK"] > 30 and scripts["CYRILLIC"] > 30


def test_homoglyphs_merged_and_distinct_letters_kept():
    by_cp = {c.codepoint: c for c in G.glyph_classes()}
    a = by_cp[ord("A")]
    assert {0x391, 0x410} <= set(a.members)  # Greek Alpha, Cyrillic A merged into Latin A
    assert ord("o") in by_cp and ord("O") in by_cp and ord("e") in by_cp
    assert 0x3BF in by_cp[ord("o")].members  # Greek omicron
    # box drawing (identical in every family) was dropped
    members = {m for c in by_cp.values() for m in c.members}
    for cp in (0x2501, 0x2502, 0x253C):
        assert cp not in by_cp and cp not in members


def test_pair_distance_is_hamming_and_design_count():
    rng = np.random.default_rng(0)
    v = torch.from_numpy(rng.random((6, 50)).astype(np.float32))
    d = G.pair_distances(v)
    b = (v > 0.5).numpy()
    brute = np.array([[(b[i] ^ b[j]).sum() for j in range(6)] for i in range(6)])
    assert np.array_equal(d.numpy().astype(int), brute)
    # three groups: {0,1} identical, {2}, {3,4} close (1 px apart)
    x = torch.zeros(5, 20)
    x[0, :5] = x[1, :5] = 1
    x[2, 10:] = 1
    x[3, :3] = 1
    x[3, 15:] = 1
    x[4] = x[3]
    x[4, 0] = 0
    assert G.num_designs(G.pair_distances(x), 0) == 4
    assert G.num_designs(G.pair_distances(x), 1) == 3


def test_sample_of_committed_classes_renders_in_every_listed_font():
    classes = G.glyph_classes()
    rng = np.random.default_rng(1)
    for i in rng.choice(len(classes), size=40, replace=False):
        c = classes[i]
        for f in c.fonts:
            g = G.render_glyph(f, c.codepoint, 32)
            assert g is not None, (c.label, f)
            assert max(g.size) == 32
            assert (np.asarray(g) > 127).sum() >= G.MIN_INK


def test_homoglyph_rule_on_renders():
    """Latin A and Greek Alpha render pixel-identically in most fonts; o and O do not."""
    def ham(f, a, b):
        x = G.centered(G.render_glyph(f, a, 32), 32) > 0.5
        y = G.centered(G.render_glyph(f, b, 32), 32) > 0.5
        return int((x ^ y).sum())
    fonts = G.FONT_FILES[:12]
    same = [ham(f, ord("A"), 0x391) <= G.DUP_MAX_PIXELS for f in fonts]
    diff = [ham(f, ord("o"), ord("O")) <= G.DUP_MAX_PIXELS for f in fonts]
    assert sum(same) >= 0.5 * len(fonts) and sum(diff) < 0.5 * len(fonts)


# =============================================================================================
# Glyphs: pool + cache
# =============================================================================================

def _no_render(*a, **k):
    raise AssertionError("render_pool called although a valid cache exists")


def test_glyph_cache_roundtrip_and_manifest(tmp_path, monkeypatch):
    pool1, man1 = G.load_pool(**SMALL, cache_dir=tmp_path)
    pt, js = G.cache_paths(tmp_path, 32, 4, 0, 3)
    assert pt.exists() and js.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([pt.name, js.name])  # no temp files left
    monkeypatch.setattr(glyph_pool, "render_pool", _no_render)  # where load_pool looks it up
    pool2, man2 = G.load_pool(**SMALL, cache_dir=tmp_path)
    for k in ("images", "labels", "fonts"):
        assert torch.equal(pool1[k], pool2[k])
    assert pool1["images"].dtype == torch.uint8 and pool1["images"].shape == (2 * 3 * 4, 32, 32)
    man = json.loads(js.read_text())
    assert man == man1 == man2
    assert man["sha256"] == hashlib.sha256(pt.read_bytes()).hexdigest()
    assert man["bytes"] == pt.stat().st_size
    assert (man["image_size"], man["instances_per_class"], man["seed"], man["max_classes"]) == (32, 4, 0, 3)
    assert man["num_train_classes"] == man["num_test_classes"] == 3
    expected = [c.label for c in G.split_classes("train", 3) + G.split_classes("test", 3)]
    assert man["classes"] == expected
    assert [f["file"] for f in man["fonts"]] == list(G.FONT_FILES)
    assert all(f["version"] for f in man["fonts"])
    import matplotlib
    import PIL
    assert man["versions"]["matplotlib"] == matplotlib.__version__
    assert man["versions"]["pillow"] == PIL.__version__


@pytest.mark.parametrize("damage", ["truncate", "flip", "manifest_field", "manifest_garbage", "no_manifest"])
def test_corrupt_cache_is_regenerated(tmp_path, caplog, damage):
    pool1, _ = G.load_pool(**SMALL, cache_dir=tmp_path)
    pt, js = G.cache_paths(tmp_path, 32, 4, 0, 3)
    if damage == "truncate":
        data = pt.read_bytes()
        pt.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        data = bytearray(pt.read_bytes())
        data[len(data) // 2] ^= 0xFF  # inside the image payload: torch.load alone does not notice
        pt.write_bytes(bytes(data))
        silently_wrong = torch.load(pt, weights_only=True)["images"]
        assert not torch.equal(silently_wrong, pool1["images"])
    elif damage == "manifest_field":
        m = json.loads(js.read_text())
        m["seed"] = 1
        js.write_text(json.dumps(m))
    elif damage == "manifest_garbage":
        js.write_text("{not json")
    else:
        js.unlink()
    with caplog.at_level(logging.WARNING, logger=glyph_pool.__name__):
        pool2, man = G.load_pool(**SMALL, cache_dir=tmp_path)
    assert any("regenerating" in r.getMessage() for r in caplog.records)
    assert torch.equal(pool1["images"], pool2["images"])
    assert man["sha256"] == hashlib.sha256(pt.read_bytes()).hexdigest()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=glyph_pool.__name__):
        G.load_pool(**SMALL, cache_dir=tmp_path)  # repaired: loads silently
    # the cache's own logger only: caplog also catches any other logger's record in the same window, such as
    # jupyter_client's warning when an earlier test's kernel client is garbage-collected here (seen once in CI)
    assert not [r for r in caplog.records if r.name == glyph_pool.__name__]


def test_glyph_generation_deterministic_and_seeded(tmp_path):
    a, ma = G.load_pool(**SMALL, cache_dir=tmp_path / "a")
    b, mb = G.load_pool(**SMALL, cache_dir=tmp_path / "b")
    assert torch.equal(a["images"], b["images"]) and torch.equal(a["fonts"], b["fonts"])
    assert ma["sha256"] == mb["sha256"]  # byte-identical files, so concurrent writers cannot conflict
    c, _ = G.load_pool(**{**SMALL, "seed": 1}, cache_dir=tmp_path / "c")
    assert not torch.equal(a["images"], c["images"])
    # a max_classes pool is a subset of a larger one (random state depends on seed, code point, index)
    d, _ = G.load_pool(**{**SMALL, "max_classes": 2}, cache_dir=tmp_path / "d")
    n = 2 * 4
    assert torch.equal(d["images"][:n], a["images"][:n])  # first 2 train classes
    assert torch.equal(d["images"][n:], a["images"][12:12 + n])  # first 2 test classes
    # worker processes give the same result as in-process rendering
    cls = G.split_classes("train", 4)
    p0 = G.render_pool(cls, 32, 3, 0, num_workers=0)
    p2 = G.render_pool(cls, 32, 3, 0, num_workers=2)
    assert torch.equal(p0["images"], p2["images"])


def test_glyph_dataset_splits(tmp_path):
    tr = get_dataset("glyphs", "train", root=tmp_path, **{k: v for k, v in SMALL.items()})
    te = get_dataset("glyphs", "test", root=tmp_path, **{k: v for k, v in SMALL.items()})
    for ds in (tr, te):
        assert ds.x.shape == (12, 1, 32, 32) and ds.x.dtype == torch.float32
        assert 0.0 <= float(ds.x.min()) and float(ds.x.max()) <= 1.0 and float(ds.x.max()) > 0.9
        assert ds.labels.dtype == torch.long and ds.labels.tolist() == [0] * 4 + [1] * 4 + [2] * 4
        assert ds.num_classes == 3 == len(ds.class_names)
        x, y = ds[5]
        assert torch.equal(x, ds.x[5]) and int(y) == 1
        # instances of a class cycle through distinct fonts
        assert len(set(ds.font_index[:4].tolist())) == 4
        # background dark, ink in the middle
        assert float(ds.x[:, :, 0, :].mean()) < 0.05 and float(ds.x[:, :, 8:24, 8:24].mean()) > 0.1
    assert not set(tr.class_names) & set(te.class_names)
    assert tr.class_names == [c.label for c in G.split_classes("train", 3)]


def test_glyph_image_size_64_and_sample_grid(tmp_path):
    ds = G.load_glyphs("test", image_size=64, instances_per_class=3, max_classes=2, cache_dir=tmp_path)
    assert ds.x.shape == (6, 1, 64, 64)
    imgs, labels, names = G.sample_grid(2, 3, dataset=ds, seed=0)
    assert imgs.shape == (6, 1, 64, 64) and labels.tolist() == [0, 0, 0, 1, 1, 1]
    assert names == ds.class_names
    with pytest.raises(ValueError, match="n_classes"):
        G.sample_grid(3, 1, dataset=ds)


def test_glyph_bad_parameters_and_default_dir(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="'split' = 'val'.*'train', 'test'"):
        G.load_glyphs("val", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="image_size"):
        G.load_glyphs("train", image_size=0, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="max_classes"):
        G.load_glyphs("train", max_classes=0, cache_dir=tmp_path)
    assert not any(tmp_path.iterdir())  # rejected before any work
    monkeypatch.setenv("SEC_DATA_DIR", str(tmp_path / "elsewhere"))
    assert G.default_cache_dir() == tmp_path / "elsewhere" / "glyphs"
    assert not (tmp_path / "elsewhere").exists()  # resolving the folder does not create it
    monkeypatch.delenv("SEC_DATA_DIR")
    assert G.default_cache_dir() == Path(G.__file__).resolve().parents[2] / "data" / "glyphs"


# =============================================================================================
# Toy
# =============================================================================================

def test_toy_shapes_determinism_and_split():
    a = make_toy("train", num_classes=20, per_class=10, dim=8, seed=3)
    b = make_toy("train", num_classes=20, per_class=10, dim=8, seed=3)
    c = make_toy("train", num_classes=20, per_class=10, dim=8, seed=4)
    t = make_toy("test", num_classes=20, per_class=10, dim=8, seed=3)
    assert a.x.shape == (100, 8) and a.x.dtype == torch.float32 and a.labels.shape == (100,)
    assert a.num_classes == 10 == t.num_classes
    assert torch.equal(a.x, b.x) and not torch.equal(a.x, c.x)
    assert not set(a.class_names) & set(t.class_names)
    assert not torch.allclose(a.centers, t.centers[: len(a.centers)])
    sub = make_toy("test", num_classes=20, per_class=10, dim=8, seed=3, max_classes=4)
    assert torch.equal(sub.x, t.x[:40]) and sub.num_classes == 4
    x, y = a[13]
    assert torch.equal(x, a.x[13]) and int(y) == 1


def test_toy_directions_carry_class_and_norms_vary():
    ds = make_toy("train", num_classes=40, per_class=20, dim=16, noise=0.1, scale_sigma=0.5, seed=0)
    # nearest centre by cosine recovers the label (the scale does not change directions)
    cos = torch.nn.functional.normalize(ds.x, dim=1) @ ds.centers.T
    assert (cos.argmax(1) == ds.labels).float().mean() > 0.95
    norms = ds.x.norm(dim=1)
    assert norms.std() / norms.mean() > 0.3
    flat = make_toy("train", num_classes=40, per_class=20, dim=16, noise=0.1, scale_sigma=0.0, seed=0)
    assert flat.x.norm(dim=1).std() / flat.x.norm(dim=1).mean() < 0.15
    with pytest.raises(ValueError, match="per_class"):
        make_toy("train", per_class=0)
    with pytest.raises(ValueError, match="split"):
        make_toy("val")


# =============================================================================================
# PKSampler
# =============================================================================================

def test_pksampler_composition_and_determinism():
    labels = torch.tensor([0] * 10 + [1] * 7 + [2] * 2 + [3] * 5 + [5] * 6)  # class 4 empty, class 2 small
    s = PKSampler(labels, p=3, k=4, seed=0, num_batches=200)
    batches = list(s)
    assert len(batches) == len(s) == 200
    seen_small_with_repeat = False
    for b in batches:
        assert len(b) == 12
        cls = labels[b].view(3, 4)
        assert (cls == cls[:, :1]).all()  # K consecutive indices per class
        assert len(set(cls[:, 0].tolist())) == 3  # P distinct classes
        for row, idx in zip(cls[:, 0].tolist(), torch.tensor(b).view(3, 4).tolist()):
            if row == 2:
                assert set(idx) == {17, 18}  # both instances + repeats
                seen_small_with_repeat = True
            else:
                assert len(set(idx)) == 4  # no repeats when the class is large enough
    assert seen_small_with_repeat
    used = Counter(int(labels[b[j]]) for b in batches for j in (0, 4, 8))
    assert set(used) == {0, 1, 2, 3, 5}
    assert batches == list(PKSampler(labels, 3, 4, seed=0, num_batches=200))
    assert batches != list(PKSampler(labels, 3, 4, seed=1, num_batches=200))
    again = list(s)  # second epoch: new batches
    assert again != batches
    s.set_epoch(0)
    assert list(s) == batches
    inf = iter(PKSampler(labels.tolist(), 3, 4, seed=0))
    assert [next(inf) for _ in range(5)] == batches[:5]


def test_pksampler_errors():
    with pytest.raises(ValueError, match="p=4.*only 3 classes"):
        PKSampler(torch.tensor([0, 0, 1, 1, 2]), p=4, k=2)
    with pytest.raises(ValueError, match="k=0"):
        PKSampler(torch.tensor([0, 1]), p=1, k=0)
    with pytest.raises(TypeError):
        len(PKSampler(torch.tensor([0, 1]), p=1, k=1))


def test_pksampler_matches_pml_mperclass_statistics():
    from pytorch_metric_learning.samplers import MPerClassSampler
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 20, size=600)
    p, k, nb = 5, 4, 1500
    ours = list(PKSampler(labels, p, k, seed=0, num_batches=nb))
    torch.manual_seed(0)
    pml_idx = list(MPerClassSampler(labels, m=k, batch_size=p * k, length_before_new_iter=p * k * nb))
    pml = [pml_idx[i:i + p * k] for i in range(0, len(pml_idx), p * k)]
    for batches in (ours, pml):
        for b in batches[:200]:
            c = Counter(labels[b].tolist())
            assert len(c) == p and set(c.values()) == {k}
        freq = np.bincount(labels[np.concatenate(batches)], minlength=20) / (nb * p * k)
        assert np.abs(freq - 1 / 20).max() < 0.01  # classes drawn uniformly
        inst = np.bincount(np.concatenate(batches), minlength=600)
        per_class = [inst[labels == c] / inst[labels == c].mean() for c in range(20)]
        # instances within a class are used uniformly: relative spread ~ Poisson, 1/sqrt(50) = 0.14
        assert np.concatenate(per_class).std() < 0.2


# =============================================================================================
# Real benchmark layouts (tiny fixtures built in tmp_path)
# =============================================================================================

def _img(path: Path, seed: int, size=(40, 30)):
    path.parent.mkdir(parents=True, exist_ok=True)
    a = np.random.default_rng(seed).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(a).save(path)


def _make_cub(root: Path, n_classes=4, per=2):
    d = root / "CUB_200_2011"
    imgs, labs, cls = [], [], []
    i = 1
    for c in range(1, n_classes + 1):
        folder = f"{c:03d}.Bird_{c}"
        cls.append(f"{c} {folder}")
        for j in range(per):
            rel = f"{folder}/img_{c}_{j}.jpg"
            _img(d / "images" / rel, i)
            imgs.append(f"{i} {rel}")
            labs.append(f"{i} {c}")
            i += 1
    (d / "images.txt").write_text("\n".join(imgs) + "\n")
    (d / "image_class_labels.txt").write_text("\n".join(labs) + "\n")
    (d / "classes.txt").write_text("\n".join(cls) + "\n")
    return d


def test_cub_layout_splits_and_transforms(tmp_path):
    _make_cub(tmp_path)
    tr = get_dataset("cub", "train", root=tmp_path, image_size=24)
    te = get_dataset("cub", "test", root=tmp_path / "CUB_200_2011", image_size=24)  # either root works
    assert len(tr) == len(te) == 4
    assert tr.labels.tolist() == [0, 0, 1, 1] and te.labels.tolist() == [0, 0, 1, 1]
    assert tr.class_names == ["001.Bird_1", "002.Bird_2"] and te.class_names == ["003.Bird_3", "004.Bird_4"]
    assert te.paths[0].endswith("003.Bird_3/img_3_0.jpg")
    x, y = te[0]
    assert x.shape == (3, 24, 24) and int(y) == 0
    # the test transform = resize shorter side to round(24*256/227)=27, centre crop 24, ImageNet normalisation
    im = Image.open(te.paths[0]).convert("RGB").resize((36, 27), Image.Resampling.BILINEAR).crop((6, 1, 30, 25))
    ref = torch.from_numpy(np.asarray(im, np.float32) / 255).permute(2, 0, 1)
    ref = (ref - torch.tensor(B.IMAGENET_MEAN).view(3, 1, 1)) / torch.tensor(B.IMAGENET_STD).view(3, 1, 1)
    assert torch.allclose(x, ref, atol=1e-5)
    torch.manual_seed(0)
    a = tr[0][0]
    torch.manual_seed(0)
    b = tr[0][0]
    c = tr[0][0]
    assert a.shape == (3, 24, 24) and torch.equal(a, b) and not torch.equal(a, c)  # random crop, torch-seeded
    sub = get_dataset("cub", "train", root=tmp_path, max_classes=1)
    assert sub.num_classes == 1 and len(sub) == 2
    assert get_dataset("cub", "test", root=tmp_path, size=16)[0][0].shape == (3, 16, 16)  # size alias


def test_cub_missing_and_malformed(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="CUB_200_2011/"):
        get_dataset("cub", "train", root=tmp_path / "nope")
    with pytest.raises(FileNotFoundError, match="image_class_labels.txt"):
        get_dataset("cub", "train", root=tmp_path)
    d = _make_cub(tmp_path)
    (d / "image_class_labels.txt").write_text("1 1\n2\n")
    with pytest.raises(ValueError, match="image_class_labels.txt line 2"):
        get_dataset("cub", "train", root=tmp_path)
    (d / "image_class_labels.txt").write_text("1 one\n")
    with pytest.raises(ValueError, match="not an integer"):
        get_dataset("cub", "train", root=tmp_path)
    monkeypatch.delenv("SEC_DATA_ROOT", raising=False)
    with pytest.raises(ValueError, match="SEC_DATA_ROOT"):
        get_dataset("cub", "train")
    _make_cub(tmp_path / "env")
    monkeypatch.setenv("SEC_DATA_ROOT", str(tmp_path / "env"))
    assert len(get_dataset("cub", "train")) == 4


def _cars_struct(rows, fields):
    arr = np.zeros((1, len(rows)), dtype=[(f, "O") for f in fields])
    for i, r in enumerate(rows):
        for f, v in zip(fields, r):
            arr[0, i][f] = np.array([[v]]) if not isinstance(v, str) else np.array([v])
    return arr


def test_cars_devkit_and_alternative_layouts(tmp_path):
    from scipy.io import savemat
    d = tmp_path / "a"
    rows, names = [], np.array([f"Car model {c}" for c in range(1, 5)], dtype=object).reshape(1, -1)
    for i in range(8):
        cls = i // 2 + 1
        rel = f"car_ims/{i + 1:06d}.jpg"
        _img(d / rel, i)
        rows.append((rel, 1, 2, 30, 20, cls, i % 2))
    fields = ["relative_im_path", "bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2", "class", "test"]
    savemat(str(d / "cars_annos.mat"), {"annotations": _cars_struct(rows, fields), "class_names": names})
    tr = get_dataset("cars", "train", root=d, image_size=16)
    te = get_dataset("cars", "test", root=d, image_size=16)
    assert tr.labels.tolist() == [0, 0, 1, 1] and te.labels.tolist() == [0, 0, 1, 1]
    assert tr.class_names == ["Car model 1", "Car model 2"] and te.class_names == ["Car model 3", "Car model 4"]
    assert te.paths[0].endswith("car_ims/000005.jpg") and te[0][0].shape == (3, 16, 16)

    e = tmp_path / "b" / "cars196"  # alternative layout, found under <root>/cars196
    (e / "devkit").mkdir(parents=True)
    savemat(str(e / "devkit" / "cars_meta.mat"), {"class_names": names})
    for part, folder, offs in (("devkit/cars_train_annos.mat", "cars_train", 0),
                               ("cars_test_annos_withlabels.mat", "cars_test", 4)):
        rws = []
        for i in range(4):
            fn = f"{i + 1:05d}.jpg"
            _img(e / folder / fn, 100 + offs + i)
            rws.append((1, 2, 30, 20, (offs + i) // 2 + 1, fn))
        savemat(str(e / part), {"annotations": _cars_struct(rws, ["bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2",
                                                                  "class", "fname"])})
    tr2 = get_dataset("cars", "train", root=tmp_path / "b")
    te2 = get_dataset("cars", "test", root=tmp_path / "b")
    assert tr2.labels.tolist() == [0, 0, 1, 1] and te2.class_names == ["Car model 3", "Car model 4"]
    assert all("cars_test" in p for p in te2.paths)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="cars_annos.mat"):
        get_dataset("cars", "train", root=tmp_path / "empty")
    (d / "cars_annos.mat").write_bytes(b"garbage")
    with pytest.raises(ValueError, match="cannot read cars_annos.mat"):
        get_dataset("cars", "train", root=d)


def test_sop_layout(tmp_path):
    d = tmp_path / "Stanford_Online_Products"
    for fname, classes in (("Ebay_train.txt", (1, 2, 3)), ("Ebay_test.txt", (7, 9))):
        lines = ["image_id class_id super_class_id path"]
        k = 1
        for c in classes:
            for j in range(2):
                rel = f"bicycle_final/{1000 + c}_{j}.JPG"
                _img(d / rel, c * 10 + j)
                lines.append(f"{k} {c} 1 {rel}")
                k += 1
        (d / fname).write_text("\n".join(lines) + "\n")
    tr = get_dataset("sop", "train", root=tmp_path, image_size=16)
    te = get_dataset("sop", "test", root=tmp_path, image_size=16)
    assert tr.num_classes == 3 and tr.labels.tolist() == [0, 0, 1, 1, 2, 2]
    assert te.class_names == ["bicycle_final/7", "bicycle_final/9"] and te.labels.tolist() == [0, 0, 1, 1]
    assert te[3][0].shape == (3, 16, 16)
    (d / "Ebay_test.txt").write_text("image_id class_id super_class_id path\n1 7 bicycle_final/x.JPG\n")
    with pytest.raises(ValueError, match="Ebay_test.txt line 2 has 3 columns"):
        get_dataset("sop", "test", root=tmp_path)


def test_inshop_layout(tmp_path):
    rows = []
    spec = [("id_01", "train"), ("id_01", "train"), ("id_02", "train"), ("id_05", "query"),
            ("id_05", "gallery"), ("id_03", "query"), ("id_03", "gallery"), ("id_03", "gallery")]
    for i, (item, status) in enumerate(spec):
        rel = f"img/WOMEN/Dresses/{item}/{i:02d}_front.jpg"
        _img(tmp_path / rel, i)
        rows.append(f"{rel} {item} {status}")
    (tmp_path / "list_eval_partition.txt").write_text(
        f"{len(rows)}\nimage_name item_id evaluation_status\n" + "\n".join(rows) + "\n")
    tr = get_dataset("inshop", "train", root=tmp_path, image_size=16)
    q = get_dataset("inshop", "query", root=tmp_path, image_size=16)
    g = get_dataset("inshop", "gallery", root=tmp_path, image_size=16)
    t = get_dataset("inshop", "test", root=tmp_path, image_size=16)
    assert tr.class_names == ["id_01", "id_02"] and tr.labels.tolist() == [0, 0, 1]
    assert q.class_names == g.class_names == ["id_03", "id_05"]  # one mapping for query and gallery
    assert q.labels.tolist() == [1, 0] and g.labels.tolist() == [1, 0, 0] and len(t) == 5
    assert q[0][0].shape == (3, 16, 16)
    with pytest.raises(ValueError, match="split='val'.*train, query, gallery"):
        get_dataset("inshop", "val", root=tmp_path)
    (tmp_path / "list_eval_partition.txt").write_text("1\nimage_name item_id evaluation_status\nimg/x.jpg id_1 dev\n")
    with pytest.raises(ValueError, match="evaluation_status 'dev'"):
        get_dataset("inshop", "train", root=tmp_path)


def _pickle(path: Path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        pickle.dump(obj, fh)


def test_cifar10_and_cifar100(tmp_path):
    rng = np.random.default_rng(0)
    d = tmp_path / "cifar-10-batches-py"
    names = [f"class{i}" for i in range(10)]
    _pickle(d / "batches.meta", {"label_names": names})
    train_labels = []
    for i in range(1, 6):
        lab = [(i + j) % 10 for j in range(4)]
        train_labels += lab
        _pickle(d / f"data_batch_{i}", {"data": rng.integers(0, 255, (4, 3072), dtype=np.uint8), "labels": lab})
    test_data = rng.integers(0, 255, (10, 3072), dtype=np.uint8)
    _pickle(d / "test_batch", {"data": test_data, "labels": list(range(10))})
    tr = get_dataset("cifar10", "train", root=tmp_path)
    te = get_dataset("cifar10", "test", root=tmp_path)
    assert tr.class_names == names[:5] and te.class_names == names[5:]
    assert len(tr) == sum(l < 5 for l in train_labels) and te.labels.tolist() == [0, 1, 2, 3, 4]
    x, y = te[2]  # test image of class 7, identity geometry at 32 px, ImageNet normalisation
    raw = torch.from_numpy(test_data[7].reshape(3, 32, 32).astype(np.float32) / 255)
    ref = (raw - torch.tensor(B.IMAGENET_MEAN).view(3, 1, 1)) / torch.tensor(B.IMAGENET_STD).view(3, 1, 1)
    assert torch.allclose(x, ref, atol=1e-5) and int(y) == 2
    full = get_dataset("cifar10", "train", root=tmp_path, split_by="file")
    assert full.num_classes == 10 and len(full) == 20
    assert sorted(full.labels.tolist()) == sorted(train_labels)
    assert not hasattr(te, "x")  # lazy: batches go through __getitem__ (and the train transform)

    d = tmp_path / "c100" / "cifar-100-python"
    _pickle(d / "meta", {"fine_label_names": [f"f{i}" for i in range(100)]})
    _pickle(d / "train", {"data": rng.integers(0, 255, (200, 3072), dtype=np.uint8), "fine_labels": list(range(100)) * 2})
    _pickle(d / "test", {"data": rng.integers(0, 255, (100, 3072), dtype=np.uint8), "fine_labels": list(range(100))})
    tr = get_dataset("cifar100", "train", root=tmp_path / "c100", max_classes=10)
    te = get_dataset("cifar100", "test", root=d)
    assert tr.num_classes == 10 and len(tr) == 20 and te.num_classes == 50 and te.class_names[0] == "f50"
    (d / "test").unlink()
    with pytest.raises(FileNotFoundError, match="missing test"):
        get_dataset("cifar100", "test", root=d)
    with pytest.raises(ValueError, match="'split_by' = 'x'.*'class', 'file'"):
        get_dataset("cifar100", "train", root=d, split_by="x")


def test_get_dataset_dispatch_errors(tmp_path):
    with pytest.raises(ValueError, match="unknown dataset name='imagenet'.*glyphs, toy, cub, cars, sop, inshop"):
        get_dataset("imagenet", "train")
    with pytest.raises(ValueError, match="split='query' is not valid for cub"):
        get_dataset("cub", "query", root=tmp_path)
    with pytest.raises(ValueError, match="root"):
        get_dataset("toy", "train", root=tmp_path)
    ds = get_dataset("toy", "test", num_classes=10, per_class=3, max_classes=2)
    assert ds.x.shape == (6, 32) and ds.num_classes == 2
    for name in ("cars", "sop", "inshop", "cifar10", "cifar100"):
        with pytest.raises(FileNotFoundError, match="Expected layout"):
            get_dataset(name, "train", root=tmp_path)
