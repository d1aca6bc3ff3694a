"""What every benchmark times with: the best wall time of a few calls, and interleaved
runs of several functions with median times and median paired ratios."""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable


def best_time(fn, repeats: int) -> tuple[float, object]:
    """Smallest wall time (time.perf_counter) of ``repeats`` calls of ``fn``, and the last result."""
    best, result = math.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def interleaved(fns: dict[str, Callable[[], object]], repeats: int,
                warm_up: bool = True) -> dict[str, list[float]]:
    """Wall times of ``repeats`` rounds in which every function runs once, in turn (after
    one untimed round with ``warm_up``): on a noisy machine the functions see the same load."""
    for fn in fns.values() if warm_up else ():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def median_ratio(times: dict[str, list[float]], numerator: str, denominator: str) -> float:
    """Median over the rounds of ``numerator``'s time over ``denominator``'s in that round."""
    return statistics.median(a / b for a, b in zip(times[numerator], times[denominator], strict=True))
