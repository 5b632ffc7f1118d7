"""Tests for sec_lib.models: shapes, heads, frozen BN, pretrained-weight compatibility, argument checks."""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import parametrize

from sec_lib.models import (
    ARCHS,
    HEADS,
    MIN_IMAGE_SIZE,
    EmbeddingNet,
    build_model,
    count_parameters,
)

# Small valid configurations (arch -> build kwargs, input shape) so that the whole file stays fast on 2 cores.
SMALL = {
    "smallcnn": (dict(in_channels=1, image_size=32, width=8), (4, 1, 32, 32)),
    "resnet18s": (dict(in_channels=3, image_size=16, width=4), (4, 3, 16, 16)),
    "mlp": (dict(in_dim=10, width=12), (4, 10)),
    "resnet50": (dict(in_channels=3, image_size=64, width=64), (2, 3, 64, 64)),
    "bninception": (dict(in_channels=3, image_size=64), (2, 3, 64, 64)),
}
FEATURE_DIM = {"smallcnn": 32, "resnet18s": 32, "mlp": 12, "resnet50": 2048, "bninception": 1024}


def _state_equal(a: nn.Module, b: nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


# --------------------------------------------------------------------------------------------- shapes / heads
def _check_outputs(m, x, head, batch, feature_dim):
    for train in (True, False):
        m.train(train)
        emb, pre = m.forward_with_prenorm(x)
        assert emb.shape == pre.shape == (batch, 7)
        assert torch.isfinite(emb).all()
        assert (pre is emb) == (head != "normalize")
    assert m.features(x).shape == (batch, feature_dim)
    assert torch.equal(m(x), m.forward_with_prenorm(x)[0])


def test_the_tests_cover_every_arch():
    assert set(SMALL) == set(ARCHS) and len(HEADS) == 5


@pytest.mark.parametrize("arch", ["smallcnn", "resnet18s", "mlp"])
def test_every_head_gives_right_shapes(arch):
    kwargs, shape = SMALL[arch]
    x = torch.rand(shape, generator=torch.Generator().manual_seed(0))
    for head in HEADS:
        m = build_model(arch, head=head, embed_dim=7, seed=0, **kwargs)
        assert isinstance(m, EmbeddingNet)
        assert (m.arch, m.head_name, m.feature_dim, m.embed_dim) == (arch, head, FEATURE_DIM[arch], 7)
        _check_outputs(m, x, head, shape[0], FEATURE_DIM[arch])


@pytest.mark.parametrize("arch", ["resnet50", "bninception"])
def test_every_head_gives_right_shapes_on_the_imagenet_backbones(arch):
    """Batch 2 at 64 px; the (expensive) backbone is built once and shared by the five heads."""
    kwargs, shape = SMALL[arch]
    x = torch.rand(shape, generator=torch.Generator().manual_seed(0))
    base = build_model(arch, head="paper", embed_dim=7, seed=0, **kwargs)
    assert (base.arch, base.feature_dim) == (arch, FEATURE_DIM[arch])
    _check_outputs(base, x, "paper", shape[0], FEATURE_DIM[arch])
    with torch.no_grad():
        h = base.eval().features(x)
        s = MIN_IMAGE_SIZE[arch]  # the smallest documented input also runs
        assert base(torch.rand(2, 3, s, s)).shape == (2, 7)
    for head in HEADS:
        m = EmbeddingNet(base.backbone, head, 7, arch=arch)
        assert m.head_name == head
        for train in (True, False):
            m.head.train(train)
            emb, pre = m.head(h)
            assert emb.shape == pre.shape == (shape[0], 7) and torch.isfinite(emb).all()
            assert (pre is emb) == (head != "normalize")


def test_paper_and_nobn_heads_compute_the_documented_maps():
    x = torch.rand(6, 1, 32, 32)
    m = build_model("smallcnn", head="paper", embed_dim=5, width=8, seed=0).eval()
    h = m.features(x)
    bn = m.head.bn
    manual = F.linear((h - bn.running_mean) / torch.sqrt(bn.running_var + bn.eps) * bn.weight + bn.bias,
                      m.head.fc.weight, m.head.fc.bias)
    assert isinstance(bn, nn.BatchNorm1d) and bn.num_features == 32 and m.head.out_bn is None
    torch.testing.assert_close(m(x), manual)
    m2 = build_model("smallcnn", head="nobn", embed_dim=5, width=8, seed=0).eval()
    assert m2.head.bn is None and not any(isinstance(mod, nn.BatchNorm1d) for mod in m2.head.modules())
    torch.testing.assert_close(m2(x), m2.head.fc(m2.features(x)))


def test_normalize_head_outputs_unit_vectors_and_returns_the_linear_output_as_prenorm():
    m = build_model("smallcnn", head="normalize", embed_dim=9, width=8, seed=0).train()
    emb, pre = m.forward_with_prenorm(torch.rand(8, 1, 32, 32))
    torch.testing.assert_close(emb.norm(dim=1), torch.ones(8))
    assert not torch.allclose(pre.norm(dim=1), torch.ones(8), atol=1e-2)
    torch.testing.assert_close(emb, pre / pre.norm(dim=1, keepdim=True))
    # prenorm is the Linear output of the BN'd feature
    m.eval()
    x = torch.rand(8, 1, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(m.forward_with_prenorm(x)[1], m.head.fc(m.head.bn(m.features(x))))
    m.train()
    emb, pre = m.forward_with_prenorm(torch.rand(8, 1, 32, 32))
    # the SEC term on prenorm back-propagates into the network
    (pre.norm(dim=1) - pre.norm(dim=1).mean().detach()).pow(2).mean().backward()
    assert m.head.fc.weight.grad is not None and m.head.fc.weight.grad.abs().sum() > 0


def test_bn_before_norm_output_is_standardized_per_feature_in_train_mode():
    m = build_model("smallcnn", head="bn_before_norm", embed_dim=6, width=8, seed=0).train()
    emb = m(torch.rand(32, 1, 32, 32) * 3)
    assert isinstance(m.head.out_bn, nn.BatchNorm1d) and m.head.out_bn.num_features == 6
    torch.testing.assert_close(emb.mean(0), torch.zeros(6), atol=1e-5, rtol=0)
    torch.testing.assert_close(emb.var(0, unbiased=False), torch.ones(6), atol=1e-3, rtol=0)
    # the "paper" head does not standardize its output
    emb_p = build_model("smallcnn", head="paper", embed_dim=6, width=8, seed=0).train()(torch.rand(32, 1, 32, 32) * 3)
    assert emb_p.mean(0).abs().max() > 1e-3


def test_weightnorm_head_is_a_weight_norm_parametrization():
    m = build_model("smallcnn", head="weightnorm", embed_dim=5, width=8, seed=0)
    fc = m.head.fc
    assert parametrize.is_parametrized(fc, "weight")
    g, v = fc.parametrizations.weight.original0, fc.parametrizations.weight.original1
    assert g.shape == (5, 1) and v.shape == (5, 32)
    with torch.no_grad():
        g.mul_(torch.arange(1.0, 6.0)[:, None])  # change g: weight rows must rescale to norm g
    torch.testing.assert_close(fc.weight, g * v / v.norm(dim=1, keepdim=True))
    torch.testing.assert_close(fc.weight.norm(dim=1), g.flatten())
    # both g and v receive gradients
    m(torch.rand(4, 1, 32, 32)).sum().backward()
    assert g.grad is not None and v.grad is not None
    assert not parametrize.is_parametrized(build_model("smallcnn", width=8).head.fc)


# --------------------------------------------------------------------------------------------- frozen BN
def test_freeze_bn_keeps_backbone_running_stats_and_affine_params_fixed():
    x = torch.rand(8, 1, 32, 32) * 2 + 1
    frozen = build_model("smallcnn", width=8, freeze_bn=True, seed=0)
    before = {k: v.clone() for k, v in frozen.backbone.state_dict().items()}
    head_before = frozen.head.bn.running_mean.clone()
    frozen.train()
    out = frozen(x)
    out.pow(2).sum().backward()
    after = frozen.backbone.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    bns = [mod for mod in frozen.backbone.modules() if isinstance(mod, nn.BatchNorm2d)]
    assert len(bns) == 4 and all(not b.training for b in bns)
    assert all(not p.requires_grad and p.grad is None for b in bns for p in b.parameters())
    # the head's BN still trains, and convs still get gradients
    assert frozen.head.bn.training and not torch.equal(frozen.head.bn.running_mean, head_before)
    assert frozen.backbone.features[0][0].weight.grad is not None
    # backbone output in train mode equals eval mode (BN uses running stats)
    f_train = frozen.features(x)
    frozen.eval()
    torch.testing.assert_close(f_train, frozen.features(x))
    frozen.train()
    assert all(not b.training for b in bns) and frozen.training
    # control: without freeze_bn the running stats move
    free = build_model("smallcnn", width=8, seed=0).train()
    free(x)
    assert not torch.equal(free.backbone.state_dict()["features.0.1.running_mean"],
                           before["features.0.1.running_mean"])
    assert count_parameters(frozen, trainable_only=True) == count_parameters(free) - sum(
        p.numel() for b in bns for p in b.parameters())


# --------------------------------------------------------------------------------------------- resnet50 keys
def torchvision_resnet50_shapes() -> dict:
    """torchvision.models.resnet50().state_dict() key -> shape, written out from the known architecture
    (Bottleneck x [3, 4, 6, 3], expansion 4, downsample.0 conv / downsample.1 BN in each stage's first block)."""
    shapes = {}

    def conv(name, cout, cin, k):
        shapes[name + ".weight"] = (cout, cin, k, k)

    def bn(name, c):
        for s in ("weight", "bias", "running_mean", "running_var"):
            shapes[f"{name}.{s}"] = (c,)
        shapes[name + ".num_batches_tracked"] = ()

    conv("conv1", 64, 3, 7)
    bn("bn1", 64)
    cin = 64
    for li, (planes, blocks) in enumerate([(64, 3), (128, 4), (256, 6), (512, 3)], start=1):
        for b in range(blocks):
            p = f"layer{li}.{b}."
            conv(p + "conv1", planes, cin, 1), bn(p + "bn1", planes)
            conv(p + "conv2", planes, planes, 3), bn(p + "bn2", planes)
            conv(p + "conv3", 4 * planes, planes, 1), bn(p + "bn3", 4 * planes)
            if b == 0:
                conv(p + "downsample.0", 4 * planes, cin, 1), bn(p + "downsample.1", 4 * planes)
            cin = 4 * planes
    shapes["fc.weight"], shapes["fc.bias"] = (1000, 2048), (1000,)
    return shapes


@pytest.fixture(scope="module")
def resnet50_file(tmp_path_factory):
    """A torchvision-format resnet50 state_dict file (random values, fc included) and its tensors."""
    g = torch.Generator().manual_seed(123)
    state = {}
    for k, shp in torchvision_resnet50_shapes().items():
        if k.endswith("num_batches_tracked"):
            state[k] = torch.tensor(7)
        elif k.endswith("running_var"):
            state[k] = torch.rand(shp, generator=g) + 0.5
        else:
            state[k] = torch.randn(shp, generator=g) * 0.05
    path = tmp_path_factory.mktemp("w") / "resnet50-fake.pth"
    torch.save(state, path)
    return path, state


def test_resnet50_state_dict_matches_torchvision_names_and_shapes():
    m = build_model("resnet50", in_channels=3, width=64, embed_dim=8)
    ref = torchvision_resnet50_shapes()
    ref_no_fc = {k: v for k, v in ref.items() if not k.startswith("fc.")}
    own = {k: tuple(v.shape) for k, v in m.backbone.state_dict().items()}
    assert own == ref_no_fc
    assert len(ref) == 320  # torchvision's resnet50 state_dict has 320 entries
    # torchvision resnet50: 25,557,032 parameters, of which fc has 2048*1000 + 1000
    assert count_parameters(m.backbone) == 25_557_032 - 2_049_000
    assert m.feature_dim == 2048


def test_resnet50_pretrained_round_trip(resnet50_file):
    path, state = resnet50_file
    m = build_model("resnet50", in_channels=3, width=64, embed_dim=8, pretrained=str(path), seed=5)
    own = m.backbone.state_dict()
    for k, v in state.items():
        if not k.startswith("fc."):
            assert torch.equal(own[k], v), k
    # head stays freshly initialized and identical to a non-pretrained model with the same seed
    fresh = build_model("resnet50", in_channels=3, width=64, embed_dim=8, seed=5)
    assert _state_equal(m.head, fresh.head)
    # a backbone saved from an EmbeddingNet (with "module." prefix) loads into another one
    m.eval()
    x = torch.rand(2, 3, 32, 32)
    f1 = m.features(x)
    path2 = path.parent / "dp.pth"
    torch.save({"module." + k: v for k, v in m.backbone.state_dict().items()}, path2)
    m2 = build_model("resnet50", in_channels=3, width=64, embed_dim=8, pretrained=path2, seed=9).eval()
    torch.testing.assert_close(m2.features(x), f1)


def test_pretrained_weights_that_do_not_fit_raise_with_the_keys(resnet50_file, tmp_path):
    path, state = resnet50_file
    with pytest.raises(ValueError, match=r"conv1\.weight: file \(64, 3, 7, 7\) vs model \(64, 1, 7, 7\)"):
        build_model("resnet50", in_channels=1, width=64, pretrained=path)
    bad = dict(state)
    del bad["layer2.0.downsample.0.weight"]
    bad["extra.weight"] = torch.zeros(3)
    p = tmp_path / "bad.pth"
    torch.save(bad, p)
    with pytest.raises(ValueError, match="missing keys.*layer2.0.downsample.0.weight.*unexpected keys.*extra.weight"):
        build_model("resnet50", in_channels=3, width=64, pretrained=p)
    with pytest.raises(FileNotFoundError, match="nope.pth"):
        build_model("resnet50", in_channels=3, pretrained=tmp_path / "nope.pth")


# --------------------------------------------------------------------------------------------- BN-Inception
# A few (key, shape) pairs of Cadene's pretrainedmodels bninception state_dict (Caffe port; convs have biases).
BNI_SPOTS = {
    "conv1_7x7_s2.weight": (64, 3, 7, 7),
    "conv1_7x7_s2.bias": (64,),
    "conv1_7x7_s2_bn.running_var": (64,),
    "conv2_3x3_reduce.weight": (64, 64, 1, 1),
    "conv2_3x3.weight": (192, 64, 3, 3),
    "inception_3a_1x1.weight": (64, 192, 1, 1),
    "inception_3a_pool_proj.weight": (32, 192, 1, 1),
    "inception_3b_double_3x3_2_bn.weight": (96,),
    "inception_3c_3x3.weight": (160, 128, 3, 3),
    "inception_4a_1x1.weight": (224, 576, 1, 1),
    "inception_4d_1x1.weight": (96, 608, 1, 1),
    "inception_4e_double_3x3_2.weight": (256, 256, 3, 3),
    "inception_5a_1x1.weight": (352, 1056, 1, 1),
    "inception_5b_pool_proj.weight": (128, 1024, 1, 1),
    "inception_5b_double_3x3_2_bn.bias": (224,),
}


def test_bninception_uses_cadene_names_and_loads_an_old_style_file(tmp_path):
    m = build_model("bninception", in_channels=3, image_size=64, embed_dim=8, seed=0)
    own = m.backbone.state_dict()
    for k, shp in BNI_SPOTS.items():
        assert tuple(own[k].shape) == shp, k
    convs = [mod for mod in m.backbone.modules() if isinstance(mod, nn.Conv2d)]
    assert len(convs) == 69 and all(c.bias is not None for c in convs)
    assert not any(k.startswith("inception_3c_1x1") or k.startswith("inception_3c_pool_proj") for k in own)
    # pre-0.4 files have no num_batches_tracked; the ImageNet classifier is last_linear
    old = {k: torch.randn_like(v.float()) if v.is_floating_point() else v for k, v in own.items()
           if not k.endswith("num_batches_tracked")}
    old = {k: (v.abs() + 0.5 if k.endswith("running_var") else v) for k, v in old.items()}
    old["last_linear.weight"], old["last_linear.bias"] = torch.zeros(1000, 1024), torch.zeros(1000)
    p = tmp_path / "bn_inception-old.pth"
    torch.save(old, p)
    m2 = build_model("bninception", in_channels=3, image_size=64, embed_dim=8, pretrained=p, freeze_bn=True)
    own2 = m2.backbone.state_dict()
    assert all(torch.equal(own2[k], v) for k, v in old.items() if not k.startswith("last_linear"))
    assert m2.input_spec["space"] == "BGR" and m2.input_spec["mean"] == (104.0, 117.0, 128.0)


# --------------------------------------------------------------------------------------------- small archs
def test_smallcnn_layouts_sizes_and_memory_format():
    for downsample in ("poolfirst", "maxpool", "stride"):
        for size in (16, 32, 64):
            m = build_model("smallcnn", width=8, image_size=size, downsample=downsample, seed=0).eval()
            assert m(torch.rand(3, 1, size, size)).shape == (3, 64)
    # channels_last is a pure memory-layout choice: same weights give the same outputs
    x = torch.rand(5, 1, 32, 32)
    a = build_model("smallcnn", width=8, seed=3, channels_last=True).eval()
    b = build_model("smallcnn", width=8, seed=3, channels_last=False).eval()
    assert a.backbone.features[1][0].weight.is_contiguous(memory_format=torch.channels_last)
    assert _state_equal(a, b)
    torch.testing.assert_close(a(x), b(x), rtol=1e-4, atol=1e-5)
    # 3-channel input works
    assert build_model("smallcnn", in_channels=3, width=8)(torch.rand(2, 3, 32, 32)).shape == (2, 64)


def test_smallcnn_poolfirst_equals_the_reference_layout_when_bn_scales_are_positive():
    """conv -> pool -> BN -> ReLU equals conv -> BN -> ReLU -> pool when BN is a positive per-channel affine map
    (max-pool commutes with monotone increasing maps); eval mode with the initial running stats is such a case."""
    ref = build_model("smallcnn", width=8, seed=4, downsample="maxpool").eval()
    new = build_model("smallcnn", width=8, seed=4).eval()
    assert new.backbone.downsample == "poolfirst"
    convs_ref = [m.weight for m in ref.backbone.modules() if isinstance(m, nn.Conv2d)]
    convs_new = [m.weight for m in new.backbone.modules() if isinstance(m, nn.Conv2d)]
    assert len(convs_new) == 4 and all(torch.equal(a, b) for a, b in zip(convs_ref, convs_new))
    with torch.no_grad():  # random positive BN scales and arbitrary shifts, same in both
        for a, b in zip([m for m in ref.backbone.modules() if isinstance(m, nn.BatchNorm2d)],
                        [m for m in new.backbone.modules() if isinstance(m, nn.BatchNorm2d)]):
            for t in ("weight", "running_var"):
                getattr(a, t).copy_(torch.rand_like(getattr(a, t)) + 0.1)
            for t in ("bias", "running_mean"):
                getattr(a, t).copy_(torch.randn_like(getattr(a, t)) * 0.3)
            b.load_state_dict(a.state_dict())
    x = torch.rand(3, 1, 32, 32)
    torch.testing.assert_close(new.features(x), ref.features(x), rtol=1e-4, atol=1e-5)


def test_resnet18s_matches_the_cifar_resnet18_parameter_count():
    # The common CIFAR ResNet-18 (3x3 stem, no max-pool, 10-class fc) has 11,173,962 parameters.
    m = build_model("resnet18s", in_channels=3, width=64, image_size=32)
    assert count_parameters(m.backbone) == 11_173_962 - (512 * 10 + 10)
    assert m.feature_dim == 512 and m.backbone.conv1.kernel_size == (3, 3) and m.backbone.conv1.stride == (1, 1)
    assert not any(isinstance(mod, nn.MaxPool2d) for mod in m.backbone.modules())


def test_count_parameters_matches_the_closed_form_for_smallcnn():
    w, d = 8, 5
    m = build_model("smallcnn", width=w, embed_dim=d)
    convs = 9 * (1 * w + w * 2 * w + 2 * w * 4 * w + 4 * w * 4 * w)
    bns = 2 * (w + 2 * w + 4 * w + 4 * w)
    head = 2 * 4 * w + 4 * w * d + d
    assert count_parameters(m) == convs + bns + head
    assert count_parameters(m.backbone) + count_parameters(m.head) == count_parameters(m)
    assert len(m.backbone_parameters()) + len(m.head_parameters()) == len(list(m.parameters()))


def test_mlp_input_dim_and_optional_batchnorm():
    m = build_model("mlp", in_dim=3, width=10, embed_dim=2, batchnorm=True, seed=0)
    assert m(torch.rand(5, 3)).shape == (5, 2)
    assert sum(isinstance(mod, nn.BatchNorm1d) for mod in m.backbone.modules()) == 2
    m2 = build_model("mlp", in_channels=4, width=10, embed_dim=2)  # in_dim falls back to in_channels
    assert m2.backbone.in_dim == 4 and m2.feature_dim == 10
    assert not any(isinstance(mod, nn.BatchNorm1d) for mod in m2.backbone.modules())
    assert count_parameters(m2.backbone) == (4 * 10 + 10) + (10 * 10 + 10)


@pytest.mark.parametrize("arch", ["smallcnn", "resnet18s", "resnet50", "bninception"])
def test_smallest_documented_image_size_runs_and_smaller_is_refused(arch):
    s = MIN_IMAGE_SIZE[arch]
    kw = dict(width=4) if arch in ("smallcnn", "resnet18s") else {}
    if arch in ("smallcnn", "resnet18s"):  # resnet50 / bninception: checked in the shape test above
        m = build_model(arch, in_channels=3, image_size=s, **kw).eval()
        assert m(torch.rand(2, 3, s, s)).shape == (2, 64)
    with pytest.raises(ValueError, match=f"image_size must be an integer >= {s}"):
        build_model(arch, in_channels=3, image_size=s - 1, **kw)


# --------------------------------------------------------------------------------------------- arguments, seeds
@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        (dict(arch="vgg"), r"'arch' = 'vgg'.*'smallcnn', 'resnet18s', 'mlp', 'resnet50', 'bninception'"),
        (dict(arch="smallcnn", head="bn"), r"'head' = 'bn'.*'paper', 'nobn', 'bn_before_norm', 'weightnorm', 'normalize'"),
        (dict(arch="smallcnn", embed_dim=0), r"embed_dim must be an integer >= 1; got 0"),
        (dict(arch="smallcnn", embed_dim=2.5), r"embed_dim must be an integer"),
        (dict(arch="smallcnn", width=0), r"width must be an integer >= 1"),
        (dict(arch="smallcnn", in_channels=0), r"in_channels must be an integer >= 1"),
        (dict(arch="smallcnn", freeze_bn="yes"), r"freeze_bn must be True or False"),
        (dict(arch="smallcnn", pool="sum"), r"'pool' = 'sum'.*'avg', 'max', 'avgmax'"),
        (dict(arch="smallcnn", downsample="avg"), r"'downsample' = 'avg'.*'maxpool', 'poolfirst', 'stride'"),
        (dict(arch="smallcnn", depth=3), r"unknown keyword\(s\) \['depth'\].*'pool', 'downsample'"),
        (dict(arch="mlp", pool="avg"), r"unknown keyword\(s\) \['pool'\].*'in_dim', 'batchnorm'"),
        (dict(arch="smallcnn", pretrained=3), r"pretrained must be None or a path"),
    ],
)
def test_bad_arguments_raise_value_error_naming_valid_choices(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        build_model(**kwargs)


def test_missing_pretrained_path_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.pth"):
        build_model("smallcnn", pretrained=str(tmp_path / "missing.pth"))


@pytest.mark.parametrize("arch", ["smallcnn", "resnet18s", "mlp"])
def test_init_is_deterministic_under_a_seed(arch):
    kwargs, _ = SMALL[arch]
    rng_before = torch.get_rng_state()
    a = build_model(arch, head="weightnorm", seed=0, **kwargs)
    b = build_model(arch, head="weightnorm", seed=0, **kwargs)
    c = build_model(arch, head="weightnorm", seed=1, **kwargs)
    assert torch.equal(torch.get_rng_state(), rng_before)  # seed= does not touch the global RNG
    assert _state_equal(a, b) and not _state_equal(a, c)
    torch.manual_seed(7)
    d = build_model(arch, **kwargs)
    torch.manual_seed(7)
    e = build_model(arch, **kwargs)
    assert _state_equal(d, e)
