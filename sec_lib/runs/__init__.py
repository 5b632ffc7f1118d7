"""The runs wing: a config becomes a result.

- :mod:`~sec_lib.runs.train`: :class:`TrainConfig` -> one instrumented training loop -> :class:`RunResult`;
- :mod:`~sec_lib.runs.store`: the result store (key = hash of the config, atomic writes, resumable reruns);
- :mod:`~sec_lib.runs.experiments`: the profiles and what each chapter trains (with the selections);
- :mod:`~sec_lib.runs.tier`: the committed evidence tiers under ``data/reference/`` (export, restore, rerun);
- :mod:`~sec_lib.runs.launch`: where runs train (the local pool or submitit);
- :mod:`~sec_lib.runs.commands`: the runner's ``train``, ``export`` and ``rerun`` commands.

It imports the core (``sec``, ``losses``, ``metrics``, ``models``, ``data``, ``params``, ``report``) and nothing
above it. The modules are imported on use, not here, so ``import sec_lib.runs`` costs nothing.
"""
