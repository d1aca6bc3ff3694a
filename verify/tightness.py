"""How tight each bound is: its slack at the default scenario and the tightest ratio
measured/bound known, per result (default variant).

The numbers ship in ``verify/tightness.json`` so that ``fedbound list`` and the report show
them without recomputing anything; :func:`derive` recomputes them (a test fails when the
shipped file is stale) and :func:`write` regenerates it. Where they come from:

* ``default``: the check of the default scenario (exact where the adapter can), its ratio
  measured/bound (``verify.verdict.tightness``; 1 = tight) and ``slack`` = 1/ratio;
* ``tightest``: the largest ratio recorded by the result's stored witnesses (a tightness
  witness found by ``fedbound search --objective tightest``, or a refutation), with the
  witness file (``check --all`` replays each and fails when its ratio drops), or the default
  scenario's when that is larger;
* ``unbounded``: the result has a refutation family (``verify.families``) along which the
  ratio grows without limit, with its growth;
* ``variants``: the same for each other variant that has a stored tightness witness of its
  own (e.g. the refined variants of HFL, derived by fedbound, not published), by variant.
"""

from __future__ import annotations

import json
import math
from functools import cache
from importlib import resources
from pathlib import Path

from fedbound import bounds

from .adapter import adapter_for, adapter_keys
from .families import families
from .plugins import builtin
from .scenario import json_text
from .witnesses import witnesses

PATH = resources.files(__package__) / "tightness.json"


@cache
def table() -> dict[str, dict]:
    """The shipped table, by key (empty when the file is absent)."""
    if not PATH.is_file():
        return {}
    return json.loads(PATH.read_text())


def row(key: str) -> dict | None:
    """The shipped tightness of ``key`` (None for a result not in the table, e.g. a plugin's)."""
    return table().get(key)


def by_variant(t: dict | None) -> dict[str, dict]:
    """A table row by variant: its default variant's entry and those of the other variants it
    tracks (empty for None)."""
    if t is None:
        return {}
    return {t["variant"]: t, **t.get("variants", {})}


def default_ratio(key: str, variant: str | None = None) -> dict:
    """The check of ``variant`` of ``key`` (default: its default variant) on the default
    scenario (exact where the adapter can): its ratio, the ratio's interval, the slack
    1/ratio and the mode."""
    ad = adapter_for(key)
    s = ad.default_scenario()
    v = ad.check(s, variant=variant, exact=ad.tags.exact and ad.supports_exact(s))
    return {"ratio": v.ratio, "ratio_ci": list(v.ratio_ci),
            "slack": 1 / v.ratio if v.ratio > 0 else math.inf, "mode": v.mode}


def tightest(key: str, variant: str | None = None) -> dict | None:
    """The largest ratio recorded by the stored witnesses of ``variant`` of ``key`` (default:
    its default variant), with the witness file and its mode (None when none records a
    ratio)."""
    variant = bounds.get(key, variant).variant
    best = max((w for w in witnesses(key) if w.variant == variant and w.ratio is not None),
               key=lambda w: w.ratio, default=None)
    if best is None:
        return None
    return {"ratio": best.ratio, "witness": Path(best.source).name,
            "mode": "exact" if best.exact else "monte-carlo"}


def builtin_keys() -> list[str]:
    """The results of fedbound's own papers: those whose adapter comes from a plugin that
    ships with fedbound (``verify.plugins.builtin``)."""
    own = tuple(f"{m}." for m in builtin())
    return [k for k in adapter_keys() if f"{type(adapter_for(k)).__module__}.".startswith(own)]


def tracked_variants(key: str) -> list[str]:
    """The variants of ``key`` other than the default that have a stored tightness witness."""
    default = bounds.get(key).variant
    return sorted({w.variant for w in witnesses(key)
                   if w.variant != default and Path(w.source).name.endswith(".tightest.json")})


def entry(key: str, variant: str | None = None) -> dict:
    """The tightness of ``variant`` of ``key`` (default: its default variant): its status,
    default check, tightest recorded ratio (or the default's, when larger) and family."""
    thm = bounds.get(key, variant)
    fam = families().get(key) if thm.status in bounds.REFUTED else None
    default, best = default_ratio(key, thm.variant), tightest(key, thm.variant)
    if best is None or default["ratio"] > best["ratio"]:
        best = {"ratio": default["ratio"], "witness": None, "mode": default["mode"]}
    return {"variant": thm.variant, "status": thm.status, "default": default, "tightest": best,
            "unbounded": fam is not None, "growth": None if fam is None else fam.growth}


def derive(keys=None) -> dict[str, dict]:
    """The table recomputed: for each key (default: fedbound's own results) the
    :func:`entry` of its default variant, and that of each :func:`tracked_variants`."""
    return {key: {**entry(key), "variants": {v: entry(key, v) for v in tracked_variants(key)}}
            for key in (builtin_keys() if keys is None else keys)}


def write(path: str | Path | None = None, keys=None) -> Path:
    """Write :func:`derive` to ``path`` (default: the shipped file)."""
    path = Path(str(PATH) if path is None else path)
    path.write_text(json_text(derive(keys)) + "\n")
    table.cache_clear()
    return path
