"""The book's notebooks executed in warm kernels: one IPython kernel per worker, reused page after page.

A ``python -m papermill`` process and a fresh kernel per page would cost about 5 s of CPU importing papermill,
torch, pandas, matplotlib and the library before its first cell ran, most of a smoke page's cost. A
:class:`WarmKernel` starts its kernel once and executes each page in it through papermill's own API: the same
parameter cell, the same output notebook. Before each page the kernel is put back to what a fresh kernel looks like
to a page (:data:`RESET`):

- its namespace emptied (IPython's ``reset``, as ``%reset -f`` does), so a page that uses a name it did not define
  fails as it would alone;
- every figure closed;
- the execution count back at 1, in a new history session (as a fresh kernel's);
- torch's default generator seeded afresh from the system's entropy, as a fresh process's is (two fresh interpreters
  printed different ``torch.initial_seed()`` values under torch 2.13), so a page can depend on an earlier page's draws no more than it can in a fresh kernel.

The imported modules stay: that is the saving. The library's caches are keyed on what they cache (a committed tier's
files, a store's keys), so a page reads the same numbers as in a fresh kernel. After a page fails the kernel is
restarted. ``tests/site/test_warmkernel.py`` checks that a page gives the same outputs in a warm kernel, after other
pages, as in a fresh one, and that the reset forgets what a page defined.

A reader's single page (``papermill notebooks/X.ipynb ...``) still gets a fresh kernel; this is how
``sec-book run`` executes many.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.util import Finalize
from pathlib import Path

from jupyter_client import AsyncKernelManager
from jupyter_core.utils import run_sync

from ..lifetime import exit_with_parent

#: Run silently before each page: a fresh kernel's state, as far as a page can see it (module imports stay).
RESET = ("import gc, matplotlib.pyplot, torch\n"
         "matplotlib.pyplot.close('all'); torch.seed(); gc.collect()\n"
         "get_ipython().reset(new_session=True)\n")       # the namespace, the count at 1, a new history session

KERNEL = "python3"


class PageError(RuntimeError):
    """A page failed: the message is the notebook's own error (``ParameterError: ...``)."""


class KernelManager(AsyncKernelManager):
    """A kernel manager that records the clients it hands out: papermill leaves the channels of its page's client
    running when the kernel manager is not its own (nbclient stops them only for a kernel it started), so
    :meth:`WarmKernel.execute` stops them after each page instead of leaving a heartbeat thread and five sockets per
    page until garbage collection (which then logs 'Could not destroy zmq context')."""

    def client(self, **kwargs):
        kc = super().client(**kwargs)
        self.__dict__.setdefault("handed_out", []).append(kc)
        return kc


class WarmKernel:
    """One kernel in ``cwd`` with ``env``, started on first use and reused by :meth:`execute`."""

    def __init__(self, cwd: str | Path, env: dict | None = None):
        self.cwd = str(cwd)
        self.env = dict(os.environ if env is None else env)
        self.km = None
        self.pages = 0                  # pages executed since the kernel (re)started

    def _start(self) -> None:
        self.km = KernelManager(kernel_name=KERNEL)
        # the kernel's own stdout and stderr (its start-up warnings, C-level messages) are not the page's: a cell's
        # output reaches the notebook through the kernel's messages, and an error through papermill's exception
        run_sync(self.km.start_kernel)(cwd=self.cwd, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pages = 0

    def _reset(self) -> None:
        async def reset():
            kc = self.km.client()
            kc.start_channels()
            try:
                await kc.wait_for_ready(timeout=120)
                reply = await kc.execute_interactive(RESET, silent=True, store_history=False, timeout=300)
            finally:
                kc.stop_channels()
            if reply["content"]["status"] != "ok":
                raise PageError(f"the kernel could not be reset: {reply['content'].get('evalue')}")
        run_sync(reset)()

    def execute(self, source: str | Path, output: str | Path, parameters: dict) -> None:
        """Execute the notebook ``source`` with ``parameters`` (papermill's parameter cell) into ``output``.
        Raises :class:`PageError` with the notebook's error; the kernel is then restarted for the next page."""
        import papermill as pm  # local: papermill takes about 2 s to import (measured); only a page needs it
        if self.km is None:
            self._start()
        try:
            if self.pages:
                self._reset()
            self.pages += 1
            try:
                pm.execute_notebook(str(source), str(output), parameters=parameters, kernel_name=KERNEL,
                                    progress_bar=False, km=self.km)
            finally:
                self.stop_clients()
        except pm.PapermillExecutionError as e:
            self.restart()
            raise PageError(f"{e.ename}: {e.evalue}") from None
        except Exception:
            self.restart()
            raise

    def stop_clients(self) -> None:
        """Stop the channels of every client the kernel manager handed out (papermill's, this page's)."""
        for kc in (self.km.__dict__.pop("handed_out", []) if self.km is not None else []):
            if kc.channels_running:
                kc.stop_channels()

    def restart(self) -> None:
        self.close()
        self._start()

    def close(self) -> None:
        if self.km is None:
            return
        try:
            run_sync(self.km.shutdown_kernel)(now=True)
        except Exception:       # noqa: BLE001 - already gone: nothing to stop
            pass
        self.km = None


# ------------------------------------------------------------------------------------- a pool of them

_KERNEL: WarmKernel | None = None


def _init(cwd: str, env: dict, parent: int) -> None:
    """A pool worker: its warm kernel (started on its first page), stopped when the worker ends or its parent dies
    (the kernel itself ends with its worker: ipykernel polls its parent)."""
    global _KERNEL
    exit_with_parent(parent)
    _KERNEL = WarmKernel(cwd, env)
    Finalize(_KERNEL, _KERNEL.close, exitpriority=10)


def _execute(source: str, output: str, parameters: dict) -> None:
    _KERNEL.execute(source, output, parameters)


def pool(jobs: int, cwd: str | Path, env: dict) -> ProcessPoolExecutor:
    """``jobs`` worker processes, each with one warm kernel in ``cwd`` with ``env``: submit
    ``(execute_in, source, output, parameters)`` to it (:func:`execute_in`)."""
    return ProcessPoolExecutor(max_workers=jobs, mp_context=mp.get_context("spawn"), initializer=_init,
                               initargs=(str(cwd), dict(env), os.getpid()))


def execute_in(workers: ProcessPoolExecutor, source, output, parameters: dict) -> None:
    """Execute one page in one of ``workers``' warm kernels; raises :class:`PageError` as the page failed."""
    workers.submit(_execute, str(source), str(output), dict(parameters)).result()
