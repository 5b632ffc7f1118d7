"""Pages executed in one warm kernel, one after another, see what a fresh kernel would show them."""
import os

import nbformat
import pytest

from sec_lib.site import warmkernel

#: Defines a name, moves torch's default generator, leaves a figure open.
MESSY = ["x = 41", "import torch, matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
         "torch.manual_seed(5); plt.figure(); print('messed')"]
#: Looks for all three, and shows its parameter.
PROBE = ["import torch, matplotlib.pyplot as plt\nprint('x' in dir(), plt.get_fignums(), torch.initial_seed() == 5, tag)"]


def notebook(path, cells, params=True):
    nb = nbformat.v4.new_notebook()
    if params:
        nb.cells.append(nbformat.v4.new_code_cell("tag = 'default'", metadata={"tags": ["parameters"]}))
    nb.cells += [nbformat.v4.new_code_cell(c) for c in cells]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, path)
    return path


def printed(path) -> list:
    nb = nbformat.read(path, as_version=4)
    return [(c.execution_count, "".join(o.get("text", "") for o in c.outputs)) for c in nb.cells
            if c.cell_type == "code"]


def test_a_page_after_others_in_a_warm_kernel_sees_a_fresh_kernel(tmp_path):
    messy, probe = notebook(tmp_path / "messy.ipynb", MESSY), notebook(tmp_path / "probe.ipynb", PROBE)
    fresh = warmkernel.WarmKernel(tmp_path)
    warm = warmkernel.WarmKernel(tmp_path)
    try:
        fresh.execute(probe, tmp_path / "fresh.ipynb", {"tag": "p"})
        warm.execute(messy, tmp_path / "m.ipynb", {})
        handed, stop = [], warm.stop_clients

        def spy():
            handed.extend(warm.km.__dict__.get("handed_out", []))
            assert any(kc.channels_running for kc in handed)     # papermill left its client's channels running
            stop()
        warm.stop_clients = spy
        warm.execute(probe, tmp_path / "warm.ipynb", {"tag": "p"})
        del warm.stop_clients
        # the reset's client and papermill's are stopped after the page, not left running until collected
        assert len(handed) == 2 and not any(kc.channels_running for kc in handed)
        pid = warm.km.provisioner.process.pid
        want = printed(tmp_path / "fresh.ipynb")
        assert want[-1][1] == "False [] False p\n"             # the parameter cell ran
        assert printed(tmp_path / "warm.ipynb") == want           # same outputs, same execution counts (1, 2, 3)
        assert [n for n, _ in want] == [1, 2, 3]
        # a page that uses a name an earlier page defined fails, as it would alone; the next page gets a new kernel
        notebook(tmp_path / "leaky.ipynb", ["print(x)"], params=False)
        warm.execute(messy, tmp_path / "m.ipynb", {})
        with pytest.raises(warmkernel.PageError, match="NameError: name 'x' is not defined"):
            warm.execute(tmp_path / "leaky.ipynb", tmp_path / "l.ipynb", {})
        assert warm.km.provisioner.process.pid != pid
        warm.execute(probe, tmp_path / "again.ipynb", {"tag": "p"})
        assert printed(tmp_path / "again.ipynb") == want
        # a page that kills its kernel fails alone, and the next page gets a new kernel
        notebook(tmp_path / "dead.ipynb", ["import os\nos._exit(3)"], params=False)
        with pytest.raises(Exception, match="(?i)kernel"):
            warm.execute(tmp_path / "dead.ipynb", tmp_path / "d.ipynb", {})
        warm.execute(probe, tmp_path / "after.ipynb", {"tag": "p"})
        assert printed(tmp_path / "after.ipynb") == want
    finally:
        fresh.close()
        warm.close()


def test_the_pool_runs_pages_in_its_workers_kernels_and_reports_a_failure(tmp_path):
    probe = notebook(tmp_path / "probe.ipynb", PROBE)
    bad = notebook(tmp_path / "bad.ipynb", ["raise ValueError('no such loss: nonsense; valid: ms, npair')"])
    workers = warmkernel.pool(1, tmp_path, dict(os.environ, PYTHONHASHSEED="0"))
    try:
        warmkernel.execute_in(workers, probe, tmp_path / "a.ipynb", {"tag": "q"})
        assert printed(tmp_path / "a.ipynb")[-1][1].rstrip().endswith(" q")
        with pytest.raises(warmkernel.PageError, match="ValueError: no such loss: nonsense; valid: ms, npair"):
            warmkernel.execute_in(workers, bad, tmp_path / "b.ipynb", {})
    finally:
        workers.shutdown()

