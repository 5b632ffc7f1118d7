"""Moved to :mod:`sec_lib.runs.train`. This name is kept so that old imports keep working: it is the same
module object (``sec_lib.train is sec_lib.runs.train``), so monkeypatching either name patches both."""
import sys

from .runs import train as _moved

sys.modules[__name__] = _moved
