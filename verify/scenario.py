"""Scenarios: everything a check needs, as a dataclass that round-trips through JSON.

Each paper has one :class:`Scenario` dataclass (in ``verify/papers/<paper>.py``) whose
fields are the top-level JSON keys. This module holds what they share: JSON conversion
with field-naming errors, the stable hash that keys sweeps, and the field validators
(every message names the field, its value and the rule).
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np


class FieldError(ValueError):
    """Bad input whose message already names the field as the user wrote it (an option such
    as ``--batch``, or a file's field such as ``--scenario s.json: batch``): shown as it is,
    never renamed after an option."""


class Scenario:
    """Base of scenario dataclasses: ``to_dict``/``from_dict``/JSON, ``replace`` and
    ``digest``. Subclasses are ``@dataclass``es whose fields are JSON values and which
    define ``validate(self)``, raising ValueError that names the field."""

    def validate(self) -> None:
        raise NotImplementedError(f"{type(self).__name__} must define validate()")

    def to_dict(self) -> dict[str, Any]:
        return {f.name: jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, sort_keys=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]):
        if not isinstance(data, Mapping):
            raise ValueError(f"scenario must be a JSON object, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"scenario: unknown field(s) {unknown}; fields are {sorted(names)}")
        obj = cls(**dict(data))
        obj.validate()
        return obj

    def replace(self, **changes):
        obj = dataclasses.replace(self, **changes)
        obj.validate()
        return obj

    def digest(self) -> str:
        """Stable SHA-256 of the canonical JSON (the key of a sweep's store)."""
        return hashlib.sha256(self.to_json(indent=None).encode()).hexdigest()


def jsonable(x) -> Any:
    """Numbers and arrays (nested in dicts and lists) as plain JSON values."""
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    if isinstance(x, dict):
        return {k: jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    return x


def json_text(obj) -> str:
    """Indented, key-sorted JSON; infinities are written as the strings "inf"/"-inf"
    (a bound can be genuinely infinite), and a NaN is an error, never output: a
    RuntimeError naming where it is (a bug, fedbound's or a plugin's, never bad input: the
    command's exit status 70)."""
    def fix(x, where):
        if isinstance(x, float) and not math.isfinite(x):
            if math.isnan(x):
                raise RuntimeError(f"NaN in output at {where or 'the top'} (a bug, not bad input)")
            return "inf" if x > 0 else "-inf"
        if isinstance(x, dict):
            return {k: fix(v, f"{where}.{k}" if where else str(k)) for k, v in x.items()}
        if isinstance(x, list):
            return [fix(v, f"{where}[{i}]") for i, v in enumerate(x)]
        return x
    return json.dumps(fix(jsonable(obj), ""), indent=2, sort_keys=True)


#: the largest integer a field takes: every integer ends up in an int64 (torch, numpy)
INT_MAX = 2**63 - 1


class _Literal(str):
    """A JSON number that no field takes (NaN, Infinity, 1e400, an integer beyond the float
    range), kept as its text until :func:`parse_json` names where it is."""


def _float_literal(text: str):
    x = float(text)
    return x if math.isfinite(x) else _Literal(text)


def _int_literal(text: str):
    """An integer literal: an int within int64 (every integer field's range), else a float
    (a float field may be written 100000000000000000000), or a _Literal beyond float64."""
    if len(text.lstrip("-")) > 308:
        return _Literal(text[:12] + "...")
    value = int(text)
    return value if abs(value) <= INT_MAX else _float_literal(text)


class _DuplicateKey(Exception):
    """A JSON object that repeats a key (Python's json keeps the last value silently)."""


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object, refusing a repeated key (``object_pairs_hook`` of :func:`parse_json`)."""
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: set[str] = set()
        raise _DuplicateKey(next(k for k, _ in pairs if k in seen or seen.add(k)))
    return out


def _literal_path(x, path: str = "") -> tuple[str, str] | None:
    """(path, text) of the first non-finite literal in parsed JSON, e.g. ("problem.sigma", "NaN")."""
    if isinstance(x, _Literal):
        return path, str(x)
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    for k, v in items:
        found = _literal_path(v, f"{path}[{k}]" if isinstance(k, int) else
                              f"{path}.{k}" if path else str(k))
        if found:
            return found
    return None


#: what the system says of a path that names nothing it can reach: bad input (exit 2), not
#: a failure of the environment
BAD_PATHS = (errno.ENAMETOOLONG, errno.ELOOP, errno.EINVAL)


def parse_json(text: str, what: str):
    """JSON text, strictly: a number must be finite in float64 (NaN, Infinity and -Infinity,
    which Python's json accepts, and overflowing literals such as 1e400 are refused), and an
    object must not repeat a key (Python's json would keep the last value), with a
    ValueError naming ``what`` and the field's path (``problem.sigma``, ``a[3]``) or key."""
    try:
        data = json.loads(text, parse_constant=_Literal, parse_float=_float_literal,
                          parse_int=_int_literal, object_pairs_hook=_object)
        bad = _literal_path(data)
    except _DuplicateKey as e:
        key = e.args[0] if len(e.args[0]) <= 60 else e.args[0][:57] + "..."
        raise ValueError(f"{what}: {key} is given twice in one object (a JSON object must not "
                         "repeat a key: which value was meant?)") from None
    except json.JSONDecodeError as e:
        raise ValueError(f"{what} is not valid JSON: {e.msg} at line {e.lineno} column {e.colno}") \
            from None
    except RecursionError:
        raise ValueError(f"{what} is not valid JSON: nested too deeply") from None
    if bad is not None:
        where = f"{what}: {bad[0]}" if bad[0] else what
        raise ValueError(f"{where} = {bad[1]} is not a finite number (JSON numbers must be finite: "
                         "no NaN, Infinity or literals beyond float64 such as 1e400)")
    return data


# ---------------------------------------------------------------- field validators


def comma_separated(text: str | None, name: str, kind=float) -> list | None:
    """A comma-separated list of numbers given as option ``name`` (None when not given);
    ValueError naming the option otherwise, an empty entry included ("", "1,,2", "1,": a
    typo is not read as fewer numbers, nor an empty value as the default)."""
    if text is None:
        return None
    try:
        return [kind(x) for x in text.split(",")]
    except ValueError:
        raise ValueError(f"{name} must be comma-separated numbers, got {text!r}") from None


def require_int(name: str, value, minimum: int = 1, maximum: int = INT_MAX) -> int:
    """``value`` as an int in [minimum, maximum]: a JSON integer, not a boolean, not a float
    (2.5 and 1e400 are refused, and so are 1e9 and 4.0, with the integer to write instead),
    or ValueError naming the field and its range."""
    integer = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if not integer or not minimum <= value <= maximum:
        top = "2^63" if maximum == INT_MAX else str(maximum + 1)
        integral = isinstance(value, float) and value.is_integer()
        beyond = (integer or integral) and value > maximum
        rule = f"an integer in [{minimum}, {top})" if beyond else f"an integer >= {minimum}"
        if integral and not beyond and value >= minimum:  # 1e9 or 4.0: a float in JSON
            rule += f", written without a decimal point or exponent ({int(value)})"
        raise ValueError(f"{name}={_short(value)} must be {rule}")
    return int(value)


def _short(value) -> str:
    """A field's value for a message, as JSON where it can be, at most 60 characters (a field
    may hold a huge list, or an integer of thousands of digits)."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool) and abs(value) >= 10**30:
        return f"{'-' if value < 0 else ''}~1e{int(abs(int(value)).bit_length() * math.log10(2))}"
    try:
        text = json.dumps(jsonable(value), allow_nan=True)
    except (TypeError, ValueError):  # not JSON, or an integer too long to print
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 60 else text[:57] + "..."


def require_float(name: str, value, *, low: float = -math.inf, high: float = math.inf,
                  low_open: bool = False, high_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name}={_short(value)} must be a number")
    try:
        v = float(value)
    except OverflowError:
        v = math.inf
    if not math.isfinite(v):
        raise ValueError(f"{name}={_short(value)} must be finite")
    bad_low = v <= low if low_open else v < low
    bad_high = v >= high if high_open else v > high
    if bad_low or bad_high:
        lo = "(" if low_open or math.isinf(low) else "["  # an infinite end is never in range
        hi = ")" if high_open or math.isinf(high) else "]"
        raise ValueError(f"{name}={v:g} must lie in {lo}{low:g}, {high:g}{hi}")
    return v


def require_floats(name: str, value, n: int, **bounds) -> np.ndarray:
    """A scalar (broadcast to n: a read-only view, so that validating a scenario of a billion
    workers allocates nothing) or a list of n numbers, each checked."""
    if isinstance(value, (list, tuple, np.ndarray)):
        if len(value) != n:
            raise ValueError(f"{name} has {len(value)} entries, expected {n} (one per worker)")
        return np.array([require_float(f"{name}[{i}]", v, **bounds) for i, v in enumerate(value)])
    return np.broadcast_to(require_float(name, value, **bounds), (n,))


#: the largest norm of the features of a data set (a logistic regression's R, TDCD's scale):
#: its square (the smoothness of the loss) and the products in the Hessian stay finite and
#: nonzero in float64
FEATURE_NORM_RANGE = (1e-50, 1e50)


def problem_spec(problem, kinds: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """A scenario's ``problem`` object with the defaults of its kind filled in, validated.

    ``kinds``: kind -> {field: default}. Integers (dim, n, batch) must be >= 1; L, mu, G
    positive; R in ``FEATURE_NORM_RANGE``; sigma, sigma_L, sigma_G, lam, distance
    nonnegative; skew in [0, 1]; a quadratic needs mu <= L (and mu == L in one dimension,
    where the spectrum is a single eigenvalue)."""
    if not isinstance(problem, Mapping) or "kind" not in problem:
        raise ValueError(f"problem must be an object with a 'kind' (one of {sorted(kinds)})")
    kind = problem["kind"]
    if not isinstance(kind, str) or kind not in kinds:
        raise ValueError(f"problem.kind={kind!r} must be one of {sorted(kinds)}")
    spec = {**kinds[kind], **problem}
    unknown = sorted(set(spec) - set(kinds[kind]) - {"kind"})
    if unknown:
        raise ValueError(f"problem: unknown field(s) {unknown} for kind {kind!r}")
    for name in ("dim", "n", "batch"):
        if name in spec:
            require_int(f"problem.{name}", spec[name])
    for name in ("L", "mu", "R", "G"):
        if name in spec:
            require_float(f"problem.{name}", spec[name], low=0, low_open=True)
    if "R" in spec:
        require_float("problem.R", spec["R"], low=FEATURE_NORM_RANGE[0], high=FEATURE_NORM_RANGE[1])
    for name in ("sigma", "sigma_L", "sigma_G", "lam", "distance"):
        if name in spec:
            require_float(f"problem.{name}", spec[name], low=0)
    if "skew" in spec:
        require_float("problem.skew", spec["skew"], low=0, high=1)
    for name in ("L", "mu", "R", "G", "sigma", "sigma_L", "sigma_G", "lam", "distance", "skew"):
        if name in spec:
            spec[name] = float(spec[name])  # an int beyond int64 would overflow a tensor op
    for name in ("rotate",):
        if name in spec and not isinstance(spec[name], bool):
            raise ValueError(f"problem.{name}={spec[name]!r} must be true or false")
    if kind == "quadratic" and spec["mu"] > spec["L"]:
        raise ValueError(f"problem.mu={spec['mu']} must be <= problem.L={spec['L']}")
    if kind == "quadratic" and spec["dim"] == 1 and spec["mu"] != spec["L"]:
        raise ValueError("problem.dim=1 needs problem.mu == problem.L")
    return spec


def roundoff(L: float, scale: float) -> float:
    """Round-off level of a squared gradient norm, (1e3 eps L max(scale, 1))^2, with
    ``scale`` the size of the iterates: the absolute tolerance of a check, so that a bound
    that is exactly 0 (no noise, started at the optimum) is not "violated" by round-off."""
    return (1e3 * np.finfo(float).eps * L * max(scale, 1.0)) ** 2
