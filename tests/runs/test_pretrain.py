"""The backbone pretrained here: its classes are disjoint from every split by code point and by look,
its checkpoint is a plain local weights file with provenance, and retraining reproduces it on the same CPU kind."""
import json
import sys
from pathlib import Path

import pytest
import torch

from sec_lib import kernels
from sec_lib.data.glyph_pool import GlyphClass, glyph_classes, split_classes
from sec_lib.data.glyph_pretrain import (
    NEAR_MAX_PIXELS, PRETRAIN_MIN_FONTS, benchmark_codepoints, pixel_disjointness, pretrain_classes, pretrain_manifest,
)
from sec_lib.data.glyph_render import char_name
from sec_lib.models import build_model
from sec_lib.params import ParameterError
from sec_lib.runs import pretrain as pt
from sec_lib.runs.train import TrainConfig

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"
sys.path.insert(0, str(GOLDEN_DIR))
import pretrain_prefix  # noqa: E402

CKPT = pt.REPO / pt.CHECKPOINT


def test_pretraining_classes_use_no_code_point_of_any_split():
    classes = pretrain_classes()
    assert len(classes) >= 500
    used = benchmark_codepoints()
    # every split: the train half (its last classes are the held-out classes of every profile) and the test half
    assert len(split_classes("train")) + len(split_classes("test")) == len(glyph_classes())
    for c in glyph_classes():
        assert c.codepoint in used and set(c.members) <= used
    mine = [cp for c in classes for cp in (c.codepoint, *c.members)]
    assert len(mine) == len(set(mine))
    assert not set(mine) & used
    assert all(len(c.fonts) >= PRETRAIN_MIN_FONTS for c in classes)


def test_pretraining_classes_are_disjoint_from_every_committed_class_by_look():
    """Recomputed on the rendered pixels: no render of a pretraining class (any font) lies within NEAR_MAX_PIXELS
    of a render of a committed class (any font). The same check flags the textbook homoglyphs of Latin "o"."""
    homoglyphs = [GlyphClass(cp, char_name(cp), ()) for cp in (0x043E, 0x03BF)]   # Cyrillic о, Greek ο
    classes = pretrain_classes()
    check = pixel_disjointness(classes + homoglyphs, exact=False)
    bad = [f"U+{c['codepoint']:04X} ({c['distance']} px from U+{c['nearest']:04X})"
           for c in check[:len(classes)] if not c["disjoint"]]
    assert not bad, bad
    assert [c["disjoint"] for c in check[len(classes):]] == [False, False]
    assert {c["nearest"] for c in check[len(classes):]} <= {0x006F, 0x043E, 0x03BF}   # the class of Latin o
    man = pretrain_manifest()
    assert man["rule"]["near_max_pixels"] == NEAR_MAX_PIXELS
    assert all(e["distance"] > NEAR_MAX_PIXELS for e in man["classes"])
    assert man["stats"]["classes"] == len(classes)


def test_pixel_disjointness_refuses_a_bad_threshold():
    with pytest.raises(ParameterError, match="threshold"):
        pixel_disjointness(pretrain_classes()[:1], threshold=-1)


def test_the_checkpoint_is_a_plain_weights_file_that_pretrained_reads():
    state = torch.load(CKPT, map_location="cpu", weights_only=True)
    prov = pt.committed_provenance()
    assert pt.weights_hash(state) == prov["weights_hash"]
    assert pt._file_sha256(CKPT) == prov["file_sha256"]
    assert CKPT.stat().st_size < 1_000_000
    for key in ("config", "git_commit", "data", "seed", "kernels", "test_features", "classes"):
        assert key in prov
    assert prov["kernels"]["cpu_kind"] and prov["data"]["sha256"]
    assert prov["classes"]["count"] == len(pretrain_classes())
    assert prov["classes"]["sha256"] == pt._file_sha256(pt.PRETRAIN_JSON)
    assert 0 < prov["test_features"]["pretrained"]["R@1"] <= 100
    cfg = pt.committed_config()
    model = build_model(cfg.arch, width=cfg.width, image_size=cfg.image_size, pretrained=str(CKPT))
    got = model.backbone.state_dict()
    assert all(torch.equal(got[k], state[k]) for k in state)
    TrainConfig(pretrained=str(pt.CHECKPOINT), freeze_bn=True).validate()


def test_the_pretraining_prefix_retrains_to_its_recorded_hash_on_this_cpu_kind():
    golden = json.loads(pretrain_prefix.GOLDEN.read_text())
    kind = kernels.this_kind()
    if kind not in golden:
        pytest.skip(f"no golden pretraining hash for this CPU kind {kind} (recorded: {', '.join(sorted(golden))}); "
                    "bit-identity holds on the same kind only. Record it with python tests/golden/pretrain_prefix.py "
                    "--record")
    got = pretrain_prefix.prefix_hash()
    assert got["steps"] == golden[kind]["steps"] == pt.PREFIX_STEPS
    assert got["weights_hash"] == golden[kind]["weights_hash"]


def test_a_resumed_pretraining_ends_with_the_same_bits(tmp_path, monkeypatch):
    monkeypatch.setattr(pt, "CHECKPOINT_EVERY", 4)
    cfg = pt.PretrainConfig(iterations=10, batch_size=32)
    whole = pt.pretrain(cfg)
    state = tmp_path / "state.pt"
    pt.pretrain(cfg, steps=6, state_path=state)           # interrupted after step 6; its state is from step 4
    assert state.exists()
    resumed = pt.pretrain(cfg, state_path=state)
    assert pt.weights_hash(resumed["trunk"]) == pt.weights_hash(whole["trunk"])
    with pytest.raises(ValueError, match="another pretraining config"):
        pt.pretrain(pt.PretrainConfig(iterations=10, batch_size=32, lr=0.05), state_path=state)


def test_bad_pretraining_settings_name_the_valid_choices():
    with pytest.raises(ParameterError, match="sgd"):
        pt.PretrainConfig(optimizer="adam").validate()
    with pytest.raises(ParameterError, match="valid fields"):
        pt.PretrainConfig.from_dict({"lr": 0.1, "learning_rate": 0.1})
    with pytest.raises(ParameterError, match="steps"):
        pt.pretrain(pt.PretrainConfig(iterations=10), steps=11)


def test_a_run_fine_tunes_from_the_checkpoint_through_trainconfig_pretrained():
    from sec_lib.runs.train import train
    cfg = TrainConfig(dataset="glyphs", train_classes=40, test_classes=20, iterations=2, batch_size=24, width=16,
                      embed_dim=16, pretrained=str(CKPT), freeze_bn=True, lr=1e-4, lr_head=1e-3, eval_every=0,
                      instrument=False, track_samples=0, kmeans_n_init=1, eval_clustering="final")
    res = train(cfg)
    assert res.status == "done" and 0 < res.metrics["R@1"] <= 100
    with pytest.raises(ValueError, match="does not fit"):      # a trunk of another width is refused, with the keys
        build_model("smallcnn", width=8, pretrained=str(CKPT))


def test_a_repository_relative_checkpoint_path_opens_from_any_working_directory(tmp_path, monkeypatch):
    from sec_lib.runs.config import weights_path
    monkeypatch.chdir(tmp_path)
    rel = str(pt.CHECKPOINT)
    assert not Path(rel).exists() and weights_path(rel) == str(CKPT)
    assert weights_path(None) is None and weights_path("no/such.pt") == "no/such.pt"


def test_the_gpu_profiles_trunk_is_pretrained_by_the_same_recipe_under_its_own_name(tmp_path):
    """The gpu profile's trunk (resnet18s): the same recipe, classes and seed as the committed smallcnn trunk; its
    own checkpoint name; a GPU by default (refused, naming the fix, where there is none). A tiny CPU version of it
    trains, and its trunk loads into the network a fine-tuning run builds."""
    g = pt.GPU_CONFIG
    same = ("instances_per_class", "data_seed", "iterations", "batch_size", "optimizer", "lr", "momentum",
            "weight_decay", "schedule", "seed")
    assert {k: getattr(g, k) for k in same} == {k: getattr(pt.PretrainConfig(), k) for k in same}
    assert (g.arch, g.width, g.image_size, g.device) == ("resnet18s", 64, 64, "cuda")
    assert pt.checkpoint_path(g).name == "glyph_resnet18s_64px.pt" and pt.checkpoint_path(pt.PretrainConfig()) == pt.CHECKPOINT
    assert "device" not in pt.committed_config().to_dict()         # the committed config's dict is unchanged
    if not torch.cuda.is_available():
        with pytest.raises(ParameterError, match="device.*CUDA is not available"):
            g.validate()
    tiny = pt.PretrainConfig(arch="resnet18s", width=8, image_size=32, iterations=3, batch_size=16)
    res = pt.pretrain(tiny)
    assert res["steps"] == 3 and all(torch.isfinite(v.float()).all() for v in res["trunk"].values())
    f = tmp_path / "trunk.pt"
    torch.save(res["trunk"], f)
    net = build_model("resnet18s", width=8, image_size=32, pretrained=str(f))
    loaded = net.backbone.state_dict()
    assert all(torch.equal(loaded[k], v) for k, v in res["trunk"].items())
    with pytest.raises(ParameterError, match="'arch'.*'smallcnn', 'resnet18s'"):
        pt.PretrainConfig(arch="resnet50").validate()


def test_the_gpu_trunk_is_saved_in_bfloat16_and_loads_into_a_float32_network(tmp_path, monkeypatch):
    """The gpu profile's checkpoint is saved in bfloat16 (22 MB, not 45: a lent machine returns at most 16 MiB a file
    and takes a 64 MiB tree); its provenance hashes the saved weights and the trained ones; the float32 trunk's
    config and files are unchanged; a bad dtype is refused with the valid ones."""
    assert pt.GPU_CONFIG.save_dtype == "bfloat16" and pt.PretrainConfig().save_dtype == "float32"
    assert "save_dtype" not in pt.committed_config().to_dict()
    assert pt.GPU_CONFIG.to_dict()["save_dtype"] == "bfloat16"
    with pytest.raises(ParameterError, match="'save_dtype' = 'float16'.*'float32', 'bfloat16'"):
        pt.PretrainConfig(save_dtype="float16").validate()
    tiny = pt.PretrainConfig(arch="resnet18s", width=8, image_size=32, iterations=3, batch_size=16,
                             save_dtype="bfloat16")
    monkeypatch.setattr(pt, "_state_path", lambda cfg: tmp_path / "state.pt")
    # the test features are those of the weights fine-tuning starts from: the saved (rounded) ones
    monkeypatch.setattr(pt, "feature_recall", lambda state, cfg: {
        "R@1": -1.0 if state is None else float(state["conv1.weight"].dtype == torch.bfloat16)})
    out = tmp_path / "trunk.pt"
    prov = pt.build_checkpoint(tiny, out=out, log_every=0)
    saved = torch.load(out, weights_only=True)
    assert {v.dtype for v in saved.values() if v.is_floating_point()} == {torch.bfloat16}
    assert {v.dtype for v in saved.values() if not v.is_floating_point()} == {torch.int64}   # num_batches_tracked
    assert prov["weights_hash"] == pt.weights_hash(saved) != prov["trained_weights_hash"]
    assert prov["test_features"] == {"pretrained": {"R@1": 1.0}, "random_init": {"R@1": -1.0}}
    assert prov["config"]["save_dtype"] == "bfloat16" and json.loads(out.with_suffix(".json").read_text()) == prov
    net = build_model("resnet18s", width=8, image_size=32, pretrained=str(out))
    loaded = net.backbone.state_dict()
    assert all(loaded[k].dtype == (torch.float32 if v.is_floating_point() else v.dtype) for k, v in saved.items())
    assert all(torch.equal(loaded[k], v.to(loaded[k].dtype)) for k, v in saved.items())
    trunk = net.backbone.state_dict()                                  # float32: saved as it is
    assert all(v is trunk[k] for k, v in pt.saved_state(trunk, pt.PretrainConfig()).items())


def test_a_pretraining_stopped_at_its_deadline_resumes_to_the_same_weights(tmp_path, monkeypatch):
    """A lent GPU's command ends at its deadline: pretraining stops at its next state save (PretrainStopped, naming
    the step) and the next call resumes it to the weights of an uninterrupted run."""
    monkeypatch.setattr(pt, "CHECKPOINT_EVERY", 2)
    tiny = pt.PretrainConfig(arch="resnet18s", width=8, image_size=32, iterations=4, batch_size=16)
    whole = pt.pretrain(tiny)["trunk"]
    state = tmp_path / "state.pt"
    with pytest.raises(pt.PretrainStopped, match="stopped at step 2 of 4") as e:
        pt.pretrain(tiny, state_path=state, stop_at=0.0)
    assert (e.value.step, e.value.steps) == (2, 4) and state.exists()
    resumed = pt.pretrain(tiny, state_path=state)["trunk"]
    assert all(torch.equal(whole[k], resumed[k]) for k in whole)
    with pytest.raises(ValueError, match="stop_at needs a state_path"):
        pt.pretrain(tiny, stop_at=0.0)
