"""How tight each bound is: its slack at the default scenario and the tightest ratio
measured/bound known, per result (default variant).

Each plugin ships the table of its own results, a JSON file beside its witnesses registered
with :func:`register_tightness` (fedbound's papers: ``verify/papers/<paper>/tightness.json``),
so that ``fedbound list`` and the report show them without recomputing anything, for a
plugin's results exactly as for the papers'; :func:`derive` recomputes a table (a test fails
when a shipped one is stale) and :func:`write` regenerates them. Where the numbers come from:

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
import warnings
from functools import cache
from pathlib import Path

from fedbound import bounds

from .adapter import adapter_for, adapter_keys
from .families import families
from .plugins import ensure_loaded, modules, note, origin, owner
from .scenario import json_text
from .witnesses import witnesses

#: the registered tables (paths or ``importlib.resources`` traversables), in registration order
_TABLES: list = []


def register_tightness(path) -> None:
    """Add a plugin's tightness table: the JSON file that :func:`write` makes from the
    plugin's results (``importlib.resources.files(__name__) / "tightness.json"``), read on
    first use. Its rows are what ``fedbound list`` and the report show for those results."""
    if path not in _TABLES:
        _TABLES.append(path)
        note("tightness_tables", str(path))


def unregister_tightness(path) -> None:
    """Remove a table added by :func:`register_tightness` (for tests)."""
    if path in _TABLES:
        _TABLES.remove(path)


def tables() -> list:
    """The registered tables (the plugins loaded), in registration order."""
    ensure_loaded()
    return list(_TABLES)


@cache
def read(path) -> dict[str, dict]:
    """The rows of the table file ``path``, by key (empty when the file is absent; a file
    that is not a JSON object of rows is a ValueError naming it)."""
    if not path.is_file():
        return {}
    try:
        rows = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"tightness table {path} is not valid JSON: {e}") from None
    if not isinstance(rows, dict) or not all(isinstance(r, dict) for r in rows.values()):
        raise ValueError(f"tightness table {path} must be a JSON object of rows by result key")
    return rows


def table() -> dict[str, dict]:
    """Every registered table's rows, by key (a key in two tables: the first registered). A
    table that cannot be read is left out with a warning naming it (one broken plugin hides no
    other's rows; ``fedbound plugins`` flags it)."""
    out: dict[str, dict] = {}
    for path in tables():
        try:
            rows = read(path)
        except ValueError as e:
            warnings.warn(f"{e}: its rows are left out", stacklevel=2)
            continue
        for key, r in rows.items():
            out.setdefault(key, r)
    return out


def row(key: str) -> dict | None:
    """The shipped tightness of ``key`` (None for a result in no registered table)."""
    return table().get(key)


def by_variant(t: dict | None) -> dict[str, dict]:
    """A table row by variant: its default variant's entry and those of the other variants it
    tracks (empty for None)."""
    if t is None:
        return {}
    return {t["variant"]: t, **t.get("variants", {})}


def tracked() -> dict:
    """Each registered table and the results it holds the tightness of: those registered (with
    an adapter) by the plugin that registered the table, sorted (a table registered outside
    any plugin: the keys in it)."""
    plugins = modules()
    out = {}
    for path in tables():
        mine = owner(origin("tightness_tables", str(path)), plugins)
        out[path] = sorted(read(path)) if mine is None else [
            k for k in adapter_keys() if owner(bounds.registry.origin(k), plugins) == mine]
    return out


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


def derive(keys) -> dict[str, dict]:
    """A table recomputed: for each of ``keys`` the :func:`entry` of its default variant,
    and that of each :func:`tracked_variants`."""
    return {key: {**entry(key), "variants": {v: entry(key, v) for v in tracked_variants(key)}}
            for key in keys}


def write(plugin: str | None = None) -> list[Path]:
    """Regenerate every registered table (only those of the plugin module ``plugin``, when
    given) from the results its plugin registered (:func:`tracked`): how a paper's or a
    plugin's table is made, and refreshed after a change of a bound, an adapter or a witness
    (``python -c "from fedbound.verify import tightness; tightness.write()"``; a plugin's:
    ``tightness.write("fedbound_sgd")`` with the plugin loaded). Returns the files written."""
    todo = {path: keys for path, keys in tracked().items()
            if plugin is None or owner(origin("tightness_tables", str(path)), modules()) == plugin}
    if plugin is not None and not todo:
        raise ValueError(f"plugin={plugin!r} registered no tightness table (register_tightness); "
                         f"loaded plugins: {', '.join(modules())}")
    written = []
    for path, keys in todo.items():
        out = Path(str(path))
        out.write_text(json_text(derive(keys)) + "\n")
        written.append(out)
    read.cache_clear()
    return written
