"""The four papers, each built on the public extension API (``verify.api``) and nothing else.

One module per paper, in a fixed order: statement and citation, the scenario dataclass,
parameter derivation, measurement (with its exact-expectation code, where the dynamics
allow it), then one small adapter class per result key. ``docs/extending.md`` holds the
template for a new paper or plugin.
"""

from . import afl, hfl, mllsgd, tdcd  # noqa: F401  (each registers its adapters)
