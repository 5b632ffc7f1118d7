"""One helper: run a block of torch work with a given number of intra-op threads."""
import contextlib

import torch
from threadpoolctl import threadpool_limits


@contextlib.contextmanager
def torch_threads(n: int | None = 1):
    """Use ``n`` torch threads inside the block (None: leave the setting alone), then restore it.

    Small-tensor work (the theory chapter's batches, the explorer's toy runs) is fastest on one
    thread: on a busy 2-core machine ``torch.cdist`` on 18 x 32 was 100x slower with 2 threads.

    The OpenMP/BLAS pools of numpy and scikit-learn (k-means for NMI/F1) are limited to ``n`` too:
    their reductions depend on the thread count, so a run's numbers do (NMI 33.66 with 1 thread
    against 35.77 with 2 for one config, before this limit).
    """
    old = torch.get_num_threads()
    if n and n != old:
        torch.set_num_threads(n)
    try:
        if n:
            with threadpool_limits(limits=n):
                yield
        else:
            yield
    finally:
        if torch.get_num_threads() != old:
            torch.set_num_threads(old)
