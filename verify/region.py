"""Regions of scenarios, for ``fedbound search --where`` and ``--stratify``.

A region is a conjunction of comparisons, each of one scenario field with a number:
``S >= 2``, ``Q >= 2``, ``problem.sigma > 0`` (a dotted name reaches into a nested object
of the scenario, as the search's own moves do). The operators are ``<=``, ``>=``, ``<``,
``>``, ``==`` and ``!=``. The expression is parsed by one regular expression and the number
by ``float``; nothing of the user's text is evaluated. Each field is checked against the
adapter's default scenario: it must exist and hold a number (or null, as an open step),
and the search must be free to vary it (not ``seed`` or ``replicas``).

A scenario is in the region when every comparison holds there (a null or missing value is
outside it). :meth:`Region.projected` moves a scenario onto the region's boundary (a field
below ``S >= 2`` to 2): the search uses it on its random draws, as it pushes fields to the
edges of their ranges, so that a narrow region still gets draws, at its own edges.

A stratified budget (``--stratify S=0,2,5,10``) is a list of such regions, one per value of
one field (``S == 0``, ``S == 2``, ...), each within the ``--where`` region.
"""

from __future__ import annotations

import dataclasses
import math
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: the comparison operators, longest first (``<=`` before ``<``)
OPERATORS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, ">=": operator.ge, "==": operator.eq, "!=": operator.ne,
    "<": operator.lt, ">": operator.gt}
_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_COMPARISON = re.compile(rf"^\s*(?P<field>{_NAME}(?:\.{_NAME})*)\s*(?P<op><=|>=|==|!=|<|>)"
                         rf"\s*(?P<value>[^\s<>=!]+)\s*$")
_SYNTAX = "FIELD OP NUMBER, OP one of " + ", ".join(OPERATORS)


@dataclass(frozen=True)
class Comparison:
    """``path op value``: the text as written, the field's path, the operator, the number,
    and whether the field holds integers (in the default scenario)."""

    text: str
    path: tuple[str, ...]
    op: str
    value: float
    integer: bool = False

    @property
    def field(self) -> str:
        return ".".join(self.path)

    def holds(self, scenario) -> bool:
        """Whether the comparison holds at ``scenario`` (a null or missing field: no)."""
        v = value_at(scenario, self.path)
        return _is_number(v) and OPERATORS[self.op](float(v), self.value)

    def boundary(self):
        """The value nearest to the region on its boundary (None for ``!=``): the number for
        ``<=``, ``>=``, ``==``; the next integer, or the next float, for ``<`` and ``>``."""
        if self.op == "!=":
            return None
        v = self.value
        if self.integer:
            lo, hi = math.ceil(v), math.floor(v)
            return {"<=": hi, ">=": lo, "==": int(v) if v == int(v) else None,
                    "<": math.ceil(v) - 1, ">": math.floor(v) + 1}[self.op]
        return {"<": math.nextafter(v, -math.inf), ">": math.nextafter(v, math.inf)}.get(self.op, v)


@dataclass(frozen=True)
class Region:
    """A conjunction of :class:`Comparison`; the empty region is every scenario."""

    comparisons: tuple[Comparison, ...] = ()

    @property
    def text(self) -> str:
        """The comparisons as written, joined with and ("" for every scenario)."""
        return " and ".join(c.text for c in self.comparisons)

    def __str__(self) -> str:
        return self.text or "every scenario"

    def __bool__(self) -> bool:
        return bool(self.comparisons)

    def contains(self, scenario) -> bool:
        return all(c.holds(scenario) for c in self.comparisons)

    def projected(self, scenario):
        """``scenario`` with each field outside its comparison moved to the region's boundary,
        or None when that is not a valid scenario or not in the region."""
        for c in self.comparisons:
            if not c.holds(scenario):
                target = c.boundary()
                scenario = None if target is None else replaced(scenario, c.path, target)
                if scenario is None:
                    return None
        return scenario if self.contains(scenario) else None

    def and_(self, other: Region) -> Region:
        return Region(self.comparisons + other.comparisons)


def parse(where: str | Sequence[str] | Region | None, default, *, name: str = "where",
          frozen: Sequence[str] = ()) -> Region:
    """The region of ``where`` (one expression or several, combined with and), checked
    against the fields of the scenario ``default``. ValueError naming the expression as
    written (``name``, e.g. ``--where``) and what is wrong: the syntax, an unknown field, a
    field that is not a number or that ``frozen`` lists, a number that is not finite."""
    if where is None:
        return Region()
    if isinstance(where, Region):
        return where
    texts = [where] if isinstance(where, str) else list(where)
    return Region(tuple(_comparison(t, default, name, frozen) for t in texts))


def parse_strata(stratify: str | Mapping[str, Sequence[float]] | None, default, *,
                 name: str = "stratify", frozen: Sequence[str] = ()) -> list[Comparison]:
    """One ``FIELD == value`` comparison per value of ``stratify``: ``"S=0,2,5,10"`` or
    ``{"S": [0, 2, 5, 10]}`` (one field, at least one value, no value twice)."""
    if stratify is None:
        return []
    if isinstance(stratify, str):
        field_, sep, values = stratify.partition("=")
        if not sep or not values.strip():
            raise ValueError(f"{name} {stratify!r}: expected FIELD=v1,v2,... (e.g. S=0,2,5,10)")
        texts = [v.strip() for v in values.split(",")]
    elif isinstance(stratify, Mapping) and len(stratify) == 1:
        [(field_, values)] = stratify.items()
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"{name} {dict(stratify)!r}: give a non-empty list of values")
        texts = [repr(v) if not isinstance(v, str) else v for v in values]
    else:
        raise ValueError(f"{name}={stratify!r}: expected 'FIELD=v1,v2,...' or {{FIELD: [values]}}")
    out = [_comparison(f"{field_.strip()} == {t}", default, name, frozen) for t in texts]
    values = [c.value for c in out]
    if len(set(values)) != len(values):
        raise ValueError(f"{name} {stratify!r}: a value is given twice")
    for c in out:
        if c.integer and c.value != int(c.value):
            raise ValueError(f"{name} {stratify!r}: {c.field} holds integers, not {c.value:g}")
    return out


def _comparison(text, default, name: str, frozen: Sequence[str]) -> Comparison:
    if not isinstance(text, str):
        raise ValueError(f"{name} {text!r}: an expression is a string, {_SYNTAX}")
    m = _COMPARISON.match(text)
    if m is None:
        raise ValueError(f"{name} {text!r}: expected {_SYNTAX} (e.g. 'S >= 2')")
    path = tuple(m["field"].split("."))
    fields = [f.name for f in dataclasses.fields(default)]
    if path[0] not in fields:
        raise ValueError(f"{name} {text!r}: {type(default).__name__} has no field "
                         f"{path[0]!r}; its fields are {', '.join(fields)}")
    if path[0] in frozen:
        raise ValueError(f"{name} {text!r}: the search does not vary {path[0]!r} "
                         f"(fixed: {', '.join(frozen)})")
    current: Any = default
    for depth, part in enumerate(path):
        holder = current
        current = getattr(holder, part) if depth == 0 else (
            holder.get(part, _MISSING) if isinstance(holder, Mapping) else _MISSING)
        if current is _MISSING:
            known = ", ".join(sorted(holder)) if isinstance(holder, Mapping) else "none"
            raise ValueError(f"{name} {text!r}: the field {'.'.join(path[:depth])!r} has no "
                             f"{part!r} (it holds {known})")
    if current is not None and not _is_number(current):
        raise ValueError(f"{name} {text!r}: the field {m['field']!r} is not a number (it is "
                         f"{current!r} in the default scenario)")
    try:
        value = float(m["value"])
    except ValueError:
        raise ValueError(f"{name} {text!r}: {m['value']!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} {text!r}: {m['value']!r} is not a finite number")
    return Comparison(text.strip(), path, m["op"], value,
                      integer=isinstance(current, int) and not isinstance(current, bool))


_MISSING = object()


def value_at(scenario, path: Sequence[str]):
    """The value of the field at ``path`` (None where it is missing)."""
    v: Any = getattr(scenario, path[0], None)
    for part in path[1:]:
        v = v.get(part) if isinstance(v, Mapping) else None
    return v


def replaced(scenario, path: Sequence[str], value):
    """``scenario`` with the field at ``path`` set to ``value`` (validated), or None if
    that is not a valid scenario."""
    try:
        if len(path) == 1:
            return scenario.replace(**{path[0]: value})
        nested = dict(getattr(scenario, path[0]))
        inner = nested
        for part in path[1:-1]:
            inner[part] = dict(inner[part])
            inner = inner[part]
        inner[path[-1]] = value
        return scenario.replace(**{path[0]: nested})
    except (ValueError, TypeError, KeyError):
        return None


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
