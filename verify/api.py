"""The public extension API of fedbound: everything a plugin contributes goes through it.

What a plugin may register is declared once, in :data:`HOOKS` (``verify.hooks``: each
:class:`Hook` with its register function and its contract; ``fedbound plugins --hooks`` prints
them, and ``fedbound plugins`` shows what every installed plugin registered and flags a
registration that breaks its contract):

* ``theorems``: a result's Theorem, ``bounds.register`` (one line: key, title, the build's
  import path, ``{variant: status}``, default variant);
* ``adapters``: its :class:`Adapter` (:func:`register_adapter`);
* ``witness_dirs``: its stored witnesses (:func:`register_witness_dir`);
* ``tightness_tables``: the tightness table of its results (:func:`register_tightness`,
  written by ``verify.tightness.write``), shown by ``fedbound list`` and the report;
* ``families``: refutation families (:func:`register_family`);
* ``sweeps``: rate sweeps (:func:`register_sweep`);
* ``choosers``: choosers (:func:`register_chooser`, with :class:`Chooser`, its inputs
  declared once with :class:`Input` and :class:`Group`, :func:`problem_inputs` for the
  user's own problem: ``fedbound choose`` generates their options, scenario-file fields and
  validation);
* ``experiments`` and ``claims``: the experiments and claims of its paper
  (:func:`register_experiment`, :func:`register_claim`, decided by the tests :func:`above`,
  :func:`below`, :func:`between`, :func:`sooner` against a margin, or
  :func:`fixed_by_setting`; :func:`reproduce` decides them, :func:`claim_figure` draws one,
  :func:`claims_grid` many, and :func:`load_reproduction` loads a reproduction stored with
  ``fedbound reproduce ... --json --curves``).

The four papers of ``verify/papers/`` use this module and nothing else of ``verify``, as a
plugin does from outside the package, and register everything they have through these hooks.
See ``docs/extending.md`` for a walk through the example plugin, and ``verify.testing`` for
the contract checks to run on a new adapter.

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
from .choose import (
    TOLERANCE,
    Answer,
    ChoiceReport,
    Chooser,
    Evaluation,
    Knob,
    NoCertificate,
    Proposal,
    block_seed,
    choose,
    choosers,
    half_width,
    paired_regret,
    passes,
    predicted_over_steps,
    register_chooser,
    settings_text,
    unregister_chooser,
)
from .claimplots import claim_figure, claims_grid
from .claims import (
    Claim,
    Curve,
    Experiment,
    Outcome,
    Plan,
    Reading,
    claims,
    register_claim,
    register_experiment,
    unregister_paper,
)
from .deadline_inputs import GUARANTEE, MU, ZETA, DeadlineVariants, require_mu
from .decide import (
    ACCURACY,
    RELATIVE_LOSS,
    Test,
    above,
    accuracy_margin,
    below,
    between,
    fixed_by_setting,
    relative_margin,
    sooner,
)
from .declare import DEVICE, SMALLEST_STEP, Group, Input
from .draw import Draw, RngDraw
from .estimated import (
    EstimationSettings,
    Parts,
    along_trajectory,
    check_estimated,
    conservative_bound,
    conservative_step,
    estimate_constants,
    estimate_grid,
    estimated_keys,
    estimated_start,
)
from .families import Family, families, register_family
from .hooks import HOOKS, Hook
from .limits import (
    LOOP_OVERHEAD,
    Footprint,
    ResourceError,
    count_text,
    fitting_batches,
    require_runs,
)
from .named_problem import NamedProblem, problem_inputs
from .plugins import load_plugins
from .rate import Sweep, register_sweep, unregister_sweeps
from .reproduce import ClaimResult, Reproduction, digits_mlp, reproduce
from .reproduction_io import load_reproduction, reproduction_differences, reproduction_from_dict
from .scenario import (
    FEATURE_NORM_RANGE,
    FieldError,
    Scenario,
    comma_separated,
    json_text,
    jsonable,
    problem_spec,
    require_float,
    require_floats,
    require_int,
    roundoff,
)
from .tightness import register_tightness, unregister_tightness
from .units import COUNT, GRAD2, INDEX, LOSS, PARAM2, RATIO, SCENARIO, STEP, TIME, UNITS, label
from .verdict import Comparison, Measurement, Verdict, compare
from .witnesses import Witness, register_witness_dir, unregister_witness_dir, witnesses

__all__ = [
    "above", "ACCURACY", "accuracy_margin", "Adapter", "adapter_for", "adapter_keys",
    "along_trajectory", "Answer", "below", "between", "block_seed", "check",
    "check_estimated", "ChoiceReport", "choose", "Chooser", "choosers", "Claim", "claim_figure",
    "ClaimResult", "claims", "claims_grid", "comma_separated", "compare", "Comparison",
    "conservative_bound", "conservative_step", "COUNT", "count_text", "Curve", "DeadlineVariants",
    "default_scenario", "DEVICE", "digits_mlp", "Draw", "estimate_constants", "estimate_grid",
    "estimated_keys", "estimated_start", "EstimationSettings", "Evaluation", "Experiment",
    "families", "Family", "FEATURE_NORM_RANGE", "FieldError", "fitting_batches",
    "fixed_by_setting", "Footprint", "GRAD2", "Group", "GUARANTEE",
    "half_width", "Hook", "HOOKS", "INDEX", "Input", "json_text", "jsonable", "Knob", "label",
    "load_plugins", "load_reproduction", "load_scenario", "LOOP_OVERHEAD", "LOSS",
    "Measurement", "MU", "NamedProblem", "NoCertificate", "Outcome", "paired_regret", "PARAM2",
    "Parts", "passes", "Plan", "predicted_over_steps", "problem_inputs", "problem_spec",
    "Proposal", "RATIO", "Reading",
    "register_adapter", "register_chooser", "register_claim", "register_experiment",
    "register_family", "register_sweep", "register_tightness", "register_witness_dir",
    "RELATIVE_LOSS", "relative_margin", "reproduce", "Reproduction", "reproduction_differences",
    "reproduction_from_dict", "require_float", "require_floats", "require_int", "require_mu",
    "require_runs",
    "ResourceError", "RngDraw", "roundoff", "Scenario", "SCENARIO", "settings_text",
    "SMALLEST_STEP", "sooner",
    "STEP", "Sweep", "Tags", "Test", "TIME", "TOLERANCE", "UNITS", "unregister_adapter",
    "unregister_chooser", "unregister_paper", "unregister_sweeps", "unregister_tightness",
    "unregister_witness_dir", "Verdict", "Witness", "witnesses", "ZETA",
]
