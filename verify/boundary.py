"""What a plugin's code returns, checked where it crosses the extension API.

A plugin's chooser, experiments, claims and adapters are called by fedbound's engine, and
what they return is used as fedbound's own: a NaN step of a chooser became a report with
``nan`` settings, ``regret -inf`` and ``passes yes``. Each value is checked here as it
comes back (the right type, finite, in range) before anything else reads it; a bad one is
a :class:`PluginError` naming the plugin, the hook and the field, e.g.

    plugin 'my_plugin' returned a bad value: chooser 'my-step' Chooser.calibrated():
    settings['eta'] = nan: must be a finite number > 0 (the knob's scale is log)

The ``fedbound`` command answers it as the internal error it is (one line and a log, exit
70): a bug of the plugin, never bad input. The checks are the same in
``verify.testing.check_chooser`` and ``check_claims``, so that a plugin's own tests find
such a value before a user does.

* :func:`checked_chooser`: a chooser whose hooks' returns are checked (``verify.choose``);
* :func:`checked_comparison`: an adapter's bound against its measurement (``verify.adapter``);
* ``verify.claims_boundary``: an experiment's outcome and a claim's tests
  (``verify.reproduce``), with this module's checks.
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Callable, Mapping

import numpy as np


class PluginError(RuntimeError):
    """A value a plugin returned breaks the extension API's contract (a bug of the plugin:
    exit status 70 in the CLI, with a log)."""


def plugin_of(obj) -> str:
    """The plugin that defines ``obj`` (a function, a class or an instance; or a module, by
    name): the loaded plugin module that is its module or holds it
    (``verify.plugins.modules``), else its module."""
    from .plugins import builtin, modules

    module = obj if isinstance(obj, str) else (
        getattr(obj, "__module__", None) or type(obj).__module__ or "?")
    for m in [*builtin(), *modules()]:
        if module == m or module.startswith(m + "."):
            return m
    return module


def bad_value(owner, hook: str, field: str, value, rule: str) -> PluginError:
    from .scenario import _short

    return PluginError(f"plugin {plugin_of(owner)!r} returned a bad value: {hook}: {field} = "
                       f"{_short(value)}: {rule}")


def number(owner, hook: str, field: str, value, *, infinite: bool = False,
            positive: bool = False, integer: bool = False) -> float:
    """``value`` as a float: a real number (not a boolean), never NaN, finite unless
    ``infinite``, > 0 with ``positive``, a whole number with ``integer``."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))
    x = float(value) if ok else math.nan
    rule = ("must be " + ("an integer" if integer else "a number")
            + ("" if infinite else ", finite") + (", > 0" if positive else ""))
    if (not ok or math.isnan(x) or (not infinite and math.isinf(x)) or (positive and not x > 0)
            or (integer and not (math.isfinite(x) and x == int(x)))):
        raise bad_value(owner, hook, field, value, rule)
    return x


def _json_values(owner, hook: str, field: str, value) -> None:
    """Every number inside ``value`` (dicts, lists, tuples, arrays) not NaN: what the report
    prints and ``--json`` writes (an infinity is written "inf")."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            _json_values(owner, hook, f"{field}[{k!r}]", v)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _json_values(owner, hook, f"{field}[{i}]", v)
    elif isinstance(value, np.ndarray) and value.dtype.kind in "fc":
        bad = np.flatnonzero(np.isnan(value))
        if bad.size:
            raise bad_value(owner, hook, f"{field}[{int(bad[0])}]", value.ravel()[bad[0]],
                        "must not be NaN")
    elif isinstance(value, (float, np.floating)) and math.isnan(value):
        raise bad_value(owner, hook, field, value, "must not be NaN")


def array(owner, hook: str, field: str, value, shape: tuple[int, ...] | None = None
           ) -> np.ndarray:
    """``value`` as a float array (of ``shape``) without NaN (an infinity is a diverged run)."""
    try:
        a = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise bad_value(owner, hook, field, value, "must be an array of numbers") from None
    if shape is not None and a.shape != shape:
        raise bad_value(owner, hook, f"{field} of shape {a.shape}", value,
                    f"must have shape {shape}")
    bad = np.flatnonzero(np.isnan(a))
    if bad.size:
        i = int(bad[0])
        where = f"{field}[{', '.join(map(str, np.unravel_index(i, a.shape)))}]" if a.ndim else field
        raise bad_value(owner, hook, where, a.ravel()[i], "must not be NaN (a diverged run is inf)")
    return a


def require_instance(owner, hook: str, field: str, value, kind: type | str, fields=()) -> None:
    """``value`` an instance of ``kind``; a class named as a string is recognised by its
    ``fields`` (a class of a module that imports this one, or of one above it: this module
    sits low among the engine's, below ``verify.adapter`` and ``verify.choose``)."""
    if isinstance(kind, str):
        ok = all(hasattr(value, f) for f in fields)
        name = kind
    else:
        ok, name = isinstance(value, kind), f"{kind.__module__}.{kind.__qualname__}"
    if not ok:
        raise bad_value(owner, hook, field, value, f"must be a {name}, not a {type(value).__name__}")


# ---------------------------------------------------------------------- choosers


def checked_chooser(chooser):
    """A shallow copy of ``chooser`` (a ``verify.choose.Chooser``) whose hooks check what they
    return (module docstring): ``knobs``, ``certified``, ``calibrated``, ``simulate``,
    ``inputs``, ``footprint``, ``bound_footprints`` and ``variants``. Its class is the
    chooser's own; every other attribute is the chooser's."""
    out = copy.copy(chooser)
    name = f"chooser {getattr(chooser, 'name', type(chooser).__name__)!r}"
    for hook, check in _CHOOSER_HOOKS.items():
        setattr(out, hook, _checking(chooser, getattr(chooser, hook), f"{name} Chooser.{hook}()",
                                     check))
    return out


def _checking(chooser, method: Callable, hook: str, check: Callable) -> Callable:
    def checked(*args, **kwargs):
        return check(chooser, hook, method(*args, **kwargs), *args, **kwargs)

    checked.__name__ = getattr(method, "__name__", "hook")
    checked.__doc__ = getattr(method, "__doc__", None)
    return checked


def _knob_list(chooser, hook: str, knobs, *args, **kwargs):
    if not isinstance(knobs, (list, tuple)) or not knobs:
        raise bad_value(chooser, hook, "the knobs", knobs, "must be a non-empty list of Knob")
    for i, k in enumerate(knobs):
        require_instance(chooser, hook, f"knobs[{i}]", k, "verify.api.Knob",
                  ("name", "values", "scale", "integer"))
    names = [k.name for k in knobs]
    if len(set(names)) != len(names):
        raise bad_value(chooser, hook, "the knobs' names", names, "must be distinct")
    return knobs


def _settings(chooser, hook: str, field: str, settings, knobs) -> None:
    """Settings of the knobs: a dict of every knob by name, each value a finite number,
    > 0 on a log scale, a whole number for an integer knob."""
    names = [k.name for k in knobs]
    if not isinstance(settings, Mapping) or sorted(settings) != sorted(names):
        raise bad_value(chooser, hook, field, settings,
                    f"must be a dict of the knobs {', '.join(names)}")
    for k in knobs:
        rule = ("(the knob's scale is log)" if k.scale == "log" else "")
        try:
            number(chooser, hook, f"{field}[{k.name!r}]", settings[k.name],
                    positive=k.scale == "log", integer=k.integer)
        except PluginError as e:
            raise PluginError(f"{e} {rule}".rstrip()) from None


def _proposal(chooser, hook: str, p, *args, **kwargs):
    require_instance(chooser, hook, "the proposal", p, "verify.api.Proposal",
              ("settings", "predicted", "curve", "note"))
    _settings(chooser, hook, "settings", p.settings, chooser.knobs())
    number(chooser, hook, "predicted", p.predicted, infinite=True)
    if not isinstance(p.curve, list) or not all(isinstance(r, Mapping) for r in p.curve):
        raise bad_value(chooser, hook, "curve", p.curve, "must be a list of dicts")
    _json_values(chooser, hook, "curve", p.curve)
    if not isinstance(p.note, str):
        raise bad_value(chooser, hook, "note", p.note, "must be a string")
    return p


def _evaluations(chooser, hook: str, out, settings, replicas, *args, **kwargs):
    if not isinstance(out, (list, tuple)) or len(out) != len(settings):
        raise bad_value(chooser, hook, "the evaluations", out,
                    f"must be a list of {len(settings)} Evaluation (one per configuration)")
    knobs = chooser.knobs()
    for i, (e, asked) in enumerate(zip(out, settings, strict=True)):
        require_instance(chooser, hook, f"[{i}]", e, "verify.api.Evaluation",
                  ("settings", "values", "extra"))
        _settings(chooser, hook, f"[{i}].settings", e.settings, knobs)
        if {k: float(v) for k, v in e.settings.items()} != {k: float(v) for k, v in asked.items()}:
            raise bad_value(chooser, hook, f"[{i}].settings", e.settings,
                        f"must be the configuration asked for, {dict(asked)}")
        array(chooser, hook, f"[{i}].values", e.values, (replicas,))
        _json_values(chooser, hook, f"[{i}].extra", e.extra)
    return out


def _inputs(chooser, hook: str, inputs, *args, **kwargs):
    if not isinstance(inputs, Mapping):
        raise bad_value(chooser, hook, "the inputs", inputs, "must be a dict of JSON values")
    _json_values(chooser, hook, "inputs", inputs)
    return inputs


def _footprint(owner, hook: str, fp, *args, **kwargs):
    from .limits import Footprint

    if fp is None:
        return None
    require_instance(owner, hook, "the footprint", fp, Footprint)
    for name in ("bytes", "steps"):  # inf: more than float64 counts, refused by the limits
        value = number(owner, hook, f"{name}", getattr(fp, name), infinite=True)
        if value < 0:
            raise bad_value(owner, hook, name, value, "must be >= 0")
    return fp


def _footprints(chooser, hook: str, prints, *args, **kwargs):
    if not isinstance(prints, Mapping):
        raise bad_value(chooser, hook, "the footprints", prints, "must be a dict label -> Footprint")
    for label, fp in prints.items():
        _footprint(chooser, f"{hook}[{label!r}]", fp)
    return prints


def _variants(chooser, hook: str, names, *args, **kwargs):
    if not isinstance(names, (list, tuple)) or not all(isinstance(v, str) for v in names):
        raise bad_value(chooser, hook, "the variants", names, "must be a list of variant names")
    return names


_CHOOSER_HOOKS = {"knobs": _knob_list, "certified": _proposal, "calibrated": _proposal,
                  "simulate": _evaluations, "inputs": _inputs, "footprint": _footprint,
                  "bound_footprints": _footprints, "variants": _variants}


# ---------------------------------------------------------------------- adapters


def checked_comparison(adapter, c, outcomes: tuple[str, ...]):
    """What ``adapter._compare`` returned, checked: a ``verify.verdict.Comparison`` whose
    bound, mean and interval are numbers (not NaN), its outcome one of ``outcomes`` (the
    verdicts, ``verify.verdict.OUTCOMES``)."""
    hook = f"adapter {adapter.key} Adapter._compare()"
    require_instance(adapter, hook, "the comparison", c, "verify.api.Comparison",
              ("bound", "mean", "ci", "outcome", "mode", "cell", "replicas"))
    number(adapter, hook, "bound", c.bound, infinite=True)
    number(adapter, hook, "mean", c.mean, infinite=True)
    if not isinstance(c.ci, (list, tuple)) or len(c.ci) != 2:
        raise bad_value(adapter, hook, "ci", c.ci, "must be a pair (low, high)")
    for i, x in enumerate(c.ci):
        number(adapter, hook, f"ci[{i}]", x, infinite=True)
    if c.outcome not in outcomes:
        raise bad_value(adapter, hook, "outcome", c.outcome, f"must be one of {outcomes}")
    return c
