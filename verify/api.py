"""The public extension API of fedbound: everything a result needs to be checked.

A result is a Theorem (``bounds.register``) and an :class:`Adapter` (this module). The
four papers of ``verify/papers/`` use this module and nothing else of ``verify``; a
plugin does the same from outside the package. See ``docs/extending.md`` for a walk
through, and ``verify.testing`` for the contract checks to run on a new adapter.

Everything not re-exported here is internal and may change.
"""

from .adapter import (
    Adapter,
    Tags,
    adapter_for,
    adapter_keys,
    default_scenario,
    load_scenario,
    register_adapter,
    unregister_adapter,
)
from .check import check
from .draw import Draw, RngDraw
from .estimated import (
    EstimationSettings,
    Parts,
    along_trajectory,
    check_estimated,
    estimate_constants,
    estimated_start,
)
from .families import Family, families, register_family
from .limits import LOOP_OVERHEAD, Footprint, ResourceError, count_text
from .plugins import load_plugins
from .scenario import (
    FEATURE_NORM_RANGE,
    Scenario,
    json_text,
    jsonable,
    problem_spec,
    require_float,
    require_floats,
    require_int,
    roundoff,
)
from .units import COUNT, GRAD2, INDEX, LOSS, PARAM2, RATIO, SCENARIO, STEP, TIME, UNITS, label
from .verdict import Comparison, Measurement, Verdict, compare
from .witnesses import Witness, register_witness_dir, unregister_witness_dir, witnesses

__all__ = [
    "COUNT", "GRAD2", "INDEX", "LOSS", "PARAM2", "RATIO", "SCENARIO", "STEP", "TIME", "UNITS",
    "label",
    "FEATURE_NORM_RANGE", "LOOP_OVERHEAD", "Adapter", "Comparison", "Draw", "EstimationSettings",
    "Family", "Footprint", "Measurement", "Parts", "ResourceError", "RngDraw", "Scenario", "Tags",
    "Verdict", "Witness", "adapter_for", "adapter_keys", "check", "check_estimated", "compare",
    "along_trajectory", "count_text", "estimate_constants", "estimated_start",
    "default_scenario", "families", "json_text", "jsonable", "load_plugins", "load_scenario",
    "problem_spec", "register_adapter", "register_family", "register_witness_dir",
    "require_float", "require_floats", "require_int", "roundoff", "unregister_adapter",
    "unregister_witness_dir", "witnesses",
]
