"""The ``fedbound`` command.

fedbound list                                   registered results and their status
fedbound bound KEY [--variant V] --params JSON  value, terms, admissibility of a bound
fedbound step KEY [--variant V] --params JSON   largest admissible step and what binds
fedbound scenario KEY                           the default scenario of KEY as JSON
fedbound check KEY [--scenario FILE|-] [--exact] [--plot PNG]   bound vs simulator

Every command takes ``--json``. Bad input exits with status 2 and one line naming the
problem, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence

import numpy as np

import bounds

from . import plots
from .check import Verdict, check
from .scenario import default_scenario, jsonable, load_scenario


class UsageError(Exception):
    """Bad input from the command line (exit status 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, no usage dump
        raise UsageError(message)


def _params(text: str | None) -> dict:
    if text is None:
        raise UsageError("--params JSON is required")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"--params is not valid JSON: {e.msg} at column {e.colno}") from None
    if not isinstance(data, dict):
        raise UsageError("--params must be a JSON object of parameter values")
    return {k: np.asarray(v, dtype=float) if isinstance(v, list) else v for k, v in data.items()}


def _finite_json(obj) -> str:
    """JSON text; infinities are written as the strings "inf"/"-inf", never NaN."""
    def fix(x):
        if isinstance(x, float) and not math.isfinite(x):
            if math.isnan(x):
                raise ValueError("internal error: NaN in output")
            return "inf" if x > 0 else "-inf"
        if isinstance(x, dict):
            return {k: fix(v) for k, v in x.items()}
        if isinstance(x, list):
            return [fix(v) for v in x]
        return x
    return json.dumps(fix(jsonable(obj)), indent=2, sort_keys=True)


# ---------------------------------------------------------------- commands


def cmd_list(args) -> dict | list:
    rows = bounds.list()
    if args.json:
        return rows
    w = max(len(r["key"]) for r in rows)
    lines = [f"{'key':<{w}}  {'status':<19} {'variants':<22} title"]
    lines += [f"{r['key']:<{w}}  {r['status']:<19} {','.join(r['variants']):<22} {r['title']}"
              for r in rows]
    print("\n".join(lines))
    return None


def cmd_bound(args):
    thm = bounds.get(args.key, args.variant)
    p = _params(args.params)
    out = {
        "key": thm.key, "variant": thm.variant,
        "value": thm.evaluate(**p), "terms": thm.terms(**p),
        "admissible": thm.admissible(**p),
        "violations": [str(v) for v in thm.violations(**p)],
    }
    if args.json:
        return out
    print(f"{thm.key} [{thm.variant}] = {out['value']:.6g}")
    for name, v in out["terms"].items():
        print(f"  {name:<24} {v:.6g}")
    print("admissible" if out["admissible"] else "NOT admissible: " + "; ".join(out["violations"]))
    return None


def cmd_step(args):
    thm = bounds.get(args.key, args.variant)
    c = bounds.choose_step(thm, args.objective, **_params(args.params))
    binding = c.binding + (f" at worker {c.worker}" if c.worker is not None else "")
    out = {"max_step" if args.objective == "max" else "step": c.step, "bound": c.bound,
           "binding": binding}
    if args.json:
        return out
    print(f"{thm.key} [{thm.variant}]: {thm.step} = {c.step:.6g} (bound {c.bound:.6g}; "
          f"binding: {binding})")
    return None


def cmd_scenario(args):
    return default_scenario(args.key).to_dict()


def _read_scenario(key: str, source: str | None):
    if source is None:
        return default_scenario(key)
    try:
        text = sys.stdin.read() if source == "-" else open(source).read()
    except OSError as e:
        raise UsageError(f"--scenario {source}: {e.strerror}") from None
    return load_scenario(key, text)


def _verdict_table(v: Verdict) -> str:
    lo, hi = v.measured_ci
    rows = [
        ("result", f"{v.key} [{v.variant}]"),
        ("bound", f"{v.bound:.6g}"),
        ("measured", f"{v.measured_mean:.6g}" + ("" if v.mode == "exact" else
                                                 f"  (95% CI {lo:.6g} .. {hi:.6g})")),
        ("verdict", v.verdict.upper()),
        ("slack", f"{v.slack:.3g}x  (bound / measured)"),
        ("mode", f"{v.mode}, {v.replicas} replicas" + (f", {v.diverged} diverged"
                                                        if v.diverged else "")),
        ("eta", f"{v.params.get('eta', float('nan')):.6g}"),
        ("zeta", f"{v.params.get('zeta', float('nan')):.6g}"),
        ("time", f"{v.seconds:.2f} s"),
    ]
    return "\n".join(f"  {k:<9} {val}" for k, val in rows)


def cmd_check(args):
    scenario = _read_scenario(args.key, args.scenario)
    v = check(args.key, scenario, variant=args.variant, exact=args.exact)
    if args.plot:
        plots.save(plots.along_K(args.key, scenario, variant=args.variant, exact=args.exact),
                   args.plot)
    if args.json:
        return v.as_dict()
    print(_verdict_table(v))
    if args.plot:
        print(f"  plot      {args.plot}")
    return None


# ---------------------------------------------------------------- parser


def parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="fedbound", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def add(name, fn, help_):
        p = sub.add_parser(name, help=help_)
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(fn=fn)
        return p

    add("list", cmd_list, "registered results, variants and status")
    p = add("bound", cmd_bound, "evaluate a bound")
    p.add_argument("key"), p.add_argument("--variant"), p.add_argument("--params")
    p = add("step", cmd_step, "largest admissible (or bound-minimising) step size")
    p.add_argument("key"), p.add_argument("--variant"), p.add_argument("--params")
    p.add_argument("--objective", choices=bounds.tuning.OBJECTIVES, default="max")
    p = add("scenario", cmd_scenario, "the default scenario of a result as JSON")
    p.add_argument("key")
    p = add("check", cmd_check, "check a bound against the simulator")
    p.add_argument("key"), p.add_argument("--variant")
    p.add_argument("--scenario", help="scenario JSON file, or - for standard input")
    p.add_argument("--exact", action="store_true",
                   help="exact expectation instead of Monte Carlo (quadratic problems)")
    p.add_argument("--plot", help="also write the bound-vs-measurement plot to this PNG")
    return ap


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parser().parse_args(argv)
        out = args.fn(args)
        if out is not None:
            print(_finite_json(out))
        return 0
    except (UsageError, ValueError, NotImplementedError) as e:
        print(f"fedbound: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
