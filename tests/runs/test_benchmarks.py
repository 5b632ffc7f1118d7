"""The real-benchmark books: the profiles' paper settings and their sources, the checks that stop
bad input before training, and every dataset loading and training on fixture folders in its exact layout
(tests/fixtures/benchmark_folders.py, generated into a temporary folder)."""
import os
import re
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from sec_lib import chapters, reference
from sec_lib.data import LAYOUTS, get_dataset
from sec_lib.data.benchmarks import ImageTransform, make_transform
from sec_lib.params import ParameterError
from sec_lib.runs import benchmarks as B
from sec_lib.runs import experiments as ex
from sec_lib.runs.store import ResultStore
from sec_lib.runs.train import load_data, train

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fixtures"))
import benchmark_folders as bf  # noqa: E402

ENV = (B.ROOT_ENV, B.PRETRAINED_ENV, B.BACKBONE_ENV)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("benchmarks")
    return {name: make(root / name) for name, make in bf.MAKERS.items()}


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    d = tmp_path_factory.mktemp("weights")
    return {arch: bf.weights_file(d / f"{arch}.pth", arch) for arch in B.BACKBONES}


@pytest.fixture
def use(monkeypatch, tmp_path):
    """``use(profile, data_root, pretrained, backbone)``: the runner's options, into a clean environment and a
    result store under tmp_path; returns the profile."""
    for k in ENV:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("SEC_RUNS_DIR", str(tmp_path / "runs"))

    def configure(profile, data_root=None, pretrained=None, backbone=None):
        B.configure(profile, data_root, pretrained, backbone)
        return ex.get_profile(profile)
    yield configure
    for k in ENV:                                   # configure() wrote os.environ directly
        os.environ.pop(k, None)


# ------------------------------------------------------------------------------------------ settings

#: Rebuttal Table 3 (and Table 4 for tml), typed again here from ../shared/reference/rebuttal_hyperparameters.md:
#: (backbone lr, head lr, decay, milestones) per dataset and loss.
TABLE3 = {"cub": {"triplet": (5e-6, 2.5e-6, 0.1, (5000,)), "semihard": (5e-6, 2.5e-6, 0.1, (5000,)),
                  "npair": (1e-5, 5e-6, 0.1, (5000,)), "ms": (5e-7, 2.5e-5, 0.1, (5000,)),
                  "tml": (4e-5, 2e-5, 0.1, (5000,))},
          "cars": {"triplet": (1e-5, 1e-5, 0.5, (4000, 6000)), "semihard": (1e-5, 1e-5, 0.5, (4000, 6000)),
                   "npair": (1e-5, 1e-5, 0.5, (4000, 6000)), "ms": (4e-5, 4e-5, 0.1, (2000,)),
                   "tml": (6e-5, 6e-5, 0.5, (4000, 6000))},
          "sop": {loss: (5e-4, 1e-4, 0.1, (6000,)) for loss in ("triplet", "semihard", "npair", "ms", "tml")},
          "inshop": {loss: (5e-4, 1e-4, 0.1, (6000,)) for loss in ("triplet", "semihard", "npair", "ms")}}
PAPER_KS = {"cub": (1, 2, 4, 8), "cars": (1, 2, 4, 8), "sop": (1, 10, 100, 1000), "inshop": (1, 10, 20, 30, 40, 50)}


@pytest.mark.parametrize("name", ("cub", "cars", "sop", "inshop"))
def test_each_profile_trains_with_the_papers_settings_and_cites_them(name):
    p = ex.get_profile(name)
    b = p.base
    assert (b["dataset"], b["model"], b["image_size"], b["batch_size"], b["embed_dim"], b["head"]) == \
        (name, "bninception", 227, 120, 512, "paper")
    assert b["freeze_bn"] and b["optimizer"] == "adam" and b["schedule"] == "step" and b["device"] == "cuda"
    assert b["iterations"] == (8000 if name in ("cub", "cars") else 12000)
    assert b["weight_decay"] == (2.5e-3 if name in ("cub", "cars") else 1e-5)     # the authors' code
    assert tuple(b["eval_ks"]) == PAPER_KS[name]
    assert b["data_kwargs"] == {"convention": "bninception", "crop_scale": (0.16, 1.0)}
    for loss, (lr, head, decay, ms) in TABLE3[name].items():
        c = ex.config(p, loss, "sec", 0)
        assert (c.lr, c.lr_head, c.lr_decay, c.lr_milestones) == (lr, head, decay, ms), loss
        assert c.batch_size == 120 and c.eta == ex.ETA_SEC[loss] and c.pretrained is None   # no weights given
        c.replace(device="cpu").validate()
    # a loss without a published rate trains with the triplet row; SGD runs never take Adam's per-loss rates
    assert ex.config(p, "cosface").lr == TABLE3[name]["triplet"][0]
    sgd = [c for c in ex.lr_pilot(p)]
    assert sgd and all(c.optimizer == "sgd" and c.lr_head is None and c.holdout_classes == p.holdout_classes
                       for c in sgd)
    assert ex.tuned(p, "adam", store=None) is p                   # the paper's rates: no Adam pilot
    assert ex.pilot_configs(p, ["compare", "eta"]) == [] and ex.pilot_configs(p, ["optim"]) == sgd
    assert ex.pilot_configs(ex.get_profile("cpu"), ["compare"]) == ex.lr_pilot(ex.get_profile("cpu"))
    # every setting names its source; the paper's Table 1 has a column for each of the profile's K
    table = B.settings_table(name)
    assert table["source"].str.len().min() > 10 and len(table) >= 20
    assert (table["authors' code"].str.len() > 0).sum() >= 5      # where the authors' code differs
    paper = reference.paper_table(B.paper_datasets(name))
    assert list(paper.columns[3:-1]) == ["NMI", "F1"] * (name != "inshop") + [f"R@{k}" for k in PAPER_KS[name]]
    assert B.paper_metrics(name) == tuple(paper.columns[3:-1]) and len(paper) == 12
    assert ("NMI" in paper.columns) == (name != "inshop") == B.DATASETS[name]["clustering"].value


def test_benchmark_profiles_leave_the_glyph_book_alone():
    assert set(ex.PROFILES) == set(ex.GLYPH_PROFILES)             # the data page's profile table is unchanged
    assert ex.PROFILE_NAMES == ex.GLYPH_PROFILES + ex.BENCHMARK_PROFILES
    for name in ex.GLYPH_PROFILES:
        p = ex.get_profile(name)
        assert (p.fixed_optimizer, p.loss_base, p.sweeps, p.excluded_losses) == ("", {}, (), ())
        assert ex.profile_sweeps(p) == tuple(ex.SWEEPS)
        assert B.page_note(name, "fairness") is None
    assert (B.data_name("cpu"), B.paper_datasets("cpu"), B.data_name("cub-smoke")) == \
        ("glyphs", ("CUB", "Cars"), "CUB-200-2011")
    assert (B.data_name("decisive"), B.paper_datasets("decisive")) == ("glyphs", ("CUB", "Cars"))   # a tier a page shows
    with pytest.raises(ParameterError, match="'profile'"):
        B.data_name("fast")
    assert B.paper_metrics("cpu") == ("NMI", "F1", "R@1", "R@2", "R@4", "R@8")
    assert ex.sweep_configs("ssl", "cub", store=None) == []          # a chapter it does not train: no runs
    cub = ex.get_profile("cub")
    assert "ssl" not in ex.profile_sweeps(cub) and not {c.loss for c in ex.eta_selection(cub)} & set(ex.SSL_LOSSES)
    assert B.page_note("cub", "fairness") and B.page_note("cub", "compare") is None


def test_the_plan_counts_each_run_once_and_estimates_hours():
    pl = B.plan("cub")
    assert pl["runs"].sum() > 200 and 100 < pl["hours"].sum() < 1000
    assert pl.loc[pl["stage"] == "compare", "runs"].item() == 36          # 4 losses x 3 variants x 3 seeds
    c = ex.config(ex.get_profile("sop"), "ms", "sec", 0)
    assert B.estimate(c) > B.estimate(ex.config(ex.get_profile("cub"), "ms", "sec", 0)) > 1.0


def test_the_bninception_convention_is_bgr_0_255_minus_the_mean():
    from PIL import Image
    img = Image.new("RGB", (40, 34), (10, 20, 30))
    x = ImageTransform(False, 32, convention="bninception")(img)
    assert torch.allclose(x[:, 0, 0], torch.tensor([30 - 104.0, 20 - 117.0, 10 - 128.0]))
    assert make_transform(None, "train", 32, crop_scale=(0.16, 1)).scale == (0.16, 1.0)
    with pytest.raises(ValueError, match="crop_scale"):
        make_transform(None, "train", 32, crop_scale=(0.5, 2))


# ------------------------------------------------------------------------------------------ bad input

@pytest.mark.parametrize("name", ("cub", "cars", "sop", "inshop"))
def test_a_wrong_or_missing_folder_or_file_stops_with_the_expected_layout(name, folders, weights, use, tmp_path):
    profile, p = "cub-smoke", B.smoke_profile(name)      # cub-smoke's options, the fixture profile of `name`
    use(profile, pretrained=weights["resnet50"])
    with pytest.raises(ParameterError, match="pass --data-root DIR") as e:
        B.preflight(p)
    assert LAYOUTS[name].splitlines()[1] in str(e.value)
    for root, why in ((tmp_path / "nope", "root folder does not exist"),
                      (folders["cub" if name != "cub" else "sop"], "found")):   # another dataset's folder
        B.configure(profile, data_root=root)
        with pytest.raises(ParameterError, match=why) as e:
            B.preflight(p)
        assert "Expected layout" in str(e.value) and LAYOUTS[name].splitlines()[1] in str(e.value)
    # a copy with one image gone: every listed image is checked, before anything trains
    copy = bf.MAKERS[name](tmp_path / "copy", classes=16, per=5)
    listed = get_dataset(name, "test" if name != "inshop" else "gallery", root=copy).paths
    Path(listed[-1]).unlink()
    B.configure(profile, data_root=copy)
    with pytest.raises(ParameterError, match=r"1 of the \d+ images .* missing") as e:
        B.preflight(p)
    assert listed[-1] in str(e.value) and "Expected layout" in str(e.value)


def test_weights_that_do_not_fit_name_their_keys(folders, weights, use, tmp_path):
    p = use("cub-smoke", data_root=folders["cub"])                         # resnet50, 4 wide
    with pytest.raises(ParameterError, match="pass --pretrained PATH"):
        B.check_weights(p)
    p = use("cub-smoke", pretrained=tmp_path / "missing.pth")
    with pytest.raises(ParameterError, match="no such file"):
        B.check_weights(p)
    p = use("cub-smoke", pretrained=weights["bninception"])
    with pytest.raises(ParameterError) as e:
        B.check_weights(p)
    msg = str(e.value)
    assert "does not fit the resnet50 backbone" in msg and "'conv1.weight'" in msg and "'conv1_7x7_s2.weight'" in msg
    assert "pass --backbone bninception" in msg
    # a renamed key and a wrongly shaped one, in an otherwise fitting file
    state = torch.load(weights["resnet50"], weights_only=True)
    state["layer9.weight"] = state.pop("layer1.0.conv1.weight")
    state["conv1.weight"] = torch.zeros(4, 3, 3, 3)
    bad = tmp_path / "bad.pth"
    torch.save(state, bad)
    p = use("cub-smoke", pretrained=bad)
    with pytest.raises(ParameterError) as e:
        B.check_weights(p)
    msg = str(e.value)
    assert "missing keys ['layer1.0.conv1.weight']" in msg and "unexpected keys ['layer9.weight']" in msg
    assert "conv1.weight: file (4, 3, 3, 3) vs model (4, 3, 7, 7)" in msg
    p = use("cub-smoke", pretrained=weights["bninception"], backbone="bninception")
    assert B.check_weights(p) == str(weights["bninception"].resolve())             # the full BN-Inception's keys fit


def test_the_runner_stops_bad_input_before_anything_trains(folders, weights, use, tmp_path, capsys):
    from sec_lib.site import runner
    use("cub")
    cmd = ["run", "--profile", "cub-smoke", "--only", "table1", "--site", str(tmp_path / "nosite")]
    assert runner.main(["run", "--profile", "cpu", "--data-root", str(folders["cub"])]) == 2
    assert "--data-root applies only to the real-benchmark profiles" in capsys.readouterr().err
    (tmp_path / "nosite" / "notebooks").mkdir(parents=True)
    (tmp_path / "nosite" / "_config.yml").write_text("title: t\n")
    assert runner.main([*cmd, "--data-root", str(folders["sop"]), "--pretrained", str(weights["resnet50"])]) == 2
    assert "Expected layout" in capsys.readouterr().err
    assert runner.main([*cmd, "--data-root", str(folders["cub"]), "--pretrained", str(weights["bninception"])]) == 2
    assert "unexpected keys ['conv1_7x7_s2.bias'" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


# ------------------------------------------------------------------------------------------ training

@pytest.mark.parametrize("name", ("cub", "cars", "sop", "inshop"))
def test_each_dataset_loads_and_trains_a_few_steps(name, folders, weights, use):
    use("cub-smoke", data_root=folders[name], pretrained=weights["resnet50"])
    p = B.smoke_profile(name)
    sizes = B.preflight(p)
    assert sizes["train"] == (40, 8)
    cfg = ex.config(p, "ms", "sec", 0)
    assert cfg.pretrained == str(weights["resnet50"].resolve()) and cfg.dataset == name
    train_ds, test_ds = load_data(cfg)
    assert train_ds[0][0].shape == (3, 32, 32) and train_ds.num_classes == 8
    r = train(cfg)
    assert r.status == "done" and r.evals["step"].tolist() == [0, 2, 4]
    assert {f"R@{k}" for k in cfg.eval_ks} <= set(r.metrics)
    if name == "inshop":                          # query against gallery: recall only
        assert type(test_ds).__name__ == "QueryGallery" and "NMI" not in r.metrics
    else:
        assert "NMI" in r.metrics and "F1" in r.metrics


def test_the_runner_trains_a_cub_smoke_chapter_and_writes_the_pages_that_do_not_apply(folders, weights, use,
                                                                                        tmp_path, monkeypatch):
    from sec_lib.site import runner
    use("cub")
    rc = runner.main(["train", "--profile", "cub-smoke", "--sweeps", "normlayer", "--jobs", "1",
                      "--data-root", str(folders["cub"]), "--pretrained", str(weights["resnet50"])])
    assert rc == 0
    store = ResultStore()
    p = ex.get_profile("cub-smoke")
    for c in ex.sweep_configs("normlayer", p, store):
        r = store.get(c, tables=())
        assert r is not None and r.status == "done" and c.dataset == "cub" and c.pretrained
    assert runner.main(["train", "--profile", "cub-smoke", "--sweeps", "ssl"]) == 2     # not one of its sweeps
    # pages that do not apply are written as a note, without training or a kernel
    site = tmp_path / "site"
    (site / "notebooks").mkdir(parents=True)
    (site / "_config.yml").write_text("title: t\n")
    for page in ("data", "fairness", "ssl"):
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell(f"# The {page} page\n\ntext")])
        nbformat.write(nb, site / "notebooks" / f"{page}.ipynb")
    monkeypatch.setattr(runner, "execute_page", lambda *a, **k: pytest.fail("no notebook may run"))
    monkeypatch.setattr(runner, "train_stages", lambda *a, **k: pytest.fail("nothing may train"))
    s = runner.run("cub-smoke", only=["data", "fairness", "ssl"], site=site)
    assert sorted(s.executed) == ["data", "fairness", "ssl"] and not s.failed_pages
    for page in ("data", "fairness", "ssl"):
        cell = nbformat.read(site / "book" / "nb" / f"{page}.ipynb", as_version=4).cells[0].source
        assert cell.startswith(f"# The {page} page") and "does not apply to this book" in cell
        assert B.page_note("cub-smoke", page) in cell and "CUB-200-2011" in cell


# ------------------------------------------------------------------------------------------ end to end

def visible_text(path) -> str:
    """What a reader of an executed notebook sees: its markdown cells and its outputs' markdown, HTML and text."""
    nb = nbformat.read(path, as_version=4)
    parts = []
    for c in nb.cells:
        if c.cell_type == "markdown":
            parts.append(c.source)
        for o in c.get("outputs", []):
            parts += [str(o.get("data", {}).get(k, "")) for k in ("text/markdown", "text/html")] + [o.get("text", "")]
    return "\n".join(parts)


@pytest.mark.slow
def test_the_cub_smoke_book_trains_executes_and_builds(cub_smoke_book):
    """``run --profile cub-smoke`` on the fixture folders, then ``build``, into a temporary site and store (made in the
    background while the other tests run: tests/conftest.py's ``cub_smoke_book``): every page executes (the
    glyph-only ones as notes), each shows the cub-smoke runs, and the book builds with -W."""
    run, build, site = cub_smoke_book["run"], cub_smoke_book["build"], cub_smoke_book["site"]
    assert run is not None and run.returncode == 0, (run.stdout[-3000:] + run.stderr[-3000:]) if run else "no run"
    from sec_lib.chapters import PAGES
    assert f"notebooks: {len(PAGES)} executed, 0 failed" in run.stdout, run.stdout[-2000:]
    for page in B.NOT_APPLICABLE:
        assert "does not apply to this book" in (site / "book" / "nb" / f"{page}.ipynb").read_text()
    assert "the cub-smoke tier" in (site / "book" / "nb" / "table1.ipynb").read_text()
    assert build is not None and build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    # a page that applies speaks of this book's data, not of glyphs (but in a sentence about what the glyph book does);
    # the monitor and the explorer train their own glyph and toy runs, the tiers page lists the glyph tiers, and the
    # claims page lists every claim, the glyph-only ones included
    for page in chapters.PAGES:
        if page.source in (*B.NOT_APPLICABLE, "monitor", "explore", "tiers", "claims"):
            continue
        sentences = re.split(r"(?<=[.!?])\s+", visible_text(site / "book" / "nb" / f"{page.output}.ipynb"))
        said = [x for x in sentences if "glyph" in x.lower() and "glyph book" not in x.lower()]
        assert not said, (page.output, said)
    table1 = site / "_build" / "html" / "book" / "nb" / "table1.html"
    assert "CUB" in table1.read_text()                    # the paper's CUB numbers beside the cub-smoke runs
