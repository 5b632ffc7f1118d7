"""The runs wing: a config becomes a result.

- :mod:`~sec_lib.runs.config`: what a run is (:class:`TrainConfig`, :class:`RunResult`);
- :mod:`~sec_lib.runs.train`: :class:`TrainConfig` -> one instrumented training loop -> :class:`RunResult`;
- :mod:`~sec_lib.runs.store`: the result store (key = hash of the config, atomic writes, resumable reruns);
- :mod:`~sec_lib.runs.experiments`: every profile by name, and what each sweep trains (``SWEEPS``); the
  sweeps and their selections are in :mod:`~sec_lib.runs.sweeps`, the profiles' settings in
  :mod:`~sec_lib.runs.profiles` and :mod:`~sec_lib.runs.benchmark_settings`;
- :mod:`~sec_lib.runs.tier`: the committed evidence tiers under ``data/reference/`` (export, restore, rerun);
- :mod:`~sec_lib.runs.launch`: where runs train (the local pool or submitit);
- :mod:`~sec_lib.runs.study`: a registered study (:class:`~sec_lib.runs.study.Study`), the driver that trains a
  list of them, and the held-out grid grown at an edge; the studies: the decisive tier's
  (:mod:`~sec_lib.runs.decisive_studies`) and each follow-up's module (listed in :mod:`~sec_lib.runs.studies`);
- :mod:`~sec_lib.runs.commands`: the runner's ``train``, ``export``, ``rerun``, ``pilot`` and ``decisive`` commands.

It imports the core (``sec``, ``losses``, ``metrics``, ``models``, ``data``, ``params``, ``report``) and nothing
above it. The modules are imported on use, not here, so ``import sec_lib.runs`` costs nothing.
"""
