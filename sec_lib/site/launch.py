"""Moved to :mod:`sec_lib.runs.launch`. This name is kept so that old imports keep working: it is the same
module object, so monkeypatching either name patches both."""
import sys

from ..runs import launch as _moved

sys.modules[__name__] = _moved
