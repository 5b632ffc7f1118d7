"""Moved to :mod:`sec_lib.runs.store`. This name is kept so that old imports keep working: it is the same
module object (``sec_lib.store is sec_lib.runs.store``), so monkeypatching either name patches both."""
import sys

from .runs import store as _moved

sys.modules[__name__] = _moved
