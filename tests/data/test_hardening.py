"""CIFAR pickles are read with an unpickler that allows numpy arrays and plain containers only."""
import os
import pickle

import numpy as np
import pytest

from sec_lib.data.benchmarks import load_cifar


class Exploit:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


def cifar10(root, batch_extra=None, protocol=pickle.HIGHEST_PROTOCOL):
    d = root / "cifar-10-batches-py"
    d.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)

    def dump(name, obj):
        with open(d / name, "wb") as fh:
            pickle.dump(obj, fh, protocol=protocol)
    dump("batches.meta", {"label_names": [f"c{i}" for i in range(10)]})
    for i in range(1, 6):
        dump(f"data_batch_{i}", {"data": rng.integers(0, 255, (10, 3072), dtype=np.uint8), "labels": list(range(10)),
                                 "batch_label": "training batch", "filenames": [f"f{j}.png" for j in range(10)],
                                 **(batch_extra or {})})
    dump("test_batch", {"data": rng.integers(0, 255, (10, 3072), dtype=np.uint8), "labels": list(range(10))})
    return root


@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_genuine_cifar_pickles_load_with_any_protocol(tmp_path, protocol):
    ds = load_cifar(cifar10(tmp_path, {"n": np.int64(3), "scale": np.float32(0.5)}, protocol), "train",
                    split_by="file")
    assert len(ds) == 50 and ds.num_classes == 10


def test_a_pickle_that_runs_code_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    cifar10(tmp_path / "data", {"evil": Exploit(marker)})
    with pytest.raises(ValueError, match=r"cannot unpickle data_batch_1 .*posix\.system|cannot unpickle data_batch_1 .*os\.system"):
        load_cifar(tmp_path / "data", "train", split_by="file")
    assert not marker.exists()
    with open(tmp_path / "check.pkl", "wb") as fh:          # the same pickle does run code when loaded freely
        pickle.dump(Exploit(marker), fh)
    with open(tmp_path / "check.pkl", "rb") as fh:
        pickle.load(fh)
    assert marker.exists()
