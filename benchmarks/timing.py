"""What every benchmark times with: the best wall time of a few calls."""

from __future__ import annotations

import math
import time


def best_time(fn, repeats: int) -> tuple[float, object]:
    """Smallest wall time (time.perf_counter) of ``repeats`` calls of ``fn``, and the last result."""
    best, result = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result
