"""Moved to :mod:`sec_lib.runs.tier`. This name is kept so that old imports keep working: it is the same
module object (``sec_lib.tier is sec_lib.runs.tier``), so monkeypatching either name patches both."""
import sys

from .runs import tier as _moved

sys.modules[__name__] = _moved
