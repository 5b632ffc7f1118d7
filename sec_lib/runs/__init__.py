"""The runs wing: a config becomes a result.

- :mod:`~sec_lib.runs.train`: :class:`TrainConfig` -> one instrumented training loop -> :class:`RunResult`;
- :mod:`~sec_lib.runs.store`: the result store (key = hash of the config, atomic writes, resumable reruns);
- :mod:`~sec_lib.runs.experiments`: every profile by name, and what each chapter trains (``CHAPTERS``); the
  sweeps and their selections are in :mod:`~sec_lib.runs.sweeps`, the profiles' settings in
  :mod:`~sec_lib.runs.profiles` and :mod:`~sec_lib.runs.benchmark_settings`;
- :mod:`~sec_lib.runs.tier`: the committed evidence tiers under ``data/reference/`` (export, restore, rerun);
- :mod:`~sec_lib.runs.launch`: where runs train (the local pool or submitit);
- :mod:`~sec_lib.runs.commands`: the runner's ``train``, ``export`` and ``rerun`` commands.

It imports the core (``sec``, ``losses``, ``metrics``, ``models``, ``data``, ``params``, ``report``) and nothing
above it. The modules are imported on use, not here, so ``import sec_lib.runs`` costs nothing.
"""
