"""Several processes write and read the same keys at once: no error, no torn record, no false alarm.

Writers keep saving two different results for each key (same config, different numbers and
tables), readers keep reading: every read must be one whole result or the other, never a mix.
The two writers and one reader are processes of their own; the other reader is a thread of the
test's process (a process too, other than the writers', without a third interpreter importing torch).
"""
import copy
import multiprocessing as mp
import threading
import time

from sec_lib.runs.store import ResultStore
from sec_lib.runs.train import TrainConfig, train

SECONDS = 3.0


def toy(seed):
    return TrainConfig(dataset="toy", model="mlp", width=16, embed_dim=8, iterations=4, batch_size=24, eval_every=2,
                       track_every=2, track_samples=4, dtheta_every=2, lr=3e-3, loss="npair", seed=seed,
                       data_kwargs={"noise": 0.1, "num_classes": 60})


def variants(seed):
    """Two results of one config that differ in every file but config.json."""
    a = train(toy(seed))
    b = copy.deepcopy(a)                   # the same run: every table but config.json is changed below
    b.metrics = {k: v + 1.0 for k, v in a.metrics.items()}
    b.wall_s = a.wall_s + 100.0
    for t in ("steps", "tracked", "evals", "test_norms", "grad_scatter"):
        df = getattr(a, t).copy()
        df[df.columns[-1]] = df[df.columns[-1]] + 1
        setattr(b, t, df)
    b.cosines = a.cosines.iloc[::2].reset_index(drop=True)
    return a, b


def signature(r):
    return (r.wall_s, tuple(sorted(r.metrics.items())), r.steps.to_json(), r.evals.to_json(), r.cosines.to_json(),
            r.tracked.to_json(), r.test_norms.to_json(), r.grad_scatter.to_json())


def writer(phases, results, start, out):
    for root, replace in phases:
        try:
            store, n = ResultStore(root), 0
            start.wait(timeout=300)                # every process has started (spawn imports torch)
            end = time.time() + SECONDS
            while time.time() < end:
                for r in results:
                    store.save(r, replace=replace)
                    n += 1
            out.put((root, "writer", n, None, len(store.quarantined)))
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            out.put((root, "writer", 0, f"{type(e).__name__}: {e}", 0))


def reader(phases, expected, start, out):
    for root, replace in phases:
        try:
            store, n, seen = ResultStore(root), 0, set()
            start.wait(timeout=300)
            end = time.time() + SECONDS
            while time.time() < end:
                for key, sigs in expected.items():
                    r = store.get(key)
                    if r is None:
                        if key in seen and not replace:      # while replaced, a record is briefly absent
                            raise AssertionError(f"{key} was stored, then missing")
                        continue
                    seen.add(key)
                    if signature(r) not in sigs:
                        raise AssertionError(f"torn or unknown record for {key}")
                    if not replace and not store.has(key):
                        raise AssertionError(f"has({key}) is False right after a complete get")
                    n += 1
            out.put((root, "reader", n, None, len(store.quarantined)))
        except BaseException as e:  # noqa: BLE001
            out.put((root, "reader", 0, f"{type(e).__name__}: {e}", 0))


def test_concurrent_writers_and_readers_never_see_an_error_or_a_torn_record(tmp_path):
    results = []
    for seed in (0, 1):
        a, b = variants(seed)
        a.key = b.key = ResultStore(tmp_path).path(a.config).name
        results += [a, b]
    expected = {}
    for r in results:
        expected.setdefault(r.key, set()).add(signature(r))
    # phase 1: a second writer keeps the stored record; phase 2: it replaces it (a retried failed run)
    phases = [(str(tmp_path / "keep"), False), (str(tmp_path / "replace"), True)]
    ctx = mp.get_context("spawn")
    out, start = ctx.Queue(), ctx.Barrier(4)
    procs = [ctx.Process(target=writer, args=(phases, results[i::2] + results, start, out)) for i in range(2)]
    procs += [ctx.Process(target=reader, args=(phases, expected, start, out))]
    here = threading.Thread(target=reader, args=(phases, expected, start, out), daemon=True)
    for p in procs:
        p.start()
    here.start()
    reports = [out.get(timeout=600) for _ in range((len(procs) + 1) * len(phases))]
    for p in procs:
        p.join(timeout=60)
    here.join(timeout=60)
    assert sorted(kind for _, kind, *_ in reports) == ["reader"] * 4 + ["writer"] * 4
    assert not [r for r in reports if r[3]], reports
    assert all(n > 0 for _, _, n, _, _ in reports), reports               # everyone did real work
    assert sum(q for *_, q in reports) == 0                                # no complete record called corrupt
    for root, _ in phases:
        root = tmp_path / root
        assert not (root / ".quarantine").exists() or not any((root / ".quarantine").iterdir())
        assert sorted(p.name for p in root.iterdir() if p.name != ".quarantine") == sorted(expected)  # no temp left
        for key, sigs in expected.items():
            assert signature(ResultStore(root).get(key)) in sigs
