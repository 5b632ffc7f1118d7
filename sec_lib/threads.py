"""One helper: run a block of torch work with a given number of intra-op threads."""
import contextlib

import torch


@contextlib.contextmanager
def torch_threads(n: int | None = 1):
    """Use ``n`` torch threads inside the block (None: leave the setting alone), then restore it.

    Small-tensor work (the theory chapter's batches, the explorer's toy runs) is fastest on one
    thread: on a busy 2-core machine ``torch.cdist`` on 18 x 32 was 100x slower with 2 threads.
    """
    old = torch.get_num_threads()
    if n and n != old:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if torch.get_num_threads() != old:
            torch.set_num_threads(old)
