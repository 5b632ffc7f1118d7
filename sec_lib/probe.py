"""Moved to :mod:`sec_lib.metrics.probe`. This name is kept so that old imports keep working: it is the same
module object, so monkeypatching either name patches both."""
import sys

from .metrics import probe as _moved

sys.modules[__name__] = _moved
