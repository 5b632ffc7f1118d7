"""The opt-in ``portable`` kernel pin (sec_lib.kernels, sec_lib.losses.portable): the avx2 pin's kernels plus the
losses' transcendental ops in float64 rounded back to float32; its runs recorded and keyed apart; nothing changed
under the default pin. Vendor-free: these hold on any x86-64 CPU."""
import hashlib
import json
import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
from pytorch_metric_learning import distances as pml_distances
from pytorch_metric_learning import losses as pml_losses

from sec_lib import kernels
from sec_lib.losses import contrastive, get_loss, pair, portable, proxy
from sec_lib.runs.store import run_key
from sec_lib.runs.train import TrainConfig

#: The losses whose CPU float32 computation the pin routes, and the hyperparameters they need here.
ROUTED = {"ms": {}, "tml": {}, "ntxent": {}, "supcon": {}, "contrastive": {},
          "arcface": {"num_classes": 6, "embedding_size": 16}}
#: Losses with no routed op: the same computation under every pin.
UNROUTED = ("triplet", "semihard", "npair")


@pytest.fixture
def pin(monkeypatch):
    """Set this process's pin name (the library variables of ``portable`` are ``avx2``'s, already in force)."""
    def set_(name):
        monkeypatch.setenv(kernels.PIN_ENV, name)
    return set_


def batch(seed=0, n_classes=6, k=5, d=16):
    g = torch.Generator().manual_seed(seed)
    f = torch.randn(n_classes * k, d, generator=g)
    return f, torch.arange(n_classes).repeat_interleave(k)


def value_and_grad(name, f, y, **hp):
    torch.manual_seed(0)                                   # the proxy losses' class weights
    loss = get_loss(name, **{**ROUTED.get(name, {}), **hp})
    f = f.clone().requires_grad_()
    v = loss(f, y)
    v.backward()
    return v.detach(), f.grad


def same_bits(a, b):
    return a.dtype == b.dtype and a.shape == b.shape and a.numpy().tobytes() == b.numpy().tobytes()


# ------------------------------------------------------------------------------------------- the pin
def test_the_portable_pin_sets_the_avx2_variables_and_fused_adam_and_is_not_the_default():
    assert kernels.PINS["portable"] == kernels.PINS["avx2"] and kernels.DEFAULT_PIN == "avx2"
    assert kernels.FUSED_ADAM["portable"] and kernels.adam_kwargs("cpu", "portable") == {"fused": True}
    assert kernels.expected_capability("portable") == "AVX2"
    assert kernels.PORTABLE_MATH == {"avx2": False, "native": False, "portable": True}
    env = kernels.child_env("portable", {})
    assert env == {**kernels.child_env("avx2", {}), "SEC_KERNELS": "portable"}


def test_an_unknown_pin_is_refused_with_the_valid_names():
    for call in (lambda: kernels.pin_name({"SEC_KERNELS": "portible"}), lambda: kernels.pin_env("portible"),
                 lambda: kernels.key_fields("portible")):
        with pytest.raises(ValueError, match="'portible' is not valid; valid values: avx2, native, portable"):
            call()


def test_provenance_records_the_portable_pin_and_its_kind(pin):
    pin("portable")
    p = kernels.provenance()
    assert p["kernel_pin"] == "portable" and p["cpu_kind"] == kernels.this_kind()
    assert p["cpu_kind"] == f"{p['cpu_vendor']}/{p['aten_capability']}/portable"
    env = json.loads(p["kernel_env"])
    assert env["adam"] == "fused" and env["loss_math"] == "float64" and env["MKL_CBWR"] == "AVX2,STRICT"
    pin("avx2")
    assert "loss_math" not in json.loads(kernels.provenance()["kernel_env"])


# --------------------------------------------------------------------------------------- store keys
def test_the_key_has_a_pin_field_only_under_the_portable_pin(pin):
    cfg = TrainConfig(dataset="toy", model="mlp", loss="ms", iterations=4)
    plain = hashlib.sha256(json.dumps(cfg.canonical(), sort_keys=True, default=str).encode()).hexdigest()[:16]
    keys = {}
    for name in ("avx2", "native", "portable"):
        pin(name)
        keys[name] = run_key(cfg)
    assert kernels.key_fields("avx2") == kernels.key_fields("native") == {}
    assert kernels.key_fields("portable") == {"kernel_pin": "portable"}
    assert keys["avx2"] == keys["native"] == plain            # no existing key changes
    with_pin = {**cfg.canonical(), "kernel_pin": "portable"}
    blob = json.dumps(with_pin, sort_keys=True, default=str).encode()
    assert keys["portable"] == hashlib.sha256(blob).hexdigest()[:16]
    assert keys["portable"] != keys["avx2"]


# --------------------------------------------------------------------------------- the routed forms
def test_the_portable_forms_are_the_float64_ops_rounded_to_float32(pin):
    pin("portable")
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(40, 70, generator=g) * 2 - 1) * 30
    c = torch.rand(40, 70, generator=g) * 2 - 1
    y = torch.randn(25, 8, generator=g)
    cases = [(portable.portable_logsumexp(x, dim=1), torch.logsumexp(x.double(), dim=1).float()),
             (portable.portable_logsumexp(x, dim=0, keepdim=True),
              torch.logsumexp(x.double(), dim=0, keepdim=True).float()),
             (portable.portable_softplus(x), F.softplus(x.double()).float()),
             (portable.portable_acos(c), torch.acos(c.double()).float()),
             (portable.portable_cos(x), torch.cos(x.double()).float()),
             (portable.portable_cdist(y[:10], y), torch.cdist(y[:10].double(), y.double()).float())]
    for got, want in cases:
        assert same_bits(got, want)
    # the backward too: the gradient is the float64 one, rounded when it leaves
    a, b = x.clone().requires_grad_(), x.double().requires_grad_()
    portable.portable_logsumexp(a, dim=1).sum().backward()
    torch.logsumexp(b, dim=1).float().sum().backward()
    assert same_bits(a.grad, b.grad.float())
    # not routed: float64 inputs (already there) and the default pin
    assert same_bits(portable.portable_logsumexp(x.double(), dim=1), torch.logsumexp(x.double(), dim=1))
    pin("avx2")
    assert not portable.routed(x)
    for got, want in [(portable.portable_logsumexp(x, dim=1), torch.logsumexp(x, dim=1)),
                      (portable.portable_softplus(x), F.softplus(x)), (portable.portable_acos(c), torch.acos(c)),
                      (portable.portable_cos(x), torch.cos(x)),
                      (portable.portable_cdist(y[:10], y), torch.cdist(y[:10], y))]:
        assert same_bits(got, want)


def test_under_the_portable_pin_ms_computes_its_logsumexp_in_float64(pin, monkeypatch):
    """The multi-similarity loss under the pin equals the loss computed with float64 logsumexp rounded to float32."""
    f, y = batch()
    pin("portable")
    got = value_and_grad("ms", f, y)
    monkeypatch.setattr(pair, "portable_logsumexp", lambda x, dim, keepdim=False:
                        torch.logsumexp(x.double(), dim=dim, keepdim=keepdim).float())
    pin("avx2")
    want = value_and_grad("ms", f, y)
    assert all(same_bits(a, b) for a, b in zip(got, want))


#: The plain torch call in place of each routed helper.
PLAIN = {"portable_logsumexp": lambda x, dim, keepdim=False: torch.logsumexp(x, dim=dim, keepdim=keepdim),
         "portable_softplus": F.softplus, "portable_acos": torch.acos, "portable_cos": torch.cos,
         "portable_cdist": lambda x, y, p=2.0: torch.cdist(x, y, p=p)}


def _plain_log1p_sum_exp(z, mask):
    """``sec_lib.losses.pair._log1p_sum_exp`` with torch's float32 logsumexp in place of the routed one."""
    z = z.masked_fill(~mask, torch.finfo(z.dtype).min)
    return torch.logsumexp(torch.cat([torch.zeros_like(z[:, :1]), z], dim=1), dim=1)


def test_under_the_default_pin_every_loss_computes_torchs_plain_ops(pin, monkeypatch):
    """Under avx2 (and native) the routed helpers are torch's own ops: each loss's value and gradient are bit-identical
    to those computed with the plain torch calls (patched in here)."""
    f, y = batch(seed=2)
    for name in ("avx2", "native"):
        pin(name)
        now = {n: value_and_grad(n, f, y) for n in (*ROUTED, *UNROUTED)}
        with monkeypatch.context() as m:
            m.setattr(pair, "_log1p_sum_exp", _plain_log1p_sum_exp)
            for module in (pair, contrastive, proxy):
                for fn, plain in PLAIN.items():
                    if hasattr(module, fn):
                        m.setattr(module, fn, plain)
            m.setattr(contrastive, "_RoutedLpDistance", pml_distances.LpDistance)
            before = {n: value_and_grad(n, f, y) for n in now}
        for n in now:
            assert all(same_bits(a, b) for a, b in zip(now[n], before[n])), (name, n)


def test_the_contrastive_loss_is_pmls_under_the_default_pin_and_float64_distances_under_the_portable_one(pin):
    f, y = batch(seed=3)
    pml = pml_losses.ContrastiveLoss(pos_margin=0.0, neg_margin=1.0,
                                     distance=pml_distances.LpDistance(normalize_embeddings=True, p=2, power=1))
    pin("avx2")
    assert same_bits(get_loss("contrastive")(f, y), pml(f, y))
    pin("portable")
    got = get_loss("contrastive")(f, y)
    assert torch.allclose(got, pml(f, y), rtol=1e-5, atol=1e-6)
    mat = contrastive._RoutedLpDistance(normalize_embeddings=True, p=2, power=1)(f)
    x = F.normalize(f, dim=1)
    assert same_bits(mat, torch.cdist(x.double(), x.double()).float())


def test_the_routed_losses_stay_close_to_the_default_ones_and_the_others_are_unchanged(pin):
    """The float64 route changes the last bits of a routed loss, not its value; the losses it does not reach
    (triplet, semihard, N-pair) compute exactly the same under both pins."""
    f, y = batch(seed=4)
    pin("avx2")
    base = {n: value_and_grad(n, f, y) for n in (*ROUTED, *UNROUTED)}
    pin("portable")
    port = {n: value_and_grad(n, f, y) for n in base}
    for n in base:
        for a, b in zip(base[n], port[n]):
            assert torch.allclose(a, b, rtol=1e-4, atol=1e-6), n
    for n in UNROUTED:
        assert all(same_bits(a, b) for a, b in zip(base[n], port[n])), n


# ------------------------------------------------------------------------------ a run under the pin
PORTABLE_RUN = """
import json, sys
import sec_lib
from sec_lib import kernels
from sec_lib.runs.store import ResultStore, run_key
from sec_lib.runs.train import TrainConfig
cfg = TrainConfig(dataset='toy', model='mlp', width=16, embed_dim=8, iterations=3, batch_size=20, eval_every=0,
                  track_samples=0, loss='ms', data_kwargs={'noise': 0.1, 'num_classes': 20})
store = ResultStore(sys.argv[1])
r = store.run(cfg)
print(json.dumps({"status": r.status, "key": run_key(cfg), "stored": store.keys(), "cap": kernels.check(),
                  "prov": store.meta(run_key(cfg))["provenance"]}))
"""


def test_a_run_under_the_portable_pin_holds_it_records_it_and_is_stored_under_its_own_key(tmp_path):
    if "avx2" not in kernels.cpu_info()["cpu_isa"].split():
        pytest.skip("this CPU has no AVX2: the portable pin (avx2's variables) cannot hold here")
    env = kernels.child_env("portable")
    out = subprocess.run([sys.executable, "-c", PORTABLE_RUN, str(tmp_path)], capture_output=True, text=True, env=env,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    assert out.returncode == 0, out.stderr[-2000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    assert res["status"] == "done" and res["cap"] == "AVX2" and res["stored"] == [res["key"]]
    assert res["prov"]["kernel_pin"] == "portable" and res["prov"]["cpu_kind"].endswith("/AVX2/portable")
    assert json.loads(res["prov"]["kernel_env"])["loss_math"] == "float64"
    cfg = TrainConfig(dataset="toy", model="mlp", width=16, embed_dim=8, iterations=3, batch_size=20, eval_every=0,
                      track_samples=0, loss="ms", data_kwargs={"noise": 0.1, "num_classes": 20})
    assert run_key(cfg) != res["key"]                     # this process (avx2) keys the same config apart
