# case: expert-weight swapper split over modules: a base class in base.py issues copies and keeps the event on self, a subclass in experts.py waits in forward via super(); capture.py captures through the package's re-exports
from .base import SwapBase
from .experts import SwappedExperts
from .capture import capture_decode

__all__ = ["SwapBase", "SwappedExperts", "capture_decode"]
