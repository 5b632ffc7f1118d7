"""The registered follow-up studies by name, in their registered order: each is one module's ``STUDY``
(:class:`~sec_lib.runs.study.Study`), trained by ``python -m sec_lib.book study NAME ...``."""
from . import densecurves, longruns, regimeseeds, sgdeta, sgdrates, weightdecay

#: {name: Study}, in the order they were registered.
FOLLOWUPS = {s.name: s for s in (sgdrates.STUDY, sgdeta.STUDY, densecurves.STUDY, longruns.STUDY, weightdecay.STUDY,
                                 regimeseeds.STUDY)}
