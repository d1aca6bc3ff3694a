"""What a plugin's experiments and claims return, checked where it crosses the extension API
(``verify.boundary``'s checks, for ``verify.claims`` and ``verify.decide``): an experiment's
outcome (:func:`checked_outcome`) and a claim's tests (:func:`checked_tests`), as
``verify.reproduce`` receives them and ``verify.testing.check_claims`` runs them. A bad one
is a :class:`verify.boundary.PluginError` naming the plugin, the experiment or claim and
the field (exit 70 in the CLI)."""

from __future__ import annotations

from collections.abc import Mapping

from .boundary import array, bad_value, number, require_instance
from .claims import Curve, Outcome


def checked_outcome(experiment, outcome):
    """``outcome``, what ``experiment.run`` returned, checked: an ``Outcome`` of at least one
    ``Curve``, every curve's metric without NaN (a diverged seed is inf; ``bound`` may be
    NaN where it is not evaluated), its scalars without NaN, its notes and prediction text."""
    hook = f"experiment {experiment.id!r} Experiment.run()"
    owner = experiment.run
    require_instance(owner, hook, "the outcome", outcome, Outcome)
    if not isinstance(outcome.curves, Mapping) or not outcome.curves:
        raise bad_value(owner, hook, "curves", outcome.curves, "must be a non-empty dict label -> Curve")
    for label, c in outcome.curves.items():
        require_instance(owner, hook, f"curves[{label!r}]", c, Curve)
        array(owner, hook, f"curves[{label!r}].y", c.y)
    for name, v in outcome.scalars.items():
        array(owner, hook, f"scalars[{name!r}]", v)
    for field in ("xlabel", "ylabel", "prediction"):
        if not isinstance(getattr(outcome, field), str):
            raise bad_value(owner, hook, field, getattr(outcome, field), "must be a string")
    if not all(isinstance(n, str) for n in outcome.notes):
        raise bad_value(owner, hook, "notes", outcome.notes, "must be strings")
    return outcome


def checked_tests(claim, tests, verdicts: tuple[str, ...]) -> tuple:
    """The tests ``claim.decide`` returned, checked: at least one ``verify.decide.Test``
    (what :func:`~verify.decide.above`, ``below``, ``between`` and ``fixed_by_setting``
    build), each with finite numbers (none for a test fixed by the setting without a run),
    a margin > 0 and one of ``verdicts`` (``verify.decide.VERDICTS``: this module sits below
    ``verify.decide``, whose Test it recognises by its fields)."""
    hook = f"claim {claim.id!r} Claim.decide()"
    owner = claim.decide
    if hasattr(tests, "__iter__") and not isinstance(tests, (str, bytes, Mapping)):
        tests = tuple(tests)
    if not isinstance(tests, tuple) or not tests:
        raise bad_value(owner, hook, "the tests", tests, "must be a non-empty list of Test "
                                                     "(verify.api.above, below, between)")
    for i, t in enumerate(tests):
        require_instance(owner, hook, f"[{i}]", t, "verify.api.Test",
                         ("kind", "effect", "low", "high", "sd", "seeds", "margin", "verdict"))
        fixed = t.kind == "fixed"  # fixed by the setting: no run of its own, no numbers
        for name in ("effect", "low", "high", "sd", "detectable"):
            if not (fixed and getattr(t, name) is None):
                number(owner, hook, f"[{i}].{name}", getattr(t, name))
        if not (fixed and t.seeds is None):
            number(owner, hook, f"[{i}].seeds", t.seeds, integer=True, positive=True)
        if t.margin is not None:
            number(owner, hook, f"[{i}].margin", t.margin, positive=True)
        if t.verdict not in verdicts:
            raise bad_value(owner, hook, f"[{i}].verdict", t.verdict, f"must be one of {verdicts}")
    return tests
