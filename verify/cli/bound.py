"""``fedbound bound`` and ``fedbound step``: a bound evaluated at given parameters, and the
largest admissible (or bound-minimising) step; both evaluate the result without sympy where
a manifest exists (:mod:`bounds.manifest`)."""

from __future__ import annotations

import json
import math

from .common import Command, Exit, UsageError, json_object, key_and_variant


def param_value(name: str, v):
    """A value of ``--params``: a number, or a (nested, rectangular) list of numbers as a
    float array; UsageError naming the entry (``a[3]``) otherwise."""
    import numpy as np

    def check(x, where: str):
        if isinstance(x, bool) or not isinstance(x, (int, float, list)):
            raise UsageError(f"--params: {where}={json.dumps(x)[:40]} must be a number"
                             + (", not a boolean" if isinstance(x, bool) else ""))
        if isinstance(x, int) and not isinstance(x, bool) and abs(x) > 2**1023:
            raise UsageError(f"--params: {where} is beyond the float64 range")
        if isinstance(x, int) and not isinstance(x, bool) and int(float(x)) != x:
            raise UsageError(f"--params: {where}={x} is an integer that float64 cannot hold exactly "
                             f"(it would be evaluated as {int(float(x))}): give it as a float "
                             "(e.g. 1e20) if an approximation is meant")
        if isinstance(x, list):
            if not x:
                raise UsageError(f"--params: {where} is an empty list")
            for i, y in enumerate(x):
                check(y, f"{where}[{i}]")
            shapes = {np.shape(y) for y in x}
            if len(shapes) > 1:
                raise UsageError(f"--params: {where} is ragged (its entries have shapes "
                                 f"{sorted(shapes)}): give a rectangular array")

    check(v, name)
    return np.asarray(v, dtype=float) if isinstance(v, list) else v


def params(text: str | None) -> dict:
    data = json_object(text, "--params")
    return {k: param_value(k, v) for k, v in data.items()}


def numeric_theorem(key: str, variant: str | None):
    """The result to evaluate for ``bound`` and ``step``: its numeric theorem, loaded without
    sympy, where a valid manifest exists (:mod:`bounds.manifest`); else the sympy theorem,
    whose manifest is then written for the next process."""
    from fedbound.bounds import manifest

    thm = manifest.load(key, variant)
    if thm is None:
        from fedbound import bounds

        thm = bounds.get(key, variant)
        manifest.save(thm)
    return thm


def run_bound(args):
    import numpy as np

    from ..adapter import nonfinite_bound, undefined_named

    thm = numeric_theorem(args.key, args.variant)
    p = params(args.params)
    with undefined_named(thm, p):
        out = {
            "key": thm.key, "variant": thm.variant,
            "value": thm.evaluate(**p), "terms": thm.terms(**p),
            "admissible": bool(thm.admissible(**p)),
            "violations": [str(v) for v in thm.violations(**p)],
        }
    if out["admissible"] and not all(np.all(np.isfinite(x)) for x in
                                     (out["value"], *out["terms"].values())):
        raise ValueError(nonfinite_bound(thm, p))  # never a number, never admissible
    status = 0 if out["admissible"] or args.allow_inadmissible else 1
    if args.json:
        return Exit(out, status)
    print(f"{thm.key} [{thm.variant}] = {_values(out['value'])}")
    for name, v in out["terms"].items():
        print(f"  {name:<24} {_values(v)}")
    print("admissible" if out["admissible"] else "NOT admissible: " + "; ".join(out["violations"]))
    return Exit(None, status)


def _values(x) -> str:
    """A bound or a term as text: a number, or every entry of a bound stated per round,
    group or worker (an array), six significant digits each."""
    import numpy as np

    if np.ndim(x) == 0:
        return f"{float(x):.6g}"
    return np.array2string(np.asarray(x, dtype=float), separator=", ",
                           formatter={"float_kind": lambda v: f"{v:.6g}"})


def run_step(args):
    from fedbound import bounds

    from ..adapter import nonfinite_bound, undefined_named

    thm = numeric_theorem(args.key, args.variant)
    p = params(args.params)
    with undefined_named(thm, p):
        c = bounds.choose_step(thm, args.objective, **p)
    if not (math.isfinite(c.step) and math.isfinite(c.bound)):
        raise ValueError(nonfinite_bound(thm, {**p, thm.step: c.step}))
    binding = c.binding + (f" at worker {c.worker}" if c.worker is not None else "")
    out = {"max_step" if args.objective == "max" else "step": c.step, "bound": c.bound,
           "binding": binding}
    if args.json:
        return out
    print(f"{thm.key} [{thm.variant}]: {thm.step} = {c.step:.6g} (bound {c.bound:.6g}; "
          f"binding: {binding})")
    return None




def bound_arguments(p) -> None:
    key_and_variant(p)
    p.add_argument("--params", help="the theorem's parameters as a JSON object")
    p.add_argument("--allow-inadmissible", action="store_true",
                   help="exit 0 even when a condition of the theorem fails")


def step_arguments(p) -> None:
    key_and_variant(p)
    p.add_argument("--params", help="the theorem's parameters except the step, as a JSON object")
    p.add_argument("--objective", choices=("max", "min-bound"), default="max",
                   help="max: the largest admissible step; min-bound: the admissible step "
                        "that minimises the bound")


COMMANDS = (
    Command("bound", run_bound, "evaluate a bound: value, terms, admissibility", bound_arguments,
            "fedbound bound mllsgd.theorem1 --params '{\"L\": 1, \"beta\": 0, \"sigma\": 1,\n"
            "      \"Delta\": 1, \"eta\": 0.001, \"K\": 64, \"q\": 2, \"tau\": 4, \"zeta\": 0.5,\n"
            "      \"a\": [0.5, 0.5], \"p\": [1, 0.9]}'",
            "Evaluate a bound at the given parameters. Exits 1 when the parameters are "
            "inadmissible (a condition of the theorem fails), unless --allow-inadmissible.",
            {0: "the parameters are admissible (or --allow-inadmissible)",
             1: "the parameters are inadmissible: a condition of the theorem fails"}),
    Command("step", run_step, "largest admissible (or bound-minimising) step size", step_arguments,
            "fedbound step hfl.theorem2 --params '{\"L\": 2, \"G\": 1, \"sigma\": 1, \"Delta\": 1,\n"
            "      \"sizes\": [2, 2], \"t\": [[1, 2]]}'",
            exits={0: "the step was found and printed"}),
)
