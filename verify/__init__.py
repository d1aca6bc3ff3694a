"""fedbound.verify: where theory meets measurement.

Scenarios (dataclass <-> JSON), ``check(key, scenario) -> Verdict``, plots and the
``fedbound`` command. Depends on ``bounds`` and ``sim``; neither depends on it.
"""

from . import afl, hfl, mllsgd, tdcd  # noqa: F401  (register each paper's scenario adapter)
from .check import Verdict, check
from .scenario import default_scenario, load_scenario

__all__ = ["Verdict", "check", "default_scenario", "load_scenario"]
