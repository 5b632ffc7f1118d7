"""Moved to :mod:`sec_lib.runs.experiments`. This name is kept so that old imports keep working: it is the same
module object (``sec_lib.experiments is sec_lib.runs.experiments``), so monkeypatching either name patches both."""
import sys

from .runs import experiments as _moved

sys.modules[__name__] = _moved
